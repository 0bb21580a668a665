"""``--algo auto`` from the ranks' rows: no rank holds the whole aggregation matrix.

The time model (:mod:`spgnn.plan.model`) reads only counts off Â
(:class:`~spgnn.plan.events.BlockCounts`): the stored entries of row blocks
and of (row block, column block) pairs, and the pair rows of the 1D/1.5D
exchanges (the distinct columns of row block ``i`` in block ``j``, of Â and
of Âᵀ).  :func:`choose_from_rows` first runs the ranking on a
:class:`_Recorder` that answers zeros and notes every count asked for, so
the counts of every candidate configuration are known before any is priced,
then gathers exactly those counts from the ranks' row blocks
(:func:`gather_counts`: local histograms, the distinct columns of a row
block held by several ranks sent to one owner per block pair with one
``alltoallv``, one ``allreduce``; O(nnz) work and memory per rank, O(P²)
counts), and ranks on rank 0 with the same model code as
:func:`spgnn.plan.choose.choose`: the same predictions to the float on the
same graph with ``partition="none"``.  Collective labels: ``auto:counts``.
"""

import numpy as np
import scipy.sparse as sp

from ..grid import parse_grid
from .choose import _agree, _configs, _fitting
from .events import BlockCounts
from .model import DEFAULT_CALIBRATION, load_calibration, rank_configs

__all__ = ["RowCounts", "gather_counts", "choose_from_rows", "choose_spmm_from_rows",
           "needed_counts", "recorder",
           "pattern_rows"]

LABEL = "auto:counts"

#: Entries per row chunk of :func:`_runs` (bounds its per-entry temporaries).
RUN_CHUNK = 1 << 22


def _key(offsets):
    return tuple(int(v) for v in offsets)


class _Needs:
    """The counts a ranking asks for, as requests on A: block nnz ``(R, C)``, pair rows of A
    at ``offsets`` and of Aᵀ at ``offsets``."""

    def __init__(self):
        self.nnz, self.pairs, self.pairs_t = set(), set(), set()


class _CountsView(BlockCounts):
    """Answers from ``table`` (A's counts), as A or, ``transposed``, as Aᵀ."""

    def __init__(self, n, table, transposed=False):
        self.shape = (int(n), int(n))
        self._table, self._transposed = table, transposed

    def _nnz(self, r, c):                   # A's counts
        raise NotImplementedError

    def _pairs(self, off, transposed):
        raise NotImplementedError

    def block_nnz(self, row_off, col_off):
        r, c = _key(row_off), _key(col_off)
        return self._nnz(c, r).T.copy() if self._transposed else self._nnz(r, c)

    def row_block_nnz(self, offsets):
        return self.block_nnz(offsets, (0, self.shape[0])).ravel()

    def pair_rows(self, offsets):
        return self._pairs(_key(offsets), self._transposed)

    def transpose(self):
        return type(self)(self.shape[0], self._table, not self._transposed)


class _Recorder(_CountsView):
    """Notes every count asked for (in ``table``, a :class:`_Needs`) and answers zeros."""

    def _nnz(self, r, c):
        self._table.nnz.add((r, c))
        return np.zeros((len(r) - 1, len(c) - 1), dtype=np.int64)

    def _pairs(self, off, transposed):
        (self._table.pairs_t if transposed else self._table.pairs).add(off)
        return np.zeros((len(off) - 1, len(off) - 1), dtype=np.int64)


class RowCounts(_CountsView):
    """:class:`~spgnn.plan.events.BlockCounts` gathered from the ranks' rows (:func:`gather_counts`).

    ``table``: ``{"nnz": {(R, C): z}, "pairs": {offsets: r}, "pairs_t": {offsets: r}}``,
    A's counts (tuples of block boundaries as keys).  Asking for a count it
    does not hold raises KeyError (every count is gathered before the ranking).
    """

    def _nnz(self, r, c):
        return self._table["nnz"][r, c]

    def _pairs(self, off, transposed):
        return self._table["pairs_t" if transposed else "pairs"][off]


def recorder(n):
    """``(counts, needs)``: price anything on ``counts`` (zeros, n×n), then
    :func:`gather_counts` ``needs`` to price it for real. Pure."""
    needs = _Needs()
    return _Recorder(n, needs), needs


def _offsets_for(counts, row_blocks):
    if row_blocks is None:
        return None
    def offsets_for(blocks):                 # 3d asks for the matrix only (even blocks)
        off = row_blocks(blocks)
        return counts, None if off is None else tuple(off)

    return offsets_for


def needed_counts(n, ranks, dims, configs, agg_blocks=1, row_blocks=None):
    """The :class:`_Needs` of ranking ``configs`` on an n×n matrix, and of pricing their
    memory (:func:`spgnn.plan.memory.within_limit`). Pure.

    ``row_blocks(blocks)``: the row partition into that many blocks
    (default: even blocks, ``partition="none"``).
    """
    from .memory import within_limit

    needs = _Needs()
    rec = _Recorder(n, needs)
    ranked = rank_configs(rec, ranks, dims, DEFAULT_CALIBRATION, configs=configs,
                          offsets_for=_offsets_for(rec, row_blocks), agg_blocks=agg_blocks)
    # and what the memory model reads of the same configurations (--memory-limit)
    within_limit(ranked, float("inf"), a=rec, dims=dims, offsets_for=_offsets_for(rec, row_blocks))
    return needs


def _column_blocks(cols, inner, first):
    """``first`` + the number of ``inner`` boundaries at or below each column."""
    if len(inner) <= 6:                      # a few compares beat a binary search
        cb = np.full(cols.size, first, dtype=np.int32)
        for b in inner:
            cb += cols >= b
        return cb
    return (np.searchsorted(np.asarray(inner), cols, side="right") + first).astype(np.int32)


def _runs(a, off):
    """``(row, block, length)`` of every run of one row's entries in one column block of ``off``.

    ``a`` has sorted indices, so a row's column blocks ascend and each
    distinct (row, block) is one run: O(nnz) with no sort.  The block of a
    column is ``searchsorted(off, col, "right") - 1``.
    """
    n = a.shape[1]
    rows = np.arange(a.shape[0], dtype=np.int64)
    lens = np.diff(a.indptr).astype(np.int64)
    # boundaries at 0 or below move every column on by one; at n or above, none
    first = sum(1 for b in off[1:] if b <= 0)
    inner = [int(b) for b in off[1:] if 0 < b < n]
    if not inner or a.nnz == 0:              # one column block: a row is one run
        keep = lens > 0
        return rows[keep], np.full(int(keep.sum()), first, dtype=np.int64), lens[keep]
    out = []
    # rows in chunks of about RUN_CHUNK entries: the per-entry temporaries stay bounded
    cuts = np.unique(np.searchsorted(a.indptr, np.arange(0, a.nnz, RUN_CHUNK), side="right") - 1)
    cuts = np.append(cuts[cuts < a.shape[0]], a.shape[0])
    for r0, r1 in zip(cuts[:-1], cuts[1:]):
        e0, e1 = int(a.indptr[r0]), int(a.indptr[r1])
        if e0 == e1:
            continue
        cb = _column_blocks(a.indices[e0:e1], inner, first)
        start = np.empty(e1 - e0, dtype=bool)
        start[0] = True
        np.not_equal(cb[1:], cb[:-1], out=start[1:])
        heads = a.indptr[r0:r1]
        start[heads[lens[r0:r1] > 0] - e0] = True
        pos = np.flatnonzero(start)
        del start
        out.append((np.searchsorted(a.indptr, pos + e0, side="right") - 1,
                    cb[pos].astype(np.int64), np.diff(np.append(pos, e1 - e0))))
        del cb
    return tuple(np.concatenate([o[k] for o in out]) for k in range(3))


def _row_blocks(lo, m, off):
    """The block of ``off`` holding each of the rows ``lo .. lo+m-1``."""
    return np.searchsorted(np.asarray(off), np.arange(lo, lo + m), side="right") - 1


def _distinct_columns(a, r0, r1, mask):
    """Sorted distinct columns of local rows ``r0:r1`` (``mask``: n falses, left false)."""
    cols = a.indices[a.indptr[r0]:a.indptr[r1]]
    if cols.size * 8 <= mask.size:
        return np.unique(cols).astype(np.int64)
    mask[cols] = True
    out = np.flatnonzero(mask)
    mask[out] = False
    return out


def _pair_rows_local(comm, a, lo, ranges, offsets_list):
    """Pair rows of A at each of ``offsets_list``: the blocks this rank holds whole, counted
    here; a block several ranks share, its ranks' distinct columns per column block sent to one
    owner (one alltoallv pair), who counts their union.  Each entry of the result comes from
    exactly one rank (sum them).  Collective when a block is shared."""
    n = a.shape[1]
    out = {off: np.zeros((len(off) - 1, len(off) - 1), dtype=np.int64) for off in offsets_list}
    heads = [[] for _ in range(comm.size)]
    ids = [[] for _ in range(comm.size)]
    shared_any = False
    mask = np.zeros(n, dtype=bool)
    hi = lo + a.shape[0]
    for o, off in enumerate(offsets_list):
        k = len(off) - 1
        for i in range(k):
            b0, b1 = off[i], off[i + 1]
            if b0 == b1 or k == 1:
                continue
            holders = [q for q, (l, h) in enumerate(ranges) if l < b1 and b0 < h]
            shared = len(holders) > 1
            shared_any |= shared
            if b1 <= lo or hi <= b0:
                continue
            cols = _distinct_columns(a, max(b0, lo) - lo, min(b1, hi) - lo, mask)
            cut = np.searchsorted(cols, np.asarray(off), side="left")
            if not shared:
                out[off][i] = np.diff(cut)
                out[off][i, i] = 0
                continue
            for j in np.flatnonzero(np.diff(cut)):
                if j == i:
                    continue
                owner = holders[j % len(holders)]
                heads[owner].append((o, i, int(j), int(cut[j + 1] - cut[j])))
                ids[owner].append(cols[cut[j]:cut[j + 1]])
    if not shared_any:
        return out
    head = np.array([h for q in heads for h in q], dtype=np.int64).reshape(-1, 4)
    got_heads = comm.alltoallv(head, [len(q) for q in heads], label=LABEL)
    flat = [p for q in ids for p in q]
    send = np.concatenate(flat) if flat else np.zeros(0, np.int64)
    got = comm.alltoallv(send, [sum(p.size for p in q) for q in ids], label=LABEL)
    union = {}
    at = 0
    for o, i, j, size in got_heads:
        union.setdefault((int(o), int(i), int(j)), []).append(got[at:at + size])
        at += size
    for (o, i, j), pieces in union.items():
        off = offsets_list[o]
        seen = np.zeros(off[j + 1] - off[j], dtype=bool)
        for p in pieces:
            seen[p - off[j]] = True
        out[off][i, j] = int(seen.sum())
    return out


def gather_counts(comm, rows, lo, n, needs, *, add_identity=False):
    """The :class:`RowCounts` of ``needs`` (:class:`_Needs`) from every rank's rows. Collective.

    ``rows``: this rank's CSR rows ``lo .. lo + rows.shape[0]`` of A
    (global column ids; stored zeros count as entries unless
    ``add_identity``); the ranks' rows in rank order cover ``0 .. n``.
    ``add_identity``: count the pattern of A + I instead (A's nonzeros and
    the diagonal, :func:`pattern_rows`) without building it: the diagonal
    adds to the block nnz only, since pair rows ignore a block's own columns.
    Every rank returns the same counts.
    """
    a = sp.csr_array(rows)
    if add_identity and a.nnz and not np.all(a.data != 0):
        a = a.copy()
        a.eliminate_zeros()
    if not a.has_sorted_indices:
        a = a.copy() if a is rows else a
        a.sort_indices()
    m = a.shape[0]
    # the diagonal entries A lacks (A + I's extra entries), as local rows
    extra = np.flatnonzero(a.diagonal(lo) == 0) if add_identity else np.zeros(0, np.int64)
    ranges = [(int(l), int(l) + int(h)) for l, h in
              comm.allgather_obj((int(lo), int(m)), label=LABEL)]
    by_col = {}
    for r, c in needs.nnz:
        by_col.setdefault(c, set()).add(r)
    for off in needs.pairs_t:
        by_col.setdefault(off, set())
    parts = []                               # (kind, key, local array), summed over ranks
    for c in sorted(by_col):
        run_row, run_cb, run_len = _runs(a, c)
        kc = len(c) - 1
        for r in sorted(by_col[c] | ({c} if c in needs.pairs_t else set())):
            kr = len(r) - 1
            rb = _row_blocks(lo, m, r)[run_row]
            if (r, c) in needs.nnz:
                z = np.rint(np.bincount(rb * kc + run_cb, weights=run_len, minlength=kr * kc))
                z = z.astype(np.int64)
                if extra.size:
                    cd = np.searchsorted(np.asarray(c), lo + extra, side="right") - 1
                    z += np.bincount(_row_blocks(lo, m, r)[extra] * kc + cd, minlength=kr * kc)
                parts.append(("nnz", (r, c), z.reshape(kr, kc)))
            if r == c and c in needs.pairs_t:
                # Aᵀ's pair rows: rows of block j holding a column of block i
                t = np.bincount(rb * kc + run_cb, minlength=kr * kc).reshape(kr, kc)
                parts.append(("pairs_t", c, t.T.astype(np.int64)))
        del run_row, run_cb, run_len
    pairs = _pair_rows_local(comm, a, lo, ranges, sorted(needs.pairs))
    parts += [("pairs", off, r) for off, r in pairs.items()]
    flat = np.concatenate([p.ravel() for *_, p in parts]) if parts else np.zeros(0, np.int64)
    total = comm.allreduce(flat, label=LABEL) if flat.size else flat
    table = {"nnz": {}, "pairs": {}, "pairs_t": {}}
    at = 0
    for kind, key, p in parts:
        v = np.asarray(total[at:at + p.size], dtype=np.int64).reshape(p.shape)
        at += p.size
        if kind != "nnz":
            np.fill_diagonal(v, 0)
        table[kind][key] = v
    return RowCounts(n, table)


def pattern_rows(adj, lo):
    """Rows ``lo ..`` of Â's pattern (:func:`~spgnn.plan.choose.aggregation_pattern`) from the
    same rows of a symmetric ``A`` (CSR, global columns): A's nonzeros and the diagonal.
    Local; O(nnz + rows), no sparse addition.  Values are True (bool: only the
    pattern is read)."""
    a = sp.csr_array(adj)
    if a.nnz and not np.all(a.data != 0):
        a = a.copy()
        a.eliminate_zeros()
    if not a.has_sorted_indices:
        a = a.copy() if a is adj else a
        a.sort_indices()
    m, n = a.shape
    idt = np.int64 if n >= np.iinfo(np.int32).max else np.int32
    lens = np.diff(a.indptr)
    diag = np.arange(lo, lo + m, dtype=idt)
    # each diagonal's place in its (sorted) row: the row's entries below it
    below = a.indices < np.repeat(diag, lens)
    pos = np.zeros(m, dtype=np.int64)
    full = lens > 0
    if a.nnz:
        pos[full] = np.add.reduceat(below, a.indptr[:-1][full], dtype=np.int64)
    del below
    pos += a.indptr[:-1]
    has = np.zeros(m, dtype=bool)
    inside = pos < a.indptr[1:]
    has[inside] = a.indices[pos[inside]] == diag[inside]
    add = ~has
    indices = np.insert(a.indices.astype(idt, copy=False), pos[add], diag[add])
    indptr = a.indptr.astype(np.int64) + np.concatenate([[0], np.cumsum(add)])
    return sp.csr_array((np.ones(indices.size, dtype=bool), indices, indptr), shape=(m, n))


def _check_rows(comm, rows, lo, n):
    """The rows' ranges in rank order cover 0..n with n columns, on every rank; ValueError else."""
    got = comm.allgather_obj((int(lo), int(rows.shape[0]), int(rows.shape[1])), label=LABEL)
    at = 0
    for r, (l, m, cols) in enumerate(got):
        if l != at or m < 0 or cols != n:
            return ValueError(f"choose_from_rows: the ranks' rows must cover 0..{n} in rank order "
                              f"with {n} columns, but rank {r} holds rows {l}:{l + m} with "
                              f"{cols} columns (rows so far: 0:{at})")
        at = l + m
    if at != n:
        return ValueError(f"choose_from_rows: the ranks' rows cover 0:{at}, not 0:{n}")
    return None


def choose_from_rows(comm, rows, lo, n, dims, *, grid=None, algorithms=(), permute="none",
                     agg_blocks=1, memory_limit=None, row_blocks=None, add_identity=False,
                     replication=None, quantize="none"):
    """:func:`spgnn.plan.choose.choose` from the ranks' rows of Â (partition none). Collective.

    ``rows``: this rank's scipy CSR rows ``lo .. lo + rows.shape[0]`` of the
    aggregation pattern Â (global column ids; values are not read), the
    ranks' blocks in rank order covering ``0 .. n``; ``dims``: the layer
    widths (every rank alike).  ``grid``, ``algorithms`` and ``agg_blocks``
    as in :func:`~spgnn.plan.choose.choose`; ``permute="double"`` is refused
    (its permutations are drawn from the whole Â).  ``memory_limit``
    (bytes per rank): keep the configurations whose predicted per-rank peak
    fits (the memory model's ``within_limit``, issue 37 item 4, on the
    same gathered counts and row blocks as the time model).  ``row_blocks``:
    the 1D/1.5D row partitions, ``row_blocks(blocks)`` -> ``blocks + 1``
    boundaries, or None where that many blocks cannot be placed (those
    candidates are skipped; a shard directory's parts,
    :func:`spgnn.gnn.data.part_blocks`); default: even blocks
    (``partition="none"``).  3d is priced on even blocks of the rows' order.
    ``add_identity``: ``rows`` are a symmetric A's (a generated graph's or
    shards' ``A'``) and Â's pattern is A + I's, counted without building it
    (:func:`gather_counts`).  ``replication``: only the 1.5D candidates of
    that ``c`` (an explicit ``--algo 15d*`` priced against ``memory_limit``).

    Returns ``(algorithm, replication, grid or None, top3)`` on every rank:
    on the same graph exactly :func:`~spgnn.plan.choose.choose`'s, the same
    predictions to the float.  On one rank nothing is ranked (the first
    candidate is priced on the rows, which are the whole Â).

    Raises
    ------
    ValueError, GridError
        On every rank alike: rows that do not cover ``0..n`` in rank order,
        ``permute="double"``, a bad ``grid`` or calibration file.
    """
    p = comm.size
    err = _check_rows(comm, rows, lo, n)
    if err is None and permute != "none":
        err = ValueError(f"choose_from_rows: permute={permute!r} draws its permutations from "
                         f"the whole Â; rank with permute='none' or choose()")
    comm.agree(err)
    g = parse_grid(grid, p, ndim=3, what="choose_from_rows: grid") if grid else None
    configs = _configs(p, g, tuple(algorithms))
    if replication is not None:     # one 1.5D replication (an explicit --algo 15d* priced)
        configs = [cf for cf in configs if cf[1] == int(replication)]
    if row_blocks is not None:
        configs = [cf for cf in configs if cf[0] == "3d" or row_blocks(p // cf[1]) is not None]
        if not configs:
            from ..errors import GridError

            comm.agree(GridError(f"choose_from_rows: no candidate configuration "
                                 f"({', '.join(algorithms) or 'any'}) can place these row "
                                 f"blocks on {p} ranks: row_blocks(P/c) has none for every c"))
    dims = [int(v) for v in dims]
    if p == 1:
        counts = pattern_rows(rows, lo) if add_identity else sp.csr_array(rows)
    else:
        counts = gather_counts(comm, rows, lo, n, needed_counts(n, p, dims, configs, agg_blocks,
                                                                row_blocks),
                               add_identity=add_identity)

    def compute():
        ranked = rank_configs(counts, p, dims, load_calibration(), configs=configs,
                              offsets_for=_offsets_for(counts, row_blocks),
                              agg_blocks=agg_blocks)
        if memory_limit is not None:    # the memory model prices the same counts and blocks
            return _fitting(ranked, memory_limit, counts, dims,
                            offsets_for=_offsets_for(counts, row_blocks), quantize=quantize)
        return [r.to_dict() for r in ranked[:3]]

    return _agree(comm, compute)


def _placeable(comm, configs, p, row_blocks, algorithms):
    """``configs`` whose row blocks ``row_blocks`` can place (3d always); one GridError on every
    rank when none can."""
    if row_blocks is None:
        return configs
    configs = [cf for cf in configs if cf[0] == "3d" or row_blocks(p // cf[1]) is not None]
    if not configs:
        from ..errors import GridError

        comm.agree(GridError(f"choose_from_rows: no candidate configuration "
                             f"({', '.join(algorithms) or 'any'}) can place these row "
                             f"blocks on {p} ranks: row_blocks(P/c) has none for every c"))
    return configs


def choose_spmm_from_rows(comm, rows, lo, n, feat, *, grid=None, algorithms=(), row_blocks=None,
                          memory_limit=None, replication=None):
    """:func:`spgnn.plan.choose.choose_spmm` from the ranks' rows of the matrix. Collective.

    ``spmm --graph DIR --algo auto``: ``rows`` are this rank's CSR rows
    ``lo .. lo + rows.shape[0]`` of the matrix ``spgnn spmm`` multiplies (a
    shard directory's ``A'`` as stored: stored entries count, no identity),
    the ranks' blocks in rank order covering ``0 .. n``; ``feat`` the
    columns of X.  ``grid``, ``algorithms`` and ``row_blocks`` as in
    :func:`choose_from_rows`.  The counts the ranking of one multiply
    (:func:`~spgnn.plan.model.rank_spmm_configs`) asks for are recorded on
    zeros, gathered from the rows (:func:`gather_counts`, label
    ``auto:counts``) and ranked on rank 0: on the same matrix with even
    blocks, exactly ``choose_spmm``'s predictions (``partition="none"``).
    ``memory_limit`` (bytes per rank, ``spmm --memory-limit``): keep the
    configurations whose predicted per-rank peak of one ``spmm`` command from
    shards (:func:`spgnn.plan.memory_spmm.spmm_peak_bytes`: the blocks of the
    matrix, X, Y, the largest exchange's buffers, the read's transient) fits, each priced
    on the row blocks it was ranked on, from the same gathered counts (the
    memory model's counts are recorded with the ranking's, one gather);
    the top dicts then carry ``memory_peak_bytes`` and ``memory_skipped``,
    as ``choose_spmm(memory_limit=...)``'s do.  ``replication``: only the
    1.5D candidates of that ``c`` (an explicit ``spmm --algo 15d*`` priced).

    Returns ``(algorithm, replication, grid or None, top3)`` on every rank.

    Raises
    ------
    ValueError, GridError
        On every rank alike: rows that do not cover ``0..n`` in rank order, a
        bad ``grid`` or calibration file, no candidate the row blocks can place,
        no configuration within ``memory_limit`` ("--algo auto: no configuration
        fits in --memory-limit ...").
    """
    from .model import rank_spmm_configs

    p, feat = comm.size, int(feat)
    comm.agree(_check_rows(comm, rows, lo, n))
    g = parse_grid(grid, p, ndim=3, what="choose_spmm_from_rows: grid") if grid else None
    configs = _configs(p, g, tuple(algorithms))
    if replication is not None:     # one 1.5D replication (an explicit --algo 15d* priced)
        configs = ([cf for cf in configs if cf[1] == int(replication)]
                   or [(a, int(replication), None) for a in algorithms if a.startswith("15d")])
    configs = _placeable(comm, configs, p, row_blocks, algorithms)
    if p == 1:
        counts = sp.csr_array(rows)
    else:
        needs = _Needs()
        rec = _Recorder(n, needs)
        ranked = rank_spmm_configs(rec, p, feat, DEFAULT_CALIBRATION, configs=configs,
                                   offsets_for=_offsets_for(rec, row_blocks))
        if memory_limit is not None:         # and what the memory model reads of them
            from .memory_spmm import spmm_within_limit

            spmm_within_limit(ranked, float("inf"), a=rec, feat=feat, source="shards",
                              offsets_for=_offsets_for(rec, row_blocks))
        counts = gather_counts(comm, rows, lo, n, needs)

    def compute():
        offsets_for = _offsets_for(counts, row_blocks)
        ranked = rank_spmm_configs(counts, p, feat, load_calibration(), configs=configs,
                                   offsets_for=offsets_for)
        if memory_limit is not None:         # one SpMM priced on the blocks it was ranked on
            return _fitting(ranked, memory_limit, counts, [feat, feat], training=False,
                            offsets_for=offsets_for, spmm_source="shards")
        return [r.to_dict() for r in ranked[:3]]

    return _agree(comm, compute)
