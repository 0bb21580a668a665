"""Row-wise reductions and the softmax over a sparse matrix's stored values (GAT's edge softmax).

For a matrix whose rows are whole on each rank (``local``, ``1d`` and
``1d-aware`` layouts: A split by rows only, or replicated), every row's
entries are on one rank, so all of this is **local**: no communication.
Layouts that split rows over columns (1.5D, 2D, 3D) are refused with
:class:`~spgnn.errors.LayoutMismatch`; they would need an all-reduce of the
row maxima and sums over the column axes.

``row_reduce`` is a small special case of GraphBLAS's ``reduce`` to rows;
the general distributed ``reduce`` (any monoid, any layout, issue 23) may
later subsume it, leaving ``edge_softmax`` as a composition of it.

* :func:`with_values` -- same pattern, new values (keeps the pattern's
  cached exchange plans).
* :func:`row_reduce` -- per-row monoid of the stored values (empty rows give
  the identity).
* :func:`edge_softmax` -- ``α[i, j] = exp(v[i, j] - max_i) / Σ_j exp(v[i, j] - max_i)``
  over the stored entries of row ``i``.
* :func:`edge_softmax_backward` -- ``dv = α ⊙ (dα - Σ_row α ⊙ dα)``.
"""

import copy

import numpy as np

from ..errors import DimensionMismatch, LayoutMismatch
from ..local.csr import LocalCSR
from ..local.semiring import MAX, PLUS, Monoid
from .dist_sparse import DistSparseMatrix

__all__ = ["with_values", "row_reduce", "row_ids", "edge_softmax", "edge_softmax_backward"]


def _check_rows_whole(S, op):
    if not isinstance(S, DistSparseMatrix):
        raise TypeError(f"{op}: expected a DistSparseMatrix, but got {type(S).__name__}")
    if S.layout.cols and S.grid.size > 1:
        raise LayoutMismatch(f"{op}: needs whole rows on every rank (split by rows only, or "
                             f"replicated), but got {S.layout!r}")


def with_values(S, data):
    """``S``'s pattern, layout and storage order with the local values ``data``. Local.

    ``data`` is this rank's value array (length ``S.local_nnz``).  The
    pattern-only plans cached on ``S`` (the ``1d-aware`` and slab-form
    ``15d-aware`` exchange plans) are
    carried over with the new values, so an SpMM or SDDMM with the result
    communicates exactly what one with ``S`` does and builds nothing.
    """
    loc = S.local
    if data.shape != (loc.nnz,):
        raise DimensionMismatch(f"with_values: expected {loc.nnz} local values, but got shape "
                                f"{data.shape}")
    out = DistSparseMatrix(LocalCSR(loc.indptr, loc.indices, data, loc.shape, check=None),
                           S.shape, S.grid, S.layout, nnz=S.nnz, backend=S.backend)
    for key, plan in S.cache.items():
        # 1D plans, and 1.5D plans of a slab-form matrix (whose plan is built on S.local
        # itself, so its entries line up with data)
        if isinstance(key, tuple) and key and (
                key[0] == "spmm-1d-aware" or (key[0] == "spmm-15d-aware" and S.layout.cols)):
            mine = copy.copy(plan)
            c = plan.compact
            mine.compact = LocalCSR(c.indptr, c.indices, data, c.shape, check=None)
            out.cache[key] = mine
        elif key == "row_ids":
            out.cache[key] = plan
    return out


def row_ids(S):
    """The local row of every stored entry of ``S`` (int64, cached on ``S``). Local."""
    got = S.cache.get("row_ids")
    if got is None:
        indptr = np.asarray(S.backend.to_host(S.local.indptr)).astype(np.int64)
        got = np.repeat(np.arange(S.local.shape[0], dtype=np.int64), np.diff(indptr))
        S.cache["row_ids"] = got
    return got


def row_reduce(S, monoid=PLUS):
    """Per-row ``monoid`` of ``S``'s stored values, for this rank's rows (host array). Local.

    Empty rows give the monoid's identity.  Needs whole rows on every rank.
    """
    _check_rows_whole(S, "row_reduce")
    if not isinstance(monoid, Monoid):
        monoid = {"plus": PLUS, "max": MAX}[monoid]
    be = S.backend
    data = np.asarray(be.to_host(S.local.data))
    indptr = np.asarray(be.to_host(S.local.indptr)).astype(np.int64)
    m = S.local.shape[0]
    out = np.full(m, monoid.identity, dtype=data.dtype)
    nonempty = np.flatnonzero(np.diff(indptr))
    if nonempty.size:
        out[nonempty] = monoid.ufunc.reduceat(data, indptr[nonempty])
    return out


def edge_softmax(S):
    """Row-wise softmax of ``S``'s stored values: a matrix with S's pattern. Local.

    Max-subtracted (no overflow); a row without entries stays empty.
    """
    _check_rows_whole(S, "edge_softmax")
    be = S.backend
    v = np.asarray(be.to_host(S.local.data))
    rows = row_ids(S)
    ex = np.exp(v - row_reduce(S, MAX)[rows])
    tmp = with_values(S, be.from_host(ex))
    alpha = ex / row_reduce(tmp, PLUS)[rows]
    return with_values(S, be.from_host(alpha))


def edge_softmax_backward(alpha, dalpha):
    """Gradient of :func:`edge_softmax`: ``dv = α ⊙ (dα - Σ_row α ⊙ dα)``. Local.

    ``alpha`` is the forward's output; ``dalpha`` the gradient of its values
    (a matrix with the same pattern, or this rank's value array).
    """
    _check_rows_whole(alpha, "edge_softmax_backward")
    be = alpha.backend
    a = np.asarray(be.to_host(alpha.local.data))
    da = dalpha.local.data if isinstance(dalpha, DistSparseMatrix) else dalpha
    da = np.asarray(be.to_host(da))
    if da.shape != a.shape:
        raise DimensionMismatch(f"edge_softmax_backward: dalpha has {da.shape} values, alpha "
                                f"{a.shape}")
    prod = with_values(alpha, be.from_host(a * da))
    dv = a * (da - row_reduce(prod, PLUS)[row_ids(alpha)])
    return with_values(alpha, be.from_host(dv))
