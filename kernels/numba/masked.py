"""Generic kernels specialised on user operators: masked SpGEMM, element-wise maps.

The kernels call their operators as module globals (``ADD``, ``MUL``, ``F1``,
``FI``), unbound here: the factories (:func:`masked_spgemm_kernels`, ...)
return the kernels of a copy of this module specialised on the operators by
:func:`.opcache.specialise`, which numba caches on disk per operator set, so
a user operator registered once (:mod:`spgnn.local.ops`) is compiled into
each kernel once, not once per process.

Masked SpGEMM ``C<M> = A (+).(x) B`` (Gustavson, symbolic then numeric),
*mask-driven*: row ``i`` first marks the allowed columns of ``M[i, :]`` in a
per-worker int64 marker, and a product ``a(i,k) b(k,j)`` is only formed into
the accumulator when column ``j`` is allowed -- masked-out entries are never
accumulated nor stored.  Marker states of row ``i``, with ``t = 3 (i + 1)``
(rows are distinct, so a marker never needs clearing):

* ``t``     -- column ``j`` is in the mask row (allowed; or, complemented,
  forbidden),
* ``t + 1`` -- column ``j`` already holds a value in row ``i``.

Without complement the output row is the mask row's allowed columns that got
a product, emitted in the mask row's order (sorted: the caller canonicalises
the mask).  With complement (or no mask: an empty complemented mask) the
output columns are collected in a per-worker list and sorted.

Rows are split into ``nparts`` chunks balanced by ``A``'s nonzeros
(:func:`_ops.row_partition`); each chunk allocates its own scratch (one
marker and one accumulator of ``B.shape[1]`` entries).
"""

import sys

import numba
import numpy as np

from ._ops import atomic_fetch_add, atomic_load, chunk_starts, row_partition, wait_for_chunks
from .opcache import specialise

__all__ = ["masked_spgemm_kernels", "masked_saxpy_kernel", "saxpy_row_costs",
           "saxpy_chunk_costs", "masked_dot_kernel", "dot_row_costs", "dot_cost_reaches",
           "gustavson_flops", "pack_rows", "map_binary_kernel", "map_unary_kernel",
           "map_indexed_kernel", "reduce_rows_kernel"]


@numba.njit(cache=True, nogil=True)
def _zeros_i64(n):
    return np.zeros(n, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _empty_like_dtype(n, like):
    return np.empty(n, dtype=like.dtype)


#: The operators a specialised copy of this module binds (:mod:`.opcache`); unbound here.
ADD = MUL = F1 = FI = None


@numba.njit(cache=True, nogil=True, parallel=True)
def symbolic(a_indptr, a_indices, b_indptr, b_indices, m_indptr, m_indices, m_keep,
             complement, ncols, nparts, counts):
    m = a_indptr.shape[0] - 1
    bounds = row_partition(a_indptr, nparts)
    for w in numba.prange(nparts):
        marker = _zeros_i64(ncols)
        for i in range(bounds[w], bounds[w + 1]):
            t = 3 * (np.int64(i) + 1)
            for e in range(m_indptr[i], m_indptr[i + 1]):
                if m_keep[e]:
                    marker[m_indices[e]] = t
            c = 0
            for ea in range(a_indptr[i], a_indptr[i + 1]):
                k = a_indices[ea]
                for eb in range(b_indptr[k], b_indptr[k + 1]):
                    j = b_indices[eb]
                    s = marker[j]
                    if complement:
                        if s != t and s != t + 1:
                            marker[j] = t + 1
                            c += 1
                    elif s == t:
                        marker[j] = t + 1
                        c += 1
            counts[i] = c
    return m

@numba.njit(cache=True, nogil=True, parallel=True)
def numeric(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, m_indptr, m_indices,
            m_keep, complement, ncols, nparts, out_indptr, out_indices, out_data):
    bounds = row_partition(a_indptr, nparts)
    for w in numba.prange(nparts):
        marker = _zeros_i64(ncols)
        acc = _empty_like_dtype(ncols, out_data)
        cols = _zeros_i64(ncols if complement else 0)
        for i in range(bounds[w], bounds[w + 1]):
            t = 3 * (np.int64(i) + 1)
            for e in range(m_indptr[i], m_indptr[i + 1]):
                if m_keep[e]:
                    marker[m_indices[e]] = t
            r = 0
            for ea in range(a_indptr[i], a_indptr[i + 1]):
                k = a_indices[ea]
                av = a_data[ea]
                for eb in range(b_indptr[k], b_indptr[k + 1]):
                    j = b_indices[eb]
                    s = marker[j]
                    if s == t + 1:
                        acc[j] = ADD(acc[j], MUL(av, b_data[eb]))
                    elif (s == t) != complement:
                        marker[j] = t + 1
                        acc[j] = MUL(av, b_data[eb])
                        if complement:
                            cols[r] = j
                            r += 1
            p = out_indptr[i]
            if complement:
                row = cols[:r]
                row.sort()
                for q in range(r):
                    out_indices[p + q] = row[q]
                    out_data[p + q] = acc[row[q]]
            else:
                for e in range(m_indptr[i], m_indptr[i + 1]):
                    j = m_indices[e]
                    if m_keep[e] and marker[j] == t + 1:
                        out_indices[p] = j
                        out_data[p] = acc[j]
                        marker[j] = t + 2      # emitted: a repeated mask column is not
                        p += 1
    return 0


@numba.njit(cache=True, nogil=True)
def map2(x, y, out):
    """``out[e] = MUL(x[e], y[e])`` over 1-D arrays (serial)."""
    for e in range(out.shape[0]):
        out[e] = MUL(x[e], y[e])


@numba.njit(cache=True, nogil=True)
def map1(x, out):
    """``out[e] = F1(x[e])`` (serial)."""
    for e in range(out.shape[0]):
        out[e] = F1(x[e])


@numba.njit(cache=True, nogil=True)
def mapi(x, rows, cols, out):
    """``out[e] = FI(x[e], rows[e], cols[e])`` (global indices; serial)."""
    for e in range(out.shape[0]):
        out[e] = FI(x[e], rows[e], cols[e])


@numba.njit(cache=True, nogil=True)
def reduce_rows(indptr, data, out, has):
    """``out[i] = ADD-reduction of data[indptr[i]:indptr[i+1]]``; ``has[i]`` = row non-empty."""
    for i in range(indptr.shape[0] - 1):
        lo, hi = indptr[i], indptr[i + 1]
        if hi > lo:
            acc = data[lo]
            for e in range(lo + 1, hi):
                acc = ADD(acc, data[e])
            out[i] = acc
            has[i] = 1


def _this():
    return sys.modules[__name__]


def masked_spgemm_kernels(add, mul):
    """``(symbolic, numeric)`` njit kernels for the semiring ``(add, mul)`` (scalar functions).

    ``symbolic(a_indptr, a_indices, b_indptr, b_indices, m_indptr, m_indices,
    m_keep, complement, ncols, nparts, counts)`` writes each output row's
    entry count into ``counts``; ``numeric(..., out_indptr, out_indices,
    out_data, a_data, b_data)`` fills the row's sorted columns and values.
    ``m_keep[e]`` (uint8) says whether mask entry ``e`` counts (all ones for
    a structural mask).  Cached on disk per operator pair (:mod:`.opcache`).
    """
    mod = specialise(_this(), ADD=add, MUL=mul)
    return mod.symbolic, mod.numeric


# -- one-pass masked saxpy (mask without complement) --------------------------------------
#: In the one-pass saxpy kernel, a row ``B(k, :)`` longer than this many times the
#: allowed entries of the mask row is not scanned: each allowed column is
#: binary-searched in it instead (SuiteSparse's saxpy3 does the same for hub rows).
SEARCH_RATIO = 64


@numba.njit(cache=True, nogil=True, inline="always")
def _saxpy_row_cost(a_indptr, a_indices, b_indptr, m_indptr, i):
    """Estimated steps of the one-pass saxpy on row ``i``: per ``A(i, k)`` the length of
    ``B(k, :)``, or the mask row's length times a log when that row is searched instead."""
    nm = np.int64(m_indptr[i + 1] - m_indptr[i])
    total = 1 + nm
    if nm > 0:
        for e in range(a_indptr[i], a_indptr[i + 1]):
            k = a_indices[e]
            lb = np.int64(b_indptr[k + 1] - b_indptr[k])
            total += lb if lb <= SEARCH_RATIO * nm else _search_cost(lb, nm)
    return total


@numba.njit(cache=True, nogil=True, inline="always")
def _search_cost(lb, nm):
    """Steps of binary-searching ``nm`` columns in a row of ``lb`` entries."""
    steps = 1
    q = lb // nm
    while q > 1:
        q >>= 1
        steps += 1
    return nm * (steps + 1)


@numba.njit(cache=True, nogil=True, parallel=True)
def saxpy_row_costs(a_indptr, a_indices, b_indptr, m_indptr, costs):
    """Cumulative estimated steps of the one-pass saxpy: ``costs[i + 1] - costs[i]`` is
    row ``i``'s (``costs[0] = 0``, see :func:`_saxpy_row_cost`).  Rows in parallel, then a
    serial prefix sum; O(nnz(A))."""
    m = a_indptr.shape[0] - 1
    costs[0] = 0
    for i in numba.prange(m):
        costs[i + 1] = _saxpy_row_cost(a_indptr, a_indices, b_indptr, m_indptr, i)
    for i in range(m):
        costs[i + 1] += costs[i]


@numba.njit(cache=True, nogil=True, parallel=True)
def saxpy_chunk_costs(a_indptr, a_indices, b_indptr, m_indptr, rows, costs):
    """The saxpy's cumulative costs per row chunk: ``costs[c + 1]`` receives the summed
    row costs (:func:`saxpy_row_costs`'s) of the chunks ``rows[0]:rows[1]`` to
    ``rows[c]:rows[c + 1]`` (``costs[0] = 0``).  Chunks in parallel; no O(rows)
    scratch nor serial pass over the rows (on a road network's 1-2 ms products a
    per-row cost array and its prefix sum cost a third of the call)."""
    nchunks = rows.shape[0] - 1
    costs[0] = 0
    for c in numba.prange(nchunks):
        total = np.int64(0)
        for i in range(rows[c], rows[c + 1]):
            total += _saxpy_row_cost(a_indptr, a_indices, b_indptr, m_indptr, i)
        costs[c + 1] = total
    for c in range(nchunks):
        costs[c + 1] += costs[c]


@numba.njit(cache=True, nogil=True)
def _zeros_u8(n):
    return np.zeros(n, dtype=np.uint8)


@numba.njit(cache=True, nogil=True, parallel=True)
def saxpy(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, m_indptr, m_indices,
          m_keep, b_sorted, ncols, bounds, first, nworkers, budget, out_indices, out_data,
          counts, chunk_counts):
    nchunks = bounds.shape[0] - 1
    counter = np.full(1, first, dtype=np.int64)     # the next chunk to take
    done = np.full(1, first, dtype=np.int64)        # chunks finished or skipped
    spent = np.zeros(1, dtype=np.int64)             # the finished chunks' estimated steps
    chunk_steps = np.zeros(nchunks, dtype=np.int64)
    for w in numba.prange(nworkers):
        # one byte per column (0: outside the mask row, 1: allowed, 2: holds a value),
        # cleared by the row's own emit loop: 8x less cache than a row-tagged int64
        # marker, and every scanned B entry reads it, while only hits touch ``acc``
        marker = _zeros_u8(ncols)
        acc = _empty_like_dtype(ncols, out_data)
        while True:
            p = atomic_fetch_add(counter, 0, 1)
            if p >= nchunks:
                break
            if budget >= 0 and atomic_load(spent, 0) > budget:
                chunk_counts[p] = -1                # over budget: skipped
                atomic_fetch_add(done, 0, 1)
                continue
            steps = np.int64(0)
            total = np.int64(0)
            for i in range(bounds[p], bounds[p + 1]):
                c, cost = _saxpy_row(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data,
                                     m_indptr, m_indices, m_keep, b_sorted, ncols, marker, acc,
                                     out_indices, out_data, i)
                counts[i] = c
                total += c
                steps += cost
            chunk_counts[p] = total
            chunk_steps[p] = steps
            atomic_fetch_add(spent, 0, steps)
            atomic_fetch_add(done, 0, 1)
        if w == 0:
            wait_for_chunks(done, nchunks)
    # the finished prefix (a chunk after the first skipped one may have run: a second
    # call from ``end`` runs it again) and its steps
    end = first
    steps = np.int64(0)
    while end < nchunks and chunk_counts[end] >= 0:
        steps += chunk_steps[end]
        end += 1
    return end, steps


@numba.njit(cache=True, nogil=True, inline="always")
def _saxpy_row(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, m_indptr, m_indices,
               m_keep, b_sorted, ncols, marker, acc, out_indices, out_data, i):
    """Row ``i`` of the one-pass saxpy, written at the mask row's positions: ``(its
    count, its estimated steps)`` (:func:`_saxpy_row_cost`'s, counted as it goes)."""
    m0, m1 = m_indptr[i], m_indptr[i + 1]
    nm = 0
    mmin, mmax = ncols, -1      # the allowed columns' range
    for e in range(m0, m1):
        if m_keep[e]:
            j = m_indices[e]
            marker[j] = 1
            nm += 1
            mmin = min(mmin, j)
            mmax = max(mmax, j)
    nmr = np.int64(m1 - m0)     # the cost model counts every mask entry
    if nmr == 0:
        return 0, np.int64(1)
    cost = 1 + nmr
    for ea in range(a_indptr[i], a_indptr[i + 1]):
        k = a_indices[ea]
        av = a_data[ea]
        b0, b1 = b_indptr[k], b_indptr[k + 1]
        lb = np.int64(b1 - b0)
        cost += lb if lb <= SEARCH_RATIO * nmr else _search_cost(lb, nmr)
        if nm == 0:
            continue            # a value mask row with no allowed entry: costed only
        if b_sorted and b1 - b0 > SEARCH_RATIO * nm:
            p = b0
            for e in range(m0, m1):
                if not m_keep[e]:
                    continue
                j = m_indices[e]
                p = _lower_bound(b_indices, p, b1, j)
                if p == b1:
                    break
                if b_indices[p] == j:
                    v = MUL(av, b_data[p])
                    if marker[j] == 2:
                        acc[j] = ADD(acc[j], v)
                    else:
                        marker[j] = 2
                        acc[j] = v
        else:
            if b_sorted and b1 - b0 > 8 and b_indices[b0] < mmin:
                b0 = _lower_bound(b_indices, b0, b1, mmin)   # skip below the range
            for eb in range(b0, b1):
                j = b_indices[eb]
                if b_sorted and j > mmax:
                    break                                    # and above it
                s = marker[j]
                if s == 2:
                    acc[j] = ADD(acc[j], MUL(av, b_data[eb]))
                elif s == 1:
                    marker[j] = 2
                    acc[j] = MUL(av, b_data[eb])
    c = 0
    if nm > 0:
        for e in range(m0, m1):
            if m_keep[e]:
                j = m_indices[e]
                if marker[j] == 2:
                    out_indices[m0 + c] = j
                    out_data[m0 + c] = acc[j]
                    c += 1
                marker[j] = 0      # cleared: a repeated mask column is not emitted twice
    return c, cost


def masked_saxpy_kernel(add, mul):
    """One-pass mask-driven Gustavson for a mask *without* complement (semiring ``(add, mul)``).

    ``saxpy(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, m_indptr,
    m_indices, m_keep, b_sorted, ncols, bounds, first, nworkers, budget,
    out_indices, out_data, counts, chunk_counts)``.  The mask bounds the output,
    so no symbolic pass is needed: row ``i`` is written at the mask row's own
    positions (``out_*[m_indptr[i]:]``, in mask order, so sorted) with its count
    in ``counts[i]`` (the caller passes the output's row pointers from their second
    entry), and chunk ``p``'s total in ``chunk_counts[p]`` (:func:`pack_rows` packs
    them).  Row ``i`` marks its allowed columns in
    a per-worker byte marker that the row clears as it emits;
    for each ``A(i, k)`` it scans ``B(k, :)``, or -- ``B``'s rows sorted and
    ``B(k, :)`` longer than :data:`SEARCH_RATIO` times the allowed columns --
    binary-searches each allowed column in ``B(k, :)``; a sorted ``B(k, :)`` is scanned
    only over the allowed columns' range (5-10 % on the social graphs' triangles and
    masked products).  ``nworkers`` workers take the row chunks ``bounds[first:]``
    in order from an atomic counter (dynamic scheduling, :func:`_ops.chunk_count`).
    Returns ``(end, spent)``: chunks ``first .. end`` are done, and their rows'
    estimated steps (:func:`saxpy_row_costs`'s, counted as the rows run) sum to
    ``spent``.

    ``budget >= 0`` runs the product *optimistically*, before any costing: once
    the finished chunks' steps exceed ``budget`` the chunks still to be taken are
    skipped (``end < nchunks``, or ``spent > budget`` when the last ones were
    already running), and a second call with ``first=end`` can finish them.
    The caller passes the largest saxpy cost at which the method choice picks
    saxpy without costing the dot method, so a product within it needs no
    planning pass (on a road network that pass cost a quarter of the call) and
    one beyond it is costed only over the rows not yet done.
    """
    return specialise(_this(), ADD=add, MUL=mul).saxpy


# -- mask-driven dot product ("dot3") -----------------------------------------------------
#: A sorted intersection gallops (binary-searches each entry of the shorter list in
#: the longer one) when the longer list is this many times longer; else it merges.
GALLOP_RATIO = 16


@numba.njit(cache=True, nogil=True, inline="always")
def _lower_bound(idx, lo, hi, x):
    """First position ``p`` in ``[lo, hi)`` with ``idx[p] >= x`` (``hi`` if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if idx[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True, nogil=True, inline="always")
def _intersect_cost(la, lb):
    """Estimated steps of one sorted intersection of lists of lengths ``la`` and ``lb``."""
    small, large = (la, lb) if la < lb else (lb, la)
    if small == 0:
        return 1
    if large >= GALLOP_RATIO * small:
        steps = 1
        q = large // small
        while q > 1:            # ~log2(large / small) per searched entry
            q >>= 1
            steps += 1
        return 1 + small * (steps + 1)
    return 1 + la + lb


@numba.njit(cache=True, nogil=True, inline="always")
def _dot_row_cost(a_indptr, bt_len, m_indptr, m_indices, i):
    la = np.int64(a_indptr[i + 1] - a_indptr[i])
    total = np.int64(1)
    for e in range(m_indptr[i], m_indptr[i + 1]):
        total += _intersect_cost(la, np.int64(bt_len[m_indices[e]]))
    return total


@numba.njit(cache=True, nogil=True, parallel=True)
def dot_row_costs(a_indptr, bt_len, m_indptr, m_indices, costs):
    """Cumulative estimated intersection steps of the dot kernel (``costs[0] = 0``,
    ``costs[i + 1] - costs[i]`` for mask row ``i``); ``bt_len[j]`` is the length of ``B``'s
    column ``j``.  Used both to choose the method and to balance the dot kernel's rows.
    Rows in parallel, then a serial prefix sum; O(nnz(M))."""
    m = m_indptr.shape[0] - 1
    costs[0] = 0
    for i in numba.prange(m):
        costs[i + 1] = _dot_row_cost(a_indptr, bt_len, m_indptr, m_indices, i)
    for i in range(m):
        costs[i + 1] += costs[i]


@numba.njit(cache=True, nogil=True, parallel=True)
def dot_cost_reaches(a_indptr, bt_len, m_indptr, m_indices, limit, nsegs):
    """Whether the dot kernel's estimated steps (the total of :func:`dot_row_costs`) reach
    ``limit``.  The rows are costed in ``nsegs`` consecutive segments (each in parallel),
    stopping at the first that takes the running sum to ``limit``: when the dot method
    loses clearly, only a fraction of the mask is visited."""
    m = m_indptr.shape[0] - 1
    total = np.int64(0)
    for s in range(nsegs):
        part = np.int64(0)
        for i in numba.prange(m * s // nsegs, m * (s + 1) // nsegs):
            part += _dot_row_cost(a_indptr, bt_len, m_indptr, m_indices, i)
        total += part
        if total >= limit:
            return True
    return False


@numba.njit(cache=True, nogil=True)
def gustavson_flops(a_indptr, a_indices, b_indptr):
    """Scalar products of ``A @ B`` (the saxpy/Gustavson work). Serial, O(nnz(A))."""
    f = np.int64(0)
    for e in range(a_indptr[a_indptr.shape[0] - 1]):
        k = a_indices[e]
        f += b_indptr[k + 1] - b_indptr[k]
    return f


@numba.njit(cache=True, nogil=True, parallel=True)
def pack_rows(src_indptr, bounds, chunk_counts, src_indices, src_data, out_indptr, out_indices,
              out_data):
    """Pack a padded CSR -- row ``i``'s entries at ``src_indptr[i]``, their count in
    ``out_indptr[i + 1]`` (where the masked kernels write it) -- into ``out_indices`` /
    ``out_data``, turning the counts into row pointers in place.  In parallel over the row
    chunks ``bounds`` whose totals are ``chunk_counts``: one pass over the rows."""
    starts = chunk_starts(chunk_counts)
    out_indptr[0] = 0
    for p in numba.prange(bounds.shape[0] - 1):
        d = starts[p]
        for i in range(bounds[p], bounds[p + 1]):
            s, c = src_indptr[i], np.int64(out_indptr[i + 1])
            for q in range(c):
                out_indices[d + q] = src_indices[s + q]
                out_data[d + q] = src_data[s + q]
            d += c
            out_indptr[i + 1] = d


@numba.njit(cache=True, nogil=True, inline="always")
def _gallop(s_idx, s_data, ps, es, l_idx, l_data, pl, el, short_is_a, acc):
    """``(acc, found)``: the products of the short sorted list's entries ``[ps, es)`` found
    (by binary search) in the long one's ``[pl, el)``, folded with ``ADD``; ``MUL`` takes
    A's value first (``short_is_a`` says which list is A's row)."""
    found = False
    for q in range(ps, es):
        pl = _lower_bound(l_idx, pl, el, s_idx[q])
        if pl == el:
            break
        if l_idx[pl] == s_idx[q]:
            v = MUL(s_data[q], l_data[pl]) if short_is_a else MUL(l_data[pl], s_data[q])
            acc = ADD(acc, v) if found else v
            found = True
    return acc, found


@numba.njit(cache=True, nogil=True, parallel=True)
def dot(a_indptr, a_indices, a_data, bt_indptr, bt_indices, bt_data, m_indptr, m_indices,
        m_keep, bounds, out_indices, out_data, counts, chunk_counts):
    for w in numba.prange(bounds.shape[0] - 1):
        total = 0
        for i in range(bounds[w], bounds[w + 1]):
            p = m_indptr[i]
            c = 0
            a0, a1 = a_indptr[i], a_indptr[i + 1]
            if a0 < a1:
                amin, amax = a_indices[a0], a_indices[a1 - 1]
                for e in range(m_indptr[i], m_indptr[i + 1]):
                    if not m_keep[e]:
                        continue
                    j = m_indices[e]
                    b0, b1 = bt_indptr[j], bt_indptr[j + 1]
                    if b0 == b1 or bt_indices[b0] > amax or bt_indices[b1 - 1] < amin:
                        continue
                    # clip each list to the other's range
                    pa = _lower_bound(a_indices, a0, a1, bt_indices[b0])
                    pb = _lower_bound(bt_indices, b0, b1, amin)
                    ea = _lower_bound(a_indices, pa, a1, bt_indices[b1 - 1] + 1)
                    eb = _lower_bound(bt_indices, pb, b1, amax + 1)
                    la, lb = ea - pa, eb - pb
                    found = False
                    acc = out_data[p]       # overwritten before it is read
                    if la > GALLOP_RATIO * lb:
                        acc, found = _gallop(bt_indices, bt_data, pb, eb, a_indices, a_data,
                                             pa, ea, False, acc)
                    elif lb > GALLOP_RATIO * la:
                        acc, found = _gallop(a_indices, a_data, pa, ea, bt_indices, bt_data,
                                             pb, eb, True, acc)
                    else:
                        while pa < ea and pb < eb:
                            ka, kb = a_indices[pa], bt_indices[pb]
                            if ka < kb:
                                pa += 1
                            elif kb < ka:
                                pb += 1
                            else:
                                v = MUL(a_data[pa], bt_data[pb])
                                acc = ADD(acc, v) if found else v
                                found = True
                                pa += 1
                                pb += 1
                    if found:
                        out_indices[p + c] = j
                        out_data[p + c] = acc
                        c += 1
            counts[i] = c
            total += c
        chunk_counts[w] = total
    return 0


def masked_dot_kernel(add, mul):
    """The mask-driven dot-product kernel (SuiteSparse's "dot3") for the semiring ``(add, mul)``.

    ``dot(a_indptr, a_indices, a_data, bt_indptr, bt_indices, bt_data, m_indptr,
    m_indices, m_keep, bounds, out_indices, out_data, counts, chunk_counts)``: for every
    allowed mask entry ``(i, j)`` (``m_keep[e]``), intersect the sorted row
    ``i`` of ``A`` with the sorted row ``j`` of ``Bᵀ`` (``B``'s column ``j``)
    and fold ``add`` over ``mul(a(i,k), b(k,j))`` of the common ``k``.  An
    entry with no common ``k`` is not stored.  Row ``i``'s results are written
    at the mask row's own positions (``out_*[m_indptr[i]:]``, in mask order,
    so sorted), its count in ``counts[i]`` and chunk ``w``'s total in
    ``chunk_counts[w]``; :func:`pack_rows` packs them.
    Only for a mask without complement: the mask bounds the output.  Rows are
    split by ``bounds`` (a cost-balanced partition; one chunk per parallel
    iteration).  Each intersection merges, or gallops when one list is
    :data:`GALLOP_RATIO` times longer; both lists are first clipped to the
    other's index range.
    """
    return specialise(_this(), ADD=add, MUL=mul).dot


def map_binary_kernel(f):
    """``out[e] = f(x[e], y[e])`` over 1-D arrays (njit, serial)."""
    return specialise(_this(), MUL=f).map2


def map_unary_kernel(f):
    """``out[e] = f(x[e])`` over a 1-D array (njit, serial)."""
    return specialise(_this(), F1=f).map1


def map_indexed_kernel(f):
    """``out[e] = f(x[e], rows[e], cols[e])`` (global indices; njit, serial)."""
    return specialise(_this(), FI=f).mapi


def reduce_rows_kernel(add):
    """``out[i] = add-reduction of data[indptr[i]:indptr[i+1]]``; ``has[i]`` = row non-empty."""
    return specialise(_this(), ADD=add).reduce_rows
