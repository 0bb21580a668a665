"""``DistSparseMatrix``: a local :class:`LocalCSR` block plus global metadata.

Constructors and operations are collective over the grid; properties are
local and never communicate.  Column indices of the local block are local
(offset by ``col_start``).
"""

import numpy as np
import scipy.sparse as sp

from ..backends import get_backend
from ..errors import DimensionMismatch, DTypeError, InvalidSparseStructure, LayoutMismatch
from ..layout import Layout
from ..local.csr import VALUE_DTYPES, LocalCSR
from ..local.ops import Mask
from . import dispatch
from .expr import Expr, Region, Target, _split_key
from ._dist_common import (as_layout, check_grid, check_shape, fingerprint, primary_owners,
                           same_on_every_rank, transfer_rects)

__all__ = ["DistSparseMatrix"]


def _index_dtype(*extents):
    return np.int32 if max(extents, default=0) < np.iinfo(np.int32).max else np.int64


def _block_csr(a, r0, r1, c0, c1, backend) -> LocalCSR:
    blk = a[r0:r1][:, c0:c1] if (c0, c1) != (0, a.shape[1]) else a[r0:r1]
    blk = sp.csr_array(blk)
    idt = _index_dtype(blk.shape[0], blk.shape[1], blk.nnz)
    data = blk.data if blk.data.dtype in VALUE_DTYPES else blk.data.astype(np.float64)
    xp = backend.from_host
    return LocalCSR(xp(blk.indptr.astype(idt)), xp(blk.indices.astype(idt)), xp(data), blk.shape)


def _summed(a):
    """``a`` (a scipy CSR array) with duplicate entries summed and indices sorted:
    the one rule every constructor applies.  A copy when ``a`` is not canonical."""
    if a.has_canonical_format:
        return a
    a = a.copy()
    a.sum_duplicates()
    return a


def _csr_from_coo(rows, cols, vals, shape, dtype, backend) -> LocalCSR:
    m = sp.csr_array((vals.astype(dtype, copy=False), (rows, cols)), shape=shape)
    m.sum_duplicates()
    m.sort_indices()
    idt = _index_dtype(shape[0], shape[1], m.nnz)
    xp = backend.from_host
    return LocalCSR(xp(m.indptr.astype(idt)), xp(m.indices.astype(idt)), xp(m.data), shape)


class DistSparseMatrix:
    """A sparse matrix placed on a :class:`~spgnn.grid.ProcessGrid` by a :class:`Layout`.

    Attributes (local, free): ``shape`` (global), ``local`` (this rank's
    :class:`LocalCSR`), ``layout``, ``grid``, ``row_start``, ``col_start``,
    ``local_shape``, ``dtype``, ``backend``, ``nnz`` (global, counted once
    at construction), ``local_nnz``.
    """

    def __init__(self, local, shape, grid, layout, *, nnz, backend=None):
        self.grid = grid
        self.layout = as_layout(layout)
        self.shape = check_shape(shape)
        self.backend = get_backend(backend)
        self.local = local
        self.nnz = int(nnz)
        (self.row_start, _), (self.col_start, _) = self.layout.bounds(grid, self.shape)
        self._cache = {}

    # -- properties ------------------------------------------------------------------
    @property
    def local_shape(self):
        return self.local.shape

    @property
    def local_nnz(self):
        return self.local.nnz

    @property
    def dtype(self):
        return self.local.dtype

    @property
    def cache(self) -> dict:
        """Per-matrix cache for plans built from its pattern (e.g. SpMM exchange plans)."""
        return self._cache

    def __repr__(self):
        return (f"DistSparseMatrix(shape={self.shape}, nnz={self.nnz}, dtype={self.dtype}, "
                f"{self.layout!r}, grid={self.grid!r}, local_shape={self.local_shape})")

    # -- construction (collective) ---------------------------------------------------
    @staticmethod
    def _check_layout(op, grid, layout, shape):
        check_grid(op, grid)
        layout = as_layout(layout).check(grid, shape)
        if layout.partial:
            raise LayoutMismatch(f"{op}: sparse matrices cannot hold partial sums, but got {layout!r}")
        return layout

    @classmethod
    def _finish(cls, local, shape, grid, layout, backend):
        axes = tuple(a for a in grid.axis_names if a in set(layout.rows) | set(layout.cols))
        if axes:
            nnz = int(grid.comm(*axes).allreduce(np.array([local.nnz], dtype=np.int64),
                                                 label="nnz")[0])
        else:
            nnz = local.nnz
        return cls(local, shape, grid, layout, nnz=nnz, backend=backend)

    @classmethod
    def from_global(cls, a, grid, layout=Layout("row"), *, backend=None, root=None,
                    check_same=True):
        """Place a global scipy sparse matrix (or a dense array).

        Collective.  With ``root=None`` every rank passes the same ``a`` and
        slices its block; ``check_same`` (default) first compares a
        fingerprint of every rank's ``a`` (shape, dtype, CRC-32 of its arrays:
        one pass over them and one small all-gather) and raises
        :class:`~spgnn.errors.RankMismatch` on every rank if one differs,
        rather than give each rank another matrix; ``check_same=False``
        skips it when the caller knows the inputs are equal.  With
        ``root=r`` only rank ``r`` needs ``a``; its nonzeros are scattered
        with one alltoallv of coordinates and values.

        Duplicate entries (equal row and column) are summed, as in every
        constructor of this class (``from_local`` too), so a semiring other
        than plus-times sees one entry per position whichever way the matrix
        was built; the caller's arrays are not modified.

        Examples
        --------
        On one process, a grid over a solo communicator (under ``mpiexec``:
        ``grid_1d()``, every rank running the same lines):

        >>> import numpy as np, scipy.sparse as sp
        >>> from spgnn import DistSparseMatrix, Layout, grid_1d
        >>> from spgnn.comm import solo_communicator
        >>> grid = grid_1d(solo_communicator())
        >>> a = sp.csr_array(np.array([[0., 1, 0], [2, 0, 3], [0, 0, 4]]))
        >>> A = DistSparseMatrix.from_global(a, grid, Layout("row"), backend="numpy")
        >>> A.shape, A.nnz
        ((3, 3), 4)
        >>> A.to_global().toarray()
        array([[0., 1., 0.],
               [2., 0., 3.],
               [0., 0., 4.]])
        """
        be = get_backend(backend)
        comm = grid.world if hasattr(grid, "world") else None
        if root is None:
            a = _summed(cls._as_scipy(a))
            if check_same and comm is not None and comm.size > 1:
                same_on_every_rank(comm, fingerprint(a.indptr, a.indices, a.data) + (a.shape,),
                                   "DistSparseMatrix.from_global(root=None)", "matrix")
            layout = cls._check_layout("DistSparseMatrix.from_global", grid, layout, a.shape)
            (r0, r1), (c0, c1) = layout.bounds(grid, a.shape)
            return cls._finish(_block_csr(a, r0, r1, c0, c1, be), a.shape, grid, layout, be)
        check_grid("DistSparseMatrix.from_global", grid)
        meta = None
        if comm.rank == root:
            try:
                a = cls._as_scipy(a).tocoo()
                meta = (a.shape, a.dtype.str, None)
            except (TypeError, ValueError) as exc:
                meta = (None, None, f"{type(exc).__name__}: {exc}")
        meta = comm.bcast_obj(meta, root=root, label="from_global:meta")
        if meta[2] is not None:
            raise InvalidSparseStructure(f"DistSparseMatrix.from_global: root {root} failed: {meta[2]}")
        shape, dtype = tuple(meta[0]), np.dtype(meta[1])
        layout = cls._check_layout("DistSparseMatrix.from_global", grid, layout, shape)
        coo = (a.row, a.col, a.data) if comm.rank == root else None
        local = _scatter_coo(grid, layout, shape, dtype, coo, root, be)
        return cls._finish(local, shape, grid, layout, be)

    @staticmethod
    def _as_scipy(a):
        if sp.issparse(a):
            a = sp.csr_array(a)
        else:
            arr = np.asarray(a)
            if arr.ndim != 2:
                raise DimensionMismatch(f"DistSparseMatrix.from_global: expected a 2-D matrix, "
                                        f"but got ndim={arr.ndim}")
            a = sp.csr_array(arr)
        if a.dtype.kind not in "fiub":
            raise DTypeError(f"DistSparseMatrix.from_global: expected a numeric matrix, but got {a.dtype}")
        if a.dtype not in VALUE_DTYPES:
            a = a.astype(np.float64)
        return a

    @classmethod
    def from_local(cls, local, shape, grid, layout=Layout("row"), *, backend=None, check="full"):
        """Wrap blocks each rank already holds (local column indices).

        Collective: every rank validates its block (``check="full"`` runs the
        O(nnz) checks) and the ranks agree before anyone raises, so a
        malformed block on one rank raises the same error type on all ranks.
        Duplicate entries of a block are summed (and its indices sorted) into a
        new block, as ``from_global`` does; a block already in canonical form is
        kept as given (one O(nnz) check on the host).
        """
        check_grid("DistSparseMatrix.from_local", grid)
        shape = check_shape(shape)
        layout = cls._check_layout("DistSparseMatrix.from_local", grid, layout, shape)
        err = None
        try:
            if sp.issparse(local):
                local = LocalCSR.from_scipy(local, check=None)
            if not isinstance(local, LocalCSR):
                raise TypeError(f"DistSparseMatrix.from_local: expected a LocalCSR or scipy matrix, "
                                f"but got {type(local).__name__}")
            local.check(full=(check == "full"))
            (r0, r1), (c0, c1) = layout.bounds(grid, shape)
            if local.shape != (r1 - r0, c1 - c0):
                raise DimensionMismatch(
                    f"DistSparseMatrix.from_local: rank {grid.rank} at coords {grid.coords} must hold "
                    f"a block of shape {(r1 - r0, c1 - c0)} under {layout!r}, but got {local.shape}")
        except (ValueError, TypeError) as exc:
            err = exc
        grid.world.agree(err)
        same_on_every_rank(grid.world, (shape, layout), "DistSparseMatrix.from_local",
                           "global shape and layout")
        be = get_backend(backend)
        host = local.to_scipy()
        if not host.has_canonical_format:
            host = _summed(host)
            local = LocalCSR(be.from_host(host.indptr.astype(local.index_dtype)),
                             be.from_host(host.indices.astype(local.index_dtype)),
                             be.from_host(host.data), host.shape)
        return cls._finish(local, shape, grid, layout, be)

    # -- collective operations -----------------------------------------------------------
    def _coo_host(self):
        loc = self.local.to_scipy().tocoo()
        return (loc.row.astype(np.int64) + self.row_start, loc.col.astype(np.int64) + self.col_start,
                loc.data)

    def redistribute(self, layout) -> "DistSparseMatrix":
        """Move to another layout. Collective: an alltoallv of coordinates and one of values."""
        layout = self._check_layout("redistribute", self.grid, layout, self.shape)
        if layout == self.layout:
            return self
        grid, comm = self.grid, self.grid.world
        rects = transfer_rects(grid.abstract(), self.shape, self.layout, layout)
        rows, cols, vals = self._coo_host()
        me = comm.rank
        parts, counts = [], np.zeros(comm.size, dtype=np.int64)
        for d in range(comm.size):
            rect = rects.get((me, d))
            if rect is None:
                continue
            (a0, a1), (b0, b1) = rect
            sel = np.flatnonzero((rows >= a0) & (rows < a1) & (cols >= b0) & (cols < b1))
            parts.append(sel)
            counts[d] = sel.size
        sel = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        local = _exchange_coo(comm, grid, layout, self.shape, self.dtype,
                              rows[sel], cols[sel], vals[sel], counts, self.backend, "redistribute")
        return DistSparseMatrix(local, self.shape, grid, layout, nnz=self.nnz, backend=self.backend)

    def to_global(self, root=None):
        """Gather into a ``scipy.sparse.csr_array``. Collective.

        On every rank (``root=None``) or on ``root`` only (others get ``None``).
        """
        grid, comm = self.grid, self.grid.world
        owners = primary_owners(grid, self.layout)
        rows, cols, vals = self._coo_host()
        if comm.rank not in owners:
            rows, cols, vals = rows[:0], cols[:0], vals[:0]
        if root is None:
            got = comm.allgatherv(np.stack([rows, cols], axis=1), label="to_global:coords")
            gv = comm.allgatherv(vals, label="to_global:values")
        else:
            counts = np.zeros(comm.size, dtype=np.int64)
            counts[root] = rows.size
            got = comm.alltoallv(np.stack([rows, cols], axis=1), counts, label="to_global:coords")
            gv = comm.alltoallv(vals, counts, label="to_global:values")
            if comm.rank != root:
                return None
        out = sp.csr_array((gv, (got[:, 0], got[:, 1])), shape=self.shape)
        out.sort_indices()
        return out

    def transpose(self) -> "DistSparseMatrix":
        """The transpose with the transposed layout. Local: no communication."""
        t = self.backend.transpose(self.local)
        return DistSparseMatrix(t, self.shape[::-1], self.grid, self.layout.T, nnz=self.nnz,
                                backend=self.backend)

    @property
    def T(self):
        return self.transpose()

    def transposed(self) -> "DistSparseMatrix":
        """``Aᵀ`` placed in *this* matrix's layout (A square), built once and cached.

        Collective the first time (one :meth:`redistribute`); later calls are
        local.  Backward passes multiply by ``Aᵀ`` in the forward layout, and
        the transposed matrix caches its own exchange plans, so each plan is
        built once per matrix and once for its transpose.
        """
        got = self._cache.get("transposed")
        if got is None:
            if self.shape[0] != self.shape[1]:
                raise DimensionMismatch(f"transposed: A must be square to keep its layout, "
                                        f"but got shape {self.shape}")
            got = self.transpose().redistribute(self.layout)
            self._cache["transposed"] = got
        return got

    # -- GraphBLAS expressions (evaluated by ``<<`` or ``.new()``; see spgnn.core.expr) ----
    @property
    def S(self) -> Mask:
        """This matrix as a structural mask (its stored entries); ``~A.S`` complements."""
        return Mask(self, structure=True)

    @property
    def V(self) -> Mask:
        """This matrix as a value mask (its non-zero entries)."""
        return Mask(self, structure=False)

    def __call__(self, mask=None, accum=None, replace=False) -> Target:
        """``C(mask=M.S, accum="plus", replace=True) << expr`` writes ``expr`` into C."""
        return Target(self, mask, accum, replace)

    def __lshift__(self, expr):
        """``C << expr``: evaluate into C (no mask, no accum). Collective."""
        return Target(self) << expr

    def __getitem__(self, key) -> Region:
        """``C[rows, cols]``: ``<< A`` assigns into the region, ``.new()`` extracts it."""
        rows, cols = _split_key(key)
        return Region(self, rows, cols)

    def mxm(self, other, semiring="plus_times", *, algorithm=None) -> Expr:
        """``self (+).(x) other`` (sparse x sparse; :func:`spgnn.core.mxm.mxm`), deferred."""
        return Expr("mxm", self, other, semiring, algorithm=algorithm)

    def mxv(self, v, semiring="plus_times") -> Expr:
        """``self (+).(x) v`` for an ``n x 1`` sparse vector, deferred."""
        return Expr("mxv", self, v, semiring)

    def ewise_add(self, other, op="plus") -> Expr:
        return Expr("ewise_add", self, other, op)

    def ewise_mult(self, other, op="times") -> Expr:
        return Expr("ewise_mult", self, other, op)

    def apply(self, op) -> Expr:
        return Expr("apply", self, op)

    def select(self, selector, thunk=0) -> Expr:
        return Expr("select", self, selector, thunk)

    def __matmul__(self, other):
        """``A @ X`` is ``spmm(A, X)`` (plus_times, algorithm from the layouts). Collective."""
        return dispatch.lookup("matmul")(self, other)


def _exchange_coo(comm, grid, layout, shape, dtype, rows, cols, vals, counts, backend, label):
    """Send COO triples (global coords) by ``counts`` and build my block of ``layout``."""
    coords = comm.alltoallv(np.stack([rows, cols], axis=1).astype(np.int64), counts,
                            label=f"{label}:coords")
    got_vals = comm.alltoallv(np.ascontiguousarray(vals, dtype=dtype), counts,
                              label=f"{label}:values")
    (r0, r1), (c0, c1) = layout.bounds(grid, shape)
    return _csr_from_coo(coords[:, 0] - r0, coords[:, 1] - c0, got_vals, (r1 - r0, c1 - c0),
                         dtype, backend)


def _scatter_coo(grid, layout, shape, dtype, coo, root, backend):
    comm = grid.world
    counts = np.zeros(comm.size, dtype=np.int64)
    if coo is not None:
        rows, cols, vals = (np.asarray(c) for c in coo)
        rows, cols = rows.astype(np.int64), cols.astype(np.int64)
        roff = np.asarray(layout.offsets(grid, shape[0], 0))
        coff = np.asarray(layout.offsets(grid, shape[1], 1))
        rb = np.searchsorted(roff, rows, side="right") - 1
        cb = np.searchsorted(coff, cols, side="right") - 1
        dest_lists = []
        for d, coords in grid.ranks():
            mine = (rb == layout.block_index(grid, coords, 0)) & (cb == layout.block_index(grid, coords, 1))
            idx = np.flatnonzero(mine)
            dest_lists.append(idx)
            counts[d] = idx.size
        sel = np.concatenate(dest_lists)
        rows, cols, vals = rows[sel], cols[sel], vals[sel]
    else:
        rows = cols = np.zeros(0, dtype=np.int64)
        vals = np.zeros(0, dtype=dtype)
    return _exchange_coo(comm, grid, layout, shape, dtype, rows, cols, vals, counts, backend,
                         "from_global:scatter")
