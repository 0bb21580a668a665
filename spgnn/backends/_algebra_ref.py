"""Host reference of the GraphBLAS local operations (the numpy backend's, and the default).

Written for obvious correctness: the masked SpGEMM computes the whole
product (:meth:`NumpyBackend.spgemm_numeric`'s expand-sort-reduce, which takes
any semiring) and then keeps the allowed entries -- filter-after, the
opposite of the compiled mask-driven kernel it checks.  Local, no MPI.
"""

import numpy as np

from ..local.csr import LocalCSR
from ..local.ops import binary_op, unary_op

__all__ = ["mask_allowed", "filter_by_mask", "map_binary", "map_unary", "reduce_rows"]


def _keys(indptr, indices, ncols):
    rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(np.asarray(indptr)))
    return rows * max(ncols, 1) + np.asarray(indices, dtype=np.int64)


def mask_allowed(keys, mask_csr, structure, complement, ncols):
    """Boolean per key (``row * ncols + col``): may the output hold that position?"""
    mk = _keys(mask_csr.indptr, mask_csr.indices, ncols)
    if not structure:
        mk = mk[np.asarray(mask_csr.data) != 0]
    inside = np.isin(keys, mk)
    return ~inside if complement else inside


def filter_by_mask(c, mask_csr, structure, complement):
    """``c`` (LocalCSR, host) with only the positions the mask allows."""
    if mask_csr is None:
        return c
    keys = _keys(c.indptr, c.indices, c.shape[1])
    keep = mask_allowed(keys, mask_csr, structure, complement, c.shape[1])
    rows = np.repeat(np.arange(c.shape[0], dtype=np.int64), np.diff(np.asarray(c.indptr)))
    counts = np.bincount(rows[keep], minlength=c.shape[0])
    indptr = np.zeros(c.shape[0] + 1, dtype=np.asarray(c.indptr).dtype)
    np.cumsum(counts, out=indptr[1:])
    return LocalCSR(indptr, np.asarray(c.indices)[keep], np.asarray(c.data)[keep], c.shape,
                    check=None)


def map_binary(op, x, y):
    return binary_op(op)(x, y)


def map_unary(op, x, rows=None, cols=None):
    return unary_op(op)(x, rows, cols)


def reduce_rows(monoid, indptr, data, nrows):
    """``(values, has)``: each row's reduction (identity where empty) and whether it had entries."""
    indptr = np.asarray(indptr)
    out = np.full(nrows, monoid.identity, dtype=np.asarray(data).dtype)
    nonempty = np.flatnonzero(np.diff(indptr))
    if nonempty.size:
        out[nonempty] = monoid.op.reduceat(np.asarray(data), indptr[nonempty])
    return out, np.diff(indptr) > 0
