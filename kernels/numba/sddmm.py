"""Sampled dense-dense products (SDDMM) over a semiring, row-parallel.

``C = A .(x) (X (+).(x) Y^T)`` evaluated only on ``A``'s pattern: for a
nonzero ``e = (i, j)``, ``C.data[e] = A.data[e] (x) ((+)_k X[i, k] (x) Y[j, k])``.
This is the attention-score kernel of GAT-like layers.  Each nonzero is
independent; the kernel runs ``prange`` over chunks of rows balanced by
nonzero count so that one row of ``X`` stays in cache while its nonzeros
stream through rows of ``Y``.
"""

import numba
import numpy as np

from ._ops import (ADD_PLUS, MUL_TIMES, PREFETCH_BYTES, PREFETCH_DIST, atomic_fetch_add,
                   chunk_count, clamp_parts, prefetch_row, row_partition, semiring_add,
                   semiring_mul, wait_for_chunks)

__all__ = ["csr_sddmm"]


# reassoc: lets LLVM vectorise the dot-product reduction over k (8 or 16
# partial sums); contract: FMA.  Neither changes min/max selections; sums may
# differ from a sequential loop by rounding only (the reference, numpy, does
# not sum sequentially either).
@numba.njit(cache=True, nogil=True, parallel=True, fastmath={"reassoc", "contract"})
def csr_sddmm(indptr, indices, data, x, y, add_op, mul_op, identity, nparts, out_data):
    """``out_data[e] = data[e] (x) ((+)_k x[i, k] (x) y[indices[e], k])``.

    Parameters
    ----------
    indptr, indices : int32 or int64 arrays of ``A`` (``m`` rows, ``n`` columns)
    data : float array ``(nnz,)``
    x : float array ``(m, d)``, C-contiguous
    y : float array ``(n, d)``, C-contiguous (not transposed: rows of ``y``
        are the column operands, so the inner loop is contiguous in both)
    add_op, mul_op : int
        Semiring codes (``_ops.ADD_*``, ``_ops.MUL_*``).
    identity : float scalar of ``out_data.dtype``
        Start of the inner reduction (what ``d == 0`` yields).
    nparts : int
        Number of row chunks (clamped to ``[1, m]``).
    out_data : float array ``(nnz,)``, overwritten; same order as ``indices``

    Notes
    -----
    The output keeps ``A``'s pattern and storage order, so unsorted indices
    and duplicates simply produce one value per stored nonzero.
    Cost O(nnz * d); no scratch memory.  Dynamic row-chunk scheduling and
    prefetch of the ``y`` row ``PREFETCH_DIST`` nonzeros ahead, as in SpMM.
    """
    m = indptr.shape[0] - 1
    d = x.shape[1]
    one = out_data.dtype.type(1)
    nparts = clamp_parts(nparts, m)
    nchunks = chunk_count(nparts, m)
    bounds = row_partition(indptr, nchunks)
    nnz = np.int64(indptr[m])
    dot = add_op == ADD_PLUS and mul_op == MUL_TIMES
    # the rows of y are gathered like X's in SpMM: prefetch when y is big
    dist = PREFETCH_DIST if y.shape[0] * d * y.itemsize > PREFETCH_BYTES else 0
    counter = np.zeros(1, dtype=np.int64)
    done = np.zeros(1, dtype=np.int64)
    for w in numba.prange(nparts):
        while True:
            p = atomic_fetch_add(counter, 0, 1)
            if p >= nchunks:
                break
            for i in range(bounds[p], bounds[p + 1]):
                for e in range(indptr[i], indptr[i + 1]):
                    if dist > 0 and e + dist < nnz:
                        prefetch_row(y, indices[e + dist])
                    j = indices[e]
                    acc = identity
                    if dot:
                        # dot product fast path (plus_times / mean)
                        for k in range(d):
                            acc += x[i, k] * y[j, k]
                    else:
                        for k in range(d):
                            acc = semiring_add(add_op, acc,
                                               semiring_mul(mul_op, x[i, k], y[j, k], one))
                    out_data[e] = semiring_mul(mul_op, data[e], acc, one)
            atomic_fetch_add(done, 0, 1)
        if w == 0:
            wait_for_chunks(done, nchunks)
