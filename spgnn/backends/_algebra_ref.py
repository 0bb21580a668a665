"""Host reference of the GraphBLAS local operations (the numpy backend's, and the default).

Written for obvious correctness: the masked SpGEMM computes the whole
product (:meth:`NumpyBackend.spgemm_numeric`'s expand-sort-reduce, which takes
any semiring) and then keeps the allowed entries -- filter-after, the
opposite of the compiled mask-driven kernel it checks.  Local, no MPI.
"""

import numpy as np

from ..local.csr import LocalCSR
from ..local.ops import binary_op, unary_op

__all__ = ["mask_allowed", "filter_by_mask", "map_binary", "map_unary", "reduce_rows",
           "spgemm_all"]


def spgemm_all(a, b, semiring):
    """The whole structural product ``A (+).(x) B`` of host blocks, any semiring.

    Expands every product ``a(i,k) (x) b(k,j)`` (A's storage order, then B's),
    stably sorts them by ``(i, j)`` and reduces each run left to right with
    the monoid -- the order the compiled kernels use.
    """
    m, n = a.shape[0], b.shape[1]
    dt = np.result_type(np.asarray(a.data), np.asarray(b.data))
    a_idx = np.asarray(a.indices, dtype=np.int64)
    b_indptr = np.asarray(b.indptr, dtype=np.int64)
    per_a = np.diff(b_indptr)[a_idx]
    total = int(per_a.sum())
    ea = np.repeat(np.arange(a_idx.size, dtype=np.int64), per_a)
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(per_a) - per_a, per_a)
    eb = b_indptr[a_idx[ea]] + within
    i = np.repeat(np.arange(m, dtype=np.int64), np.diff(np.asarray(a.indptr)))[ea]
    j = np.asarray(b.indices, dtype=np.int64)[eb]
    v = np.asarray(semiring.mul(np.asarray(a.data).astype(dt)[ea],
                                np.asarray(b.data).astype(dt)[eb]), dtype=dt)
    order = np.lexsort((j, i))                    # stable: equal (i, j) keep storage order
    i, j, v = i[order], j[order], v[order]
    if total:
        starts = np.flatnonzero(np.r_[True, (i[1:] != i[:-1]) | (j[1:] != j[:-1])])
        data = np.asarray(semiring.add.op.reduceat(v, starts), dtype=dt)
    else:
        starts, data = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=dt)
    indptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(i[starts], minlength=m), out=indptr[1:])
    return LocalCSR(indptr, j[starts], data, (m, n), check=None)


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


#: ``j - i`` against the offset, per band selector (:meth:`Backend.select_band`).
BANDS = {"tril": np.less_equal, "triu": np.greater_equal, "diag": np.equal,
         "offdiag": np.not_equal}


def select_band(a, kind, offset):
    """Filter host block ``a`` to a diagonal band (numpy reference; storage order kept)."""
    indptr = np.asarray(a.indptr)
    rows = np.repeat(np.arange(a.shape[0], dtype=np.int64), np.diff(indptr))
    keep = BANDS[kind](np.asarray(a.indices, dtype=np.int64) - rows, offset)
    before = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
    return LocalCSR(before[indptr].astype(indptr.dtype), np.asarray(a.indices)[keep],
                    np.asarray(a.data)[keep], a.shape, check=None)
