"""GraphBLAS ``assign``: ``C<M, replace>(rows, cols) accum= A`` by global index lists.

Semantics (GrB_assign, the mask has C's shape):

1. ``Z = C``; inside the region ``rows x cols``: without ``accum`` the
   region of ``Z`` becomes exactly ``A`` placed there (``Z[rows[p],
   cols[q]] = A[p, q]`` where A holds an entry; C's other entries in the
   region are deleted), with ``accum`` it is the union of C's region and A
   with ``accum(c, a)`` where both hold an entry.  Outside the region
   ``Z = C``.
2. ``C<M, replace> = Z`` by GraphBLAS's output rule
   (:func:`spgnn.core.algebra.write`): where the mask allows, ``Z``; where
   it does not, C's old entries, or nothing with ``replace`` -- so
   ``replace`` deletes C's entries outside the mask also outside the region,
   as GrB_assign does (GxB_subassign, whose mask has A's shape, is not
   offered).

``A`` may be a :class:`DistSparseMatrix` of shape ``(len(rows),
len(cols))`` (any layout on C's grid) or a scalar, which is assigned to
every position of the region (GrB_Matrix_assign_Scalar).  ``rows``/``cols``
are 1-D lists of distinct indices in any order (``None``: all); a repeated
index raises :class:`~spgnn.errors.DimensionMismatch` (GraphBLAS leaves the
result undefined; refusing is the only answer that cannot be wrong).

Collective.  Every check (types, grids, shapes, index lists, backends, mask,
operator) uses what all ranks know and runs before the first collective, so
a bad call raises the same typed error on every rank and sends nothing.
Communication: a matrix ``A`` is sent entry by entry to the ranks holding
the target positions of C (every replica), one alltoallv of coordinates and
one of values (labels ``assign:coords``, ``assign:values``), as
:func:`~spgnn.core.algebra.extract`; a scalar moves nothing.  Then the
write's allreduce of the new nnz.
"""

import numbers

import numpy as np

from ..errors import BackendMismatch, DimensionMismatch
from ..local.ops import binary_op
from . import dispatch
from ._dist_common import primary_owners, same_grid
from .algebra import _check_sparse, _combine, check_mask, csr_from_coo, host_csr, local_coo, write
from .dist_sparse import DistSparseMatrix, _exchange_coo

__all__ = ["assign", "index_list"]


def index_list(op, what, idx, extent):
    """``idx`` as a 1-D int64 array of distinct indices in ``[0, extent)`` (``None``: all).

    Local; raises DimensionMismatch naming the offending values.
    """
    if idx is None:
        return np.arange(extent, dtype=np.int64)
    arr = np.asarray(idx)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise DimensionMismatch(f"{op}: {what} must be a 1-D list of integer indices, but got "
                                f"shape {arr.shape} dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    bad = arr[(arr < 0) | (arr >= extent)]
    if bad.size:
        raise DimensionMismatch(f"{op}: {what} must be indices in [0, {extent}), but got "
                                f"{bad[:8].tolist()}")
    uniq, counts = np.unique(arr, return_counts=True)
    if uniq.size != arr.size:
        raise DimensionMismatch(f"{op}: {what} must not repeat an index (GraphBLAS leaves the "
                                f"result undefined), but got repeated "
                                f"{uniq[counts > 1][:8].tolist()}")
    return arr


def _check(C, A, rows, cols, mask, accum):
    _check_sparse("assign", "C", C)
    n, m = C.shape
    rows = index_list("assign", "rows", rows, n)
    cols = index_list("assign", "cols", cols, m)
    if isinstance(A, DistSparseMatrix):
        same_grid("assign", C, A)
        if A.shape != (rows.size, cols.size):
            raise DimensionMismatch(f"assign: A must have shape (len(rows), len(cols)) = "
                                    f"{(rows.size, cols.size)}, but got A.shape={A.shape}")
        if A.backend.name != C.backend.name:
            raise BackendMismatch(f"assign: C uses backend {C.backend.name!r} but A uses "
                                  f"{A.backend.name!r}; convert one explicitly")
    elif not isinstance(A, numbers.Real) or isinstance(A, bool):
        raise TypeError(f"assign: A must be a DistSparseMatrix or a real scalar, but got "
                        f"{type(A).__name__}")
    mask = check_mask("assign", mask, C)
    return rows, cols, mask, None if accum is None else binary_op(accum)


def _placed_matrix(C, A, rows, cols):
    """A's entries at their positions in C, sent to the ranks holding them: my block of them.

    Collective over the world (two alltoallvs)."""
    be, grid, layout = C.backend, C.grid, C.layout
    r, c, v = local_coo(host_csr(be, A.local))
    if grid.rank not in primary_owners(grid, A.layout):       # replicas send once
        r, c, v = r[:0], c[:0], v[:0]
    gi, gj = rows[r + A.row_start], cols[c + A.col_start]
    roff = np.asarray(layout.offsets(grid, C.shape[0], 0))
    coff = np.asarray(layout.offsets(grid, C.shape[1], 1))
    rb = np.searchsorted(roff, gi, side="right") - 1
    cb = np.searchsorted(coff, gj, side="right") - 1
    counts = np.zeros(grid.world.size, dtype=np.int64)
    sel = []
    for d, coords in grid.ranks():                              # every replica of the block
        mine = np.flatnonzero((rb == layout.block_index(grid, coords, 0))
                              & (cb == layout.block_index(grid, coords, 1)))
        sel.append(mine)
        counts[d] = mine.size
    sel = np.concatenate(sel) if sel else np.zeros(0, np.int64)
    loc = _exchange_coo(grid.world, grid, layout, C.shape, C.dtype, gi[sel], gj[sel],
                        np.asarray(v[sel], dtype=C.dtype), counts, be, "assign")
    return host_csr(be, loc)


def _placed_scalar(C, value, rows, cols):
    """Every position of the region inside my block, holding ``value``. Local."""
    (r0, r1), (c0, c1) = C.layout.bounds(C.grid, C.shape)
    lr = np.sort(rows[(rows >= r0) & (rows < r1)]) - r0
    lc = np.sort(cols[(cols >= c0) & (cols < c1)]) - c0
    rr, cc = np.repeat(lr, lc.size), np.tile(lc, lr.size)
    return csr_from_coo(rr, cc, np.full(rr.size, value, dtype=C.dtype), (r1 - r0, c1 - c0))


def assign(C, A, rows=None, cols=None, *, mask=None, accum=None, replace=False):
    """``C<mask, replace>(rows, cols) accum= A`` in place; returns ``C``. Collective.

    See the module docstring for the semantics, the communication and the
    errors.  ``mask`` is a :class:`~spgnn.local.ops.Mask` (``M.S``,
    ``~M.V``, ...) or a matrix (value mask) in C's shape and layout;
    ``accum`` a binary operator (name or object).
    """
    rows, cols, mask, accum = _check(C, A, rows, cols, mask, accum)
    be = C.backend
    if isinstance(A, DistSparseMatrix):
        t = _placed_matrix(C, A, rows, cols)
    else:
        t = _placed_scalar(C, A, rows, cols)
    c_loc = host_csr(be, C.local)
    if accum is not None:
        z = _combine(c_loc, t, accum, True, be)
    else:
        # C's entries outside the region stay; the region becomes A's
        rc, cc, vc = local_coo(c_loc)
        (r0, _), (c0, _) = C.layout.bounds(C.grid, C.shape)
        inside = np.isin(rc + r0, rows) & np.isin(cc + c0, cols)
        rt, ct, vt = local_coo(t)
        z = csr_from_coo(np.concatenate([rc[~inside], rt]), np.concatenate([cc[~inside], ct]),
                         np.concatenate([vc[~inside], vt.astype(vc.dtype)]), c_loc.shape)
    return write("assign", C, z, C, mask, None, replace)


dispatch.register("assign", assign)
