"""Exact communication plans for distributed SpMM, without running the ranks.

Given the (already permuted) global matrix, a row partition into blocks, the
number of ranks and the feature width, a planner returns the ledger events a
real run records, rank by rank, under the communicator's byte model
(:mod:`spgnn.comm.stats`).  Tests check plan == ledger exactly for every
configuration that fits in 8 ranks, so the plans for 1024 ranks can be
trusted as much as the model.

An α–β estimate turns the events into time: each collective costs
``α · max_r messages_r + β · max_r max(sent_r, recv_r)`` (the slowest rank
of a bulk-synchronous step), summed over the collectives.
"""

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from ..comm.stats import (allreduce_messages, block_size, model_allgather, model_allreduce,
                          model_alltoallv)
from ..errors import DimensionMismatch, GridError
from ..grid import AXES_3D, AbstractGrid, roles_for_layer, shapes_3d
from ..layout import block_bounds, block_offsets, row_chunk_offsets

__all__ = ["PlannedEvent", "SpmmPlan", "plan_spmm", "PLANNERS", "pair_rows", "best_grid_3d",
           "comm_terms_3d", "comm_volume_3d", "plan_mxm", "MXM_PLANNERS", "nnz_per_rank_3d",
           "nnz_imbalance_3d", "plan_gcn_3d", "gcn_3d_layers", "BlockCounts", "MatrixCounts",
           "as_counts"]


@dataclass
class PlannedEvent:
    """One collective as every rank records it: arrays indexed by world rank."""

    op: str
    label: str
    axis: tuple
    sent: np.ndarray
    recv: np.ndarray
    messages: np.ndarray
    phase: str = "spmm"   # "setup" (once per matrix) or "spmm" (every multiply)

    def seconds(self, alpha, beta):
        if not len(self.sent):
            return 0.0
        return float(alpha * self.messages.max() + beta * np.maximum(self.sent, self.recv).max())


@dataclass
class SpmmPlan:
    """Planned events of one algorithm, with totals and an α–β time estimate."""

    algorithm: str
    ranks: int
    feat: int
    itemsize: int
    events: list = field(default_factory=list)

    def select(self, phase="spmm"):
        return [e for e in self.events if e.phase == phase]

    def bytes_total(self, phase="spmm") -> int:
        return int(sum(int(e.sent.sum()) for e in self.select(phase)))

    def bytes_per_rank(self, phase="spmm") -> np.ndarray:
        out = np.zeros(self.ranks, dtype=np.int64)
        for e in self.select(phase):
            out += e.sent
        return out

    def bytes_max_rank(self, phase="spmm") -> int:
        return int(self.bytes_per_rank(phase).max(initial=0))

    def seconds(self, alpha, beta, phase="spmm") -> float:
        return sum(e.seconds(alpha, beta) for e in self.select(phase))

    def grouped(self):
        """Events summed per (phase, op, label, axis), per rank, with the number of calls."""
        out = {}
        for e in self.events:
            key = (e.phase, e.op, e.label, e.axis)
            if key in out:
                calls, s, r, m = out[key]
                out[key] = (calls + 1, s + e.sent, r + e.recv, m + e.messages)
            else:
                out[key] = (1, e.sent.copy(), e.recv.copy(), e.messages.copy())
        return out

    def to_dict(self, alpha=None, beta=None) -> dict:
        out = {"algorithm": self.algorithm, "ranks": self.ranks, "feat": self.feat,
               "bytes_total": self.bytes_total(), "bytes_max_rank": self.bytes_max_rank(),
               "setup_bytes_total": self.bytes_total("setup"),
               "collectives": [{"phase": phase, "op": op, "label": label, "axis": list(axis),
                                "calls": calls, "bytes_total": int(s.sum()),
                                "bytes_max_rank": int(np.maximum(s, r).max(initial=0)),
                                "messages_max_rank": int(m.max(initial=0))}
                               for (phase, op, label, axis), (calls, s, r, m)
                               in self.grouped().items()]}
        if alpha is not None and beta is not None:
            out["seconds_estimate"] = self.seconds(alpha, beta)
        return out


def _event(op, label, axis, rows, phase="spmm"):
    sent, recv, msgs = (np.array(v, dtype=np.int64) for v in zip(*rows)) if rows else ([],) * 3
    return PlannedEvent(op, label, tuple(axis), sent, recv, msgs, phase)


def pair_rows(a, offsets):
    """``r[i, j]``: rows of X owned by part ``j`` that part ``i``'s block of A touches (i ≠ j).

    ``offsets`` splits both the rows of A and the rows of X (square A).
    O(nnz + n) with no sort: each row block marks its distinct columns in
    one scratch array of ``n`` stamps (the block's number), so a column
    counts once per block however many of its rows touch it.
    """
    a = sp.csr_array(a)
    offsets = np.asarray(offsets, dtype=np.int64)
    k = offsets.size - 1
    r = np.zeros((k, k), dtype=np.int64)
    if a.nnz == 0:
        return r
    stamp = np.full(a.shape[1], -1, dtype=np.int64)
    for i in range(k):
        cols = a.indices[a.indptr[offsets[i]]:a.indptr[offsets[i + 1]]]
        if cols.size == 0:
            continue
        stamp[cols] = i
        distinct = np.flatnonzero(stamp == i) if cols.size * 8 > a.shape[1] else \
            np.unique(cols)
        r[i] = np.bincount(np.searchsorted(offsets, distinct, side="right") - 1, minlength=k)
    np.fill_diagonal(r, 0)
    return r


def csr_block_nnz(a, row_off, col_off):
    """``z[i, j]``: stored entries of ``a[row block i, column block j]`` (``a`` CSR). Pure."""
    rows = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
    i = np.searchsorted(row_off, rows, side="right") - 1
    j = np.searchsorted(col_off, a.indices, side="right") - 1
    z = np.zeros((len(row_off) - 1, len(col_off) - 1), dtype=np.int64)
    np.add.at(z, (i, j), 1)
    return z


class BlockCounts:
    """What the planners and the time model read off an n×n matrix: counts per row block.

    Only :meth:`pair_rows` (the 1D/1.5D-aware exchanges), :meth:`block_nnz`
    and :meth:`row_block_nnz` (the local SpMM work), :meth:`transpose` (the
    backward pass's Aᵀ) and ``shape``.  :class:`MatrixCounts` reads them off
    a whole matrix; :class:`spgnn.plan.from_rows.RowCounts` holds them as
    gathered from the ranks' rows (no rank holds the matrix).  Every
    offsets argument is a sequence of block boundaries from 0 to n.
    """

    shape = (0, 0)

    def pair_rows(self, offsets):
        """:func:`pair_rows` of the matrix at ``offsets`` (diagonal zero)."""
        raise NotImplementedError

    def block_nnz(self, row_off, col_off):
        """Stored entries of every (row block, column block)."""
        raise NotImplementedError

    def row_block_nnz(self, offsets):
        """Stored entries of every row block."""
        raise NotImplementedError

    def transpose(self):
        """The counts of the transposed matrix."""
        raise NotImplementedError

    def permuted(self, permutation):
        """The counts of ``permutation.matrices(A)`` (``--permute double``)."""
        raise NotImplementedError(f"{type(self).__name__}: the double permutation needs the "
                                  f"whole matrix")


class MatrixCounts(BlockCounts):
    """:class:`BlockCounts` read off a whole matrix ``a`` (CSR), as the model always did. Pure."""

    def __init__(self, a):
        self.matrix = sp.csr_array(a)
        self.shape = self.matrix.shape
        self._t = None

    def pair_rows(self, offsets):
        return pair_rows(self.matrix, offsets)

    def block_nnz(self, row_off, col_off):
        return csr_block_nnz(self.matrix, row_off, col_off)

    def row_block_nnz(self, offsets):
        off = np.asarray(offsets, dtype=np.int64)
        return self.matrix.indptr[off[1:]] - self.matrix.indptr[off[:-1]]

    def transpose(self):
        if self._t is None:
            self._t = MatrixCounts(sp.csr_array(self.matrix.T))
        return self._t

    def permuted(self, permutation):
        return [MatrixCounts(m) for m in permutation.matrices(self.matrix)]


def as_counts(a):
    """``a`` as :class:`BlockCounts`: itself when it is one, else :class:`MatrixCounts` of it."""
    return a if isinstance(a, BlockCounts) else MatrixCounts(a)


def _plan_1d(a, offsets, p, f, w):
    sizes = np.diff(offsets)
    n = int(offsets[-1])
    rows = [model_allgather(int(sizes[r]) * f * w, n * f * w, p) for r in range(p)]
    return [_event("allgatherv", "spmm-1d:allgather", ("row",), rows)]


def _plan_exchange(r, f, w, label, rank_of, p):
    """Setup and per-call events of an :class:`ExchangePlan` inside groups of ranks.

    ``r[g]`` is the pair-row matrix of group ``g`` (``r[g][i, j]``: rows group
    member ``i`` needs from member ``j``); ``rank_of(g, i)`` the world rank.
    """
    # model_alltoallv / model_allreduce of every member at once (O(k^2) numpy work per group:
    # the per-member calls dominated plan --time at thousands of ranks)
    names = ("counts", "split", "ids", "max", "x")
    arrays = {name: np.zeros((3, p), dtype=np.int64) for name in names}
    for g, rg in enumerate(r):
        rg = np.asarray(rg, dtype=np.int64)
        k = rg.shape[0]
        world = np.array([rank_of(g, q) for q in range(k)], dtype=np.int64)
        off = ~np.eye(k, dtype=bool)                    # peers only, as model_alltoallv
        need = np.where(off, rg, 0)
        asked = need.sum(axis=1)                        # rows member q asks for (its ids sent)
        given = need.sum(axis=0)                        # rows member q is asked for
        peers_asked = np.count_nonzero(need, axis=1)
        peers_asking = np.count_nonzero(need, axis=0)
        one = 2 * (1 - (np.arange(k) < 1 % k).astype(np.int64)) * 8 if k > 1 else np.zeros(k)
        reduce_msgs = allreduce_messages(k)
        arrays["counts"][:, world] = [[(k - 1) * 8] * k, [(k - 1) * 8] * k, [k - 1] * k]
        for name in ("split", "max"):
            arrays[name][:, world] = [one, one, [reduce_msgs] * k]
        arrays["ids"][:, world] = [asked * 8, given * 8, peers_asked]
        arrays["x"][:, world] = [given * f * w, asked * f * w, peers_asking]
    rows = {name: list(zip(*(arrays[name][i].tolist() for i in range(3)))) for name in names}
    return [_event("alltoall", f"{label}:plan", ("row",), rows["counts"], "setup"),
            _event("allreduce:split", f"{label}:plan", ("row",), rows["split"], "setup"),
            _event("alltoallv", f"{label}:plan", ("row",), rows["ids"], "setup"),
            _event("allreduce", f"{label}:plan", ("row",), rows["max"], "setup"),
            _event("alltoallv", f"{label}:exchange", ("row",), rows["x"])]


def _plan_1d_aware(a, offsets, p, f, w):
    return _plan_exchange([as_counts(a).pair_rows(offsets)], f, w, "spmm-1d-aware", lambda g, i: i, p)


def _slabs(offsets, c):
    """Column slab of each replica: the union of X blocks ``block_bounds(k, c, j)``."""
    k = len(offsets) - 1
    return [(int(offsets[block_bounds(k, c, j)[0]]), int(offsets[block_bounds(k, c, j)[1]]))
            for j in range(c)]


def _allreduce_15d(offsets, p, f, w, c):
    sizes = np.diff(offsets)
    rows = [model_allreduce(int(sizes[q // c]) * f, w, c, q % c) for q in range(p)]
    return [_event("allreduce", "spmm-15d:allreduce", ("layer",), rows)] if c > 1 else []


def _plan_15d_aware(a, offsets, p, f, w, c):
    # a slab is whole X blocks (_slabs): its pair rows are the full matrix's in its block columns
    full, k = as_counts(a).pair_rows(offsets), len(offsets) - 1
    r = []
    for j in range(c):
        b0, b1 = block_bounds(k, c, j)
        rj = np.zeros_like(full)
        rj[:, b0:b1] = full[:, b0:b1]
        r.append(rj)
    # process column j holds ranks (i, j) = i * c + j
    return (_plan_exchange(r, f, w, "spmm-15d-aware", lambda j, i: i * c + j, p)
            + _allreduce_15d(offsets, p, f, w, c))


def _plan_15d(a, offsets, p, f, w, c):
    k = len(offsets) - 1
    slabs = _slabs(offsets, c)
    lo, hi = np.asarray(offsets[:-1]), np.asarray(offsets[1:])
    events = []
    for q in range(k):      # one broadcast stage per X block overlapping each column's slab
        sent, recv, msgs = (np.zeros(p, dtype=np.int64) for _ in range(3))
        active = False
        for j, (c0, c1) in enumerate(slabs):
            m = max(0, min(int(hi[q]), c1) - max(int(lo[q]), c0)) * f * w
            if m == 0:
                continue
            active = True
            column = np.arange(k) * c + j          # ranks (i, j) of process column j
            recv[column] = m
            recv[q * c + j] = 0
            sent[q * c + j] = m * (k - 1)
            msgs[q * c + j] = k - 1
        if active:
            events.append(PlannedEvent("bcast", "spmm-15d:bcast", ("row",), sent, recv, msgs))
    return events + _allreduce_15d(offsets, p, f, w, c)


def _plan_3d(a, offsets, p, f, w, grid, shard_input):
    g = AbstractGrid(tuple(grid), ("x", "y", "z"))
    gx, gy, gz = g.shape                     # layer 0: roles (o, i, d) = (x, y, z)
    n = a.shape[0]
    rows_d, rows_o, cols_i = block_offsets(n, gz), block_offsets(n, gx), block_offsets(f, gy)
    gather, reduce = [None] * p, [None] * p
    for rank, (cx, cy, cz) in g.ranks():
        width = cols_i[cy + 1] - cols_i[cy]
        oblock = rows_o[cx + 1] - rows_o[cx]
        pieces = block_offsets(oblock, gz)
        own = (pieces[cz + 1] - pieces[cz]) * width * w
        gather[rank] = model_allgather(own, oblock * width * w, gz)
        reduce[rank] = model_allreduce((rows_d[cz + 1] - rows_d[cz]) * width, w, gx, cx)
    events = []
    if shard_input and gz > 1:
        events.append(_event("allgatherv", "spmm-3d:allgather", ("z",), gather))
    if gx > 1:
        events.append(_event("allreduce", "spmm-3d:allreduce", ("x",), reduce))
    return events


PLANNERS = {"1d": _plan_1d, "1d-aware": _plan_1d_aware, "15d": _plan_15d,
            "15d-aware": _plan_15d_aware, "3d": _plan_3d}


def plan_spmm(a, algorithm, ranks, feat, *, offsets=None, itemsize=4, replication=2, grid=None,
              shard_input=True):
    """Plan one algorithm's communication for ``Y = A X`` (A square, n×n; X n×feat).

    Parameters
    ----------
    a : scipy sparse matrix or BlockCounts
        The matrix as it will be distributed (apply a partition's
        permutation first), or its counts (:class:`BlockCounts`).
    algorithm : str
        A key of :data:`PLANNERS`.
    ranks : int
        Number of ranks P (any size: nothing is launched).
    offsets : sequence of int, optional
        Block boundaries of the row partition into P blocks (1D) or P/c
        blocks (1.5D); default even.  ``3d`` uses even splits.
    itemsize : int
        Bytes per element of X (4 for float32).
    replication : int
        c for ``15d`` and ``15d-aware``, on a P/c × c grid.
    grid : (int, int, int)
        ``(X, Y, Z)`` for ``3d``: layer 0's SpMM with roles ``(o, i, d) =
        (x, y, z)``; X is row-sharded over z when ``shard_input`` (an
        all-gather over z), then partial sums are all-reduced over x.

    Returns
    -------
    SpmmPlan
    """
    if a.shape[0] != a.shape[1]:
        raise DimensionMismatch(f"plan_spmm: A must be square, but got shape {a.shape}")
    if algorithm not in PLANNERS:
        raise ValueError(f"plan_spmm: unknown algorithm {algorithm!r}; expected one of "
                         f"{sorted(PLANNERS)}")
    n, ranks, feat, itemsize = a.shape[0], int(ranks), int(feat), int(itemsize)
    extra, blocks = {}, ranks
    if algorithm in ("15d", "15d-aware"):
        c = int(replication)
        if c < 1 or ranks % c:
            raise ValueError(f"plan_spmm: replication c must divide ranks={ranks}, but got c={c}")
        extra["c"], blocks = c, ranks // c
    elif algorithm == "3d":
        if grid is None or len(tuple(grid)) != 3 or int(np.prod(grid)) != ranks:
            raise ValueError(f"plan_spmm: 3d needs grid=(X, Y, Z) with X*Y*Z = ranks={ranks}, "
                             f"but got grid={grid}")
        extra.update(grid=tuple(int(g) for g in grid), shard_input=bool(shard_input))
    offsets = np.asarray(block_offsets(n, blocks) if offsets is None else offsets, dtype=np.int64)
    if (offsets.size != blocks + 1 or offsets[0] != 0 or offsets[-1] != n
            or np.any(np.diff(offsets) < 0)):
        raise DimensionMismatch(f"plan_spmm: {algorithm} on {ranks} ranks needs {blocks + 1} "
                                f"non-decreasing offsets from 0 to n={n}, but got "
                                f"{offsets.tolist() if offsets.size < 12 else offsets.size}")
    events = PLANNERS[algorithm](as_counts(a), offsets, ranks, feat, itemsize, **extra)
    return SpmmPlan(algorithm, ranks, feat, itemsize, events)


def _mxm_pairs(a, b, ra, rb):
    """``(rows, nnz)``: ``rows[i, j]`` rows of B owned by part ``j`` that part ``i``'s rows of A
    touch (i != j), ``nnz[i, j]`` their entries.  ``ra``/``rb`` split A's and B's rows."""
    k = ra.size - 1
    rows = np.zeros((k, k), dtype=np.int64)
    nnz = np.zeros((k, k), dtype=np.int64)
    a = sp.coo_array(a)
    if a.nnz:
        part = np.searchsorted(ra, a.row, side="right") - 1
        key = np.unique(part.astype(np.int64) * a.shape[1] + a.col)
        i, col = np.divmod(key, a.shape[1])
        j = np.searchsorted(rb, col, side="right") - 1
        blen = np.diff(sp.csr_array(b).indptr).astype(np.int64)
        np.add.at(rows, (i, j), 1)
        np.add.at(nnz, (i, j), blen[col])
    np.fill_diagonal(rows, 0)
    np.fill_diagonal(nnz, 0)
    return rows, nnz


def _plan_mxm_1d(a, b, ra, rb, p, w):
    rows, nnz = _mxm_pairs(a, b, ra, rb)
    setup = [e for e in _plan_exchange([rows], 0, w, "mxm-1d", lambda g, i: i, p)
             if e.phase == "setup"]
    ev = {name: [None] * p for name in ("lens", "split", "idx", "val")}
    for q in range(p):
        ev["lens"][q] = model_alltoallv(rows[:, q] * 8, rows[q] * 8, q)
        ev["split"][q] = model_allreduce(1, 8, p, q)
        ev["idx"][q] = model_alltoallv(nnz[:, q] * 8, nnz[q] * 8, q)
        ev["val"][q] = model_alltoallv(nnz[:, q] * w, nnz[q] * w, q)
    lab = "mxm-1d:exchange"
    return setup + [_event("alltoallv", lab, ("row",), ev["lens"], "spmm"),
                    _event("allreduce:split", lab, ("row",), ev["split"], "spmm"),
                    _event("alltoallv", lab, ("row",), ev["idx"], "spmm"),
                    _event("allreduce:split", lab, ("row",), ev["split"], "spmm"),
                    _event("alltoallv", lab, ("row",), ev["val"], "spmm")]


def _block_nnz(m, r_off, c_off):
    m = sp.coo_array(m)
    out = np.zeros((len(r_off) - 1, len(c_off) - 1), dtype=np.int64)
    if m.nnz:
        np.add.at(out, (np.searchsorted(r_off, m.row, side="right") - 1,
                        np.searchsorted(c_off, m.col, side="right") - 1), 1)
    return out


def _plan_mxm_summa(a, b, q, w):
    """Per stage, three broadcasts of A's blocks along grid rows and of B's along columns."""
    p = q * q
    ro, inner, co = (np.asarray(block_offsets(n, q)) for n in (a.shape[0], a.shape[1], b.shape[1]))
    na, nb = _block_nnz(a, ro, inner), _block_nnz(b, inner, co)
    events = []
    if q == 1:
        return events
    for s in range(q):
        for which, axis, sizes in (("A", ("col",), lambda g: (ro[g + 1] - ro[g], na[g, s])),
                                   ("B", ("row",), lambda g: (inner[s + 1] - inner[s], nb[s, g]))):
            for part in range(3):
                sent, recv, msgs = (np.zeros(p, dtype=np.int64) for _ in range(3))
                for g in range(q):          # grid row g (for A) or grid column g (for B)
                    nrows, nz = sizes(g)
                    m = (8, (nrows + 1 + nz) * 8, nz * w)[part]
                    members = [g * q + t for t in range(q)] if which == "A" else \
                        [t * q + g for t in range(q)]
                    root = members[s]
                    for r in members:
                        recv[r] = 0 if r == root else m
                    sent[root] = m * (q - 1)
                    msgs[root] = (q - 1) if m > 0 else 0
                events.append(PlannedEvent("bcast", f"mxm-summa:{which}", axis, sent, recv, msgs,
                                           "spmm"))
    return events


#: Distributed SpGEMM algorithms the planner knows (:mod:`spgnn.core.mxm`).
MXM_PLANNERS = ("1d", "summa")


def plan_mxm(a, b, algorithm, ranks, *, offsets=None, b_offsets=None, itemsize=8):
    """Plan ``C = A B`` (sparse x sparse) with ``algorithm`` on ``ranks`` ranks. Pure.

    ``1d``: A and B split by rows at ``offsets`` and ``b_offsets`` (default
    even); setup events (phase ``"setup"``: the cached exchange plan) and
    per-call events (phase ``"spmm"``: every multiply).  ``summa``: a square ``q x q`` grid
    with even splits (:class:`~spgnn.errors.GridError` when ``ranks`` is
    not a square).  ``itemsize`` is the bytes per value (8: float64).
    Returns an :class:`SpmmPlan` (``feat`` = 0); ``bytes_total()`` is the
    bytes one multiply moves, ``bytes_total("setup")`` the plan's.
    """
    a, b = sp.csr_array(a), sp.csr_array(b)
    if a.shape[1] != b.shape[0]:
        raise DimensionMismatch(f"plan_mxm: A.shape={a.shape} and B.shape={b.shape} do not chain")
    ranks, w = int(ranks), int(itemsize)
    if algorithm == "1d":
        ra = np.asarray(block_offsets(a.shape[0], ranks) if offsets is None else offsets, np.int64)
        rb = np.asarray(block_offsets(b.shape[0], ranks) if b_offsets is None else b_offsets,
                        np.int64)
        for name, off, n in (("offsets", ra, a.shape[0]), ("b_offsets", rb, b.shape[0])):
            if off.size != ranks + 1 or off[0] != 0 or off[-1] != n or np.any(np.diff(off) < 0):
                raise DimensionMismatch(f"plan_mxm: {name} must be {ranks + 1} non-decreasing "
                                        f"offsets from 0 to {n}")
        events = _plan_mxm_1d(a, b, ra, rb, ranks, w)
    elif algorithm == "summa":
        q = int(round(ranks ** 0.5))
        if q * q != ranks:
            raise GridError(f"plan_mxm: 2D Sparse SUMMA needs a square number of ranks, "
                            f"but got {ranks}")
        events = _plan_mxm_summa(a, b, q, w)
    else:
        raise ValueError(f"plan_mxm: unknown algorithm {algorithm!r}; expected one of "
                         f"{MXM_PLANNERS}")
    return SpmmPlan(f"mxm-{algorithm}", ranks, 0, w, events)


def best_grid_3d(n, ranks, dims):
    """The ``(X, Y, Z)`` grid Plexus's model prefers for a GCN epoch with widths ``dims``.

    Minimises the per-rank epoch volume of :func:`comm_volume_3d`
    (report §2.7; ties go to the smaller maximum axis volume).  The SpMM
    step alone is not a good criterion: a ``1 x P x 1`` grid makes it free
    by replicating A, and moves the cost into the dense layer steps.
    """
    def cost(grid):
        vol = comm_volume_3d(int(n), list(dims), grid)
        return (vol["total"], max(v for k, v in vol.items() if k != "total"))

    return min(shapes_3d(ranks), key=cost)


# --------------------------------------------------------------------------------------------
# The 3D algorithm's communication in closed form (Plexus, Ranjan et al., SC'25, §2.7)


def comm_terms_3d(N, dims, grid_shape, *, axes=AXES_3D, forward=True, backward=True,
                  shard_input=True, shard_weights=True):
    """Every communication step of a ``len(dims) - 1``-layer 3D GCN epoch. Pure.

    Returns a list of ``(layer, pass, step, axis, elements)`` with
    ``elements`` the per-rank volume under the ring model (all-gather and
    reduce-scatter ``(p−1)/p·M``, all-reduce ``2(p−1)/p·M`` for a full buffer
    of ``M`` elements) as an exact :class:`fractions.Fraction`.  The steps are
    the table of report §2.7, with layer ``l``'s roles ``roles_for_layer(l)``:
    forward AG F (first layer, when ``shard_input``), AR H over o, AG W over d
    (when ``shard_weights``), AR Q over i; backward RS dW over d (AR when the
    weights are replicated), AG W over d, AR dH over o, and dF over d (RS for
    the sharded first layer, AR otherwise).  Zero-volume steps are included.
    """
    N = int(N)
    dims = [int(v) for v in dims]
    if len(dims) < 2:
        raise DimensionMismatch(f"comm_terms_3d: dims needs at least two entries, but got {dims}")
    if len(grid_shape) != 3 or any(int(g) <= 0 for g in grid_shape):
        raise GridError(f"comm_terms_3d: grid_shape must be three positive ints, but got "
                        f"{grid_shape!r}")
    G = dict(zip(axes, (int(g) for g in grid_shape)))

    def ag(p, m):
        return Fraction(p - 1, p) * m

    def ar(p, m):
        return 2 * Fraction(p - 1, p) * m

    out = []
    for layer in range(len(dims) - 1):
        o, i, d = roles_for_layer(layer, axes)
        go, gi, gd = G[o], G[i], G[d]
        D, Dp = dims[layer], dims[layer + 1]
        feat_in = Fraction(N * D, go * gi)       # F block  N/Go x D/Gi
        h_blk = Fraction(N * D, gd * gi)         # H block  N/Gd x D/Gi
        q_blk = Fraction(N * Dp, gd * go)        # Q block  N/Gd x D'/Go
        w_blk = Fraction(D * Dp, gi * go)        # W block  D/Gi x D'/Go
        first = layer == 0 and shard_input
        if forward:
            if first:
                out.append((layer, "forward", "allgather F", d, ag(gd, feat_in)))
            out.append((layer, "forward", "allreduce H", o, ar(go, h_blk)))
            if shard_weights:
                out.append((layer, "forward", "allgather W", d, ag(gd, w_blk)))
            out.append((layer, "forward", "allreduce Q", i, ar(gi, q_blk)))
        if backward:
            if shard_weights:
                out.append((layer, "backward", "reduce_scatter dW", d, ag(gd, w_blk)))
                out.append((layer, "backward", "allgather W", d, ag(gd, w_blk)))
            else:
                out.append((layer, "backward", "allreduce dW", d, ar(gd, w_blk)))
            out.append((layer, "backward", "allreduce dH", o, ar(go, h_blk)))
            if first:
                out.append((layer, "backward", "reduce_scatter dF", d, ag(gd, feat_in)))
            else:
                out.append((layer, "backward", "allreduce dF", d, ar(gd, feat_in)))
    return out


def comm_volume_3d(N, dims, grid_shape, *, axes=AXES_3D, itemsize=None, **options):
    """Per-rank communication volume of a 3D GCN epoch, by grid axis (Plexus §2.7). Pure.

    Parameters
    ----------
    N : int
        Rows (vertices).
    dims : sequence of int
        Feature widths ``[D_0, ..., D_L]`` (``L`` layers).
    grid_shape : (int, int, int)
        ``(G_x, G_y, G_z)`` for ``axes``.
    itemsize : int, optional
        Bytes per element; when given the result is in bytes.
    **options
        ``forward``, ``backward``, ``shard_input``, ``shard_weights`` as in
        :func:`comm_terms_3d` (default: the full epoch with Plexus's sharding).

    Returns
    -------
    dict
        ``{axis: volume, ..., "total": volume}`` as exact Fractions (ints
        compare equal when integral).  For the report's test vector,
        ``comm_volume_3d(65536, [128, 128, 128, 32], (2, 2, 2))["total"] ==
        23_606_784``.
    """
    out = {a: Fraction(0) for a in axes}
    for *_, axis, vol in comm_terms_3d(N, dims, grid_shape, axes=axes, **options):
        out[axis] += vol
    if itemsize is not None:
        out = {a: v * int(itemsize) for a, v in out.items()}
    out["total"] = sum(out.values(), Fraction(0))
    return out


def nnz_per_rank_3d(a, grid_shape, layers, *, permutation=None, axes=AXES_3D):
    """Stored entries of every rank's Â shard, per layer, in 3D training. Pure.

    Returns an int array ``(layers, X·Y·Z)``: row ``l`` holds, for every
    grid position, the nnz of the ``(d, o)`` block (even splits) of the
    matrix layer ``l`` multiplies by, with roles ``roles_for_layer(l)``.
    ``permutation`` is a :class:`~spgnn.partition.DoublePermutation`
    (``permute="double"`` in :class:`~spgnn.gnn.DistGraph`): layer ``l``
    uses ``P_r Â P_cᵀ`` when ``l`` is even, ``P_c Â P_rᵀ`` when odd;
    ``None``: Â as given (``permute="none"``).  Entries are ordered by
    grid position ``(x, y, z)`` (C order), which is not the world rank
    order; max/mean does not care.
    """
    a = sp.csr_array(a)
    n = a.shape[0]
    g = dict(zip(axes, (int(v) for v in grid_shape)))
    variants = [a] if permutation is None else list(permutation.matrices(a))
    out = np.zeros((int(layers), int(np.prod(grid_shape))), dtype=np.int64)
    cache = {}
    for layer in range(int(layers)):
        o, i, d = roles_for_layer(layer, axes)
        v = layer % len(variants)
        key = (v, g[d], g[o])
        if key not in cache:
            m = sp.coo_array(variants[v])
            bi = np.searchsorted(block_offsets(n, g[d]), m.row, side="right") - 1
            bj = np.searchsorted(block_offsets(n, g[o]), m.col, side="right") - 1
            cache[key] = np.bincount(bi * g[o] + bj, minlength=g[d] * g[o]).reshape(g[d], g[o])
        z = cache[key]
        # rank at grid position (x, y, z) holds block (its d coordinate, its o coordinate)
        pos = np.indices(tuple(g[ax] for ax in axes)).reshape(3, -1)
        coord = dict(zip(axes, pos))
        out[layer] = z[coord[d], coord[o]]
    return out


def nnz_imbalance_3d(a, grid_shape, layers, **options):
    """Max over layers of ``max / mean`` nnz per rank (:func:`nnz_per_rank_3d`); 1.0 is even. Pure."""
    z = nnz_per_rank_3d(a, grid_shape, layers, **options)
    mean = z.mean(axis=1)
    ratio = np.where(mean > 0, z.max(axis=1) / np.where(mean > 0, mean, 1), 1.0)
    return float(ratio.max(initial=1.0))


def gcn_3d_layers(dims, order="auto", axes=AXES_3D):
    """The axes each layer of spgnn's 3D GCN uses, following the layouts. Pure.

    Returns one dict per layer: ``first`` (transform first), ``prop`` (the
    aggregation's roles ``(o, i, d)``: Â's ``(d, o)`` block), ``mm`` (the
    product's ``(r, c, t)``: H ``Layout(r, c)``, W ``(c, t)``) and
    ``width`` (the aggregated columns).  With every layer aggregating first
    the roles are Plexus's rotation (:func:`~spgnn.grid.roles_for_layer`);
    a transform-first layer moves the rotation on by two.
    """
    def third(a, b):
        return next(x for x in axes if x not in (a, b))

    state, out = (axes[0], axes[1]), []
    for d_in, d_out in zip(dims[:-1], dims[1:]):
        first = (order == "transform-first") or (order == "auto" and d_out < d_in)
        if first:
            mm = (state[0], state[1], third(*state))
            z = (mm[0], mm[2])
            prop = (z[0], z[1], third(*z))
            state, width = (prop[2], prop[1]), d_out
        else:
            prop = (state[0], state[1], third(*state))
            h = (prop[2], prop[1])
            mm = (h[0], h[1], third(*h))
            state, width = (mm[0], mm[2]), d_in
        out.append({"first": first, "prop": prop, "mm": mm, "width": width})
    return out


def plan_gcn_3d(n, dims, grid_shape, *, itemsize=4, shard_weights=True, bias=False,
                order="auto", agg_blocks=1, axes=AXES_3D):
    """Every collective of one 3D GCN training epoch as spgnn runs it, rank by rank. Pure.

    The events :class:`~spgnn.gnn.Trainer` records for a
    :class:`~spgnn.gnn.GCN` (``layers = len(dims) - 1``, widths ``dims``)
    on a :class:`~spgnn.gnn.DistGraph` with ``algorithm="3d"`` on grid
    ``grid_shape`` (``shard_input=False``, the default), in execution order,
    under the ledger's byte model, without the loss's small reductions
    (``gnn-loss:*``) and the trainer's finiteness check.  Tested equal to a
    real epoch's ledger (``tests/unit/test_plexus_3d.py``).  Unlike Plexus's
    closed form (:func:`comm_terms_3d`) it follows what spgnn does: a layer
    multiplies in the order of its widths (``order="auto"``: transform
    first when ``D' < D``), the first layer computes no input gradient, a
    weight block is sharded over depth only when its rows split evenly
    (``Context._place_weight``), blocks are even splits of ``n`` and of the
    widths, collectives over one rank are skipped.  ``agg_blocks=K``
    (``DistGraph(agg_blocks=K)``, blocked aggregation): every aggregation's
    all-reduce (``spmm-3d:allreduce``, forward and backward) becomes K
    all-reduces, one per row chunk of the rank's Â block
    (:func:`~spgnn.layout.row_chunk_offsets`, aligned to the group size):
    the same bytes per rank, up to K times the messages (an empty chunk's
    all-reduce is still called and sends nothing).

    Returns
    -------
    list of ``(layer, pass, PlannedEvent)`` with ``pass`` ``"forward"`` or
    ``"backward"``; the events' arrays are indexed by world rank
    (row-major over the grid).
    """
    dims = [int(v) for v in dims]
    if len(dims) < 2 or min(dims) < 1:
        raise DimensionMismatch(f"plan_gcn_3d: dims needs two or more positive widths, but "
                                f"got {dims}")
    shape = tuple(int(g) for g in grid_shape)
    if len(shape) != 3 or min(shape) < 1:
        raise GridError(f"plan_gcn_3d: grid_shape must be three positive ints, but got "
                        f"{grid_shape!r}")
    if order not in ("auto", "aggregate-first", "transform-first"):
        raise ValueError(f"plan_gcn_3d: unknown order {order!r}")
    if isinstance(agg_blocks, bool) or not isinstance(agg_blocks, (int, np.integer)) \
            or agg_blocks < 1:
        raise ValueError(f"plan_gcn_3d: agg_blocks must be an int >= 1, but got {agg_blocks!r}")
    n, w, k_blocks = int(n), int(itemsize), int(agg_blocks)
    G = dict(zip(axes, shape))
    p = int(np.prod(shape))
    coord = dict(zip(axes, np.indices(shape).reshape(3, -1)))

    def third(a, b):
        return next(x for x in axes if x not in (a, b))

    def blk(total, axis):
        return np.diff(np.asarray(block_offsets(total, G[axis]), dtype=np.int64))[coord[axis]]

    def allreduce(label, axis, elements):
        if G[axis] == 1:
            return []
        # model_allreduce for every rank at once (at thousands of ranks the per-rank calls
        # were most of plan --time): the ring moves 2 (n - own block) items each way
        e = np.asarray(elements, dtype=np.int64)
        g, r = G[axis], coord[axis].astype(np.int64)
        own = e // g + (r < e % g)
        moved = 2 * (e - own) * w
        msgs = np.where(e > 0, allreduce_messages(g), 0).astype(np.int64)
        return [PlannedEvent("allreduce", label, (axis,), moved, moved.copy(), msgs)]

    def aggregate(axis, rows, cols):
        """The aggregation's all-reduce over ``axis`` of ``rows × cols`` blocks, in chunks."""
        if k_blocks == 1:
            return allreduce("spmm-3d:allreduce", axis, rows * cols)
        cuts = np.array([np.diff(row_chunk_offsets(int(m), k_blocks, G[axis])) for m in rows])
        return [e for k in range(k_blocks)
                for e in allreduce("spmm-3d:allreduce", axis, cuts[:, k] * cols)]

    def sharded(d_in, r, c):
        return (shard_weights and G[r] > 1
                and all(b % G[r] == 0 for b in np.diff(block_offsets(d_in, G[c]))))

    def w_pieces(d_in, d_out, r, c, t):
        """(own, total) bytes of each rank's depth piece of its W block (rows over c, then r)."""
        rows = blk(d_in, c)
        own = np.array([block_size(int(rows[k]), G[r], int(coord[r][k])) for k in range(p)])
        cols = blk(d_out, t)
        return own * cols * w, rows * cols * w

    def gather_w(label, d_in, d_out, r, c, t):
        own, total = w_pieces(d_in, d_out, r, c, t)
        return [_event("allgatherv", label, (r,),
                       [model_allgather(int(o), int(a), G[r]) for o, a in zip(own, total)])]

    events = []

    def emit(layer, phase, evs):
        events.extend((layer, phase, e) for e in evs)

    state = (axes[0], axes[1])                 # the features: Layout(x, y), layer 0's (o, i)
    saved = []
    for layer, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
        first = (order == "transform-first") or (order == "auto" and d_out < d_in)

        def propagate(st, width):
            o, i = st
            d = third(o, i)
            return aggregate(o, blk(n, d), blk(width, i)), (d, i)

        def matmul(st, din, dout):
            r, c = st
            t = third(r, c)
            evs = gather_w("matmul-3d:allgather", din, dout, r, c, t) \
                if sharded(din, r, c) else []
            return evs + allreduce("matmul-3d:allreduce", c, blk(n, r) * blk(dout, t)), (r, t)

        if first:
            h_state = state
            evs, z = matmul(state, d_in, d_out)
            emit(layer, "forward", evs)
            evs, state = propagate(z, d_out)
        else:
            evs, h_state = propagate(state, d_in)
            emit(layer, "forward", evs)
            evs, state = matmul(h_state, d_in, d_out)
        emit(layer, "forward", evs)
        saved.append((first, h_state, d_in, d_out))
    for layer in reversed(range(len(saved))):
        first, h_state, d_in, d_out = saved[layer]
        need_dx = layer > 0
        g_state = state

        if bias:
            r, c = g_state
            emit(layer, "backward", allreduce("gnn:grad-allreduce-db", r, blk(d_out, c)))

        def weight_grad(gs):
            r, c = h_state
            t = gs[1]
            if sharded(d_in, r, c):
                own, total = w_pieces(d_in, d_out, r, c, t)
                hrows, cols = blk(d_in, c), blk(d_out, t)
                rows = []
                for k in range(p):
                    pieces = [block_size(int(hrows[k]), G[r], j) * int(cols[k])
                              for j in range(G[r])]
                    o = int(own[k])
                    rows.append((int(total[k]) - o, (G[r] - 1) * o,
                                 sum(1 for e in pieces if e > 0) - (1 if o > 0 else 0)))
                return [_event("reduce_scatter", "gnn:grad-reduce-scatter-dW", (r,), rows)]
            return allreduce("gnn:grad-allreduce-dW", r, blk(d_in, c) * blk(d_out, t))

        def matmul_t(gs):
            r, t = gs
            c = h_state[1]
            evs = gather_w("gnn:allgather-W", d_in, d_out, r, c, t) \
                if sharded(d_in, r, c) else []
            return evs + allreduce("matmul-3d:allreduce", t, blk(n, r) * blk(d_in, c)), (r, c)

        def propagate_t(gs, width):
            r, c = gs
            t = third(r, c)
            return aggregate(r, blk(n, t), blk(width, c)), (t, c)

        if not first:                      # aggregate-first: weight grad, then back through W, Â
            emit(layer, "backward", weight_grad(g_state))
            if need_dx:
                evs, dz = matmul_t(g_state)
                emit(layer, "backward", evs)
                evs, state = propagate_t(dz, d_in)
                emit(layer, "backward", evs)
        else:                              # transform-first: back through Â, weight grad, W
            evs, dz = propagate_t(g_state, d_out)
            emit(layer, "backward", evs)
            emit(layer, "backward", weight_grad(dz))
            if need_dx:
                evs, state = matmul_t(dz)
                emit(layer, "backward", evs)
    return events
