"""GraphBLAS operations on distributed sparse matrices that need no data movement
(or only a reduction), and the masked, accumulated write of any result.

Operands of the element-wise operations share one grid, shape and layout, so
each rank combines its own blocks (local); reductions combine the blocks'
partial results over the axes that split the reduced dimension (collective).
Every function validates what all ranks know (types, shapes, layouts, grids,
backends, operators) before its first collective, so a bad call raises the
same typed error on every rank.

The write ``C<M, replace> accum= T`` (GraphBLAS's output rule, used by
``mxm``, ``mxv`` and every operation here) is :func:`write`:

1. ``Z = T``, or with ``accum`` the union of ``C`` and ``T`` with
   ``accum(c, t)`` where both hold an entry;
2. without a mask, ``C = Z``; with one, ``C`` keeps ``Z``'s entries where the
   mask allows and, unless ``replace``, its own old entries where it does not.

Blocks are handled on the host (numpy); user operators run through the
backend's compiled maps (:meth:`~spgnn.backends.base.Backend.map_binary`).
"""

import numpy as np

from ..errors import BackendMismatch, DimensionMismatch, LayoutMismatch
from ..layout import Layout
from ..local.csr import LocalCSR
from ..local.ops import UnaryOp, as_mask, binary_op, unary_op
from ..local.semiring import get_monoid
from . import dispatch
from ._dist_common import primary_owners, same_grid
from .dist_dense import DistDenseMatrix
from .dist_sparse import DistSparseMatrix, _exchange_coo

__all__ = ["ewise_add", "ewise_mult", "apply", "select", "reduce_rows", "reduce_cols",
           "reduce_scalar", "write", "check_mask", "SELECTORS", "extract", "local_coo",
           "csr_from_coo", "host_csr", "ResultSpec"]

#: MPI reductions the communicator has for float values; other monoids (``lor``/``land``
#: are integer-only in MPI, user monoids) gather the partial results.
_MPI_MONOIDS = ("plus", "min", "max", "times")


# -- host blocks --------------------------------------------------------------------------
def host_csr(be, loc) -> LocalCSR:
    """A :class:`LocalCSR` of host arrays (``loc`` itself on a host backend)."""
    arrays = [np.asarray(be.to_host(t)) for t in (loc.indptr, loc.indices, loc.data)]
    if all(h is t for h, t in zip(arrays, (loc.indptr, loc.indices, loc.data))):
        return loc
    return LocalCSR(*arrays, loc.shape, check=None)


def local_coo(loc):
    """``(rows, cols, data)`` of a host block, int64 indices."""
    indptr = np.asarray(loc.indptr)
    rows = np.repeat(np.arange(loc.shape[0], dtype=np.int64), np.diff(indptr))
    return rows, np.asarray(loc.indices, dtype=np.int64), np.asarray(loc.data)


def csr_from_coo(rows, cols, data, shape) -> LocalCSR:
    """A canonical host block from COO triples without duplicate positions."""
    order = np.lexsort((cols, rows))
    rows, cols, data = rows[order], cols[order], data[order]
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
    idt = np.int32 if max(shape[0], shape[1], rows.size) < np.iinfo(np.int32).max else np.int64
    return LocalCSR(indptr.astype(idt), cols.astype(idt), np.ascontiguousarray(data), shape,
                    check=None)


def _keys(rows, cols, ncols):
    return rows * max(int(ncols), 1) + cols


def _combine(a, b, op, union, be):
    """Union (``ewise_add``) or intersection (``ewise_mult``) of two host blocks."""
    ra, ca, va = local_coo(a)
    rb, cb, vb = local_coo(b)
    dt = np.result_type(va, vb)
    ka, kb = _keys(ra, ca, a.shape[1]), _keys(rb, cb, a.shape[1])
    both, ia, ib = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
    vboth = be.map_binary(op, va[ia].astype(dt), vb[ib].astype(dt)).astype(dt, copy=False)
    if not union:
        return csr_from_coo(ra[ia], ca[ia], vboth, a.shape)
    only_a = np.ones(ka.size, bool)
    only_a[ia] = False
    only_b = np.ones(kb.size, bool)
    only_b[ib] = False
    return csr_from_coo(np.concatenate([ra[ia], ra[only_a], rb[only_b]]),
                        np.concatenate([ca[ia], ca[only_a], cb[only_b]]),
                        np.concatenate([vboth, va[only_a].astype(dt), vb[only_b].astype(dt)]),
                        a.shape)


def _allowed(rows, cols, mask_loc, structure, complement, ncols):
    mr, mc, mv = local_coo(mask_loc)
    if not structure:
        keep = mv != 0
        mr, mc = mr[keep], mc[keep]
    inside = np.isin(_keys(rows, cols, ncols), _keys(mr, mc, ncols))
    return ~inside if complement else inside


def write_local(c_old, t, mask_loc, structure, complement, accum, replace, be):
    """GraphBLAS's output rule on host blocks (module docstring); returns the new block."""
    z = t if (accum is None or c_old is None) else _combine(c_old, t, accum, True, be)
    if mask_loc is None:
        return z
    rz, cz, vz = local_coo(z)
    keep = _allowed(rz, cz, mask_loc, structure, complement, z.shape[1])
    parts = [(rz[keep], cz[keep], vz[keep])]
    if not replace and c_old is not None:
        rc, cc, vc = local_coo(c_old)
        old = ~_allowed(rc, cc, mask_loc, structure, complement, z.shape[1])
        parts.append((rc[old], cc[old], vc[old].astype(vz.dtype)))
    return csr_from_coo(*(np.concatenate(x) for x in zip(*parts)), z.shape)


# -- checks (local, every rank alike) -----------------------------------------------------
def _check_sparse(op, name, m):
    if not isinstance(m, DistSparseMatrix):
        raise TypeError(f"{op}: {name} must be a DistSparseMatrix, but got {type(m).__name__}")


class ResultSpec:
    """Grid, shape, layout and backend of a result not computed yet (for the checks)."""

    def __init__(self, grid, shape, layout, backend):
        self.grid, self.shape, self.layout, self.backend = grid, shape, layout, backend


def _check_alike(op, names, *mats):
    """Same grid, shape, layout and backend (element-wise operands and outputs)."""
    for n, m in zip(names, mats):
        if not isinstance(m, ResultSpec):
            _check_sparse(op, n, m)
    same_grid(op, *mats)
    a = mats[0]
    for n, m in zip(names[1:], mats[1:]):
        if m.shape != a.shape:
            raise DimensionMismatch(f"{op}: {names[0]}.shape={a.shape} but {n}.shape={m.shape}")
        if m.layout != a.layout:
            raise LayoutMismatch(f"{op}: {names[0]} is in {a.layout!r} but {n} in {m.layout!r}; "
                                 f"redistribute one first")
        if m.backend.name != a.backend.name:
            raise BackendMismatch(f"{op}: {names[0]} uses backend {a.backend.name!r} but {n} uses "
                                  f"{m.backend.name!r}; convert one explicitly")


def check_mask(op, mask, out_like):
    """The :class:`Mask` (``None``, a Mask, or a matrix taken as a value mask), checked
    against the output's grid, shape and layout. Local."""
    mask = as_mask(mask)
    if mask is None:
        return None
    _check_sparse(op, "mask", mask.matrix)
    _check_alike(op, ("output", "mask"), out_like, mask.matrix)
    return mask


def write(op, out, t_local, t_like, mask, accum, replace):
    """Finish ``op``: write block ``t_local`` (laid out like ``t_like``) into ``out``
    (or a new matrix when ``out`` is None) under ``mask``/``accum``/``replace``.

    Collective (the new global nnz: one allreduce).  Checks were made by the caller.
    """
    target = out if out is not None else t_like
    be = target.backend
    m = None if mask is None else host_csr(be, mask.matrix.local)
    c_old = host_csr(be, out.local) if out is not None else None
    new = write_local(c_old, host_csr(be, t_local), m, mask.structure if mask else False,
                      mask.complement if mask else False,
                      None if accum is None else binary_op(accum), replace, be)
    if c_old is not None and c_old.data.dtype != new.data.dtype:
        new.data = new.data.astype(c_old.data.dtype)
    loc = LocalCSR(*(be.from_host(x) for x in (new.indptr, new.indices, new.data)), new.shape,
                   check=None)
    res = DistSparseMatrix._finish(loc, target.shape, target.grid, target.layout, be)
    if out is None:
        return res
    out.local, out.nnz, out._cache = res.local, res.nnz, {}
    return out


def _prepare_out(op, out, like, mask, accum):
    """Checks of the output arguments shared by every operation. Local."""
    if out is not None:
        _check_alike(op, ("output", "result"), out, like)
    elif accum is not None:
        raise ValueError(f"{op}: accum= needs an existing output (out=)")
    if accum is not None:
        accum = binary_op(accum)
    return check_mask(op, mask, like), accum


# -- element-wise ----------------------------------------------------------------------
def _ewise(opname, A, B, op, union, mask, accum, out, replace):
    _check_alike(opname, ("A", "B"), A, B)
    op = binary_op(op)
    mask, accum = _prepare_out(opname, out, A, mask, accum)
    be = A.backend
    t = _combine(host_csr(be, A.local), host_csr(be, B.local), op, union, be)
    return write(opname, out, t, A, mask, accum, replace)


def ewise_add(A, B, op="plus", *, mask=None, accum=None, out=None, replace=False):
    """Union of the patterns, ``op(a, b)`` where both hold an entry. Collective (nnz only)."""
    return _ewise("ewise_add", A, B, op, True, mask, accum, out, replace)


def ewise_mult(A, B, op="times", *, mask=None, accum=None, out=None, replace=False):
    """Intersection of the patterns with ``op(a, b)``. Collective (nnz only)."""
    return _ewise("ewise_mult", A, B, op, False, mask, accum, out, replace)


def apply(A, op, *, mask=None, accum=None, out=None, replace=False):
    """``op`` on every stored value: a unary op (name, UnaryOp or Numba-compilable function),
    or an index-aware one ``f(x, i, j)`` (global indices; ``register_unary_op(...,
    indexed=True)``).  Collective (nnz only)."""
    _check_sparse("apply", "A", A)
    op = unary_op(op)
    mask, accum = _prepare_out("apply", out, A, mask, accum)
    be = A.backend
    loc = host_csr(be, A.local)
    r, c, v = local_coo(loc)
    vals = (be.map_unary(op, v, r + A.row_start, c + A.col_start) if op.indexed
            else be.map_unary(op, v))
    t = LocalCSR(loc.indptr, loc.indices, np.asarray(vals, dtype=v.dtype), loc.shape, check=None)
    return write("apply", out, t, A, mask, accum, replace)


#: Built-in selectors ``name(x, i, j, k) -> bool`` (global indices, ``k`` the thunk).
SELECTORS = {
    "tril": lambda x, i, j, k: j <= i + k,
    "triu": lambda x, i, j, k: j >= i + k,
    "diag": lambda x, i, j, k: j == i + k,
    "offdiag": lambda x, i, j, k: j != i + k,
    "valuene": lambda x, i, j, k: x != k,
    "valueeq": lambda x, i, j, k: x == k,
    "valuegt": lambda x, i, j, k: x > k,
    "valuege": lambda x, i, j, k: x >= k,
    "valuelt": lambda x, i, j, k: x < k,
    "valuele": lambda x, i, j, k: x <= k,
}


#: The selectors on the diagonal offset, run by :meth:`Backend.select_band`.
_BANDS = ("tril", "triu", "diag", "offdiag")


def select(A, selector, thunk=0, *, mask=None, accum=None, out=None, replace=False):
    """Keep the entries a selector accepts. Collective (nnz only).

    ``selector`` is a name of :data:`SELECTORS` (``tril``/``triu``/``diag``
    take the diagonal offset ``thunk``: ``select(A, "tril", -1)`` is the
    strictly lower triangle), or an index-aware unary op / function
    ``f(x, i, j)`` whose non-zero result keeps the entry (compiled by the
    numba backend).
    """
    _check_sparse("select", "A", A)
    mask, accum = _prepare_out("select", out, A, mask, accum)
    be = A.backend
    if isinstance(selector, str) and selector not in SELECTORS:
        raise ValueError(f"select: unknown selector {selector!r}; expected one of "
                         f"{sorted(SELECTORS)} or a function f(x, i, j)")
    if selector in _BANDS and not float(thunk).is_integer():
        raise ValueError(f"select: {selector!r} takes an integer diagonal offset, got {thunk!r}")
    loc = host_csr(be, A.local)
    if selector in _BANDS:
        # global j - i = local (j - i) + col_start - row_start: a compiled row filter
        t = be.select_band(loc, selector, int(thunk) + A.row_start - A.col_start)
        return write("select", out, t, A, mask, accum, replace)
    r, c, v = local_coo(loc)
    gi, gj = r + A.row_start, c + A.col_start
    if isinstance(selector, str):
        keep = np.asarray(SELECTORS[selector](v, gi, gj, thunk), dtype=bool)
    else:
        op = unary_op(selector)
        if not op.indexed:
            op = UnaryOp(op.name, op.func, None, True)
        keep = np.asarray(be.map_unary(op, v.astype(np.float64), gi, gj)) != 0
    # a filter keeps the block's (canonical) order: no sort, only the new row pointers
    before = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
    t = LocalCSR(before[np.asarray(loc.indptr)].astype(loc.indptr.dtype), loc.indices[keep],
                 v[keep], loc.shape, check=None)
    return write("select", out, t, A, mask, accum, replace)


# -- reductions --------------------------------------------------------------------------
def _combine_over(comm, values, has, monoid, label):
    """Reduce per-rank partial ``values`` (identity where ``has`` is False) over ``comm``."""
    if comm.size == 1:
        return values, has
    if monoid.name in _MPI_MONOIDS:
        # the identity is neutral, so an absent partial result changes nothing
        got = comm.allreduce(values, op=monoid.name, label=label)
        anyhas = comm.allreduce(has.astype(np.int64), op="max", label=label) > 0
        return got, anyhas
    allv = comm.allgather(values, label=label)
    allh = comm.allgather(has.astype(np.int64), label=label) > 0
    out, oh = allv[0].copy(), allh[0].copy()
    op = monoid.op
    for r in range(1, comm.size):
        both = oh & allh[r]
        out[both] = op(out[both], allv[r][both])
        only = allh[r] & ~oh
        out[only] = allv[r][only]
        oh |= allh[r]
    return out, oh


def reduce_rows(A, monoid="plus"):
    """Reduce each row with a monoid: an ``n x 1`` :class:`DistDenseMatrix` split like A's rows.

    Rows without entries hold the monoid's identity.  Collective over the
    axes splitting A's columns (an allreduce for MPI monoids, else an
    allgather of the partial results).
    """
    _check_sparse("reduce_rows", "A", A)
    monoid = get_monoid(monoid)
    be = A.backend
    loc = host_csr(be, A.local)
    vals, has = be.reduce_rows(monoid, loc.indptr, loc.data, loc.shape[0])
    if A.layout.cols:
        vals, has = _combine_over(A.grid.comm(*A.layout.cols), vals, has, monoid, "reduce_rows")
    return DistDenseMatrix(be.from_host(np.ascontiguousarray(vals.reshape(-1, 1))),
                           (A.shape[0], 1), A.grid,
                           Layout(A.layout.rows, row_splits=A.layout.row_splits), backend=be)


def reduce_cols(A, monoid="plus"):
    """Reduce each column: ``reduce_rows`` of the transpose (local transpose, no data moved)."""
    _check_sparse("reduce_cols", "A", A)
    return reduce_rows(A.T, monoid)


def reduce_scalar(A, monoid="plus"):
    """Reduce every entry to one number (the identity when A is empty), on every rank. Collective."""
    _check_sparse("reduce_scalar", "A", A)
    monoid = get_monoid(monoid)
    be = A.backend
    loc = host_csr(be, A.local)
    mine = A.grid.rank in primary_owners(A.grid, A.layout)   # replicas count once
    data = loc.data if mine else loc.data[:0]
    vals, has = be.reduce_rows(monoid, np.array([0, data.size], np.int64), data, 1)
    vals = vals.astype(np.float64)
    if A.grid.size > 1:
        vals, has = _combine_over(A.grid.world, vals, has, monoid, "reduce_scalar")
    return float(vals[0]) if has[0] else float(monoid.identity)


# -- extract -----------------------------------------------------------------------------
def extract(A, rows=None, cols=None, layout=None):
    """``A[rows, cols]`` by global index lists (any order, repeats allowed; ``None`` = all).

    The result (``len(rows) x len(cols)``) is placed in ``layout`` (default
    A's layout kind with even splits).  Collective: each rank selects its
    entries and sends them to their new owners (one alltoallv of coordinates
    and one of values, as ``redistribute``).
    """
    _check_sparse("extract", "A", A)
    n, m = A.shape
    rows = np.arange(n, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    cols = np.arange(m, dtype=np.int64) if cols is None else np.asarray(cols, dtype=np.int64)
    for what, idx, ext in (("rows", rows, n), ("cols", cols, m)):
        if idx.ndim != 1 or (idx.size and (idx.min() < 0 or idx.max() >= ext)):
            raise DimensionMismatch(f"extract: {what} must be a 1-D list of indices in [0, {ext}), "
                                    f"but got {idx[:8].tolist()}")
    layout = Layout(A.layout.rows, A.layout.cols) if layout is None else layout
    shape = (rows.size, cols.size)
    be = A.backend
    r, c, v = local_coo(host_csr(be, A.local))
    if A.grid.rank not in primary_owners(A.grid, A.layout):
        r, c, v = r[:0], c[:0], v[:0]
    gi, gj = r + A.row_start, c + A.col_start
    out_r, er = _positions(rows, gi)
    out_c, ec = _positions(cols, gj[er])
    er = er[ec]
    out_r = out_r[ec]
    layout = DistSparseMatrix._check_layout("extract", A.grid, layout, shape)
    roff = np.asarray(layout.offsets(A.grid, shape[0], 0))
    coff = np.asarray(layout.offsets(A.grid, shape[1], 1))
    rb = np.searchsorted(roff, out_r, side="right") - 1
    cb = np.searchsorted(coff, out_c, side="right") - 1
    comm = A.grid.world
    counts = np.zeros(comm.size, dtype=np.int64)
    sel = []
    for d, coords in A.grid.ranks():
        mine = np.flatnonzero((rb == layout.block_index(A.grid, coords, 0))
                              & (cb == layout.block_index(A.grid, coords, 1)))
        sel.append(mine)
        counts[d] = mine.size
    sel = np.concatenate(sel) if sel else np.zeros(0, np.int64)
    local = _exchange_coo(comm, A.grid, layout, shape, A.dtype, out_r[sel], out_c[sel],
                          v[er][sel], counts, be, "extract")
    return DistSparseMatrix._finish(local, shape, A.grid, layout, be)


def _positions(wanted, have):
    """For each ``have[e]`` every position ``p`` with ``wanted[p] == have[e]``: ``(p, e)`` pairs."""
    order = np.argsort(wanted, kind="stable")
    sw = wanted[order]
    lo = np.searchsorted(sw, have, side="left")
    hi = np.searchsorted(sw, have, side="right")
    cnt = hi - lo
    e = np.repeat(np.arange(have.size, dtype=np.int64), cnt)
    within = np.arange(e.size, dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    return order[np.repeat(lo, cnt) + within].astype(np.int64), e



for _fn in (ewise_add, ewise_mult, apply, select, extract):
    dispatch.register(_fn.__name__, _fn)
