"""Elementwise GNN kernels: counter-based dropout (dense and CSR) and ReLU.

The dropout hash is exactly :func:`spgnn.gnn.functional.hash_uniform`: the
splitmix64 finaliser of ``(row id * ncols + col) ^ base``, where ``base``
mixes the keys ``(seed, epoch, layer)`` (computed by the caller, once per
call), and ``u = (h >> 11) * 2**-53``.  An entry is kept when ``u >= p`` and
then scaled by ``scale`` (``1/(1-p)`` in the value dtype); a dropped entry is
multiplied by 0, so the result equals ``x * mask`` with the float mask that
:func:`~spgnn.gnn.functional.dropout_mask` builds, bit for bit (including
``-0.0`` and NaN propagation).  Hashing in the kernel instead of numpy saves
the five full-size uint64 temporaries of the numpy version, which dominated a
Cora epoch.

All kernels follow ``kernels/README.md``: inputs first, preallocated outputs
last, no validation (``spgnn.gnn.ops`` checks shapes and dtypes), rows are
independent, so ``prange`` over rows needs no synchronisation.
"""

import numba
import numpy as np

from .splitmix import GOLDEN, INV53, S11, mix64

__all__ = ["dropout_dense", "dropout_dense_serial", "dropout_csr", "dropout_csr_serial",
           "relu_forward", "relu_backward"]

@numba.njit(cache=True, nogil=True, inline="always")
def _uniform(counter, base):
    """splitmix64's finaliser of ``counter ^ base`` as a float64 in [0, 1) (wrapping uint64)."""
    return np.float64(mix64((counter ^ base) + GOLDEN) >> S11) * INV53


@numba.njit(cache=True, nogil=True, parallel=True)
def dropout_dense(x, ids, col0, ncols, base, p, scale, out):
    """``out[i, j] = x[i, j] * (scale if u(ids[i], col0 + j) >= p else 0)``.

    Parameters
    ----------
    x : float array ``(m, k)``, C-contiguous
    ids : int64 array ``(m,)``
        Global (input-graph) node id of each row.
    col0 : int
        Global column of ``x[:, 0]``.
    ncols : int
        Global column count (the counter is ``id * ncols + column``).
    base : uint64
        The mixed keys.
    p : float64
        Drop probability.
    scale : scalar of ``x.dtype``
        ``1 / (1 - p)``.
    out : float array like ``x``, overwritten (may be ``x`` itself)
    """
    m, k = x.shape
    zero = x.dtype.type(0)
    nc = np.uint64(ncols)
    c0 = np.uint64(col0)
    for i in numba.prange(m):
        row = np.uint64(ids[i]) * nc + c0
        for j in range(k):
            s = scale if _uniform(row + np.uint64(j), base) >= p else zero
            out[i, j] = x[i, j] * s


@numba.njit(cache=True, nogil=True)
def dropout_dense_serial(x, ids, col0, ncols, base, p, scale, out):
    """As :func:`dropout_dense`, single-threaded: for blocks too small to repay waking threads."""
    m, k = x.shape
    zero = x.dtype.type(0)
    nc = np.uint64(ncols)
    c0 = np.uint64(col0)
    for i in range(m):
        row = np.uint64(ids[i]) * nc + c0
        for j in range(k):
            s = scale if _uniform(row + np.uint64(j), base) >= p else zero
            out[i, j] = x[i, j] * s


@numba.njit(cache=True, nogil=True, parallel=True)
def dropout_csr(indptr, indices, data, ids, col0, ncols, base, p, scale, out):
    """:func:`dropout_dense` on the stored entries of a CSR block only.

    ``out`` (like ``data``) receives ``data[e] * (scale or 0)``; the pattern
    is unchanged (dropped entries become explicit zeros), so the caller can
    reuse ``indptr`` and ``indices``.  Entries not stored are zero before and
    after dropout, which is why a sparse input needs only ``nnz`` hashes.
    """
    m = indptr.shape[0] - 1
    zero = data.dtype.type(0)
    nc = np.uint64(ncols)
    c0 = np.uint64(col0)
    for i in numba.prange(m):
        row = np.uint64(ids[i]) * nc + c0
        for e in range(indptr[i], indptr[i + 1]):
            s = scale if _uniform(row + np.uint64(indices[e]), base) >= p else zero
            out[e] = data[e] * s


@numba.njit(cache=True, nogil=True)
def dropout_csr_serial(indptr, indices, data, ids, col0, ncols, base, p, scale, out):
    """As :func:`dropout_csr`, single-threaded: for blocks too small to repay waking threads."""
    m = indptr.shape[0] - 1
    zero = data.dtype.type(0)
    nc = np.uint64(ncols)
    c0 = np.uint64(col0)
    for i in range(m):
        row = np.uint64(ids[i]) * nc + c0
        for e in range(indptr[i], indptr[i + 1]):
            s = scale if _uniform(row + np.uint64(indices[e]), base) >= p else zero
            out[e] = data[e] * s


@numba.njit(cache=True, nogil=True, parallel=True)
def relu_forward(x, out, mask):
    """``out = max(x, 0)`` (``x`` where ``x > 0``, else 0) and ``mask = x > 0``, one pass."""
    m, k = x.shape
    zero = x.dtype.type(0)
    for i in numba.prange(m):
        for j in range(k):
            v = x[i, j]
            pos = v > 0
            mask[i, j] = pos
            out[i, j] = v if pos else zero


@numba.njit(cache=True, nogil=True, parallel=True)
def relu_backward(dy, mask, out):
    """``out = dy`` where ``mask``, else 0."""
    m, k = dy.shape
    zero = dy.dtype.type(0)
    for i in numba.prange(m):
        for j in range(k):
            out[i, j] = dy[i, j] if mask[i, j] else zero
