"""Distributed SDDMM ``C = A .(x) (X (+).(x) Yᵀ)`` on A's pattern.

For every stored entry ``e = (i, j)`` of A,
``C.data[e] = A.data[e] (x) ((+)_k X[i, k] (x) Y[j, k])``: the attention
scores of GAT-like layers (``X`` and ``Y`` hold one row per node).  ``C``
has A's pattern, storage order and layout, so its values line up with A's
local block entry for entry.

Layouts and algorithms
----------------------
``local``
    Grid of size 1, or A, X and Y all replicated.
``1d`` (sparsity-oblivious)
    A split by whole rows over the row axes R, X split by rows exactly like
    A (same axes, same offsets: row ``i`` of X lives with row ``i`` of A), Y
    split by rows over R (any offsets).  Every rank all-gathers Y over R:
    rank ``r`` receives ``(k - k_r)·d`` elements.
``1d-aware`` (the default for those layouts)
    Same layouts; each rank receives only the rows of Y that its block's
    non-empty columns name, through one alltoallv.  The exchange plan is
    *the* ``1d-aware`` SpMM plan (:meth:`ExchangePlan.for_spmm_1d`, cached
    on A under the same key), so an SDDMM and an SpMM with one matrix build
    it once.  Rank ``r`` receives ``λ_r·d`` elements of Y, ``λ_r`` the
    number of distinct columns of its block outside its own Y rows (ledger
    label ``sddmm-1d-aware:exchange``).

``15d-aware`` (A in 1.5D column-slab form)
    A = ``Layout(R, C)`` (rows over R, column slabs over the replica axes C,
    e.g. :func:`~spgnn.core.spmm_15d.layouts_15d`), X = ``Layout(R)`` split
    exactly like A's rows, Y = ``Layout(R)`` (replicated over C).  Inside its
    process column each rank receives the rows of Y that its slab's
    non-empty columns name (the ``15d-aware`` SpMM plan, same cache key) and
    computes its slab of C: no all-reduce, since every entry of C lives on
    exactly one replica.  C keeps A's ``Layout(R, C)``.

Refused with :class:`~spgnn.errors.LayoutMismatch` (on every rank, before
any communication): 1.5D with whole rows of A on every replica, 2D and 3D
layouts, X split differently from A's rows, and partial sums.
"""

import numpy as np

from ..errors import BackendMismatch, DimensionMismatch, LayoutMismatch
from ..local.csr import LocalCSR
from ..local.semiring import get_semiring, plus_times
from ._dist_common import same_grid
from .dist_dense import DistDenseMatrix
from .dist_sparse import DistSparseMatrix
from .edge_softmax import with_values
from .exchange import ExchangePlan
from .spmm_15d import match_15d

__all__ = ["sddmm", "SDDMM_ALGORITHMS"]


def _check(A, X, Y, semiring):
    if not isinstance(A, DistSparseMatrix):
        raise TypeError(f"sddmm: expected A to be a DistSparseMatrix, but got {type(A).__name__}")
    for name, m in (("X", X), ("Y", Y)):
        if not isinstance(m, DistDenseMatrix):
            raise TypeError(f"sddmm: expected {name} to be a DistDenseMatrix, but got "
                            f"{type(m).__name__}")
    same_grid("sddmm", A, X, Y)
    (n, k), d = A.shape, X.shape[1]
    if X.shape[0] != n or Y.shape[0] != k or Y.shape[1] != d:
        raise DimensionMismatch(f"sddmm: with signature (n,k),(n,d),(k,d)->(n,k) X must have "
                                f"A.shape[0] rows, Y A.shape[1] rows and both the same columns, "
                                f"but got A.shape={A.shape}, X.shape={X.shape}, Y.shape={Y.shape}")
    for name, m in (("X", X), ("Y", Y)):
        if m.backend.name != A.backend.name:
            raise BackendMismatch(f"sddmm: A uses backend {A.backend.name!r} but {name} uses "
                                  f"{m.backend.name!r}; convert one explicitly")
        if m.layout.partial:
            raise LayoutMismatch(f"sddmm: {name} holds partial sums ({m.layout!r}); reduce them "
                                 f"first")
    semiring = get_semiring(semiring)
    if semiring.row_mean:
        raise ValueError(f"sddmm: row_mean semirings (such as {semiring.name!r}) are defined for "
                         f"spmm and spgemm only")
    return semiring


def _is_1d(A, X, Y):
    la, lx, ly = A.layout, X.layout, Y.layout
    if not la.rows or la.cols or lx.cols or ly.cols:
        return False
    if lx.rows != la.rows or ly.rows != la.rows:
        return False
    grid, n = A.grid, A.shape[0]
    return tuple(lx.offsets(grid, n, 0)) == tuple(la.offsets(grid, n, 0))


def _is_local(A, X, Y):
    if A.grid.size == 1:
        return True
    return not any(m.layout.rows or m.layout.cols for m in (A, X, Y))


def _match_15d(A, X, Y):
    """``(R, C)`` when A is a 1.5D column slab, X split like A's rows and Y by rows over R."""
    la, lx = A.layout, X.layout
    got = match_15d(A, Y)
    if not la.cols or got is None or lx.rows != la.rows or lx.cols:
        return None
    grid, n = A.grid, A.shape[0]
    if tuple(lx.offsets(grid, n, 0)) != tuple(la.offsets(grid, n, 0)):
        return None
    return got


def _select(A, X, Y):
    if _is_local(A, X, Y):
        return "local"
    if _is_1d(A, X, Y):
        return "1d-aware"
    if _match_15d(A, X, Y) is not None:
        return "15d-aware"
    raise LayoutMismatch(
        f"sddmm: no algorithm for A.layout={A.layout!r}, X.layout={X.layout!r}, "
        f"Y.layout={Y.layout!r}; supported: A split by whole rows, X split by rows exactly like "
        f"A and Y split by rows over the same axes (1d, 1d-aware), or everything replicated "
        f"(local); A = Layout(R, C) column slabs with X and Y = Layout(R) (15d-aware). 2D "
        f"and 3D layouts are not supported")


def _result(A, data):
    # A's pattern: the result keeps A's pattern-only plans (an SpMM with it builds nothing)
    return with_values(A, data)


def _sddmm_local(A, X, Y, semiring):
    be = A.backend
    return _result(A, be.sddmm(A.local, X.local, Y.local, semiring).data)


def _require_1d(A, X, Y, name):
    if not _is_1d(A, X, Y):
        raise LayoutMismatch(f"sddmm({name!r}): needs A split by whole rows, X split by rows "
                             f"exactly like A and Y split by rows over the same axes, but got "
                             f"A.layout={A.layout!r}, X.layout={X.layout!r}, Y.layout={Y.layout!r}")


def _sddmm_1d(A, X, Y, semiring):
    """Sparsity-oblivious: all-gather Y over the row axes, then the local kernel."""
    _require_1d(A, X, Y, "1d")
    comm = A.grid.comm(*A.layout.rows)
    be = A.backend
    counts = np.diff(np.asarray(Y.layout.offsets(Y.grid, Y.shape[0], 0)))
    y_full = comm.allgatherv(np.ascontiguousarray(be.to_host(Y.local)), counts,
                             label="sddmm-1d:allgather")
    return _result(A, be.sddmm(A.local, X.local, be.from_host(y_full), semiring).data)


def _sddmm_1d_aware(A, X, Y, semiring):
    """Sparsity-aware: the SpMM exchange plan brings exactly the rows of Y A's block names."""
    _require_1d(A, X, Y, "1d-aware")
    plan = ExchangePlan.for_spmm_1d(A, Y)
    comm = A.grid.comm(*A.layout.rows)
    be = A.backend
    y_ext = plan.exchange(comm, np.asarray(be.to_host(Y.local)), label="sddmm-1d-aware:exchange")
    # plan.compact has A's indptr and storage order with remapped columns: the
    # values come out in A's order.  Its data may be stale (a matrix made by
    # with_values shares the plan), so A's current values are used.
    c = plan.compact
    compact = LocalCSR(c.indptr, c.indices, A.local.data, c.shape, check=None)
    return _result(A, be.sddmm(compact, X.local, be.from_host(y_ext), semiring).data)


def _sddmm_15d_aware(A, X, Y, semiring):
    """1.5D column slabs: the ``15d-aware`` SpMM plan brings the rows of Y my slab names."""
    if _match_15d(A, X, Y) is None:
        raise LayoutMismatch(f"sddmm('15d-aware'): needs A = Layout(R, C) (column slabs over the "
                             f"replica axes), X split by rows exactly like A and Y = Layout(R), "
                             f"but got A.layout={A.layout!r}, X.layout={X.layout!r}, "
                             f"Y.layout={Y.layout!r}")
    R = A.layout.rows
    (_, _), (c0, c1) = A.layout.bounds(A.grid, A.shape)
    comm = A.grid.comm(*R)
    yoff = Y.layout.offsets(A.grid, Y.shape[0], 0)
    key = ("spmm-15d-aware", yoff, c0, c1)                # the 1.5D SpMM's plan
    plan = A.cache.get(key)
    if plan is None:
        plan = ExchangePlan.build(comm, A.local, c0, yoff, A.backend, label="spmm-15d-aware:plan")
        A.cache[key] = plan
    be = A.backend
    y_ext = plan.exchange(comm, np.asarray(be.to_host(Y.local)),
                          label="sddmm-15d-aware:exchange")
    c = plan.compact
    compact = LocalCSR(c.indptr, c.indices, A.local.data, c.shape, check=None)
    return _result(A, be.sddmm(compact, X.local, be.from_host(y_ext), semiring).data)


#: Every SDDMM algorithm by name.
SDDMM_ALGORITHMS = {"local": _sddmm_local, "1d": _sddmm_1d, "1d-aware": _sddmm_1d_aware,
                    "15d-aware": _sddmm_15d_aware}


def sddmm(A, X, Y, semiring=plus_times, *, algorithm=None):
    """``C[i, j] = A[i, j] (x) ((+)_k X[i, k] (x) Y[j, k])`` on A's pattern.

    Collective over the grid of A, X and Y.

    Parameters
    ----------
    A : DistSparseMatrix, shape (n, k)
    X : DistDenseMatrix, shape (n, d)
    Y : DistDenseMatrix, shape (k, d)
    semiring : Semiring or name (not ``row_mean``)
    algorithm : {"local", "1d", "1d-aware", "15d-aware"}, optional
        Chosen from the layouts when omitted (see the module docstring).

    Returns
    -------
    DistSparseMatrix with A's shape, layout, pattern and storage order.

    Raises
    ------
    TypeError, DimensionMismatch, GridMismatch, BackendMismatch, LayoutMismatch, ValueError
        On every rank, before any communication (all checks use what every
        rank knows).
    """
    semiring = _check(A, X, Y, semiring)
    if algorithm is None:
        algorithm = _select(A, X, Y)
    try:
        fn = SDDMM_ALGORITHMS[algorithm]
    except KeyError:
        raise ValueError(f"sddmm: unknown algorithm {algorithm!r}; expected one of "
                         f"{sorted(SDDMM_ALGORITHMS)}") from None
    if algorithm == "local" and not _is_local(A, X, Y):
        raise LayoutMismatch(f"sddmm('local'): needs a grid of size 1 or A, X and Y replicated, "
                             f"but got A.layout={A.layout!r}")
    return fn(A, X, Y, semiring)
