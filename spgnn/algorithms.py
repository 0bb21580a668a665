"""Graph algorithms written with the public GraphBLAS operations only (the proof they compose).

All are collective over the matrix's grid and take a square, symmetric
adjacency split by whole rows (``Layout("row")``, the ``1d`` mxm); vectors
are ``n x 1`` :class:`DistSparseMatrix` in the adjacency's row split.

* :func:`triangle_count` -- ``C<L> = L (+.pair) L`` with ``L = tril(A, -1)``
  (the masked SpGEMM never forms an entry outside ``L``), then the sum of ``C``.
* :func:`bfs_levels` -- frontier ``f``: ``f<~visited, replace> = fᵀA`` over
  ``any_first`` (each vertex takes a parent's level), then ``+1``.
* :func:`sssp` -- frontier Bellman-Ford over ``min_plus``: relax from the
  vertices whose distance improved in the previous round.  Weights must not
  be negative (checked: :class:`~spgnn.errors.InvalidWeight`), and at most n
  rounds run (a safety net: non-negative weights settle within n).
* :func:`pagerank` -- power iteration with the SpMM (``Aᵀ`` in A's layout,
  cached) and dangling mass spread uniformly, to an L1 tolerance; the result
  says whether it converged and the final residual.
"""

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .core.algebra import apply, ewise_add, ewise_mult, reduce_rows, reduce_scalar, select
from .core.dist_dense import DistDenseMatrix
from .core.dist_sparse import DistSparseMatrix
from .core.mxm import mxm, vxm
from .core.spmm import spmm
from .errors import DimensionMismatch, InvalidWeight, LayoutMismatch
from .layout import Layout
from .local.ops import register_binary_op, register_unary_op

__all__ = ["triangle_count", "bfs_levels", "sssp", "pagerank", "PageRankResult",
           "check_pagerank_options", "vector"]

_INCR = register_unary_op("spgnn_incr", lambda x: x + 1.0, ufunc=lambda x: x + 1.0)
_IMPROVE = register_binary_op("spgnn_improve", lambda x, y: x if x < y else np.inf)


def _check(op, A):
    if not isinstance(A, DistSparseMatrix):
        raise TypeError(f"{op}: A must be a DistSparseMatrix, but got {type(A).__name__}")
    if A.shape[0] != A.shape[1]:
        raise DimensionMismatch(f"{op}: A must be square, but got shape {A.shape}")
    if not A.layout.rows or A.layout.cols:
        raise LayoutMismatch(f"{op}: A must be split by whole rows (Layout('row')), but got "
                             f"{A.layout!r}")


def vector(A, index, value):
    """The ``n x 1`` sparse vector with ``value`` at ``index`` (a list), in A's row split.

    Collective; every rank passes the same arguments.
    """
    n = A.shape[0]
    index = np.asarray(index, dtype=np.int64).reshape(-1)
    vals = np.broadcast_to(np.asarray(value, dtype=np.float64), index.shape)
    v = sp.csr_array((vals, (index, np.zeros_like(index))), shape=(n, 1))
    return DistSparseMatrix.from_global(v, A.grid, Layout(A.layout.rows,
                                                          row_splits=A.layout.row_splits),
                                        backend=A.backend, check_same=False)


def triangle_count(A) -> int:
    """Number of triangles of the undirected graph A (symmetric, any values). Collective."""
    _check("triangle_count", A)
    L = select(A, "tril", -1)
    C = mxm(L, L, "plus_pair", mask=L.S)
    return int(round(reduce_scalar(C)))


def bfs_levels(A, source):
    """``(levels, n_reached)``: the n x 1 vector of BFS levels from ``source`` (0 at the source;
    unreached vertices have no entry). Collective."""
    _check("bfs_levels", A)
    if not 0 <= int(source) < A.shape[0]:
        raise DimensionMismatch(f"bfs_levels: source must be in [0, {A.shape[0]}), got {source}")
    f = vector(A, [source], 0.0)
    levels = f
    while f.nnz:
        f = vxm(f, A, "any_first", mask=~levels.S)
        f = apply(f, _INCR)
        levels = ewise_add(levels, f, "first")
    return levels


def sssp(A, source):
    """Shortest-path distances from ``source`` over A's values, as an n x 1 vector
    (unreachable vertices have no entry). Collective.

    Weights must be non-negative: a negative (or NaN) stored value raises
    :class:`~spgnn.errors.InvalidWeight` on every rank before any relaxation
    (one allreduce finds the smallest weight).  Non-negative weights settle
    within n rounds; a frontier still moving after n rounds raises
    ``InvalidWeight`` too (a safety net, never an endless loop).
    """
    _check("sssp", A)
    n = A.shape[0]
    if not 0 <= int(source) < n:
        raise DimensionMismatch(f"sssp: source must be in [0, {n}), got {source}")
    # both checks below decide on global values (an all-reduced minimum, the global nnz),
    # so every rank raises together: marked agreed, a command reports it once
    world = A.grid.world
    lowest = reduce_scalar(A, "min")
    if not lowest >= 0:   # NaN fails too
        world.raise_together(InvalidWeight(
            f"sssp: weights must be non-negative (Bellman-Ford over min_plus never settles on "
            f"a negative cycle), but the smallest is {lowest!r}"))
    d = vector(A, [source], 0.0)
    f = d
    rounds = 0
    while f.nnz:
        if rounds == n:
            world.raise_together(InvalidWeight(f"sssp: distances still change after {n} rounds "
                                               f"(n); non-negative weights settle within n"))
        rounds += 1
        t = vxm(f, A, "min_plus")
        new = apply(t, "identity", mask=~d.S)                           # first reached
        better = select(ewise_mult(t, d, _IMPROVE), "valuelt", np.inf)  # improved
        f = ewise_add(new, better, "min")
        d = ewise_add(d, t, "min")
    return d


@dataclass(frozen=True)
class PageRankResult:
    """What :func:`pagerank` returns.

    ``rank``: the DistDenseMatrix n x 1 (split like A's rows); ``iterations``
    run; ``converged``: whether the L1 change of the last iteration fell below
    ``tol`` (False when ``max_iter`` ran out first); ``residual``: that L1
    change (the same on every rank).
    """

    rank: DistDenseMatrix
    iterations: int
    converged: bool
    residual: float


def check_pagerank_options(alpha, tol, max_iter):
    """Raise ``ValueError`` naming the parameter unless ``0 < alpha < 1``, ``tol`` is finite
    and ``> 0`` and ``max_iter`` is an integer ``>= 1``. Local (every rank checks the same
    arguments, so every rank raises together, before any collective)."""
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        a = math.nan
    if not 0 < a < 1:
        raise ValueError(f"pagerank: alpha (the damping factor) must be in (0, 1), but got "
                         f"{alpha!r}")
    try:
        t = float(tol)
    except (TypeError, ValueError):
        t = math.nan
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"pagerank: tol (the L1 tolerance) must be a finite number > 0, but "
                         f"got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"pagerank: max_iter must be an integer >= 1, but got {max_iter!r}")


def pagerank(A, alpha=0.85, tol=1e-9, max_iter=200) -> PageRankResult:
    """PageRank of the graph A (row i's entries are i's out-edges): a :class:`PageRankResult`
    (the rank as a DistDenseMatrix n x 1 split like A's rows, the iterations, whether it
    converged, the final L1 residual); dangling vertices spread their rank uniformly.
    Collective.

    A's values weight the edges: a vertex passes its rank on in proportion
    to its out-edges' weights (networkx's weighted PageRank; unit weights give
    the unweighted one), and a vertex whose out-weights sum to 0 is dangling.
    ``alpha`` must lie in (0, 1), ``tol`` be finite and > 0, ``max_iter`` >= 1
    (``ValueError`` naming the parameter, on every rank before any collective);
    a negative or NaN weight raises :class:`~spgnn.errors.InvalidWeight` on
    every rank (one allreduce finds the smallest), as the walk would then
    diverge.
    """
    check_pagerank_options(alpha, tol, max_iter)
    _check("pagerank", A)
    n = A.shape[0]
    comm = A.grid.comm(*A.layout.rows)
    lowest = reduce_scalar(A, "min")
    if not lowest >= 0:   # NaN fails too; an all-reduced value, so every rank raises together
        A.grid.world.raise_together(InvalidWeight(
            f"pagerank: weights must be non-negative (a negative out-weight is no random walk "
            f"and the ranks diverge), but the smallest is {lowest!r}"))
    deg = np.asarray(A.backend.to_host(reduce_rows(A).local))[:, 0]
    AT = A.transposed()
    lay = Layout(A.layout.rows, row_splits=A.layout.row_splits)
    r = np.full((A.local_shape[0], 1), 1.0 / max(n, 1))
    it, err = 0, math.inf
    for it in range(1, max_iter + 1):
        contrib = np.where(deg > 0, r[:, 0] / np.where(deg > 0, deg, 1), 0.0)
        dangling = comm.allreduce(np.array([r[deg == 0, 0].sum()]), label="pagerank")[0]
        X = DistDenseMatrix(A.backend.from_host(contrib.reshape(-1, 1)), (n, 1), A.grid, lay,
                            backend=A.backend)
        y = np.asarray(A.backend.to_host(spmm(AT, X).local))
        new = alpha * (y + dangling / n) + (1 - alpha) / n
        err = comm.allreduce(np.array([np.abs(new - r).sum()]), label="pagerank")[0]
        r = new
        if err < tol:
            break
    rank = DistDenseMatrix(A.backend.from_host(r), (n, 1), A.grid, lay, backend=A.backend)
    return PageRankResult(rank, it, bool(err < tol), float(err))
