"""Sparse x sparse products (SpGEMM) over a semiring: Gustavson, two passes.

``C = A (+).(x) B`` with all three in CSR.  Row ``i`` of ``C`` merges the rows
``B[k, :]`` for the nonzeros ``(i, k)`` of ``A`` (Gustavson's row-by-row
algorithm), so rows are independent and both passes run ``prange`` over
chunks of rows balanced by ``A``'s nonzero count.

* :func:`csr_spgemm_symbolic` counts the distinct columns of each output row
  (the structural product: GraphBLAS semantics, a column is present whenever
  some term exists, whatever its value) and writes the output ``indptr``.
* :func:`csr_spgemm_numeric` fills sorted, duplicate-free column indices and
  the semiring-reduced values into the preallocated output.

Each output row takes the cheapest of four paths, decided per row:

1. **copy** -- ``A``'s row has one nonzero ``(i, k)`` and ``B[k, :]`` is
   strictly increasing (sorted, no duplicates): the output row is ``B[k, :]``
   scaled, no scratch at all.  This is the sampling shape ``Q @ A`` (``Q`` a
   row-selection matrix) and the reason ``Q @ A`` costs no more than a row
   gather.
2. **merge** -- ``A``'s row has two nonzeros and ``B`` is canonical (every
   row strictly increasing: :func:`rows_strictly_increasing`, computed once
   per product by the caller and passed to both passes): the output row is
   the sorted union of two rows of ``B``, merged with branch-free steps, so
   it needs neither scratch nor a sort.  Road networks and meshes are mostly
   such rows (luxembourg: 85 % of the rows, 81 % of the products of
   ``A @ A``); on that graph the merge made the symbolic pass 1.1-1.2x and
   the numeric pass 1.25-1.45x faster than the marker and position-map
   paths below.
3. **ESC** (expand, sort, compress) -- at most :data:`SMALL` products: the
   (column, value) pairs go to a small per-worker buffer, a stable insertion
   sort orders them by column, and equal columns are reduced in storage
   order.  No O(ncols) scratch is touched, so short rows cost O(flops^2) with
   a tiny constant instead of cache misses in a big marker array.
4. **dense** -- a per-worker accumulator of length ``B.shape[1]`` and a
   bitmap of the row's columns, allocated lazily, once per worker, on the
   first row that needs them (the symbolic pass counts with a per-worker
   int32 marker instead: the row that last touched each column, so it is
   never cleared).  The numeric pass emits the row's columns in order either
   by walking the bitmap -- one test per 64 columns of the touched range, one
   bit scan (``tzcnt``) per entry, each word cleared as it is read -- when
   the row has at least ``1 / BITMAP_RATIO`` as many entries as the bitmap
   has words, or else by sorting the row's column list (sparse rows of a
   wide ``B``).  The walk replaced a scan of the marker over the touched range
   and a sort of every sparser row: slashdot ``A @ A`` numeric pass 3.3x,
   rmat:14 1.2-1.5x (kernels/README.md).

When an O(ncols) array is cheap -- small enough to stay in cache and to
zero per call (:data:`MARKER_MAX_COLS`) -- short rows avoid ESC's sort of
all their products: the symbolic pass counts them with the marker (counting
needs no order), and the numeric pass reduces rows of at most ``SMALL``
outputs through a per-worker position map (``where[j]`` = 1 + the output
position of column ``j``) straight into the output, then sorts only the
row's distinct columns.

Scheduling is dynamic (:func:`_ops.chunk_count`): ``nparts`` workers pull
row chunks balanced by ``A``'s nonzero count from an atomic counter.
"""

import numba
import numpy as np

from ._ops import (ADD_PLUS, MUL_TIMES, atomic_fetch_add, chunk_count, clamp_parts,
                   prefetch_at, row_partition, semiring_add, semiring_mul, trailing_zeros,
                   wait_for_chunks)
from .simd import copy_row_times

__all__ = ["csr_spgemm_symbolic", "csr_spgemm_numeric", "csr_spgemm_onehot", "selection_indptr",
           "spgemm_work_at_least", "rows_strictly_increasing", "SMALL", "BITMAP_RATIO",
           "MARKER_MAX_COLS"]

#: Rows with at most this many scalar products use expand-sort-compress.
SMALL = 32
#: Short rows use an O(b_ncols) int32 marker (symbolic) or position map
#: (numeric) instead of ESC when ``b_ncols`` is at most this (1 MiB: it stays
#: in L2) and ``A`` has at least ``b_ncols / 8`` nonzeros (its zeroing is
#: amortised).
MARKER_MAX_COLS = 2**18
#: The numeric pass emits a dense row by walking a bitmap of its columns
#: (one word per 64 columns) when the row has at least ``1 / BITMAP_RATIO``
#: as many entries as the bitmap has words, else it sorts the row's columns.
#: Measured (numeric pass, 2 threads): 4, 16, 64 and 1024 alike on power-law
#: ``A @ A`` (nearly every dense row walks); on rmat:20 times an 8-nonzero-
#: per-row selection (r ~ 74 over 16 k words) 4 was 1.15x and 1024 1.9x
#: slower than 16.
BITMAP_RATIO = 16
_BIT = np.uint64(1)
#: The selection product prefetches the row of ``B`` this many rows ahead
#: (and its row pointer twice as far).
ROW_AHEAD = 8
#: Largest marker tag: markers are int32 (half the cache footprint of int64)
#: holding a per-worker row counter that restarts, after clearing the
#: marker, when it reaches this value.
_TAG_MAX = 2**31 - 2


# Per-worker scratch is allocated through these opaque calls on purpose:
# numba's parfor pass hoists a plain ``np.empty``/``np.zeros`` whose size does
# not depend on the loop variable out of a ``prange`` loop and shares the one
# array among all threads -- a data race for scratch that must be private.
@numba.njit(cache=True, nogil=True)
def _zeros_i32(n):
    return np.zeros(n, dtype=np.int32)


@numba.njit(cache=True, nogil=True)
def _zeros_u64(n):
    return np.zeros(n, dtype=np.uint64)


@numba.njit(cache=True, nogil=True)
def _zeros_like_dtype(n, like):
    return np.zeros(n, dtype=like.dtype)


@numba.njit(cache=True, nogil=True, inline="always")
def _next_tag(tag, marker):
    """The next marker tag of a worker; clears ``marker`` when the counter wraps."""
    if tag >= _TAG_MAX:
        marker[:] = 0
        return 1
    return tag + 1


@numba.njit(cache=True, nogil=True, inline="always")
def _strictly_increasing(idx, lo, hi):
    """``idx[lo:hi]`` sorted without duplicates (a row the copy path can take verbatim)."""
    for e in range(lo + 1, hi):
        if idx[e] <= idx[e - 1]:
            return False
    return True


@numba.njit(cache=True, nogil=True, inline="always")
def _row_flops(a_indptr, a_indices, b_indptr, i):
    """Number of scalar products of output row ``i``: ``sum_k nnz(B[k, :])``."""
    f = 0
    for ea in range(a_indptr[i], a_indptr[i + 1]):
        k = a_indices[ea]
        f += b_indptr[k + 1] - b_indptr[k]
    return f


@numba.njit(cache=True, nogil=True)
def spgemm_work_at_least(a_indptr, a_indices, b_indptr, row_cost, limit):
    """``min(limit, flops + row_cost * m)`` for ``A @ B``: the thread-count decision. Serial.

    ``flops = sum_{(i,k) in A} nnz(B[k, :])``.  Stops as soon as the sum
    reaches ``limit``, so the decision costs O(min(nnz(A), limit)) instead of
    a full pass: the numpy version (gather, subtract, sum over nnz(A) with
    int64 temporaries) took 2.7 ms per call on a 240 k-nonzero road network,
    more than the product itself, and it ran twice (symbolic and numeric).
    """
    m = a_indptr.shape[0] - 1
    work = row_cost * m
    if work >= limit:
        return limit
    for e in range(a_indptr[m]):
        k = a_indices[e]
        work += b_indptr[k + 1] - b_indptr[k]
        if work >= limit:
            return limit
    return work


@numba.njit(cache=True, nogil=True, inline="always")
def _insertion_sort(keys, vals, r):
    """Stable in-place sort of ``keys[:r]`` (and ``vals[:r]`` alongside); ``r <= SMALL``."""
    for q in range(1, r):
        kq = keys[q]
        vq = vals[q]
        t = q - 1
        while t >= 0 and keys[t] > kq:
            keys[t + 1] = keys[t]
            vals[t + 1] = vals[t]
            t -= 1
        keys[t + 1] = kq
        vals[t + 1] = vq


@numba.njit(cache=True, nogil=True, inline="always")
def _column_map_is_cheap(a_indptr, b_ncols):
    """Short rows may use an O(b_ncols) int32 array (see :data:`MARKER_MAX_COLS`)."""
    return b_ncols <= MARKER_MAX_COLS and np.int64(a_indptr[a_indptr.shape[0] - 1]) * 8 >= b_ncols


@numba.njit(cache=True, nogil=True)
def rows_strictly_increasing(indptr, indices):
    """Every row of a CSR matrix sorted without duplicates (canonical).  Serial, O(nnz + rows).

    Counts the descents ``indices[e] <= indices[e - 1]`` over the whole index
    array (a branch-free loop LLVM vectorises) and those that fall on a row
    start, where a descent is allowed: the rows are canonical exactly when
    the two counts agree.  luxembourg (114 k rows, 239 k nonzeros): 0.09 ms,
    mostly the loop over row starts; a row-by-row check pays a mispredicted
    exit of its short inner loop per row.
    """
    n = indptr.shape[0] - 1
    descents = 0
    for e in range(1, indptr[n]):
        descents += indices[e] <= indices[e - 1]
    at_starts = 0
    for r in range(n):
        s = indptr[r]
        # each position is the start of at most one non-empty row
        if s > 0 and s < indptr[r + 1]:
            at_starts += indices[s] <= indices[s - 1]
    return descents == at_starts


@numba.njit(cache=True, nogil=True, inline="always")
def _merge_count(idx, p, hp, q, hq):
    """Distinct columns of the union of two strictly increasing rows ``idx[p:hp]``, ``idx[q:hq]``.

    A merge whose step advances whichever side holds the smaller column
    (both on a tie) through integer adds instead of branches, so the only
    unpredictable branch is the loop's exit; the side left over is counted
    without walking it.
    """
    count = 0
    while p < hp and q < hq:
        x = idx[p]
        y = idx[q]
        p += x <= y
        q += y <= x
        count += 1
    return count + (hp - p) + (hq - q)


@numba.njit(cache=True, nogil=True, inline="always")
def _merge_fill(idx, val, p, hp, ap, q, hq, aq, add_op, mul_op, one, pos, end,
                out_indices, out_data):
    """Merge two strictly increasing rows of ``B``, scaled by ``ap``, ``aq``, into ``out[pos:end]``.

    Row ``idx[p:hp]`` is the earlier term in storage order: on equal columns
    the result is ``(ap (x) b_p) (+) (aq (x) b_q)``, as on every other path.
    The output comes out sorted, so no sort follows.  Returns the position
    after the last entry; writes stay inside ``[pos, end)``.
    """
    while p < hp and q < hq:
        x = idx[p]
        y = idx[q]
        vx = semiring_mul(mul_op, ap, val[p], one)
        vy = semiring_mul(mul_op, aq, val[q], one)
        tx = x <= y
        ty = y <= x
        if pos < end:
            out_indices[pos] = min(x, y)
            out_data[pos] = semiring_add(add_op, vx, vy) if tx & ty else (vx if tx else vy)
        pos += 1
        p += tx
        q += ty
    # one tail loop per row (one of them runs zero times): swapping the
    # leftover row into a single loop measured 1-3 % slower
    while p < hp:
        if pos < end:
            out_indices[pos] = idx[p]
            out_data[pos] = semiring_mul(mul_op, ap, val[p], one)
        pos += 1
        p += 1
    while q < hq:
        if pos < end:
            out_indices[pos] = idx[q]
            out_data[pos] = semiring_mul(mul_op, aq, val[q], one)
        pos += 1
        q += 1
    return pos


@numba.njit(cache=True, nogil=True, inline="always")
def _count_marked(a_indptr, a_indices, b_indptr, b_indices, marker, mk, i):
    """Distinct columns of output row ``i``: tag each column with ``mk``, count first tags."""
    count = 0
    for ea in range(a_indptr[i], a_indptr[i + 1]):
        k = a_indices[ea]
        for eb in range(b_indptr[k], b_indptr[k + 1]):
            j = b_indices[eb]
            # branchless: the test is unpredictable on power-law rows
            count += marker[j] != mk
            marker[j] = mk
    return count


@numba.njit(cache=True, nogil=True, inline="always")
def _fill_by_position(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, add_op, mul_op,
                      one, i, start, end, where, out_indices, out_data):
    """Reduce output row ``i`` into ``out[start:end]`` in first-touch order; returns the end.

    ``where[j]`` holds 1 + the output position of column ``j``'s latest
    first touch by this worker.  A worker's positions only grow (it takes
    chunks in increasing order), so ``where[j] > start`` means "already in
    this row": no tags, no clearing.  Terms are reduced in storage order, as
    on every path.  Writes stay inside ``[start, end)``; the caller sorts the
    row and compares the returned position with ``end``.
    """
    pos = start
    for ea in range(a_indptr[i], a_indptr[i + 1]):
        k = a_indices[ea]
        av = a_data[ea]
        for eb in range(b_indptr[k], b_indptr[k + 1]):
            j = b_indices[eb]
            v = semiring_mul(mul_op, av, b_data[eb], one)
            q = np.int64(where[j]) - 1
            if q >= start:
                out_data[q] = semiring_add(add_op, out_data[q], v)
            else:
                if pos < end:
                    out_indices[pos] = j
                    out_data[pos] = v
                    where[j] = pos + 1
                pos += 1
    return pos


@numba.njit(cache=True, nogil=True)
def _dense_row(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, add_op, mul_op, one,
               pt, i, start, end, acc, bits, out_indices, out_data):
    """Output row ``i`` through the accumulator ``acc`` and the bitmap ``bits``
    (both all-zero for plus_times, ``bits`` all-zero otherwise, on entry and
    on exit); returns 1 when the row's count differs from ``end - start``.
    Such a row writes only inside its slot but may leave stale bits and
    sums behind; the caller raises, so nothing computed after it is used.

    A call rather than inlined code: a dense row has more than ``SMALL``
    products, so the call costs nothing measurable, and the numeric pass's
    row loop stays a short dispatch over the paths.
    """
    b_ncols = acc.shape[0]
    nwords = bits.shape[0]
    zero = acc.dtype.type(0)
    alo = a_indptr[i]
    ahi = a_indptr[i + 1]
    # emit by walking the bitmap when the row is dense enough for its words
    # (decided from the symbolic count), else sort the columns listed at
    # their first touch
    walk = (end - start) * BITMAP_RATIO >= nwords
    pos = start
    cmin = b_ncols
    cmax = -1
    if pt and walk:
        for ea in range(alo, ahi):
            k = a_indices[ea]
            av = a_data[ea]
            for eb in range(b_indptr[k], b_indptr[k + 1]):
                j = b_indices[eb]
                acc[j] += av * b_data[eb]
                bits[j >> 6] |= _BIT << np.uint64(j & 63)
                cmin = min(cmin, j)
                cmax = max(cmax, j)
    else:
        for ea in range(alo, ahi):
            k = a_indices[ea]
            av = a_data[ea]
            for eb in range(b_indptr[k], b_indptr[k + 1]):
                j = b_indices[eb]
                v = semiring_mul(mul_op, av, b_data[eb], one)
                wj = j >> 6
                bj = _BIT << np.uint64(j & 63)
                word = bits[wj]
                if word & bj:
                    if pt:
                        acc[j] += v
                    else:
                        acc[j] = semiring_add(add_op, acc[j], v)
                else:
                    bits[wj] = word | bj
                    if pt:
                        acc[j] += v
                    else:
                        acc[j] = v
                    if walk:
                        cmin = min(cmin, j)
                        cmax = max(cmax, j)
                    else:
                        if pos < end:
                            out_indices[pos] = j
                        pos += 1
    if walk:
        # set bits in column order: one test per 64 columns, one bit scan
        # per entry, and each word is cleared as read
        for wi in range(cmin >> 6, (cmax >> 6) + 1):
            word = bits[wi]
            if word == 0:
                continue
            bits[wi] = 0
            base = wi << 6
            while word != 0:
                j = base + np.int64(trailing_zeros(word))
                if pos < end:
                    out_indices[pos] = j
                    out_data[pos] = acc[j]
                pos += 1
                if pt:
                    acc[j] = zero
                word &= word - _BIT
        return 1 if pos != end else 0
    bad = 1 if pos != end else 0
    pos = min(pos, end)
    out_indices[start:pos].sort()
    for q in range(start, pos):
        j = out_indices[q]
        out_data[q] = acc[j]
        bits[j >> 6] = 0
        if pt:
            acc[j] = zero
    return bad


@numba.njit(cache=True, nogil=True, parallel=True)
def csr_spgemm_symbolic(a_indptr, a_indices, b_indptr, b_indices, b_ncols, b_canonical, nparts,
                        out_indptr):
    """Output ``indptr`` of the structural product ``pattern(A) @ pattern(B)``; returns its nnz.

    Parameters
    ----------
    a_indptr, a_indices : int arrays of ``A`` (``m`` rows)
    b_indptr, b_indices : int arrays of ``B`` (``b_ncols`` columns); all four
        share one index dtype
    b_ncols : int
    b_canonical : bool
        Every row of ``B`` strictly increasing (:func:`rows_strictly_increasing`):
        enables the merge path.  The caller computes it once for both passes.
    nparts : int
        Number of workers (clamped to ``[1, m]``); a few per thread.
    out_indptr : int32 or int64 array ``(m + 1,)``, overwritten

    Returns
    -------
    nnz : int
        ``out_indptr[m]``, or -1 when the total does not fit
        ``out_indptr``'s dtype (then ``out_indptr`` holds garbage and the
        caller retries with int64).

    Notes
    -----
    Duplicates in ``A`` or ``B`` and unsorted indices are fine: a column is
    counted once per row however many terms reach it.  Per row, the copy,
    merge, ESC or dense path of the module docstring; short rows count with
    the marker instead of ESC when ``b_ncols <= MARKER_MAX_COLS`` and ``A``
    has at least ``b_ncols / 8`` nonzeros.  Cost O(flops + m + nnz(B)) plus
    O(workers * b_ncols) for the markers of workers that meet a dense row,
    where ``flops`` is the number of scalar products
    ``sum_{(i,k) in A} nnz(B[k, :])``.
    """
    m = a_indptr.shape[0] - 1
    nparts = clamp_parts(nparts, m)
    nchunks = chunk_count(nparts, m)
    bounds = row_partition(a_indptr, nchunks)
    out_indptr[0] = 0
    # Counting needs no order, so a marker that stays in cache beats sorting
    # even 2-5 products (luxembourg A @ A: 2.5x on one thread); ESC remains
    # for markers too large to zero per call or to keep in cache.
    short_by_marker = _column_map_is_cheap(a_indptr, b_ncols)
    counter = np.zeros(1, dtype=np.int64)
    done = np.zeros(1, dtype=np.int64)
    for w in numba.prange(nparts):
        marker = _zeros_i32(0)
        tag = 0
        buf = _zeros_like_dtype(SMALL, b_indices)
        while True:
            p = atomic_fetch_add(counter, 0, 1)
            if p >= nchunks:
                break
            for i in range(bounds[p], bounds[p + 1]):
                alo = a_indptr[i]
                ahi = a_indptr[i + 1]
                if b_canonical and ahi - alo <= 2:
                    # copy and merge paths
                    if ahi - alo == 2:
                        k = a_indices[alo]
                        kk = a_indices[alo + 1]
                        out_indptr[i + 1] = _merge_count(b_indices, b_indptr[k], b_indptr[k + 1],
                                                         b_indptr[kk], b_indptr[kk + 1])
                    elif ahi - alo == 1:
                        k = a_indices[alo]
                        out_indptr[i + 1] = b_indptr[k + 1] - b_indptr[k]
                    else:
                        out_indptr[i + 1] = 0
                    continue
                if short_by_marker:
                    if marker.shape[0] == 0:
                        marker = _zeros_i32(b_ncols)
                    tag = _next_tag(tag, marker)
                    out_indptr[i + 1] = _count_marked(a_indptr, a_indices, b_indptr, b_indices,
                                                      marker, np.int32(tag), i)
                    continue
                if ahi - alo == 1:
                    k = a_indices[alo]
                    if _strictly_increasing(b_indices, b_indptr[k], b_indptr[k + 1]):
                        out_indptr[i + 1] = b_indptr[k + 1] - b_indptr[k]
                        continue
                if _row_flops(a_indptr, a_indices, b_indptr, i) <= SMALL:
                    r = 0
                    for ea in range(alo, ahi):
                        k = a_indices[ea]
                        for eb in range(b_indptr[k], b_indptr[k + 1]):
                            buf[r] = b_indices[eb]
                            r += 1
                    _insertion_sort(buf, buf, r)
                    count = 0
                    for q in range(r):
                        if q == 0 or buf[q] != buf[q - 1]:
                            count += 1
                    out_indptr[i + 1] = count
                else:
                    if marker.shape[0] == 0:
                        marker = _zeros_i32(b_ncols)
                    tag = _next_tag(tag, marker)
                    out_indptr[i + 1] = _count_marked(a_indptr, a_indices, b_indptr, b_indices,
                                                      marker, np.int32(tag), i)
            atomic_fetch_add(done, 0, 1)
        if w == 0:
            wait_for_chunks(done, nchunks)
    # prefix sum: serial, O(m), negligible next to the products; the total is
    # kept in int64 so an int32 ``out_indptr`` that overflows is detected
    limit = np.int64(np.iinfo(out_indptr.dtype).max)
    total = np.int64(0)
    for i in range(m):
        total += out_indptr[i + 1]
        if total > limit:
            return -1
        out_indptr[i + 1] = total
    return total


@numba.njit(cache=True, nogil=True, parallel=True)
def csr_spgemm_numeric(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, b_ncols,
                       b_canonical, add_op, mul_op, nparts, out_indptr, out_indices, out_data):
    """Fill ``C = A (+).(x) B`` into a structure sized by :func:`csr_spgemm_symbolic`.

    Parameters
    ----------
    a_indptr, a_indices, a_data : ``A`` in CSR
    b_indptr, b_indices, b_data : ``B`` in CSR (same index and value dtypes as ``A``)
    b_ncols : int
    b_canonical : bool
        As for :func:`csr_spgemm_symbolic`, and the same value.
    add_op, mul_op : int
        Semiring codes (``_ops.ADD_*``, ``_ops.MUL_*``).
    nparts : int
        Number of workers (clamped to ``[1, m]``); a few per thread.
    out_indptr : int array ``(m + 1,)`` from the symbolic pass (input)
    out_indices : int array ``(nnz_C,)``, overwritten
    out_data : float array ``(nnz_C,)``, overwritten

    Returns
    -------
    bad_rows : int
        Number of rows whose distinct column count differs from
        ``out_indptr``.  Such rows are written only within their slot (no
        out-of-bounds writes), so a wrong ``indptr`` gives an error, never
        memory corruption; callers raise when this is non-zero.

    Notes
    -----
    Terms are reduced in storage order (nonzeros of ``A`` row ``i``, then of
    ``B`` row ``k``) on every path (the ESC sort is stable): the first term
    initialises the accumulator, so no identity is needed and structural
    zeros are kept.  Output columns are sorted and distinct.  Rows of at most
    ``SMALL`` outputs take the position path of the module docstring when
    ``b_ncols <= MARKER_MAX_COLS``, ``A`` has at least ``b_ncols / 8``
    nonzeros and ``nnz_C`` fits the int32 map.  Cost O(flops + sum over dense
    rows of (span / 64 + r) when walked, r log r when sorted) time; per
    worker O(SMALL) scratch plus, lazily, O(b_ncols).
    """
    m = a_indptr.shape[0] - 1
    one = out_data.dtype.type(1)
    nparts = clamp_parts(nparts, m)
    nchunks = chunk_count(nparts, m)
    bounds = row_partition(a_indptr, nchunks)
    counter = np.zeros(1, dtype=np.int64)
    done = np.zeros(1, dtype=np.int64)
    # plus_times: keep the dense accumulator all-zero between rows, so the
    # first term needs no special case and the accumulation is branch-free
    pt = add_op == ADD_PLUS and mul_op == MUL_TIMES
    # rows of at most SMALL outputs go through a position map when it stays
    # in cache (as in the symbolic pass) and positions fit its int32
    short_by_position = (_column_map_is_cheap(a_indptr, b_ncols)
                         and np.int64(out_indptr[m]) < _TAG_MAX)
    bad_rows = 0
    for w in numba.prange(nparts):
        where = _zeros_i32(0)
        acc = _zeros_like_dtype(0, out_data)
        bits = _zeros_u64(0)
        kbuf = _zeros_like_dtype(SMALL, out_indices)
        vbuf = _zeros_like_dtype(SMALL, out_data)
        bad = 0
        while True:
            p = atomic_fetch_add(counter, 0, 1)
            if p >= nchunks:
                break
            for i in range(bounds[p], bounds[p + 1]):
                start = out_indptr[i]
                end = out_indptr[i + 1]
                alo = a_indptr[i]
                ahi = a_indptr[i + 1]
                # -- merge path: two nonzeros in A's row, B canonical
                if b_canonical and ahi - alo == 2:
                    k = a_indices[alo]
                    kk = a_indices[alo + 1]
                    pos = _merge_fill(b_indices, b_data, b_indptr[k], b_indptr[k + 1], a_data[alo],
                                      b_indptr[kk], b_indptr[kk + 1], a_data[alo + 1], add_op,
                                      mul_op, one, start, end, out_indices, out_data)
                    if pos != end:
                        bad += 1
                    continue
                # -- copy path: one nonzero in A's row, B's row sorted and distinct
                if ahi - alo == 1:
                    k = a_indices[alo]
                    blo = b_indptr[k]
                    bhi = b_indptr[k + 1]
                    if b_canonical or _strictly_increasing(b_indices, blo, bhi):
                        av = a_data[alo]
                        r = bhi - blo
                        if r != end - start:
                            bad += 1
                            r = min(r, end - start)
                        for q in range(r):
                            out_indices[start + q] = b_indices[blo + q]
                            out_data[start + q] = semiring_mul(mul_op, av, b_data[blo + q], one)
                        continue
                if short_by_position and end - start <= SMALL:
                    # -- position path: reduce in place, then sort the few outputs
                    if where.shape[0] == 0:
                        where = _zeros_i32(b_ncols)
                    pos = _fill_by_position(a_indptr, a_indices, a_data, b_indptr, b_indices,
                                            b_data, add_op, mul_op, one, i, start, end, where,
                                            out_indices, out_data)
                    if pos != end:
                        bad += 1
                        pos = min(pos, end)
                    _insertion_sort(out_indices[start:pos], out_data[start:pos], pos - start)
                    continue
                flops = _row_flops(a_indptr, a_indices, b_indptr, i)
                if flops <= SMALL:
                    # -- ESC path: expand, stable sort, compress in storage order
                    r = 0
                    for ea in range(alo, ahi):
                        k = a_indices[ea]
                        av = a_data[ea]
                        for eb in range(b_indptr[k], b_indptr[k + 1]):
                            kbuf[r] = b_indices[eb]
                            vbuf[r] = semiring_mul(mul_op, av, b_data[eb], one)
                            r += 1
                    _insertion_sort(kbuf, vbuf, r)
                    pos = start
                    for q in range(r):
                        if q == 0 or kbuf[q] != kbuf[q - 1]:
                            if pos < end:
                                out_indices[pos] = kbuf[q]
                                out_data[pos] = vbuf[q]
                            pos += 1
                        elif pos - 1 < end:
                            out_data[pos - 1] = semiring_add(add_op, out_data[pos - 1], vbuf[q])
                    if pos != end:
                        bad += 1
                    continue
                # -- dense path: accumulator + bitmap of the row's columns
                if acc.shape[0] == 0:
                    acc = _zeros_like_dtype(b_ncols, out_data)
                    bits = _zeros_u64((b_ncols + 63) >> 6)
                bad += _dense_row(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data,
                                  add_op, mul_op, one, pt, i, start, end, acc, bits,
                                  out_indices, out_data)
            atomic_fetch_add(done, 0, 1)
        bad_rows += bad
        if w == 0:
            wait_for_chunks(done, nchunks)
    return bad_rows


@numba.njit(cache=True, nogil=True)
def selection_indptr(a_indptr, a_indices, b_indptr, out_indptr):
    """Is ``A`` a selection (one nonzero per row)?  If so, ``C = A @ B``'s indptr. Serial.

    Returns False as soon as a row of ``A`` does not hold exactly one nonzero
    (``out_indptr`` is then partly written and meaningless).  Otherwise
    ``out_indptr`` (int64, ``m + 1``) is the prefix sum of the lengths of the
    selected rows of ``B``.  One O(m) pass in place of five numpy
    temporaries: on an 8192-row selection that was a third of the product.
    """
    m = a_indptr.shape[0] - 1
    out_indptr[0] = 0
    for i in range(m):
        if a_indptr[i + 1] - a_indptr[i] != 1:
            return False
        k = a_indices[a_indptr[i]]
        out_indptr[i + 1] = out_indptr[i] + (b_indptr[k + 1] - b_indptr[k])
    return True


@numba.njit(cache=True, nogil=True, parallel=True)
def csr_spgemm_onehot(a_indices, a_data, b_indptr, b_indices, b_data, mul_op, nparts,
                      out_indptr, out_indices, out_data):
    """``C = A (+).(x) B`` when every row of ``A`` has exactly one nonzero: one pass.

    Row ``i`` of ``C`` is row ``a_indices[i]`` of ``B`` with every value
    ``a_data[i] (x) b``: a scaled row gather, the sampling shape ``Q @ A``.
    No symbolic pass and no scratch: ``out_indptr`` comes from the row
    lengths of ``B`` (the caller's prefix sum), so the product is one
    streaming read of the selected rows of ``B`` and one write of ``C``.

    Parameters
    ----------
    a_indices, a_data : the ``m`` nonzeros of ``A`` (``a_indptr == arange(m + 1)``)
    b_indptr, b_indices, b_data : ``B`` in CSR
    mul_op : int
        Semiring multiply code (``_ops.MUL_*``); with one term per output
        entry the semiring's add never applies.
    nparts : int
        Number of workers (clamped to ``[1, m]``); a few per thread.
    out_indptr : int array ``(m + 1,)``: ``cumsum(nnz(B[a_indices[i], :]))`` (input)
    out_indices, out_data : arrays of length ``out_indptr[-1]``, overwritten

    Returns
    -------
    unsorted_rows : int
        Number of selected rows of ``B`` that are not strictly increasing
        (unsorted or with duplicates).  The output is then not canonical and
        the caller must use the general two-pass product instead.

    Notes
    -----
    Workers pull chunks balanced by *output* entries (``out_indptr``), so a
    few long rows do not serialise the copy.  For ``times`` each row is one
    :func:`.simd.copy_row_times` call (masked 16-entry vector steps that
    copy, scale and check the order together); other multiplies take a
    fused scalar loop.
    """
    m = a_indices.shape[0]
    one = out_data.dtype.type(1)
    nparts = clamp_parts(nparts, m)
    nchunks = chunk_count(nparts, m)
    bounds = row_partition(out_indptr, nchunks)
    counter = np.zeros(1, dtype=np.int64)
    done = np.zeros(1, dtype=np.int64)
    unsorted_rows = 0
    for w in numba.prange(nparts):
        bad = 0
        while True:
            p = atomic_fetch_add(counter, 0, 1)
            if p >= nchunks:
                break
            lo = bounds[p]
            hi = bounds[p + 1]
            for i in range(lo, hi):
                # rows of B sit at random addresses, usually not in cache:
                # request B's row pointer 2*ROW_AHEAD rows ahead and the row
                # itself (indices and values) ROW_AHEAD rows ahead
                if i + 2 * ROW_AHEAD < m:
                    prefetch_at(b_indptr, a_indices[i + 2 * ROW_AHEAD])
                if i + ROW_AHEAD < m:
                    kk = a_indices[i + ROW_AHEAD]
                    if b_indptr[kk] < b_indptr[kk + 1]:
                        prefetch_at(b_indices, b_indptr[kk])
                        prefetch_at(b_data, b_indptr[kk])
                k = a_indices[i]
                av = a_data[i]
                src = np.int64(b_indptr[k])
                dst = np.int64(out_indptr[i])
                r = np.int64(b_indptr[k + 1]) - src
                if mul_op == MUL_TIMES:
                    # copy, scale and order check in masked 16-entry vector
                    # steps: a scalar loop over a row of a dozen entries was
                    # 3-5x slower (loop control, no vector body entered)
                    bad += copy_row_times(b_indices, b_data, out_indices, out_data,
                                          src, dst, r, av)
                    continue
                # other multiplies: one fused scalar pass (copy, multiply, order check)
                prev = -1
                unordered = 0
                for q in range(r):
                    j = b_indices[src + q]
                    unordered += j <= prev
                    prev = j
                    out_indices[dst + q] = j
                    out_data[dst + q] = semiring_mul(mul_op, av, b_data[src + q], one)
                if unordered:
                    bad += 1
            atomic_fetch_add(done, 0, 1)
        unsorted_rows += bad
        if w == 0:
            wait_for_chunks(done, nchunks)
    return unsorted_rows
