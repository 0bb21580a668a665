"""``Aᵀ·G`` for a row-split A, by running A's ``1d-aware`` exchange plan backwards.

The backward of the ``1d-aware`` SpMM ``Y = A·X`` (and of GAT's
aggregation with attention values that change every step) needs
``dX = Aᵀ·dY``.  :func:`spmm` with ``transpose_a=True`` redistributes ``Aᵀ``
once and caches it, which suits a fixed matrix; for a matrix whose values
change each step that redistribution would run every time.  Here each rank
instead multiplies its own block transposed, ``A_rᵀ·dY_r``, which yields
contributions to its own rows of ``dX`` and to the remote rows its block
touched (exactly the rows the forward plan brought in), and sends those
back to their owners, who add them.  One alltoallv, the forward exchange
reversed: rank ``r`` *sends* ``λ_r·f`` elements (label
``spmm-t-1d-aware:exchange``).

Only ``plus_times`` (a gradient is a sum).
"""

import numpy as np

from ..errors import LayoutMismatch
from ..layout import Layout
from ..local.csr import LocalCSR
from ..local.semiring import plus_times
from ._dist_common import check_product
from .dist_dense import DistDenseMatrix
from .dist_sparse import DistSparseMatrix
from .exchange import ExchangePlan

__all__ = ["spmm_transpose"]


def spmm_transpose(A, G, out_layout=None):
    """``Aᵀ·G`` (plus_times) for A split by whole rows and G split by rows like A.

    Collective over A's row axes (one alltoallv; the first call for a pattern
    builds the exchange plan, shared with the ``1d-aware`` SpMM and SDDMM).

    Parameters
    ----------
    A : DistSparseMatrix, shape (n, k), ``Layout(R)`` (or replicated / one rank)
    G : DistDenseMatrix, shape (n, f), split by rows exactly like A
    out_layout : Layout, optional
        Row split of the result over R (default: A's row layout; A square).

    Returns
    -------
    DistDenseMatrix (k, f) in ``out_layout``.
    """
    if not isinstance(A, DistSparseMatrix) or not isinstance(G, DistDenseMatrix):
        raise TypeError("spmm_transpose: expected a DistSparseMatrix and a DistDenseMatrix")
    check_product("spmm_transpose", ("Aᵀ", "G"), _Shape(A), G,
                  "(n,k)ᵀ,(n,f)->(k,f)")
    grid, be = A.grid, A.backend
    n, k = A.shape
    la = A.layout
    if out_layout is None:
        out_layout = Layout(la.rows, row_splits=la.row_splits if n == k else None)
    if grid.size == 1 or not (la.rows or la.cols or G.layout.rows or G.layout.cols):
        y = be.spmm(be.transpose(A.local), G.local, plus_times)
        return DistDenseMatrix(y, (k, G.shape[1]), grid, out_layout, backend=be)
    same_rows = (not la.cols and G.layout.rows == la.rows and not G.layout.cols
                 and not G.layout.partial
                 and tuple(G.layout.offsets(grid, n, 0)) == tuple(la.offsets(grid, n, 0))
                 and out_layout.rows == la.rows and not out_layout.cols)
    if not same_rows:
        raise LayoutMismatch(f"spmm_transpose: needs A split by whole rows, G split by rows "
                             f"exactly like A and the result split by rows over the same axes, "
                             f"but got A.layout={A.layout!r}, G.layout={G.layout!r}, "
                             f"out_layout={out_layout!r}")
    offsets = np.asarray(out_layout.offsets(grid, k, 0), dtype=np.int64)
    plan = ExchangePlan.for_row_split(A, tuple(int(o) for o in offsets))
    comm = grid.comm(*la.rows)
    me = comm.rank
    n_own = int(offsets[me + 1] - offsets[me])
    c = plan.compact
    block = LocalCSR(c.indptr, c.indices, A.local.data, c.shape, check=None)
    y_ext = np.asarray(be.to_host(be.spmm(be.transpose(block), G.local, plus_times)))
    own = np.array(y_ext[:n_own])
    width = int(np.prod(y_ext.shape[1:], dtype=np.int64))
    got = comm.alltoallv(np.ascontiguousarray(y_ext[n_own:]), plan.recv_counts, plan.send_counts,
                         label="spmm-t-1d-aware:exchange",
                         split=plan.max_rows * width > comm.max_count)
    if got.shape[0]:
        np.add.at(own, plan.send_rows, got)
    return DistDenseMatrix(be.from_host(own), (k, G.shape[1]), grid, out_layout, backend=be)


class _Shape:
    """Aᵀ's shape and grid for the shared operand checks (no transpose is built)."""

    def __init__(self, A):
        self.shape, self.grid, self.backend = A.shape[::-1], A.grid, A.backend
