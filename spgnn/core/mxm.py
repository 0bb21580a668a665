"""Distributed SpGEMM ``C<M> accum= A (+).(x) B`` over any semiring, and ``mxv``/``vxm``.

Algorithms (``algorithm=None`` picks from the layouts):

``local``
    One rank, or everything replicated: the backend's kernel.
``1d`` (sparsity-aware row algorithm)
    A and B split by whole rows over the same axes (``Layout("row")``); C
    takes A's row split.  Each rank fetches exactly the rows of B that the
    non-empty columns of its block of A touch: the :class:`ExchangePlan`
    (which rows, from whom) is built once per (A's pattern, B's row split)
    and cached on A, as for the ``1d-aware`` SpMM; every call then moves the
    rows' lengths (int64), column indices (int64) and values in three
    alltoallvs (label ``mxm-1d:exchange``).  Then one local masked SpGEMM.
``summa`` (2D Sparse SUMMA, CombBLAS's algorithm)
    A, B and C in ``Layout(r, c)`` on a square ``q x q`` grid (axes ``r``,
    ``c``), A's column split equal to B's row split.  In stage ``s`` rank
    ``(i, s)`` broadcasts its block of A along grid row ``i`` and rank
    ``(s, j)`` its block of B along grid column ``j`` (each block as three
    broadcasts: its entry count, ``[indptr; indices]`` as int64, its values;
    labels ``mxm-summa:A`` and ``mxm-summa:B``); every rank multiplies the
    two blocks it holds -- masked by its block of M, mask-driven -- and
    merges the product into its block of C with the semiring's monoid.  A
    non-square grid raises :class:`~spgnn.errors.GridError`.

Masks, ``accum`` and ``replace`` follow GraphBLAS (:func:`spgnn.core.algebra.write`);
the mask is applied inside the local kernel, so masked-out entries are never
formed.  Exact bytes of both algorithms: :func:`spgnn.plan.events.plan_mxm`.

Vectors are ``n x 1`` :class:`DistSparseMatrix` (a sparse vector: only its
entries move): ``mxv(A, v) = mxm(A, v)`` and ``vxm(v, A) = mxm(Aᵀ, v)``
(``Aᵀ`` in A's layout, built once and cached for square A).
"""

import numpy as np

from ..errors import DimensionMismatch, GridError, LayoutMismatch
from ..layout import Layout
from ..local.csr import LocalCSR
from ..backends._validate import check_spgemm_method
from ..local.semiring import get_semiring
from . import dispatch
from ._dist_common import check_product
from .algebra import ResultSpec, _check_alike, _check_sparse, _combine, check_mask, host_csr, write
from .dist_sparse import DistSparseMatrix
from .exchange import ExchangePlan

__all__ = ["mxm", "mxv", "vxm", "MXM_ALGORITHMS", "summa_axes"]

MXM_ALGORITHMS = ("local", "1d", "summa")


def _replicated(m):
    return not m.layout.rows and not m.layout.cols


def _is_1d(A, B):
    return (bool(A.layout.rows) and not A.layout.cols and A.layout.rows == B.layout.rows
            and not B.layout.cols)


def summa_axes(grid, A, B):
    """``(r, c)``: the grid axes SUMMA uses for A and B, or ``None`` when the layouts are not
    ``Layout(r, c)`` with one distinct axis each.  Raises GridError for a non-square grid."""
    la, lb = A.layout, B.layout
    if not (len(la.rows) == 1 and len(la.cols) == 1 and la.rows == lb.rows and la.cols == lb.cols
            and la.rows != la.cols):
        return None
    r, c = la.rows[0], la.cols[0]
    if grid.axis_size(r) != grid.axis_size(c) or grid.size != grid.axis_size(r) ** 2:
        raise GridError(f"mxm('summa'): 2D Sparse SUMMA needs a square q x q grid over axes "
                        f"{r!r} and {c!r}, but the grid is {dict(zip(grid.axis_names, grid.shape))}")
    return r, c


def _select(A, B, algorithm):
    if algorithm is not None:
        if algorithm not in MXM_ALGORITHMS:
            raise ValueError(f"mxm: unknown algorithm {algorithm!r}; expected one of "
                             f"{MXM_ALGORITHMS}")
        return algorithm
    if A.grid.size == 1 or (_replicated(A) and _replicated(B)):
        return "local"
    if _is_1d(A, B):
        return "1d"
    if summa_axes(A.grid, A, B) is not None:
        return "summa"
    raise LayoutMismatch(f"mxm: no algorithm for A.layout={A.layout!r} and B.layout={B.layout!r}; "
                         f"supported: both split by whole rows over the same axes (1d), both "
                         f"Layout(r, c) on a square grid (summa), or everything on one rank (local)")


def _result_layout(A, B, algorithm):
    if algorithm == "local":
        return A.layout if A.grid.size == 1 else Layout()
    if algorithm == "1d":
        return Layout(A.layout.rows, row_splits=A.layout.row_splits)
    return Layout(A.layout.rows, B.layout.cols, row_splits=A.layout.row_splits,
                  col_splits=B.layout.col_splits)


def _check_layouts(A, B, algorithm):
    if algorithm == "1d" and not _is_1d(A, B):
        raise LayoutMismatch(f"mxm('1d'): needs A and B split by whole rows over the same axes, "
                             f"but got A.layout={A.layout!r}, B.layout={B.layout!r}")
    if algorithm == "summa":
        axes = summa_axes(A.grid, A, B)
        if axes is None:
            raise LayoutMismatch(f"mxm('summa'): needs A and B in Layout(r, c) on a square grid, "
                                 f"but got A.layout={A.layout!r}, B.layout={B.layout!r}")
        inner_a = A.layout.offsets(A.grid, A.shape[1], 1)
        inner_b = B.layout.offsets(B.grid, B.shape[0], 0)
        if tuple(inner_a) != tuple(inner_b):
            raise LayoutMismatch(f"mxm('summa'): A's column split {tuple(inner_a)} must equal B's "
                                 f"row split {tuple(inner_b)}")
    if algorithm == "local" and A.grid.size > 1 and not (_replicated(A) and _replicated(B)):
        raise LayoutMismatch(f"mxm('local'): on {A.grid.size} ranks A and B must be replicated, "
                             f"but got A.layout={A.layout!r}, B.layout={B.layout!r}")


def mxm(A, B, semiring="plus_times", *, mask=None, accum=None, out=None, replace=False,
        algorithm=None, method=None):
    """``C<mask> accum= A (+).(x) B``: a new :class:`DistSparseMatrix`, or ``out`` updated.

    Collective.  ``semiring`` is any registered semiring (name or object),
    ``mask`` a :class:`~spgnn.local.ops.Mask` (``M.S``, ``~M.V``, ...) or a
    matrix (value mask) in the result's layout, ``accum`` a binary operator
    merging into ``out``'s old entries, ``replace`` clears ``out``'s entries
    outside the mask.  Every check (types, shapes, grids, layouts, backend,
    semiring, operators) runs before the first collective, on every rank.
    ``method`` picks the local kernel (``None``/"auto": the backend's
    heuristic; "gustavson"; "dot" for a mask without complement: see
    ``docs/graphblas.md``).  Without ``out`` and ``accum`` the kernel's
    mask-driven result is the answer as it is (no second pass over the mask).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from spgnn import DistSparseMatrix, Mask, grid_1d, mxm
    >>> from spgnn.comm import solo_communicator
    >>> grid = grid_1d(solo_communicator())
    >>> a = sp.csr_array(np.array([[0., 1, 0], [2, 0, 3], [0, 0, 4]]))
    >>> A = DistSparseMatrix.from_global(a, grid, backend="numpy")
    >>> mxm(A, A).to_global().toarray()
    array([[ 2.,  0.,  3.],
           [ 0.,  2., 12.],
           [ 0.,  0., 16.]])
    >>> mxm(A, A, "min_plus").to_global().toarray()   # shortest two-hop paths
    array([[3., 0., 4.],
           [0., 3., 7.],
           [0., 0., 8.]])
    >>> C = mxm(A, A, mask=Mask(A, structure=True))   # only where A has an entry
    >>> C.nnz, C.to_global().toarray()[1:]
    (2, array([[ 0.,  0., 12.],
           [ 0.,  0., 16.]]))
    """
    _check_sparse("mxm", "A", A)
    _check_sparse("mxm", "B", B)
    check_product("mxm", ("A", "B"), A, B, "(m,k),(k,n)->(m,n)")
    semiring = get_semiring(semiring)
    if semiring.row_mean:
        raise ValueError(f"mxm: semiring {semiring.name!r} divides by row counts; it is SpMM-only")
    method = check_spgemm_method(method)
    algorithm = _select(A, B, algorithm)
    _check_layouts(A, B, algorithm)
    spec = ResultSpec(A.grid, (A.shape[0], B.shape[1]), _result_layout(A, B, algorithm), A.backend)
    mask = check_mask("mxm", mask, spec)
    if out is not None:
        _check_alike("mxm", ("out", "result"), out, spec)
    elif accum is not None:
        raise ValueError("mxm: accum= needs an existing output (out=)")
    mloc = None if mask is None else host_csr(A.backend, mask.matrix.local)
    if mloc is not None:
        mloc = _canonical(A.backend, mloc)
    mkw = dict(structure=mask.structure, complement=mask.complement) if mask else {}
    if method is not None:
        mkw["method"] = method
    run = {"local": _mxm_local, "1d": _mxm_1d, "summa": _mxm_summa}[algorithm]
    t = run(A, B, semiring, mloc, mkw)
    if out is None and accum is None:
        # the kernels applied the mask (never formed a masked-out entry) and return
        # canonical blocks: GraphBLAS's output rule has nothing left to do
        be = A.backend
        t = LocalCSR(*(be.from_host(x) for x in (t.indptr, t.indices, t.data)), t.shape,
                     check=None)
        return DistSparseMatrix._finish(t, spec.shape, spec.grid, spec.layout, be)
    return write("mxm", out, t, spec, mask, accum, replace)


def _canonical(be, loc):
    """Rows sorted, duplicates merged (the masked kernel emits in the mask row's order);
    ``loc`` itself when it already is (the usual case: one O(nnz) check, no copy)."""
    if be.is_canonical(loc):
        return loc
    s = loc.to_scipy().tocsr().copy()
    s.sum_duplicates()
    s.sort_indices()
    return LocalCSR.from_scipy(s, check=None)


def _mxm_local(A, B, semiring, mloc, mkw):
    be = A.backend
    return be.spgemm_masked(A.local, B.local, semiring, mloc, **mkw)


def _mxm_1d(A, B, semiring, mloc, mkw):
    comm = A.grid.comm(*A.layout.rows)
    be = A.backend
    boff = B.layout.offsets(B.grid, B.shape[0], 0)
    key = ("mxm-1d", tuple(boff))
    plan = A.cache.get(key)
    if plan is None:
        plan = ExchangePlan.build(comm, A.local, 0, boff, be, label="mxm-1d:plan")
        A.cache[key] = plan
    b = host_csr(be, B.local)
    indptr = np.asarray(b.indptr, dtype=np.int64)
    send = np.asarray(plan.send_rows, dtype=np.int64)
    lens = indptr[send + 1] - indptr[send]
    label = "mxm-1d:exchange"
    got_lens = comm.alltoallv(lens, plan.send_counts, plan.recv_counts, label=label, split=False)
    # entries per peer: the lengths of the rows going to (coming from) it
    send_nnz = _group_sums(lens, plan.send_counts)
    recv_nnz = _group_sums(got_lens, plan.recv_counts)
    take = _ranges(indptr[send], lens)
    got_idx = comm.alltoallv(np.asarray(b.indices, dtype=np.int64)[take], send_nnz, recv_nnz,
                             label=label)
    got_val = comm.alltoallv(np.ascontiguousarray(np.asarray(b.data)[take]), send_nnz, recv_nnz,
                             label=label)
    ext_indptr = np.concatenate([indptr, indptr[-1] + np.cumsum(got_lens)])
    ext = LocalCSR(ext_indptr, np.concatenate([np.asarray(b.indices, np.int64), got_idx]),
                   np.concatenate([np.asarray(b.data), got_val]),
                   (b.shape[0] + got_lens.size, B.shape[1]), check=None)
    ext = LocalCSR(*(be.from_host(x) for x in (ext.indptr, ext.indices, ext.data)), ext.shape,
                   check=None)
    compact = plan.compact
    if compact.indices.dtype != ext.indices.dtype or compact.indptr.dtype != ext.indptr.dtype:
        compact = LocalCSR(compact.indptr.astype(np.int64), compact.indices.astype(np.int64),
                           compact.data, compact.shape, check=None)
    return be.spgemm_masked(compact, ext, semiring, mloc, **mkw)


def _group_sums(values, counts):
    """Sum of ``values`` within consecutive groups of sizes ``counts`` (int64)."""
    ends = np.cumsum(counts)
    csum = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
    return csum[ends] - csum[ends - np.asarray(counts, dtype=np.int64)]


def _ranges(starts, lens):
    """Concatenated ``arange(s, s + l)`` for every pair."""
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offs = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    return offs + np.arange(total, dtype=np.int64)


def _bcast_csr(comm, loc, root, shape, dtype, label):
    """Broadcast a host CSR block from ``root`` (count, then [indptr; indices], then values)."""
    mine = comm.rank == root
    meta = np.array([loc.indices.size if mine else 0], dtype=np.int64)
    nnz = int(comm.bcast(meta, root=root, label=label)[0])
    struct = (np.concatenate([np.asarray(loc.indptr, np.int64), np.asarray(loc.indices, np.int64)])
              if mine else np.empty(shape[0] + 1 + nnz, dtype=np.int64))
    struct = comm.bcast(struct, root=root, label=label)
    vals = (np.ascontiguousarray(loc.data) if mine else np.empty(nnz, dtype=dtype))
    vals = comm.bcast(vals, root=root, label=label)
    return LocalCSR(struct[:shape[0] + 1], struct[shape[0] + 1:], vals, shape, check=None)


def _mxm_summa(A, B, semiring, mloc, mkw):
    grid, be = A.grid, A.backend
    r, c = summa_axes(grid, A, B)
    q = grid.axis_size(r)
    i, j = grid.axis_index(r), grid.axis_index(c)
    row_comm, col_comm = grid.comm(c), grid.comm(r)      # along my grid row / grid column
    aro = A.layout.offsets(grid, A.shape[0], 0)
    inner = A.layout.offsets(grid, A.shape[1], 1)
    bco = B.layout.offsets(grid, B.shape[1], 1)
    a_loc, b_loc = host_csr(be, A.local), host_csr(be, B.local)
    dt = np.result_type(A.dtype, B.dtype)
    acc = None
    for s in range(q):
        a_shape = (aro[i + 1] - aro[i], inner[s + 1] - inner[s])
        b_shape = (inner[s + 1] - inner[s], bco[j + 1] - bco[j])
        if q > 1:
            a_s = _bcast_csr(row_comm, a_loc, s, a_shape, A.dtype, "mxm-summa:A")
            b_s = _bcast_csr(col_comm, b_loc, s, b_shape, B.dtype, "mxm-summa:B")
        else:
            a_s, b_s = a_loc, b_loc
        dev = [LocalCSR(*(be.from_host(x) for x in (m.indptr, m.indices, m.data)), m.shape,
                        check=None) for m in (a_s, b_s)]
        if dev[0].indptr.dtype != dev[1].indptr.dtype:
            dev = [LocalCSR(m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data,
                            m.shape, check=None) for m in dev]
        prod = host_csr(be, be.spgemm_masked(dev[0], dev[1], semiring, mloc, **mkw))
        prod.data = prod.data.astype(dt, copy=False)
        acc = prod if acc is None else _combine(acc, prod, semiring.add.op, True, be)
    return acc


def _as_vector(op, v, n):
    _check_sparse(op, "v", v)
    if v.shape != (n, 1):
        raise DimensionMismatch(f"{op}: v must be an n x 1 DistSparseMatrix with n={n}, but got "
                                f"shape {v.shape}")


def mxv(A, v, semiring="plus_times", **kwargs):
    """``w<mask> accum= A (+).(x) v`` for an ``n x 1`` sparse vector ``v`` (``mxm(A, v)``)."""
    _check_sparse("mxv", "A", A)
    _as_vector("mxv", v, A.shape[1])
    return mxm(A, v, semiring, **kwargs)


def vxm(v, A, semiring="plus_times", **kwargs):
    """``w<mask> accum= vᵀ (+).(x) A`` as a column: ``mxm(Aᵀ, v)`` with ``Aᵀ`` in A's layout
    (built by one redistribution and cached on A when A is square). Collective."""
    _check_sparse("vxm", "A", A)
    _as_vector("vxm", v, A.shape[0])
    at = A.transposed() if A.shape[0] == A.shape[1] else A.T.redistribute(A.layout)
    # the multiply must see v on the left: swap the operator's arguments
    s = get_semiring(semiring)
    return mxm(at, v, _flipped(s), **kwargs)


def _flipped(s):
    """The semiring with ``multiply(y, x)``: ``vᵀA`` computed as ``Aᵀv`` keeps operand order."""
    flips = {"first": "second", "second": "first"}
    if s.multiply not in flips:
        return s                      # commutative built-ins (and user ops taken as such)
    from ..local.semiring import ALL_SEMIRINGS, Semiring
    name = f"{s.name}:flipped"
    if name not in ALL_SEMIRINGS:
        ALL_SEMIRINGS[name] = Semiring(name, s.add, flips[s.multiply])
    return ALL_SEMIRINGS[name]


for _fn in (mxm, mxv, vxm):
    dispatch.register(_fn.__name__, _fn)
