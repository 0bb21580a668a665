"""One entry point for command lines: format detection (:func:`load_graph`), the
collective :func:`load_on_root`, and :func:`load_adjacency` for the SpMM commands."""

from __future__ import annotations

import errno
import os
import zlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import GraphFormatError, InputTooLarge
from ._files import GZIP_MAGIC as _GZIP_MAGIC, open_regular
from ._text import _label
from .datasets import DATASETS, load_dataset
from .generators import parse_generator_spec
from .graph import Graph
from .jlg import load_jlg
from .mtx import load_matrix_market
from .musae import load_musae
from .npz import load_npz
from .planetoid import load_planetoid
from .snap import load_snap_edgelist

__all__ = ["SUPPORTED_FORMATS", "load_graph", "load_on_root", "load_adjacency"]

#: What :func:`load_graph` (and every ``--graph``) accepts, one line per kind of input.
SUPPORTED_FORMATS = (
    "dataset name from spgnn.io.datasets.DATASETS (cora, ogbn-arxiv, ...; downloaded into the "
    "cache on first use)",
    "generator spec 'rmat:SCALE[:EDGE_FACTOR[:SEED]]', 'sbm:N[:CLASSES[:SEED]]' or "
    "'plsbm:N:CLASSES:AVG_DEGREE[:FEATURES[:SEED]]'",
    "edge list: .txt .edges .el .tsv .csv (optionally .gz)",
    "JuliaGraphs LG: .jlg .lg (optionally .gz)",
    "MatrixMarket coordinate: .mtx (optionally .gz), with or without the header",
    "numpy archive: .npz (scipy.sparse.save_npz or spgnn.io.save_npz)",
    "Planetoid folder holding ind.<name>.{x,y,tx,ty,allx,ally,graph,test.index}",
    "MUSAE folder holding <name>_edges.csv [+ <name>_features.json, <name>_target.csv]",
)

_EDGE_EXTS = (".txt", ".edges", ".el", ".tsv", ".csv")
_GENERATORS = ("rmat", "sbm", "plsbm")


def _generator_graph(spec: str, name):
    try:
        made = parse_generator_spec(spec)
    except InputTooLarge:
        raise
    except ValueError as e:
        raise GraphFormatError(str(e)) from None
    g = Graph(adj=made["adj"], features=made["features"], labels=made["labels"], name=name or spec)
    # the per-vertex split: what each rank of a generated graph makes for its rows
    return g if made["labels"] is None else g.random_split(seed=made["seed"], per_vertex=True)


def _unknown(label, why):
    formats = "\n  ".join(SUPPORTED_FORMATS)
    return GraphFormatError(f"{label}: {why}; supported formats:\n  {formats}")


def load_on_root(comm, load, *, root=0):
    """``load()`` on rank ``root`` (None elsewhere); a failure raises on every rank.

    For commands where one rank reads the graph and then distributes it: an
    unreadable path or malformed file (``OSError``, ``ValueError`` --
    :class:`GraphFormatError` included -- or a missing optional ``ImportError``)
    on the root is agreed through ``comm.agree`` so that every rank raises
    instead of the others waiting in the next collective.

    Collective over ``comm`` (one small allreduce).
    """
    graph, err = None, None
    if comm.rank == root:
        try:
            graph = load()
        except (OSError, ValueError, ImportError) as exc:
            err = exc
    comm.agree(err)
    return graph


def load_graph(spec, *, name=None, num_nodes=None, relabel=False) -> Graph:
    """Load a graph from a generator spec or a path, detecting the format.

    Parameters
    ----------
    spec : str or os.PathLike
        * a dataset name of :data:`spgnn.io.datasets.DATASETS` (``cora``,
          ``ego-twitter``, ``ogbn-arxiv``, ...) that is not also an existing
          path: its files are made present and verified in the cache
          (downloaded on first use; :func:`spgnn.io.datasets.load_dataset`);
        * ``rmat:SCALE[:EDGE_FACTOR[:SEED]]`` — R-MAT topology (Graph500
          parameters, edge factor 16, seed 0 by default);
        * ``sbm:N[:CLASSES[:SEED]]`` — stochastic block model with 32
          label-correlated features, labels and a stratified 60/20/20 split
          drawn with the same seed;
        * a file, by extension, ``.gz`` looked through: ``.txt .edges .el
          .tsv .csv`` edge lists (undirected), ``.jlg .lg``, ``.mtx`` (a
          ``%%MatrixMarket`` banner in any file also selects it), ``.npz``;
        * a folder: Planetoid (``ind.<name>.*``; ``name`` picks the dataset when
          there are several) or MUSAE (``<name>_edges.csv``).
    name : str, optional
        Dataset to pick in a folder holding several; otherwise ``Graph.name``
        (ignored for a dataset name).
    num_nodes, relabel :
        For bare edge lists only (:func:`~spgnn.io.load_snap_edgelist`):
        ``num_nodes`` confirms the vertex count of a sparse id space (ids
        above it are an error naming the line); ``relabel=True`` numbers the
        distinct ids 0..n-1.  Without either, a file whose largest id implies
        far more vertices than its edges touch is refused
        (:class:`~spgnn.errors.InputTooLarge`).  Any other format raises
        ``ValueError`` when they are given.

    Raises
    ------
    GraphFormatError
        Unknown format (the message lists the supported ones), or any error of
        the chosen loader.
    FileNotFoundError
        ``spec`` is neither a generator spec, an existing path nor a dataset name.
    DownloadError, ChecksumError
        A dataset's files are missing and cannot be downloaded, or fail their
        checksum (:mod:`spgnn.io.download`).
    """
    edge_opts = {}
    if num_nodes is not None:
        edge_opts["num_nodes"] = num_nodes
    if relabel:
        edge_opts["relabel"] = True

    def only_edge_lists(what):
        if edge_opts:
            raise ValueError(f"load_graph: {' and '.join(sorted(edge_opts))} apply to bare edge "
                             f"lists only, but {_label(spec)} is {what}")

    if isinstance(spec, str) and spec.split(":", 1)[0] in _GENERATORS and ":" in spec:
        only_edge_lists("a generator spec")
        return _generator_graph(spec, name)
    path = Path(spec)
    label = _label(spec)
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, f"{label}: a loop of symbolic links "
                                       f"(too many levels of symbolic links)") from None
    if path.is_dir():
        only_edge_lists("a folder")
        planetoid = sorted(p.name[len("ind."): -len(".graph")] for p in path.glob("ind.*.graph"))
        if planetoid:
            if name is None and len(planetoid) > 1:
                raise GraphFormatError(f"{label}: Planetoid folder with datasets {planetoid}; "
                                       f"pass name= to choose one")
            return load_planetoid(path, name or planetoid[0])
        if any(path.glob("*_edges.csv")):
            return load_musae(path, name=name)
        raise _unknown(label, "folder holds no Planetoid or MUSAE files")
    if not path.exists():
        if isinstance(spec, str) and spec in DATASETS:
            only_edge_lists("a dataset name")
            return load_dataset(spec)
        raise FileNotFoundError(f"load_graph: {label} is neither a generator spec "
                                f"({' or '.join(_GENERATORS)}), an existing file or folder, nor "
                                f"a dataset name (python -m spgnn datasets lists them)")
    lower = path.name.lower()
    inner = lower[:-3] if lower.endswith(".gz") else lower
    if not inner.endswith(_EDGE_EXTS):
        only_edge_lists(f"not an edge list ({path.name!r})")
    if inner.endswith(".npz"):
        return load_npz(path, name=name)
    if inner.endswith((".jlg", ".lg")):
        return load_jlg(path, name=name)
    if inner.endswith(".mtx"):
        return load_matrix_market(path, name=name)
    if inner.endswith(_EDGE_EXTS):
        with open_regular(path, label) as f:
            start = f.read(64)
        if start.startswith(_GZIP_MAGIC):
            try:
                start = zlib.decompressobj(wbits=31).decompress(start, 64)
            except zlib.error:
                pass   # the loader names the damage and its line
        if start.lstrip().startswith(b"%%MatrixMarket"):
            only_edge_lists("a MatrixMarket file")
            return load_matrix_market(path, name=name)
        return load_snap_edgelist(path, name=name, **edge_opts)
    raise _unknown(label, f"cannot tell the format of {path.name!r} from its name")


def load_adjacency(spec, **options):
    """``(adj, name)``: the graph of a path or generator spec as the SpMM commands use it.

    ``adj`` is the loaded adjacency symmetrised, without self-loops
    (:func:`~spgnn.io.preprocess.symmetrize`,
    :func:`~spgnn.io.preprocess.without_self_loops`), a float32 CSR array;
    ``name`` is ``Graph.name``; ``options`` (``num_nodes``, ``relabel``) go to
    :func:`load_graph`.  Local: reads the file on the calling rank.
    """
    g = load_graph(spec, **options).symmetrize().without_self_loops()
    return sp.csr_array(g.adj, dtype=np.float32), g.name
