"""1.5D distributed SpMM: block rows replicated ``c`` times, columns split over the replicas.

Mukhopadhyay, Tripathy, Selvitopi, Yelick, Buluç, *Sparsity-Aware
Communication for Distributed GNN Training* (ICPP'24), §2.2, §2.5-2.6 of
``research/000_sparsity_aware.md`` (CAGNET's 1.5D baseline and the corrected
Algorithm 2).

Data distribution (P ranks on a ``k x c`` grid, ``k = P / c``)::

                     "layer" (c replicas) ->
                  j = 0                j = 1
    "row"   i=0 | A[V_0, C_0]  H_0   | A[V_0, C_1]  H_0   |   A: block row V_i of the k-way
     (k)    i=1 | A[V_1, C_0]  H_1   | A[V_1, C_1]  H_1   |      partition, column slab C_j
            ...                                               X: block row H_i = X[V_i], replicated
                                                                 over "layer"
    Z_i = (+)_j  A[V_i, C_j] (x) X[C_j]        (all-reduce over "layer", c ranks)

* ``A.layout = Layout(R, C, row_splits=V, col_splits=S)`` -- rows over the
  *row axes* ``R`` (k block rows), columns over the *replica axes* ``C``.
  Replica ``j`` owns the column slab ``S_j`` and computes only
  ``A[V_i, S_j] (x) X[S_j]``; the slabs partition the columns, so the
  diagonal block is computed by exactly one replica (report §2.6).
  ``A.layout = Layout(R)`` (whole block rows on every replica, the paper's
  literal distribution) is accepted too: replica ``j`` then takes the slab
  made of the X blocks ``Q_j = block_bounds(k, c, j)`` (cut once, cached).
* ``X.layout = Layout(R, row_splits=V')`` -- replicated over ``C``.
* ``Y.layout = Layout(R, row_splits=V)`` -- the all-reduce leaves the result
  replicated over ``C``, i.e. in X's layout when ``V' = V``: 1.5D layers chain
  without redistribution.

Inside one process column (the ranks sharing replica index ``j``,
communicator ``grid.comm(*R)``), the rows of ``X[S_j]`` that rank ``i`` needs
come from their owners ``P(q, j)``:

* ``15d-aware`` (Algorithm 2, corrected): only the rows ``NnzCols(i, q)``
  of ``H_q`` inside the slab, through one alltoallv planned once per matrix
  (:class:`~spgnn.core.exchange.ExchangePlan`, cached in ``A.cache``).  Summed
  over all ranks this moves exactly ``Σ_v λ_v`` rows of the k-way partition:
  the 1D volume for ``P/c`` parts (report §3.2), whatever the slab split.
* ``15d`` (CAGNET's oblivious baseline, report §2.5): for each block ``q``
  overlapping the slab, ``P(q, j)`` broadcasts its whole piece
  ``H_q ∩ S_j`` in the column (one broadcast per stage).

Corrections to the paper applied here (report §2.6, appendix errata):
Algorithm 2 sends ``H_q[NnzCols(l, q)]`` (the paper writes ``NnzCols(l, j)``),
the send loop runs over ``l ∈ [0, P/c), l ≠ q``, and Eq. (3)'s stage range
is ``[j·s, (j+1)·s − 1]``.  We generalise the stage split: ``s = P/c²``
stages with the artifact's remainder-to-the-last-column rule is replaced by
``block_bounds(k, c, j)`` (identical when ``c² | P``, balanced otherwise,
and defined when ``k < c``), or by any explicit column split of A.  The
paper's T_comm omits the all-reduce; the ledger records it (ring model,
``2·(c−1)·n_i·f`` elements summed over a row group).
"""

import numpy as np

from ..errors import LayoutMismatch
from ..layout import Layout, block_bounds
from ..local.alloc import empty as empty_output
from ..local.semiring import partial_semiring
from .exchange import ExchangePlan
from .spmm_common import finish_partials, row_split_result

__all__ = ["layouts_15d", "spmm_15d", "spmm_15d_aware", "match_15d", "slab_bounds"]

SUPPORTED = ("A = Layout(R, C) (rows over the row axes R, columns over the replica axes C) or "
             "Layout(R) (whole block rows replicated over C), with X = Layout(R) (rows over the "
             "same axes, replicated, not partial); e.g. on grid_15d(c): "
             "A = Layout('row', 'layer'), X = Layout('row')")


def _grid_order(grid, axes):
    return tuple(a for a in grid.axis_names if a in axes) == tuple(axes)


def match_15d(A, X):
    """``(R, C)`` if ``(A, X)`` have a 1.5D layout pair, else ``None``. Local.

    ``C`` is A's column axes, or (when A holds whole rows) every grid axis
    that is not in ``R``; both must be listed in grid order so that a
    sub-communicator's rank is the block index.
    """
    la, lx, grid = A.layout, X.layout, A.grid
    R = la.rows
    if not R or lx.rows != R or lx.cols or lx.partial or not _grid_order(grid, R):
        return None
    C = la.cols if la.cols else tuple(a for a in grid.axis_names if a not in R)
    if not _grid_order(grid, C):
        return None
    return R, C


def require_15d(A, X, name):
    """``(R, C)`` or LayoutMismatch naming the supported layouts. Local."""
    got = match_15d(A, X)
    if got is None:
        raise LayoutMismatch(f"spmm({name!r}): unsupported layouts A.layout={A.layout!r}, "
                             f"X.layout={X.layout!r}; supported: {SUPPORTED} (split axes in grid "
                             f"order)")
    return got


def layouts_15d(grid, n, k=None, row_splits=None, x_row_splits=None, col_splits=None,
                rows="row", layer="layer"):
    """The canonical 1.5D layouts ``(A_layout, X_layout)`` on a ``(rows, layer)`` grid. Local.

    Parameters
    ----------
    grid : ProcessGrid or AbstractGrid
    n, k : int
        A is ``n x k`` (``k`` defaults to ``n``), X is ``k x f``.
    row_splits : sequence of int, optional
        The k-way (``k = P/c``) partition of A's rows (e.g. from a graph
        partitioner); default even.
    x_row_splits : sequence of int, optional
        X's row partition; defaults to ``row_splits`` when ``k == n``.
    col_splits : sequence of int, optional
        A's column slabs over ``layer``; default: slab ``j`` is the union of
        X blocks ``block_bounds(P/c, c, j)`` (report §2.5, ``Q_j``).
    """
    k = n if k is None else k
    if x_row_splits is None and k == n:
        x_row_splits = row_splits
    xl = Layout(rows, row_splits=x_row_splits)
    nb = xl.parts(grid, 0)
    c = grid.axis_size(layer)
    if col_splits is None:
        xoff = xl.offsets(grid, k, 0)
        col_splits = tuple(xoff[block_bounds(nb, c, j)[0]] for j in range(c)) + (int(k),)
    return Layout(rows, layer, row_splits=row_splits, col_splits=col_splits), xl


def slab_bounds(A, X, R, C):
    """``(c0, c1)``: the column slab of A that my replica multiplies. Local."""
    grid = A.grid
    if A.layout.cols:
        return A.layout.bounds(grid, A.shape)[1]
    xoff = X.layout.offsets(grid, X.shape[0], 0)
    k = len(xoff) - 1
    c = 1
    j = 0
    for a in C:
        c *= grid.axis_size(a)
        j = j * grid.axis_size(a) + grid.axis_index(a)
    q0, q1 = block_bounds(k, c, j)
    return xoff[q0], xoff[q1]


def _slab(A, c0, c1):
    """My block of A restricted to columns ``[c0, c1)`` (local column ids), cached."""
    if A.layout.cols:
        return A.local
    key = ("spmm-15d:slab", c0, c1)
    got = A.cache.get(key)
    if got is None:
        cols = np.arange(c0 - A.col_start, c1 - A.col_start, dtype=np.int64)
        got = A.backend.extract_cols(A.local, A.backend.from_host(cols))
        A.cache[key] = got
    return got


def _finish(A, X, C, y, semiring, local, c0, c1):
    """All-reduce the partial products over the replica axes and wrap the result."""
    comm = A.grid.comm(*C) if C else None
    y = finish_partials(A, local, y, semiring, comm, "spmm-15d", ("spmm-15d:rowcounts", c0, c1),
                        count_comm=comm)
    return row_split_result(A, X, y)


def spmm_15d_aware(A, X, semiring):
    """Sparsity-aware 1.5D SpMM (corrected Algorithm 2 of the ICPP'24 paper).

    Collective: over the grid.  The first call plans over the row axes
    (cached in ``A.cache``); every call does one alltoallv over the row axes
    and one all-reduce (the semiring's add monoid) over the replica axes.
    """
    R, C = require_15d(A, X, "15d-aware")
    c0, c1 = slab_bounds(A, X, R, C)
    local = _slab(A, c0, c1)
    comm = A.grid.comm(*R)
    xoff = X.layout.offsets(A.grid, X.shape[0], 0)
    key = ("spmm-15d-aware", xoff, c0, c1)
    plan = A.cache.get(key)
    if plan is None:
        plan = ExchangePlan.build(comm, local, c0, xoff, A.backend, label="spmm-15d-aware:plan")
        A.cache[key] = plan
    be = A.backend
    x_ext = plan.exchange(comm, X.local, label="spmm-15d-aware:exchange", xp=be.xp)
    y = be.spmm(plan.compact, x_ext, partial_semiring(semiring))
    return _finish(A, X, C, y, semiring, local, c0, c1)


def spmm_15d(A, X, semiring):
    """Sparsity-oblivious 1.5D SpMM (CAGNET's baseline, report §2.5).

    Collective: over the grid.  In process column ``j``, one broadcast per X
    block ``q`` overlapping the slab (root ``P(q, j)``, its whole piece of
    the slab; empty pieces are skipped, every rank knows their sizes), then
    one all-reduce over the replica axes.
    """
    R, C = require_15d(A, X, "15d")
    c0, c1 = slab_bounds(A, X, R, C)
    local = _slab(A, c0, c1)
    comm = A.grid.comm(*R)
    be = A.backend
    xoff = X.layout.offsets(A.grid, X.shape[0], 0)
    xl, xp = X.local, be.xp                  # a device block: the bcasts move device rows
    f = X.shape[1]
    # the SpMM operand: cache-line aligned on the host
    slab = empty_output((c1 - c0, f), xl.dtype) if xp is np else xp.empty((c1 - c0, f), xl.dtype)
    for q in range(len(xoff) - 1):            # stage t of Algorithm 2's outer loop
        a0, a1 = max(xoff[q], c0), min(xoff[q + 1], c1)
        if a1 <= a0:
            continue
        if q == comm.rank:
            piece = xp.ascontiguousarray(xl[a0 - xoff[q]:a1 - xoff[q]])
        else:
            piece = xp.empty((a1 - a0, f), dtype=xl.dtype)
        slab[a0 - c0:a1 - c0] = comm.bcast(piece, root=q, label="spmm-15d:bcast")
    y = be.spmm(local, slab, partial_semiring(semiring))
    return _finish(A, X, C, y, semiring, local, c0, c1)
