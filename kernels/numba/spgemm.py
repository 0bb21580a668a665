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

Each chunk owns a dense marker array (and, numerically, a dense accumulator)
of length ``B.shape[1]``, allocated once per chunk rather than per row: the
marker stores the row that last touched a column, so it never needs
clearing between rows.  Scratch is O(nparts * ncols) in total, with at most
one chunk's worth live per thread.
"""

import numba
import numpy as np

from ._ops import clamp_parts, row_partition, semiring_add, semiring_mul

__all__ = ["csr_spgemm_symbolic", "csr_spgemm_numeric"]


@numba.njit(cache=True, nogil=True, parallel=True)
def csr_spgemm_symbolic(a_indptr, a_indices, b_indptr, b_indices, b_ncols, nparts, out_indptr):
    """Output ``indptr`` of the structural product ``pattern(A) @ pattern(B)``.

    Parameters
    ----------
    a_indptr, a_indices : int arrays of ``A`` (``m`` rows)
    b_indptr, b_indices : int arrays of ``B`` (``b_ncols`` columns); all four
        share one index dtype
    b_ncols : int
    nparts : int
        Number of row chunks (clamped to ``[1, m]``).
    out_indptr : int64 array ``(m + 1,)``, overwritten

    Notes
    -----
    Duplicates in ``A`` or ``B`` and unsorted indices are fine: a column is
    counted once per row however many terms reach it.  Cost O(flops + m) plus
    O(nparts * b_ncols) for the markers, where ``flops`` is the number of
    scalar products ``sum_{(i,k) in A} nnz(B[k, :])``.
    """
    m = a_indptr.shape[0] - 1
    nparts = clamp_parts(nparts, m)
    bounds = row_partition(a_indptr, nparts)
    out_indptr[0] = 0
    for p in numba.prange(nparts):
        marker = np.full(b_ncols, -1, dtype=np.int64)
        for i in range(bounds[p], bounds[p + 1]):
            count = 0
            for ea in range(a_indptr[i], a_indptr[i + 1]):
                k = a_indices[ea]
                for eb in range(b_indptr[k], b_indptr[k + 1]):
                    j = b_indices[eb]
                    if marker[j] != i:
                        marker[j] = i
                        count += 1
            out_indptr[i + 1] = count
    # prefix sum: serial, O(m), negligible next to the products
    for i in range(m):
        out_indptr[i + 1] += out_indptr[i]


@numba.njit(cache=True, nogil=True, parallel=True)
def csr_spgemm_numeric(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, b_ncols,
                       add_op, mul_op, nparts, out_indptr, out_indices, out_data):
    """Fill ``C = A (+).(x) B`` into a structure sized by :func:`csr_spgemm_symbolic`.

    Parameters
    ----------
    a_indptr, a_indices, a_data : ``A`` in CSR
    b_indptr, b_indices, b_data : ``B`` in CSR (same index and value dtypes as ``A``)
    b_ncols : int
    add_op, mul_op : int
        Semiring codes (``_ops.ADD_*``, ``_ops.MUL_*``).
    nparts : int
        Number of row chunks (clamped to ``[1, m]``).
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
    ``B`` row ``k``): the first term initialises the accumulator, so no
    identity is needed and structural zeros are kept.  Each row's columns are
    then sorted in place (O(r log r) for ``r`` output entries) and values
    gathered from the dense accumulator.  Cost O(flops + nnz_C log) time.
    """
    m = a_indptr.shape[0] - 1
    one = out_data.dtype.type(1)
    nparts = clamp_parts(nparts, m)
    bounds = row_partition(a_indptr, nparts)
    bad_rows = 0
    for p in numba.prange(nparts):
        marker = np.full(b_ncols, -1, dtype=np.int64)
        acc = np.empty(b_ncols, dtype=out_data.dtype)
        bad = 0
        for i in range(bounds[p], bounds[p + 1]):
            start = out_indptr[i]
            end = out_indptr[i + 1]
            pos = start
            for ea in range(a_indptr[i], a_indptr[i + 1]):
                k = a_indices[ea]
                av = a_data[ea]
                for eb in range(b_indptr[k], b_indptr[k + 1]):
                    j = b_indices[eb]
                    v = semiring_mul(mul_op, av, b_data[eb], one)
                    if marker[j] != i:
                        marker[j] = i
                        acc[j] = v
                        if pos < end:
                            out_indices[pos] = j
                        pos += 1
                    else:
                        acc[j] = semiring_add(add_op, acc[j], v)
            if pos != end:
                bad += 1
                pos = min(pos, end)
            out_indices[start:pos].sort()
            for q in range(start, pos):
                out_data[q] = acc[out_indices[q]]
        bad_rows += bad
    return bad_rows
