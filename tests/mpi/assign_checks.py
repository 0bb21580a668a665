"""Distributed ``assign`` checks, shared by loopback property tests and real mpiexec runs.

``check_assign(comm, case)`` is collective: it assigns a random matrix (or a
scalar) into a random C by random index lists (empty lists included), with
masks (structural/value, complemented), ``accum`` and ``replace``, through
the plain function or the expression API, compares the result with a dense
numpy reference of GrB_assign on every rank, and the ledger's ``assign:``
bytes with a count made from every rank's blocks.  ``check_assign_errors``
checks that bad calls raise the same typed error on every rank and send
nothing.  Assertions are collective.

Run under MPI: ``mpiexec -n P python tests/mpi/assign_checks.py [--examples N]
[--backend numba]``; Hypothesis is derandomized so every rank draws the
same examples.
"""

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st

from spgnn import DistSparseMatrix, Layout, ProcessGrid, assign
from spgnn.errors import BackendMismatch, DimensionMismatch, LayoutMismatch
from spgnn.local.ops import Mask
from spgnn.testing.asserts import collective_assert
from spgnn.testing.strategies_dist import random_sparse, splits_for

#: (name, C layout, A layout) choices per grid kind
_LAYOUTS_1D = (("row", "row"), ("row", "none"), ("none", "row"), ("none", "none"))
_LAYOUTS_2D = (("2d", "2d"), ("2d", "row"), ("row", "2d"), ("row", "col"), ("none", "2d"))


def _layout(kind, splits=None):
    return {"row": Layout("row", row_splits=splits), "col": Layout(None, "col"),
            "2d": Layout("row", "col"), "none": Layout()}[kind]


@st.composite
def case_assign(draw, p):
    two_d = p == 4 and draw(st.booleans())
    lc, la = draw(st.sampled_from(_LAYOUTS_2D if two_d else _LAYOUTS_1D))
    n, m = draw(st.integers(0, 9)), draw(st.integers(0, 9))
    rows = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n)) if n else []
    cols = draw(st.lists(st.integers(0, m - 1), unique=True, max_size=m)) if m else []
    return dict(p=p, two_d=two_d, lc=lc, la=la, n=n, m=m, rows=rows, cols=cols,
                splits=None if two_d else draw(splits_for(n, p)),
                scalar=draw(st.sampled_from([None, None, None, 2.5])),
                da=draw(st.sampled_from([0.0, 0.3, 0.8])), dc=draw(st.sampled_from([0.0, 0.4])),
                mask=draw(st.sampled_from([None, "S", "V", "~S", "~V"])),
                accum=draw(st.sampled_from([None, "plus", "max"])), replace=draw(st.booleans()),
                expr=draw(st.booleans()), seed=draw(st.integers(0, 2**31 - 1)))


def _pat(a):
    out = np.zeros(a.shape, bool)
    c = sp.coo_array(a)
    out[c.row, c.col] = True
    return out


def reference(c0, a, rows, cols, mk, mask, accum, replace):
    """Dense ``(pattern, values)`` of GrB_assign ``C<mask, replace>(rows, cols) accum= a``."""
    cpat, cval = _pat(c0), c0.toarray()
    if np.isscalar(a):
        apat = np.ones((len(rows), len(cols)), bool)
        aval = np.full(apat.shape, float(a))
    else:
        apat, aval = _pat(a), a.toarray()
    zpat, zval = cpat.copy(), cval.copy()
    reg = np.ix_(rows, cols)
    if accum is None:
        zpat[reg], zval[reg] = apat, np.where(apat, aval, 0.0)
    else:
        f = {"plus": np.add, "max": np.maximum}[accum]
        sp_, sv = cpat[reg], cval[reg]
        zpat[reg] = sp_ | apat
        zval[reg] = np.where(sp_ & apat, f(sv, aval), np.where(apat, aval, sv))
    if mask is None:
        return zpat, np.where(zpat, zval, 0.0)
    allow = _pat(mk) if mask.structure else (mk.toarray() != 0)
    allow = ~allow if mask.complement else allow
    keep_old = np.zeros_like(allow) if replace else ~allow
    epat = (zpat & allow) | (cpat & keep_old)
    return epat, np.where(zpat & allow, zval, np.where(cpat & keep_old, cval, 0.0))


def _grid(comm, case):
    if case["two_d"]:
        return ProcessGrid(comm, (2, 2), ("row", "col"))
    return ProcessGrid(comm, (case["p"],), ("row",))


def _expected_sent(comm, C, A, rows, cols):
    """Entries I send to other ranks: my A entries (once per block: the primary owner, A's
    coordinate 0 on unused axes) times the other ranks whose C block holds their target."""
    (r0, r1), (c0, c1) = C.layout.bounds(C.grid, C.shape)
    boxes = comm.allgather_obj((r0, r1, c0, c1), label="test:boxes")
    used = set(A.layout.rows) | set(A.layout.cols)
    primary = all(c == 0 for ax, c in zip(A.grid.axis_names, A.grid.coords) if ax not in used)
    if not primary:
        return 0
    loc = A.local
    s = sp.csr_array((np.asarray(loc.data), np.asarray(loc.indices), np.asarray(loc.indptr)),
                     shape=loc.shape).tocoo()
    gi = np.asarray(rows, np.int64)[s.row + A.row_start]
    gj = np.asarray(cols, np.int64)[s.col + A.col_start]
    total = 0
    for d, (a0, a1, b0, b1) in enumerate(boxes):
        if d != comm.rank:
            total += int(np.count_nonzero((gi >= a0) & (gi < a1) & (gj >= b0) & (gj < b1)))
    return total


def check_assign(comm, case, backend="numpy"):
    grid = _grid(comm, case)
    n, m, rows, cols = case["n"], case["m"], case["rows"], case["cols"]
    c0 = random_sparse((n, m), case["dc"], case["seed"])
    mk = random_sparse((n, m), 0.5, case["seed"] + 1)
    if mk.nnz:
        mk.data[::3] = 0.0                      # explicit zeros tell value from structure
    lc = _layout(case["lc"], case["splits"])
    C = DistSparseMatrix.from_global(c0, grid, lc, backend=backend)
    M = DistSparseMatrix.from_global(mk, grid, lc, backend=backend)
    mask = None
    if case["mask"]:
        mask = Mask(M, structure="S" in case["mask"], complement="~" in case["mask"])
    if case["scalar"] is not None:
        a, value = case["scalar"], case["scalar"]
    else:
        a = random_sparse((len(rows), len(cols)), case["da"], case["seed"] + 2)
        value = DistSparseMatrix.from_global(a, grid, _layout(case["la"]), backend=backend)
    want_sent = 0 if np.isscalar(a) else _expected_sent(comm, C, value, rows, cols)
    with comm.track("assign") as seen:
        if case["expr"]:
            C(mask=mask, accum=case["accum"], replace=case["replace"])[rows, cols] << value
            out = C
        else:
            out = assign(C, value, rows, cols, mask=mask, accum=case["accum"],
                         replace=case["replace"])
    collective_assert(comm, out is C, "assign must update C in place and return it")
    got = C.to_global()
    epat, evals = reference(c0, a, rows, cols, mk, mask, case["accum"], case["replace"])
    collective_assert(comm, np.array_equal(_pat(got), epat), f"pattern differs for {case}")
    collective_assert(comm, np.allclose(got.toarray(), evals, atol=1e-12),
                      f"values differ for {case}")
    collective_assert(comm, C.layout == lc and C.nnz == int(epat.sum()),
                      f"layout/nnz wrong for {case}")
    moved = [e for e in seen.events if e.label.startswith("assign:") and e.op == "alltoallv"]
    coords = sum(e.bytes_sent for e in moved if e.label == "assign:coords")
    vals = sum(e.bytes_sent for e in moved if e.label == "assign:values")
    collective_assert(comm, (coords, vals) == (16 * want_sent, 8 * want_sent),
                      f"ledger ({coords}, {vals}) != {(16 * want_sent, 8 * want_sent)} for {case}")
    if np.isscalar(a):
        collective_assert(comm, not any(e.label.startswith("assign:") for e in seen.events),
                          "a scalar assign must not exchange entries")


def _raises(comm, fn, exc):
    with comm.track("assign-bad") as seen:
        try:
            fn()
            err = None
        except exc as e:
            err = type(e).__name__
    collective_assert(comm, err is not None, f"{exc.__name__} not raised")
    collective_assert(comm, len(seen.events) == 0, "communicated before raising")


def check_assign_errors(comm, backend="numpy"):
    """Bad calls: the same typed error on every rank, before any communication."""
    p = comm.size
    grid = ProcessGrid(comm, (p,), ("row",))
    c0 = random_sparse((6, 5), 0.4, 0)
    C = DistSparseMatrix.from_global(c0, grid, Layout("row"), backend=backend)
    A = DistSparseMatrix.from_global(random_sparse((2, 2), 0.8, 1), grid, Layout("row"),
                                     backend=backend)
    M = DistSparseMatrix.from_global(c0, grid, Layout(), backend=backend)
    _raises(comm, lambda: assign(C, A, [0, 0], [1, 2]), DimensionMismatch)       # duplicate
    _raises(comm, lambda: assign(C, A, [0, 6], [1, 2]), DimensionMismatch)       # out of range
    _raises(comm, lambda: assign(C, A, [0, 1, 2], [1, 2]), DimensionMismatch)    # A's shape
    _raises(comm, lambda: assign(C, A, [[0], [1]], [1, 2]), DimensionMismatch)   # not 1-D
    _raises(comm, lambda: assign(C, "x", [0], [1]), TypeError)
    _raises(comm, lambda: assign(C, A, [0, 1], [1, 2], accum="nope"), ValueError)
    if p > 1:
        _raises(comm, lambda: assign(C, A, [0, 1], [1, 2], mask=M.S), LayoutMismatch)
    other = "numba" if backend == "numpy" else "numpy"
    B = DistSparseMatrix.from_global(random_sparse((2, 2), 0.8, 1), grid, Layout("row"),
                                     backend=other)
    _raises(comm, lambda: assign(C, B, [0, 1], [1, 2]), BackendMismatch)
    collective_assert(comm, np.array_equal(C.to_global().toarray(), c0.toarray()),
                      "a refused assign changed C")


def properties(comm, args):
    yield "assign", case_assign(comm.size), lambda case: check_assign(comm, case, args.backend)


if __name__ == "__main__":
    from spgnn.testing.mpi import run_property_checks

    run_property_checks("assign_checks", properties, examples=15,
                        after=lambda comm, args: check_assign_errors(comm, args.backend),
                        summary=lambda args: f" backend={args.backend}")
