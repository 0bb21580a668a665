"""Distributed dense operations used by the 3D (Plexus) layer: ``Q = H·W``.

``research/002_plexus.md`` §2.4 lines 5-7 and §2.5: with layer roles
``(o, i, d)``, ``H`` is ``N/G_d x D/G_i`` (``Layout(d, i)``), the weight block
``W_loc`` is ``D/G_i x D'/G_o`` (``Layout(i, o)``, or ``Layout((i, d), o)``
when the weights are row-sharded over ``d``), and the local product is a
partial sum over the inner axis ``i``; one all-reduce over ``i`` completes
it, giving ``Q`` with ``Layout(d, o)``: the next layer's input layout.
"""

import numpy as np

from ..errors import LayoutMismatch
from ..layout import Layout
from ._dist_common import check_product
from .depth import depth_counts, gather_depth
from .dist_dense import DistDenseMatrix

__all__ = ["matmul"]

SUPPORTED = ("H = Layout(d, i), W = Layout(i, o) or Layout((i, d), o) for three distinct axes "
             "(the 3D layer step; W's row blocks over i equal to H's column blocks), or both "
             "fully replicated")


def _single(axes):
    return axes[0] if len(axes) == 1 else None


def _roles(H, W):
    lh, lw = H.layout, W.layout
    d, i, o = _single(lh.rows), _single(lh.cols), _single(lw.cols)
    if None in (d, i, o) or len({o, i, d}) != 3 or lh.partial or lw.partial:
        return None
    if lw.rows == (i,):
        return o, i, d, False
    if lw.rows == (i, d):
        return o, i, d, True
    return None


def matmul(H, W):
    """``Q = H·W`` for the 3D layer step (all-reduce over the inner axis).

    Collective: over the grid.  An all-gather of W over ``d`` when W is
    row-sharded over ``d``, then one all-reduce (plus) over ``i``.

    Parameters
    ----------
    H : DistDenseMatrix, shape (n, k), ``Layout(d, i)``
    W : DistDenseMatrix, shape (k, m), ``Layout(i, o)`` or ``Layout((i, d), o)``

    Returns
    -------
    DistDenseMatrix, shape (n, m), ``Layout(d, o)`` with H's row splits and
    W's column splits: for roles ``(o, i, d)`` this is the input layout of
    the next layer's roles ``(d, o, i)``.

    Raises
    ------
    TypeError, GridMismatch, BackendMismatch, DimensionMismatch, LayoutMismatch
        On every rank, before any communication.
    """
    for name, m in (("H", H), ("W", W)):
        if not isinstance(m, DistDenseMatrix):
            raise TypeError(f"matmul: expected {name} to be a DistDenseMatrix, but got "
                            f"{type(m).__name__}")
    check_product("matmul", ("H", "W"), H, W, "(n,k),(k,m)->(n,m)")
    grid, be = H.grid, H.backend
    replicated = Layout()
    if (H.layout.replace(row_splits=None, col_splits=None) == replicated
            and W.layout.replace(row_splits=None, col_splits=None) == replicated):
        return DistDenseMatrix(be.matmul(H.local, W.local), (H.shape[0], W.shape[1]), grid,
                               replicated, backend=be)
    roles = _roles(H, W)
    if roles is None:
        raise LayoutMismatch(f"matmul: unsupported layouts H.layout={H.layout!r}, "
                             f"W.layout={W.layout!r}; supported: {SUPPORTED}")
    o, i, d, sharded = roles
    woff = W.layout.offsets(grid, W.shape[0], 0)
    if sharded:
        woff = woff[::grid.axis_size(d)]
    hoff = H.layout.offsets(grid, H.shape[1], 1)
    if tuple(woff) != tuple(hoff):
        raise LayoutMismatch(f"matmul: W's row blocks over {i!r} {tuple(woff)} must equal H's "
                             f"column blocks over {i!r} {tuple(hoff)}")
    w_local = W.local
    if sharded:
        w_local = gather_depth(grid, w_local, d, be, "matmul-3d:allgather",
                               depth_counts(W.layout, grid, W.shape[0], i, d))
    q = be.matmul(H.local, w_local)
    comm_i = grid.comm(i)
    if comm_i.size > 1:
        q = comm_i.allreduce(be.xp.ascontiguousarray(q), op="plus", label="matmul-3d:allreduce")
    layout = Layout(d, o, row_splits=H.layout.row_splits, col_splits=W.layout.col_splits)
    return DistDenseMatrix(q, (H.shape[0], W.shape[1]), grid, layout, backend=be)
