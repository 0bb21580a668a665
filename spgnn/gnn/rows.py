"""A rank's rows of a generated graph, drawn in parallel: :func:`generate_rows`.

The generators (:mod:`spgnn.io.generators`) draw their edges in chunks keyed
by ``(seed, chunk id)`` and every per-vertex value (classes, features,
labels, the split) in blocks keyed by ``(seed, block id)``.  So a parallel
job makes a graph without any rank holding it: rank ``r`` draws chunks ``r,
r + P, r + 2P, ...`` (one per round, every rank in every round), symmetrises
them, drops self-loops, and routes each entry to the ranks whose rows hold
it (one ``alltoallv`` per round, label ``gnn-setup:generate``); each rank
then collapses duplicates of its own rows (CSR per row), counts its rows'
degrees, and learns the degrees of its halo columns from one
``allgatherv`` of the O(n) degree vector (8 bytes a vertex, label
``gnn-setup:generate``; no O(nnz) data is ever gathered).  Features,
labels and masks of its rows are drawn per vertex.  The result is the
:class:`~spgnn.io.shards.RowBlock` a shard reader makes, equal, bit for bit,
to those rows of the whole graph :func:`spgnn.io.load_graph` loads (with
the same ``--features``/``--labels`` specs and the per-vertex split).
"""

from __future__ import annotations

import numpy as np

from ..io.generators import GeneratorSpec, parse_spec, rows_to_csr, symmetric_entries
from ..io.graph import vertex_split
from ..io.preprocess import SPARSE_DENSITY
from ..io.shards import RowBlock
from ..io.synthetic import (SYNTHETIC_HINT, check_feature_spec, check_label_spec,
                            degree_feature_width, feature_rows, label_rows)

__all__ = ["generate_rows", "as_generator_spec", "block_totals", "feature_form_of"]

LABEL = "gnn-setup:generate"


def as_generator_spec(spec):
    """``spec`` as a :class:`GeneratorSpec` (a string is parsed); ValueError when it is none."""
    if isinstance(spec, GeneratorSpec):
        return spec
    g = parse_spec(spec)
    if g is None:
        raise ValueError(f"generate_rows: {spec!r} is not a generator spec (rmat:..., sbm:..., "
                         f"plsbm:...)")
    return g


def _route(comm, rows, cols, ranges, idt):
    """Send each entry to every rank whose row range holds its row; the entries received."""
    pieces, counts = [], []
    for lo, hi in ranges:
        keep = (rows >= lo) & (rows < hi)
        pieces.append(np.column_stack([rows[keep], cols[keep]]).astype(idt))
        counts.append(pieces[-1].shape[0])
    send = np.concatenate(pieces) if pieces else np.zeros((0, 2), idt)
    del pieces
    return comm.alltoallv(send, counts, label=LABEL)


def block_totals(comm, lo, hi, values):
    """Sums of ``values`` (an int array) over the distinct row ranges of the ranks. Collective.

    Ranks holding the same rows (1.5D replicas) count once; distinct ranges
    must not overlap partially (they do not in any placement).
    """
    got = comm.allgather_obj((int(lo), int(hi), [int(v) for v in values]), label=LABEL)
    distinct = {(a, b): v for a, b, v in got}
    spans = sorted(distinct)
    for (a0, b0), (a1, b1) in zip(spans, spans[1:]):
        if a1 < b0:
            raise ValueError(f"generate_rows: row ranges {a0}:{b0} and {a1}:{b1} overlap "
                             f"partially")
    return np.sum(np.array(list(distinct.values()), dtype=np.int64).reshape(len(distinct), -1),
                  axis=0)


def generate_rows(comm, spec, offsets=None, *, rows=None, features=None, labels=None,
                  split=(0.6, 0.2), split_seed=0, progress=None) -> RowBlock:
    """This rank's rows of the generated graph ``spec``, with their data. Collective.

    Parameters
    ----------
    comm : Communicator
    spec : str or GeneratorSpec
        ``rmat:...``, ``sbm:...`` or ``plsbm:...`` (:mod:`spgnn.io.generators`).
    offsets : sequence of P + 1 ints, optional
        The block partition: rank ``r`` gets rows ``offsets[r]:offsets[r+1]``.
    rows : (lo, hi), optional
        This rank's rows instead (ranks may share a range: 1.5D replicas).
    features, labels : str, optional
        Synthetic specs (:mod:`spgnn.io.synthetic`) replacing the
        generator's own (an ``rmat`` graph needs both).
    split : (train, val)
        Fractions of the per-vertex split (:func:`spgnn.io.graph.vertex_split`)
        drawn with ``split_seed``.
    progress : callable, optional
        ``progress(round, rounds)`` after each drawing round (rank 0 shows a bar).

    Returns
    -------
    RowBlock: rows ``lo:hi`` of ``A'`` (float64 CSR, global columns),
    their GCN degrees, every vertex's degree (``degree_of``), raw features,
    labels, masks, original ids ``lo..hi-1``.

    Raises
    ------
    ValueError
        On every rank alike (they judge the same arguments): not a generator
        spec, a bad synthetic spec, an ``rmat`` graph without features or
        labels.
    """
    g = as_generator_spec(spec)
    if features is not None:
        check_feature_spec(features)
    if labels is not None:
        check_label_spec(labels, alone=True)
    if not g.has_data and (features is None or labels is None):
        raise ValueError(f"generate_rows: {g.text} has no features or labels; {SYNTHETIC_HINT}")
    p, r, n = comm.size, comm.rank, g.n
    if rows is None:
        if offsets is None or len(offsets) != p + 1:
            raise ValueError(f"generate_rows: need offsets of {p + 1} boundaries or rows=(lo, hi)")
        rows = (offsets[r], offsets[r + 1])
    lo, hi = int(rows[0]), int(rows[1])
    ranges = comm.allgather_obj((lo, hi), label=LABEL)
    idt = np.int32 if n < np.iinfo(np.int32).max else np.int64
    got = []
    rounds = -(-g.chunks // p)
    for t in range(rounds):
        i = t * p + r
        if i < g.chunks:
            src, dst = symmetric_entries(*g.chunk(i))
        else:
            src = dst = np.zeros(0, np.int64)
        got.append(_route(comm, src, dst, ranges, idt))
        del src, dst
        if progress is not None:
            progress(t + 1, rounds)
    entries = np.concatenate(got) if got else np.zeros((0, 2), idt)
    del got
    r_loc = entries[:, 0] - idt(lo)                  # local row ids, in the id dtype
    c_all = np.ascontiguousarray(entries[:, 1])
    del entries
    adj = rows_to_csr(r_loc, c_all, 0, hi - lo, n, np.float64)
    del r_loc, c_all
    nbrs = np.diff(adj.indptr).astype(np.int64)
    deg = nbrs + 1.0                                 # row sums of A' + I (unit weights)
    # every vertex's degree: the halo's come from their owners (O(n), never O(nnz))
    pieces = comm.allgatherv(deg, label=LABEL)
    all_deg = np.zeros(n)
    at = 0
    for a, b in ranges:
        all_deg[a:b] = pieces[at:at + b - a]
        at += b - a
    del pieces
    # features, labels, split: per vertex
    if features is not None:
        width = None
        if features == "degree":
            top = int(comm.allreduce(np.array([nbrs.max(initial=0)]), op="max", label=LABEL)[0])
            width = degree_feature_width(top) if n else 1
        x = feature_rows(features, lo, hi, n, nbrs, width)
    else:
        x = g.features(lo, hi)
    y = label_rows(labels, lo, hi) if labels is not None else g.labels(lo, hi)
    train, val, test = vertex_split(y, lo, hi, *split, seed=split_seed)
    return RowBlock(lo, hi, adj, deg, x, y, train, val, test, np.arange(lo, hi, dtype=np.int64),
                    [], np.arange(n, dtype=np.int64), all_deg, _table=all_deg)


def feature_form_of(comm, block, n):
    """The form (:func:`~spgnn.io.preprocess.feature_form`) the whole feature matrix takes. Collective."""
    x = block.x
    sparse = hasattr(x, "tocsr")
    nnz = x.nnz if sparse else int(np.count_nonzero(x))
    tot = block_totals(comm, block.lo, block.hi, [int(sparse), nnz])
    f = x.shape[1]
    if tot[0]:
        return "csr"
    if n * f == 0:
        return "dense"
    return "csr" if tot[1] <= SPARSE_DENSITY * n * f else "dense"
