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

from ._ops import ADD_PLUS, clamp_parts, row_partition, semiring_add, semiring_mul

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
    ``csr_matvecs`` (nonzeros in storage order).  Cost O(nnz * n + m * n).
    """
    m = indptr.shape[0] - 1
    n = out.shape[1]
    nparts = clamp_parts(nparts, m)
    bounds = row_partition(indptr, nparts)
    for p in numba.prange(nparts):
        for i in range(bounds[p], bounds[p + 1]):
            for j in range(n):
                out[i, j] = 0
            for e in range(indptr[i], indptr[i + 1]):
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
    bounds = row_partition(indptr, nparts)
    for p in numba.prange(nparts):
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
