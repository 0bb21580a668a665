"""Sparse x dense products (SpMM) over a semiring, row-parallel.

``Y = A (+).(x) X`` with ``A`` in CSR (``indptr``, ``indices``, ``data``) and
``X``, ``Y`` dense row-major.  Row ``i`` of ``Y`` only depends on row ``i`` of
``A``, so rows are independent: the kernels run ``prange`` over chunks of rows
balanced by nonzero count and need no synchronisation or scratch memory.

Conventions (scipy sparsetools style): inputs first, the preallocated output
last; the output is fully overwritten.  ``data``, ``X`` and ``out`` are
expected to share one float dtype (the backend casts), which keeps the number
of compiled signatures at (index dtype) x (value dtype).
"""

import numba

import numpy as np

from ._ops import (ADD_PLUS, PREFETCH_DIST, atomic_fetch_add, chunk_count, clamp_parts,
                   row_partition, semiring_add, semiring_mul, wait_for_chunks)
from .simd import (REGISTER_SEMIRINGS, STREAM_ALIGN, rows_block_1, rows_block_2, rows_block_4,
                   rows_block_8, rows_block_16, rows_block_32, rows_block_64, rows_semiring,
                   store_fence)

__all__ = ["csr_spmm_rowwise", "csr_spmm_plus_times", "csr_spmm_semiring", "REGISTER_SEMIRINGS",
           "STREAM_BYTES"]

#: ``csr_spmm_plus_times`` stores outputs of at least this many bytes with
#: non-temporal stores (half the 32 MiB L3 of the benchmark machine: larger
#: outputs are evicted before the next operator reads them anyway, and
#: streaming saves reading every output line before writing it).  Measured
#: (luxembourg, slashdot, ego-Twitter, rmat:16/18 at f = 64 and 256): 1.03-1.29x;
#: outputs of 4-7 MB (f = 16) neutral to 6 % slower, hence the threshold.
STREAM_BYTES = 16 << 20


@numba.njit(cache=True, nogil=True, inline="always")
def _rows_times_x(indptr, indices, data, x, out, r0, r1, pf_end, dist, stream):
    """``out[r0:r1] = A[r0:r1] @ x`` in column blocks of 64, 32, ..., 1 (widest first).

    Each block is one register-accumulating pass over the rows
    (:mod:`.simd`); ``pf_end``/``dist``/``stream`` as there.
    """
    n = out.shape[1]
    j = 0
    while n - j >= 64:
        rows_block_64(indptr, indices, data, x, out, r0, r1, j, pf_end, dist, stream)
        j += 64
    if n - j >= 32:
        rows_block_32(indptr, indices, data, x, out, r0, r1, j, pf_end, dist, stream)
        j += 32
    if n - j >= 16:
        rows_block_16(indptr, indices, data, x, out, r0, r1, j, pf_end, dist, stream)
        j += 16
    if n - j >= 8:
        rows_block_8(indptr, indices, data, x, out, r0, r1, j, pf_end, dist, stream)
        j += 8
    if n - j >= 4:
        rows_block_4(indptr, indices, data, x, out, r0, r1, j, pf_end, dist, stream)
        j += 4
    if n - j >= 2:
        rows_block_2(indptr, indices, data, x, out, r0, r1, j, pf_end, dist, stream)
        j += 2
    if n - j >= 1:
        rows_block_1(indptr, indices, data, x, out, r0, r1, j, pf_end, dist, stream)


@numba.njit(cache=True, nogil=True, parallel=True)
def csr_spmm_plus_times(indptr, indices, data, x, nparts, out):
    """``out = A @ x`` (the ``plus_times`` semiring, the GNN hot path).

    Parameters
    ----------
    indptr, indices : int32 or int64 arrays, shapes ``(m + 1,)`` and ``(nnz,)``
    data : float array ``(nnz,)``
    x : float array ``(k, n)``, C-contiguous
    nparts : int
        Number of row chunks (clamped to ``[1, m]``); a few per thread.
    out : float array ``(m, n)``, C-contiguous, overwritten

    Notes
    -----
    Output rows are computed in column blocks of 64, 32, 16, 8, 4, 2 and 1
    (greedy, widest first); for each block the row's nonzeros are summed in
    a register accumulator (:mod:`.simd`) and the block is stored once.
    When ``n`` is one block (1, 2, 4, ..., 64: the usual GNN widths) a row
    chunk is one pass with the row loop inside the block code; otherwise
    each row runs all its blocks before the next row, so that the blocks of
    one gathered row of ``x`` are read together (block passes over a whole
    chunk measured up to 2x slower for n = 100 and 256).

    Outputs of at least :data:`STREAM_BYTES` whose rows are a multiple of
    64 bytes and whose base is 64-byte aligned (the backend's own outputs
    are) are written with non-temporal stores (``simd.rows_block_<W>``'s
    ``stream``); the values are the same either way.

    Duplicates are separate terms; sortedness does not matter.  Same
    summation order as scipy's ``csr_matvecs`` (nonzeros in storage order,
    starting from +0), no FMA contraction, so the result is bit-identical to
    scipy's.  Cost O(nnz * n + m * n).

    Scheduling is dynamic (:func:`_ops.chunk_count`): ``nparts`` workers pull
    ``4 * nparts`` row chunks balanced by ``nnz + rows`` from an atomic
    counter; worker 0 ends by waiting for the last chunks
    (:func:`_ops.wait_for_chunks`).  The row block of ``x`` used
    :data:`_ops.PREFETCH_DIST` nonzeros later is always prefetched (every
    cache line of it), which turns the latency-bound random gather
    into overlapping misses (with register accumulation this measured
    neutral to 1.6x faster even for an ``x`` that fits in L2/L3, so there
    is no size threshold, unlike SDDMM's).
    """
    m = indptr.shape[0] - 1
    n = out.shape[1]
    nparts = clamp_parts(nparts, m)
    nchunks = chunk_count(nparts, m)
    bounds = row_partition(indptr, nchunks)
    dist = PREFETCH_DIST
    pf_end = np.int64(indptr[m]) - dist
    one_block = n <= 64 and (n & (n - 1)) == 0
    # stream an output larger than half the L3 cache (it would not stay there)
    # when every 64-byte block of it is aligned (MOVNTPS requires it)
    row_bytes = n * out.itemsize
    stream = (m * row_bytes >= STREAM_BYTES and row_bytes % STREAM_ALIGN == 0
              and out.ctypes.data % STREAM_ALIGN == 0)
    counter = np.zeros(1, dtype=np.int64)
    done = np.zeros(1, dtype=np.int64)
    for w in numba.prange(nparts):
        while True:
            p = atomic_fetch_add(counter, 0, 1)
            if p >= nchunks:
                break
            if one_block:
                _rows_times_x(indptr, indices, data, x, out, bounds[p], bounds[p + 1], pf_end,
                              dist, stream)
            else:
                for i in range(bounds[p], bounds[p + 1]):
                    _rows_times_x(indptr, indices, data, x, out, i, i + 1, pf_end, dist, stream)
            atomic_fetch_add(done, 0, 1)
        if stream:
            store_fence()
        if w == 0:
            wait_for_chunks(done, nchunks)


@numba.njit(cache=True, nogil=True, parallel=True)
def csr_spmm_semiring(indptr, indices, data, x, add_op, mul_op, nparts, out):
    """``out = A (+).(x) x`` for a pair of :data:`simd.REGISTER_SEMIRINGS` (the caller checks).

    Same contract and results as :func:`csr_spmm_rowwise` (rows without
    nonzeros hold the monoid's identity; min/max propagate NaN), with the
    loops of :func:`csr_spmm_plus_times`: each output row is computed in
    register column blocks of 64, 16, 4 and 1 (``simd.SEMIRING_WIDTHS``),
    dynamic row chunks, the row of ``x`` 16 nonzeros ahead prefetched.
    """
    m = indptr.shape[0] - 1
    nparts = clamp_parts(nparts, m)
    nchunks = chunk_count(nparts, m)
    bounds = row_partition(indptr, nchunks)
    dist = PREFETCH_DIST
    pf_end = np.int64(indptr[m]) - dist
    counter = np.zeros(1, dtype=np.int64)
    done = np.zeros(1, dtype=np.int64)
    for w in numba.prange(nparts):
        while True:
            p = atomic_fetch_add(counter, 0, 1)
            if p >= nchunks:
                break
            rows_semiring(indptr, indices, data, x, out, add_op, mul_op, bounds[p],
                          bounds[p + 1], pf_end, dist)
            atomic_fetch_add(done, 0, 1)
        if w == 0:
            wait_for_chunks(done, nchunks)


@numba.njit(cache=True, nogil=True, parallel=True)
def csr_spmm_rowwise(indptr, indices, data, x, add_op, mul_op, identity, nparts, out):
    """``out[i, j] = (+)_e data[e] (x) x[indices[e], j]`` over the nonzeros ``e`` of row ``i``.

    Parameters
    ----------
    indptr, indices : int32 or int64 arrays, shapes ``(m + 1,)`` and ``(nnz,)``
    data : float array ``(nnz,)``
    x : float array ``(k, n)``, C-contiguous
    add_op : int
        Additive monoid code (``_ops.ADD_*``).
    mul_op : int
        Multiplicative operator code (``_ops.MUL_*``).
    identity : float scalar of ``out.dtype``
        Additive identity; rows without nonzeros keep it.
    nparts : int
        Number of row chunks (clamped to ``[1, m]``); a few per thread.
    out : float array ``(m, n)``, C-contiguous, overwritten

    Notes
    -----
    Any semiring; ``plus_times`` is dispatched to :func:`csr_spmm_plus_times`
    (same result, tighter loop).  Row-mean semirings are handled by the
    caller (divide by ``diff(indptr)``).  Duplicates are separate terms,
    sortedness does not matter.  Cost O(nnz * n + m * n), no scratch memory.
    """
    m = indptr.shape[0] - 1
    n = out.shape[1]
    one = out.dtype.type(1)
    nparts = clamp_parts(nparts, m)
    nchunks = chunk_count(nparts, m)
    bounds = row_partition(indptr, nchunks)
    counter = np.zeros(1, dtype=np.int64)
    done = np.zeros(1, dtype=np.int64)
    for w in numba.prange(nparts):
        while True:
            p = atomic_fetch_add(counter, 0, 1)
            if p >= nchunks:
                break
            for i in range(bounds[p], bounds[p + 1]):
                for j in range(n):
                    out[i, j] = identity
                for e in range(indptr[i], indptr[i + 1]):
                    a = data[e]
                    c = indices[e]
                    if add_op == ADD_PLUS:
                        # sums are the common case (plus_pair, plus_second, ...):
                        # keep the add branch out of the inner loop.
                        for j in range(n):
                            out[i, j] += semiring_mul(mul_op, a, x[c, j], one)
                    else:
                        for j in range(n):
                            out[i, j] = semiring_add(add_op, out[i, j],
                                                     semiring_mul(mul_op, a, x[c, j], one))
            atomic_fetch_add(done, 0, 1)
        if w == 0:
            wait_for_chunks(done, nchunks)
