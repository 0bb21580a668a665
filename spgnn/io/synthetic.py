"""Features and labels for graphs that have none, so that any edge list can be trained.

Feature specs (``--features``):

* ``random:F[:SEED]`` -- F columns drawn uniformly from [0, 1) (float32),
  per block of :data:`~spgnn.io.generators.VERTEX_BLOCK` vertices from
  ``numpy.random.default_rng([SEED, 1, block])``; non-negative, so the usual
  row normalisation divides by sums near F/2, never near 0;
* ``degree`` -- one-hot of the log-binned degree, column ``floor(log2(1 + d))``
  where ``d`` counts the neighbours of the undirected graph without
  self-loops (a power-law graph with maximum degree 10^6 gets 20 columns);
  sparse CSR;
* ``onehot`` -- the identity: vertex ``i`` has feature ``i`` (n columns,
  sparse CSR; the model learns one embedding per vertex).

Label specs (``--labels``):

* ``random:C[:SEED]`` -- classes drawn uniformly from 0..C-1, per block
  of vertices from ``numpy.random.default_rng([SEED, 2, block])``.
  Accuracy on them is chance (1/C); they exist to run and time training on
  graphs without labels;
* ``quantiles:C`` -- not synthetic: the graph's own integer target (a
  regression target such as wikipedia_musae's monthly traffic) binned into
  C equal-frequency classes (:func:`quantile_labels`; ``quantiles:5`` gives
  the 5-class chameleon and squirrel of Geom-GCN, Pei et al. 2020).  It
  needs the whole graph's labels, so it applies to a loaded graph only
  (:func:`with_synthetic`), not to rows drawn alone (:func:`label_rows`).

Every spec is a deterministic function of the graph and its seed (default
0), so every rank, and every run, builds the same arrays.  Every value is
per vertex (its block's draw, its own degree), so the rows ``lo:hi`` can be
made alone (:func:`feature_rows`, :func:`label_rows`: what a rank of a
generated graph makes, :func:`spgnn.gnn.rows.generate_rows`) and equal
those rows of the whole.  Local, pure.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from .generators import vertex_blocks
from .graph import MAX_CLASSES, Graph
from .preprocess import neighbour_pattern

__all__ = ["FEATURE_SPECS", "LABEL_SPECS", "synthetic_features", "synthetic_labels",
           "with_synthetic", "check_feature_spec", "check_label_spec", "feature_rows",
           "label_rows", "degree_feature_width", "quantile_labels"]

FEATURE_SPECS = ("random:F[:SEED]", "degree", "onehot")
LABEL_SPECS = ("random:C[:SEED]", "quantiles:C")

#: What the errors of graphs without features or labels suggest.
SYNTHETIC_HINT = ("give it synthetic ones: the commands' --features random:F | degree | onehot "
                  "and --labels random:C, or spgnn.io.with_synthetic(graph, features=..., "
                  "labels=...)")


def _random_spec(spec, what, usage):
    parts = spec.split(":")
    try:
        nums = [int(p) for p in parts[1:]]
    except ValueError:
        nums = []
    if parts[0] != "random" or not 1 <= len(nums) <= 2 or nums[0] < 1:
        raise ValueError(f"{what}: expected {usage}, but got {spec!r}")
    return nums[0], (nums[1] if len(nums) == 2 else 0)


def check_feature_spec(spec, what="features"):
    """Raise ValueError unless ``spec`` is a feature spec (no graph needed)."""
    if spec in ("degree", "onehot"):
        return
    if not isinstance(spec, str) or not spec.startswith("random:"):
        raise ValueError(f"{what}: expected {' | '.join(FEATURE_SPECS)}, but got {spec!r}")
    _random_spec(spec, what, FEATURE_SPECS[0])


def _quantile_spec(spec, what):
    """C of ``quantiles:C`` (2 <= C < 2**20), else ValueError."""
    parts = spec.split(":")
    try:
        classes = int(parts[1]) if len(parts) == 2 else 0
    except ValueError:
        classes = 0
    if not 2 <= classes < MAX_CLASSES:
        raise ValueError(f"{what}: expected quantiles:C with an integer C from 2 to "
                         f"{MAX_CLASSES - 1:,} (the number of classes), but got {spec!r}")
    return classes


def is_quantile_spec(spec):
    """Whether ``spec`` is a ``quantiles:C`` spec (binning the graph's own target)."""
    return isinstance(spec, str) and spec.split(":", 1)[0] == "quantiles"


def _needs_graph(spec, what):
    return ValueError(f"{what}: {spec} bins the graph's own target over all its vertices, so "
                      f"it needs the whole graph loaded; it cannot make rows alone (a "
                      f"generator spec drawn per rank, a streamed edge list)")


def check_label_spec(spec, what="labels", alone=False):
    """Raise ValueError unless ``spec`` is a label spec; ``alone``: one that makes the labels
    without the graph's own (rows drawn alone), so not ``quantiles:C``."""
    if not isinstance(spec, str):
        raise ValueError(f"{what}: expected {' | '.join(LABEL_SPECS)}, but got {spec!r}")
    if is_quantile_spec(spec):
        _quantile_spec(spec, what)
        if alone:
            raise _needs_graph(spec, what)
        return
    _random_spec(spec, what, " | ".join(LABEL_SPECS))


def degree_feature_width(max_degree):
    """Columns of the ``degree`` features of a graph whose largest degree is ``max_degree``."""
    return int(np.floor(np.log2(1.0 + max_degree))) + 1


def feature_rows(spec, lo, hi, n, degrees=None, width=None):
    """Rows ``lo:hi`` of the feature matrix of ``spec`` for a graph of ``n`` vertices. Pure.

    ``degrees``: the rows' neighbour counts (``degree`` only) and ``width``
    the whole matrix's columns (:func:`degree_feature_width` of the largest
    degree of the graph).  Equal to those rows of :func:`synthetic_features`.
    """
    check_feature_spec(spec)
    k = hi - lo
    if spec == "onehot":
        return sp.csr_array((np.ones(k, np.float32), np.arange(lo, hi, dtype=np.int64),
                             np.arange(k + 1)), shape=(k, n))
    if spec == "degree":
        col = np.floor(np.log2(1.0 + np.asarray(degrees))).astype(np.int64)
        return sp.csr_array((np.ones(k, np.float32), col, np.arange(k + 1)), shape=(k, width))
    dim, seed = _random_spec(spec, "features", FEATURE_SPECS[0])
    return vertex_blocks(lo, hi, seed, 1, lambda rng, b: rng.random((b, dim), dtype=np.float32))


def label_rows(spec, lo, hi):
    """Labels of vertices ``lo:hi`` of ``spec``: those of :func:`synthetic_labels`. Pure."""
    check_label_spec(spec, alone=True)
    classes, seed = _random_spec(spec, "labels", LABEL_SPECS[0])
    return vertex_blocks(lo, hi, seed, 2,
                         lambda rng, b: rng.integers(0, classes, size=b, dtype=np.int64))


def synthetic_features(adj, spec):
    """The feature matrix of ``spec`` (see the module) for the graph of ``adj``."""
    n = adj.shape[0]
    check_feature_spec(spec)
    if spec == "degree":
        deg = np.diff(neighbour_pattern(adj).indptr)
        return feature_rows(spec, 0, n, n, deg, degree_feature_width(deg.max()) if n else 1)
    return feature_rows(spec, 0, n, n)


def quantile_labels(target, classes):
    """``target`` (int64, -1 = unknown) binned into ``classes`` equal-frequency classes. Pure.

    The bin edges are the ``k / classes`` quantiles (k = 1..classes-1) of the
    known values, numpy's default (linear) interpolation; the bins are closed
    on the right, ``(e[k-1], e[k]]``, as ``pandas.qcut``'s: a value equal to an
    edge goes to the lower class, so tied values always share a class and the
    classes are as equal as the ties allow (chameleon: 456 / 460 / 453 / 521 /
    387; squirrel: 1042 / 1040 / 1039 / 1040 / 1040).  Unknown stays -1.
    """
    target = np.asarray(target)
    if target.ndim != 1 or not np.issubdtype(target.dtype, np.integer):
        raise ValueError(f"labels: quantiles:{classes} bins a 1-d integer target, but the "
                         f"graph's labels are {target.dtype} of shape {target.shape}")
    known = target >= 0
    if np.unique(target[known]).size < classes:
        raise ValueError(f"labels: quantiles:{classes} needs at least {classes} distinct "
                         f"target values, but the graph has "
                         f"{np.unique(target[known]).size}")
    edges = np.quantile(target[known], np.arange(1, classes) / classes)
    out = np.full(target.shape, -1, dtype=np.int64)
    out[known] = np.searchsorted(edges, target[known], side="left")
    return out


def synthetic_labels(n, spec):
    """The int64 labels of ``spec`` (``random:C[:SEED]``) for ``n`` vertices."""
    return label_rows(spec, 0, n)


def with_synthetic(graph: Graph, features=None, labels=None) -> Graph:
    """``graph`` with its features and/or labels replaced by those of the specs (None keeps
    the graph's own; ``quantiles:C`` bins the graph's own labels)."""
    changes = {}
    if features is not None:
        changes["features"] = synthetic_features(graph.adj, features)
    if labels is not None and is_quantile_spec(labels):
        if graph.labels is None:
            raise ValueError(f"labels: {labels} bins the graph's own target, but "
                             f"{graph.name} has no labels")
        changes["labels"] = quantile_labels(graph.labels,
                                            _quantile_spec(labels, "labels"))
        changes["class_names"] = None
    elif labels is not None:
        changes["labels"] = synthetic_labels(graph.num_nodes, labels)
        changes["class_names"] = None
    return dataclasses.replace(graph, **changes) if changes else graph
