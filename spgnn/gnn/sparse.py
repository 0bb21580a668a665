"""Sparse input features: a dense matrix that also holds its local block in CSR.

Cora, CiteSeer and the MUSAE graphs have sparse binary features (Cora: 1.3 %
of 2708 x 1433 entries are non-zero).  Dropout on them and the first layer's
products ``X·W`` and ``Xᵀ·G`` then cost O(nnz) instead of O(n·d): the
counter-based mask is hashed only at the stored entries (the others are 0
before and after), and the products are sparse x dense.

:class:`SparseBackedMatrix` is a :class:`~spgnn.core.dist_dense.DistDenseMatrix`
(same shape, grid and layout), so any layer that reads ``H.local`` still gets
a dense block: it is made from the CSR block on first access and cached.  The
context helpers that know about it (:meth:`GraphContext.dropout
<spgnn.gnn.context.GraphContext.dropout>`, ``matmul``, ``weight_grad``) use the
CSR block instead.  Everything here is local.
"""

import numpy as np
import scipy.sparse as sp

from ..backends import get_backend
from ..core.dist_dense import DistDenseMatrix
from ..errors import DimensionMismatch
from ..local.csr import LocalCSR
from ..local.semiring import plus_times
from ..io import preprocess

__all__ = ["SparseBackedMatrix", "csr_times_dense", "csr_transpose_pattern",
           "SPARSE_DENSITY"]

#: ``DistGraph.from_graph(sparse_features=None)`` keeps a CSR copy of the
#: feature block when at most this fraction of the features is non-zero
#: (every rank decides from the global count, so all agree): the density
#: below which preprocessing works on features in CSR form too.
SPARSE_DENSITY = preprocess.SPARSE_DENSITY


def csr_times_dense(indptr, indices, data, shape, x, backend=None):
    """``A @ x`` for a CSR ``A`` given by its arrays; a new C-contiguous array. Local.

    The backend's ``plus_times`` SpMM (numba: the row-parallel kernel of the
    GNN hot path).  ``data`` and ``x`` must share a float dtype.
    """
    a = LocalCSR(indptr, indices, data, shape, check=None)
    return get_backend(backend).spmm(a, np.ascontiguousarray(x, dtype=data.dtype), plus_times)


def csr_transpose_pattern(csr):
    """``(indptr_T, indices_T, perm)`` with ``Aᵀ.data = A.data[perm]`` in CSR. Pure.

    The pattern of the dropped features never changes (dropped entries stay
    stored as zeros), so the transpose is computed once and each epoch only
    gathers ``data[perm]``.
    """
    m, k = csr.shape
    # Stable sort by column: entries of one column keep their row order, so
    # every row of Aᵀ has sorted (row) indices.
    order = np.argsort(csr.indices, kind="stable")
    rows = np.repeat(np.arange(m, dtype=csr.indices.dtype), np.diff(csr.indptr))
    counts = np.bincount(csr.indices, minlength=k)
    indptr_t = np.zeros(k + 1, dtype=csr.indptr.dtype)
    np.cumsum(counts, out=indptr_t[1:])
    return indptr_t, np.ascontiguousarray(rows[order]), order


class SparseBackedMatrix(DistDenseMatrix):
    """A :class:`DistDenseMatrix` whose local block is (also) a CSR matrix. Local.

    Parameters
    ----------
    csr : scipy.sparse.csr_array
        The local block, sorted indices, in the matrix's dtype.
    shape, grid, layout, backend
        As for :class:`DistDenseMatrix`.
    dense : ndarray, optional
        The dense local block when it already exists (the graph's features);
        otherwise it is made from ``csr`` on first access of ``local``.
    pattern_t : tuple, optional
        :func:`csr_transpose_pattern` of ``csr`` (shared by matrices with the
        same pattern, e.g. every epoch's dropped features).
    """

    def __init__(self, csr, shape, grid, layout, *, backend=None, dense=None, pattern_t=None):
        self.csr = csr
        self._pattern_t = pattern_t
        super().__init__(dense, shape, grid, layout, backend=backend, _checked=True)
        want = (self._r1 - self.row_start, self._c1 - self.col_start)
        if tuple(csr.shape) != want:
            raise DimensionMismatch(f"SparseBackedMatrix: rank {grid.rank} must hold a block of "
                                    f"shape {want} under {self.layout!r}, but got {csr.shape}")

    @property
    def _r1(self):
        return self.layout.bounds(self.grid, self.shape)[0][1]

    @property
    def _c1(self):
        return self.layout.bounds(self.grid, self.shape)[1][1]

    # ``DistDenseMatrix.__init__`` assigns ``self.local``; keep it lazy.
    @property
    def local(self):
        if self._dense is None:
            self._dense = self.csr.toarray()
        return self._dense

    @local.setter
    def local(self, value):
        self._dense = value

    @property
    def local_shape(self):
        return tuple(self.csr.shape)

    @property
    def dtype(self):
        return self.csr.dtype

    def pattern_t(self):
        """:func:`csr_transpose_pattern` of the local block (cached)."""
        if self._pattern_t is None:
            self._pattern_t = csr_transpose_pattern(self.csr)
        return self._pattern_t

    def with_data(self, data):
        """Same pattern, new values (a dropout of this matrix). Local."""
        c = self.csr
        new = sp.csr_array((data, c.indices, c.indptr), shape=c.shape)
        new.has_sorted_indices = True
        return SparseBackedMatrix(new, self.shape, self.grid, self.layout, backend=self.backend,
                                  pattern_t=self.pattern_t())

    def matmul_local(self, w):
        """``local @ w`` as a sparse x dense product. Local."""
        c = self.csr
        return csr_times_dense(c.indptr, c.indices, c.data, c.shape, w, self.backend)

    def t_matmul_local(self, g):
        """``localᵀ @ g`` through the cached transpose pattern. Local."""
        c = self.csr
        indptr_t, indices_t, perm = self.pattern_t()
        return csr_times_dense(indptr_t, indices_t, c.data[perm], (c.shape[1], c.shape[0]), g,
                               self.backend)

    def __repr__(self):
        return (f"SparseBackedMatrix(shape={self.shape}, dtype={self.dtype}, {self.layout!r}, "
                f"grid={self.grid!r}, local nnz={self.csr.nnz})")
