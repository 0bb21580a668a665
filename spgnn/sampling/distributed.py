"""Distributed bulk sampling: graph-replicated and graph-partitioned modes.

Report ``research/003_matrix_sampling.md`` §3.

Graph-replicated (§3.1)
    ``A`` is whole on every rank and the bulk's minibatches are split in
    1D block rows over the ranks (rank ``r`` takes minibatches
    ``block_bounds(k, P, r)``).  Every step is local: **no communication**.
    :func:`sample_replicated`.

Graph-partitioned (§3.2)
    ``P`` ranks form a ``P/c x c`` grid (:func:`spgnn.grid.grid_15d`, axes
    ``("row", "layer")``).  ``A`` is a :class:`DistSparseMatrix` with
    ``Layout("row")``: block row ``A_q`` (``q`` along ``"row"``) is
    replicated on the ``c`` ranks of process row ``P(q, :)``.  Process row
    ``i`` samples the minibatches ``block_bounds(k, P/c, i)``; every product
    ``P_i = Q_i A`` is :func:`sa_spgemm_15d` (Algorithm 2, cleaned up):

    1. replica ``j`` of process row ``i`` handles the stages
       ``q in block_bounds(P/c, c, j)`` (``q = j P/c² .. (j+1) P/c² - 1``
       when ``c² | P``; otherwise the remainder is spread the same way, and a
       replica may have no stage, e.g. ``P = 2, c = 2``);
    2. it requests from ``P(q, j)`` -- in its own process column
       (``grid.comm("row")``) -- only the rows ``NnzCols(Q_iq)`` of ``A_q``
       (one alltoallv of column ids) and receives them (row lengths, column
       ids, values: three alltoallv), except for ``q = i`` whose rows it
       holds;
    3. it multiplies ``P̂_j = Σ_q Q_iq Â_q`` with the backend's SpGEMM;
    4. the ``c`` replicas sum their partial products with a sparse
       all-reduce over ``grid.comm("layer")`` (allgatherv of the CSR pieces,
       then a sum in replica order that every replica computes identically),
       so all ``c`` replicas hold ``P_i``.

    Sampling is row-wise and keyed by global ids (:mod:`.rng`), so the ``c``
    replicas sample their process row's minibatches identically with no
    communication, and each keeps its share ``block_bounds(k_i, c, j)``.
    GraphSAGE's gathers and LADIES' row extraction ``Q_R A`` use the same
    SpGEMM; LADIES' per-minibatch column selection is then local.

Communicated words (report §3.2, §8.2 property 8), all 8-byte words, per
rank and per product, as :func:`sampling_words` computes them from ``Q``:

* column ids: ``Σ_{q ∈ stages, q ≠ i} |NnzCols(Q_iq)|`` received by the owners;
* row data: ``Σ_{q ∈ stages, q ≠ i} Σ_{v ∈ NnzCols(Q_iq)} (2 nnz(A[v, :]) + 1)``
  received (one length, the column ids and the values of each row);
* all-reduce: ``Σ_{j' ≠ j} (R_i + 2 nnz(P̂_{j'}))`` received.

Requests for ``q = i`` are local (a rank's traffic to itself is never
counted), which is why the sum skips them.  For the first hop, with no
repeated columns and average degree ``d``, the row data summed over a
process column is about ``2 k b d / c`` words, the report's ``β kbd/c`` term
(up to the factor 2 for ids plus values); the all-reduce is the
``β c kbd / P`` term.
"""

import numpy as np
import scipy.sparse as sp

from ..backends import get_backend
from ..core.dist_sparse import DistSparseMatrix
from ..errors import DimensionMismatch, GridError, LayoutMismatch
from ..layout import Layout, block_bounds
from ..local.csr import LocalCSR
from ..local.semiring import plus_times
from .local import (BackendOps, BulkSample, LocalGraph, _as64, _canonical, normalize_batches,
                    selection_matrix)

__all__ = ["PartitionedGraph", "sa_spgemm_15d", "sample_partitioned", "sample_replicated",
           "sampling_words", "stages_of"]

_LABEL = "sample-spgemm"


def stages_of(nrows_blocks, c, j):
    """Stages (block rows of ``A``) replica ``j`` handles: ``range(*block_bounds(P/c, c, j))``."""
    return range(*block_bounds(nrows_blocks, c, j))


class PartitionedGraph(BackendOps):
    """``A`` split in ``P/c`` block rows over ``"row"``, replicated over ``"layer"``.

    Parameters
    ----------
    A : DistSparseMatrix
        Square, ``Layout("row")`` (optionally with ``row_splits``) on a grid
        with axes ``("row", "layer")`` (:func:`spgnn.grid.grid_15d`).
    backend : str, optional (defaults to ``A``'s)

    Local to construct (validation only).  The block is canonicalised
    (duplicates summed, indices sorted, float64 values) exactly as
    :class:`~spgnn.sampling.local.LocalGraph` canonicalises the whole ``A``.
    """

    def __init__(self, A, backend=None):
        if not isinstance(A, DistSparseMatrix):
            raise TypeError(f"PartitionedGraph: expected a DistSparseMatrix, but got "
                            f"{type(A).__name__}")
        grid = A.grid
        if tuple(grid.axis_names) != ("row", "layer"):
            raise GridError(f"PartitionedGraph: A must live on a grid_15d grid with axes "
                            f"('row', 'layer'), but got axes {grid.axis_names}")
        if A.layout.rows != ("row",) or A.layout.cols or A.layout.partial:
            raise LayoutMismatch(f"PartitionedGraph: A must have Layout('row') (block rows "
                                 f"replicated over 'layer'), but got {A.layout!r}")
        if A.shape[0] != A.shape[1]:
            raise DimensionMismatch(f"PartitionedGraph: A must be square, but got {A.shape}")
        self.A = A
        self.grid = grid
        self.n = A.shape[0]
        self.backend = A.backend if backend is None else get_backend(backend)
        self.offsets = np.asarray(A.layout.offsets(grid, self.n, 0), dtype=np.int64)
        self.nblocks = self.offsets.size - 1
        self.i = grid.axis_index("row")
        self.j = grid.axis_index("layer")
        self.c = grid.axis_size("layer")
        r0, r1 = int(self.offsets[self.i]), int(self.offsets[self.i + 1])
        blk = A.local.to_scipy()
        m = sp.csr_array((np.asarray(blk.data, dtype=np.float64), blk.indices, blk.indptr),
                         shape=(r1 - r0, self.n))
        m.sum_duplicates()
        m.sort_indices()
        self.local = LocalCSR(m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data,
                              m.shape, check=None)
        self._squared = None

    @classmethod
    def from_global(cls, a, grid, *, row_splits=None, root=None, backend=None):
        """Place a global matrix on a ``grid_15d`` grid.

        Collective (see ``DistSparseMatrix.from_global``).
        """
        if root is None or grid.world.rank == root:
            a = _canonical(a).to_scipy()
        A = DistSparseMatrix.from_global(a, grid, Layout("row", row_splits=row_splits),
                                         backend=backend, root=root)
        return cls(A, backend)

    # -- the three products a sampler needs (all collective over the grid) --------
    def gather(self, vertices):
        """``P = Q A`` for one-hot ``Q`` (GraphSAGE). Collective: :func:`sa_spgemm_15d`."""
        p = self.rows(vertices)
        return p.indptr, p.indices, p.data, np.arange(p.shape[0], dtype=np.int64)

    def rows(self, vertices) -> LocalCSR:
        """``A[vertices]`` as ``Q_R A``. Collective: :func:`sa_spgemm_15d`."""
        return sa_spgemm_15d(selection_matrix(vertices, self.n), self)

    def multiply(self, q, square) -> LocalCSR:
        """``Q A`` or ``Q (A∘A)``. Collective: :func:`sa_spgemm_15d`."""
        return sa_spgemm_15d(q, self, square=square)


def _plan(q_cols, offsets, i, j, c):
    """Columns of ``Q_i`` my stages need: ``(need, owner, remote mask)``, ``need`` sorted."""
    nb = offsets.size - 1
    s0, s1 = block_bounds(nb, c, j)
    cols = np.unique(np.asarray(q_cols, dtype=np.int64))
    blk = np.searchsorted(offsets, cols, side="right") - 1
    mine = (blk >= s0) & (blk < s1)
    need, owner = cols[mine], blk[mine]
    return need, owner, owner != i


def sampling_words(q_cols, a_row_nnz, offsets, i, j, c):
    """Words rank ``(i, j)`` receives in one :func:`sa_spgemm_15d` exchange. Local, pure.

    Parameters
    ----------
    q_cols : int array, the column ids of ``Q_i`` (any order, repeats allowed)
    a_row_nnz : int array (n,), stored entries per row of the canonical ``A``
    offsets : the ``P/c + 1`` block-row offsets of ``A``
    i, j, c : my process row, my replica index, the replication factor

    Returns
    -------
    dict with ``colids_sent`` (ids I request), ``rowdata_recv`` (words of
    the rows I receive: ``Σ (2 nnz(A[v,:]) + 1)`` over my remote requests).
    """
    need, owner, remote = _plan(q_cols, np.asarray(offsets, dtype=np.int64), i, j, c)
    v = need[remote]
    return {"colids_sent": int(v.size),
            "rowdata_recv": int(np.sum(2 * np.asarray(a_row_nnz, dtype=np.int64)[v] + 1))}


def sa_spgemm_15d(q, g, square=False, label=_LABEL) -> LocalCSR:
    """Sparsity-aware 1.5D SpGEMM ``P_i = Q_i A`` (report §3.2, Algorithm 2).

    Parameters
    ----------
    q : LocalCSR (R_i x n), global column ids; identical on the ``c``
        replicas of my process row (the caller guarantees it)
    g : PartitionedGraph
    square : bool, multiply by ``A∘A`` (LADIES ``sum_of_squares``)
    label : ledger label prefix

    Returns
    -------
    LocalCSR (R_i x n), int64 indices sorted per row, float64 values,
    identical on the ``c`` replicas.

    Collective: over the grid -- one alltoall (counts) and four alltoallv
    over ``grid.comm("row")`` (labels ``<label>:colids`` and
    ``<label>:rowdata``), then, when ``c > 1``, three allgatherv over
    ``grid.comm("layer")`` (``<label>:allreduce``).  See :func:`sampling_words`.
    """
    grid, be = g.grid, g.backend
    colcomm = grid.comm("row")
    q = _as64(q)
    if q.shape[1] != g.n:
        raise DimensionMismatch(f"sa_spgemm_15d: Q must have n={g.n} columns, but got {q.shape}")
    need, owner, remote = _plan(q.indices, g.offsets, g.i, g.j, g.c)
    pc = g.nblocks
    # 1. column ids to the owners P(q, j) (my process column)
    req = np.bincount(owner[remote], minlength=pc).astype(np.int64)
    asked_counts = colcomm.alltoall(req, label=f"{label}:colids").astype(np.int64)
    asked = colcomm.alltoallv(need[remote], req, asked_counts, label=f"{label}:colids")
    # 2. the owner sends only the requested rows: lengths, column ids, values
    r0 = int(g.offsets[g.i])
    out_rows = _extract(g, asked - r0)
    lengths = np.diff(out_rows.indptr)
    got_len = colcomm.alltoallv(lengths, asked_counts, req, label=f"{label}:rowdata")
    send_nnz = _segment_sums(lengths, asked_counts)
    recv_nnz = _segment_sums(got_len, req)
    got_idx = colcomm.alltoallv(out_rows.indices, send_nnz, recv_nnz, label=f"{label}:rowdata")
    got_val = colcomm.alltoallv(out_rows.data, send_nnz, recv_nnz, label=f"{label}:rowdata")
    # 3. local product with the fetched rows: own rows first, then remote ones
    own = need[~remote]
    own_rows = _extract(g, own - r0)
    f_ids = np.concatenate([own, need[remote]])
    f_indptr = np.zeros(f_ids.size + 1, dtype=np.int64)
    np.cumsum(np.concatenate([np.diff(own_rows.indptr), got_len]), out=f_indptr[1:])
    f_data = np.concatenate([own_rows.data, got_val])
    if square:
        f_data = f_data * f_data
    fetched = LocalCSR(f_indptr, np.concatenate([own_rows.indices, got_idx]), f_data,
                       (f_ids.size, g.n), check=None)
    order = np.argsort(f_ids, kind="stable")
    keys = f_ids[order]
    at = np.searchsorted(keys, q.indices)
    atc = np.minimum(at, max(keys.size - 1, 0))
    keep = (at < keys.size) & (keys[atc] == q.indices) if keys.size else \
        np.zeros(q.nnz, dtype=bool)
    qrow = np.repeat(np.arange(q.shape[0], dtype=np.int64), np.diff(q.indptr))
    qc_indptr = np.zeros(q.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(qrow[keep], minlength=q.shape[0]), out=qc_indptr[1:])
    q_compact = LocalCSR(qc_indptr, order[atc[keep]].astype(np.int64), q.data[keep],
                         (q.shape[0], f_ids.size), check=None)
    if q_compact.nnz:
        part = g.host64(be.spgemm(q_compact, fetched, plus_times))
    else:
        part = LocalCSR.empty((q.shape[0], g.n))
    # 4. sparse all-reduce over the c replicas of my process row
    if g.c == 1:
        return part
    lay = grid.comm("layer")
    lens = lay.allgatherv(np.diff(part.indptr), [q.shape[0]] * g.c, label=f"{label}:allreduce")
    idx = lay.allgatherv(part.indices, label=f"{label}:allreduce")
    val = lay.allgatherv(part.data, label=f"{label}:allreduce")
    rows = np.tile(np.arange(q.shape[0], dtype=np.int64), g.c)
    m = sp.csr_array((val, (np.repeat(rows, lens), idx)), shape=(q.shape[0], g.n))
    m.sum_duplicates()
    m.sort_indices()
    return LocalCSR(m.indptr.astype(np.int64), m.indices.astype(np.int64),
                    m.data.astype(np.float64), m.shape, check=None)


def _extract(g, rows) -> LocalCSR:
    if rows.size == 0:
        return LocalCSR.empty((0, g.local.shape[1]))
    return g.host64(g.backend.extract_rows(g.local, np.asarray(rows, dtype=np.int64)))


def _segment_sums(values, counts):
    ptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    csum = np.zeros(values.size + 1, dtype=np.int64)
    np.cumsum(values, out=csum[1:])
    return csum[ptr[1:]] - csum[ptr[:-1]]


def _prepare(sampler, n, batches, minibatch_ids, op):
    flat, ptr = normalize_batches(batches, n, op)
    ids = sampler._ids(minibatch_ids, ptr.size - 1)
    return flat, ptr, ids


def _sub(flat, ptr, ids, lo, hi):
    return (flat[ptr[lo]:ptr[hi]], ptr[lo:hi + 1] - ptr[lo], ids[lo:hi])


def sample_replicated(sampler, A, batches, comm, minibatch_ids=None, *, epoch=0,
                      backend=None) -> BulkSample:
    """Graph-replicated bulk sampling (report §3.1): this rank's share, no communication.

    Parameters
    ----------
    sampler : GraphSAGESampler or LADIESSampler
    A : scipy sparse, LocalCSR or LocalGraph -- the whole graph, on every rank
    batches : the whole bulk (same on every rank), as for ``sampler.sample``
    comm : Communicator (or ProcessGrid); only its rank and size are read
    minibatch_ids : global ids of the bulk's minibatches (default ``arange(k)``)

    Returns
    -------
    BulkSample holding minibatches ``block_bounds(k, P, rank)`` of the bulk,
    bit-identical to sampling them on one process.

    Collective: no -- no communication at all (every rank may call it
    independently).
    """
    g = A if isinstance(A, LocalGraph) else LocalGraph(A, backend)
    flat, ptr, ids = _prepare(sampler, g.n, batches, minibatch_ids, "sample_replicated")
    size = comm.size
    rank = comm.rank
    lo, hi = block_bounds(ptr.size - 1, size, rank)
    return sampler._run(g, *_sub(flat, ptr, ids, lo, hi), epoch)


def sample_partitioned(sampler, A, batches, minibatch_ids=None, *, epoch=0) -> BulkSample:
    """Graph-partitioned bulk sampling on a ``grid_15d(c)`` grid (report §3.2).

    Parameters
    ----------
    sampler : GraphSAGESampler or LADIESSampler
    A : PartitionedGraph, or a DistSparseMatrix with ``Layout("row")`` on a
        grid with axes ``("row", "layer")``
    batches : the whole bulk (same on every rank)
    minibatch_ids : global ids (default ``arange(k)``)

    Returns
    -------
    BulkSample with this rank's share: process row ``i`` samples minibatches
    ``block_bounds(k, P/c, i)`` and replica ``j`` keeps the sub-range
    ``block_bounds(k_i, c, j)`` of them; bit-identical to sampling them on
    one process (for ``A`` whose LADIES sums are exact, e.g. binary ``A``;
    GraphSAGE always).

    Collective: over ``A``'s grid -- one :func:`sa_spgemm_15d` per hop
    (GraphSAGE) or two per hop (LADIES: probabilities and row extraction).
    Every rank must pass the same ``batches`` and ``minibatch_ids``.
    """
    g = A if isinstance(A, PartitionedGraph) else PartitionedGraph(A)
    flat, ptr, ids = _prepare(sampler, g.n, batches, minibatch_ids, "sample_partitioned")
    lo, hi = block_bounds(ptr.size - 1, g.nblocks, g.i)
    bulk = sampler._run(g, *_sub(flat, ptr, ids, lo, hi), epoch)
    a, b = block_bounds(hi - lo, g.c, g.j)
    return bulk.minibatches(a, b)
