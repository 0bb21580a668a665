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

from ._ops import (ADD_PLUS, PREFETCH_BYTES, PREFETCH_DIST, atomic_fetch_add, chunk_count,
                   clamp_parts, prefetch_row, row_partition, semiring_add, semiring_mul)

__all__ = ["csr_spmm_rowwise", "csr_spmm_plus_times"]


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
    Each nonzero does an axpy of one row of ``x`` straight into the output
    row, with the innermost loop running over the contiguous feature
    dimension (vectorisable, no temporaries).  Duplicates are separate terms;
    sortedness does not matter.  Same summation order as scipy's
    ``csr_matvecs`` (nonzeros in storage order), no FMA contraction, so the
    result is bit-identical to the previous kernel.  Cost O(nnz * n + m * n).

    Scheduling is dynamic (:func:`_ops.chunk_count`): ``nparts`` workers pull
    ``4 * nparts`` row chunks balanced by ``nnz + rows`` from an atomic
    counter.  When ``x`` exceeds :data:`_ops.PREFETCH_BYTES`, the row of ``x``
    used :data:`_ops.PREFETCH_DIST` nonzeros later is prefetched, which turns
    the latency-bound random gather into overlapping misses.
    """
    m = indptr.shape[0] - 1
    n = out.shape[1]
    nparts = clamp_parts(nparts, m)
    nchunks = chunk_count(nparts, m)
    bounds = row_partition(indptr, nchunks)
    nnz = np.int64(indptr[m])
    # prefetch only when X does not fit in the caches (see _ops.PREFETCH_BYTES)
    dist = PREFETCH_DIST if x.shape[0] * n * x.itemsize > PREFETCH_BYTES else 0
    counter = np.zeros(1, dtype=np.int64)
    for w in numba.prange(nparts):
        while True:
            p = atomic_fetch_add(counter, 0, 1)
            if p >= nchunks:
                break
            # The row loops are written out here, twice: moved into a helper
            # function, or merged into one loop with a per-row prefetch
            # test, they measured 1.4x slower at f = 16.
            if dist == 0:
                for i in range(bounds[p], bounds[p + 1]):
                    for j in range(n):
                        out[i, j] = 0
                    for e in range(indptr[i], indptr[i + 1]):
                        a = data[e]
                        c = indices[e]
                        for j in range(n):
                            out[i, j] += a * x[c, j]
            else:
                for i in range(bounds[p], bounds[p + 1]):
                    for j in range(n):
                        out[i, j] = 0
                    lo = np.int64(indptr[i])
                    hi = np.int64(indptr[i + 1])
                    # nonzeros whose successor `dist` ahead exists: prefetch it
                    mid = max(lo, min(hi, nnz - dist))
                    for e in range(lo, mid):
                        prefetch_row(x, indices[e + dist])
                        a = data[e]
                        c = indices[e]
                        for j in range(n):
                            out[i, j] += a * x[c, j]
                    for e in range(mid, hi):
                        a = data[e]
                        c = indices[e]
                        for j in range(n):
                            out[i, j] += a * x[c, j]


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
