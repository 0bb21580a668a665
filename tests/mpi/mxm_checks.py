"""Distributed mxm checks, shared by loopback property tests and real mpiexec runs.

``check_mxm(comm, case)`` is collective: it multiplies with the ``1d`` or
``summa`` algorithm (masks structural/value, complemented, accum and
replace), compares the result with a dense numpy reference on every rank,
and compares the ledger of the first and second multiply with
:func:`spgnn.plan.events.plan_mxm` byte for byte.  Assertions are collective.

Run under MPI: ``mpiexec -n P python tests/mpi/mxm_checks.py [--examples N]
[--backend numba]``; Hypothesis is derandomized so every rank draws the
same examples.  SUMMA runs where P is a square (1, 4).
"""

import numpy as np
from hypothesis import strategies as st

from spgnn import DistSparseMatrix, Layout, ProcessGrid
from spgnn.core.mxm import mxm
from spgnn.errors import GridError
from spgnn.local.ops import Mask
from spgnn.plan.events import plan_mxm
from spgnn.testing.asserts import collective_assert
from spgnn.testing.strategies_dist import random_sparse, splits_for

SEMIRINGS = ("plus_times", "lor_land", "any_pair", "min_plus", "plus_first")


@st.composite
def case_mxm(draw, p):
    algos = ["1d"] + (["summa"] if int(round(p ** 0.5)) ** 2 == p else [])
    algo = draw(st.sampled_from(algos))
    m, k, n = (draw(st.integers(0, 14)) for _ in range(3))
    return dict(p=p, algo=algo, m=m, k=k, n=n,
                rows=draw(splits_for(m, p)) if algo == "1d" else None,
                brows=draw(splits_for(k, p)) if algo == "1d" else None,
                da=draw(st.sampled_from([0.0, 0.15, 0.5])), db=draw(st.sampled_from([0.0, 0.2, 0.6])),
                mask=draw(st.sampled_from([None, "S", "V", "~S", "~V"])),
                accum=draw(st.sampled_from([None, "plus"])), replace=draw(st.booleans()),
                semiring=draw(st.sampled_from(SEMIRINGS)),
                seed=draw(st.integers(0, 2**31 - 1)))


def _ref(a, b, semiring):
    """Dense (pattern, values) of the semiring product, by brute force over k."""
    ad, bd = a.toarray(), b.toarray()
    pa, pb = _pat(a), _pat(b)
    m, n = ad.shape[0], bd.shape[1]
    pat = np.zeros((m, n), bool)
    val = np.zeros((m, n))
    for i in range(m):
        for j in range(n):
            ks = np.flatnonzero(pa[i] & pb[:, j])
            if ks.size == 0:
                continue
            pat[i, j] = True
            x, y = ad[i, ks], bd[ks, j]
            prods = {"plus_times": x * y, "lor_land": ((x != 0) & (y != 0)).astype(float),
                     "any_pair": np.ones_like(x), "min_plus": x + y, "plus_first": x}[semiring]
            val[i, j] = {"plus_times": np.sum, "lor_land": np.max, "any_pair": np.max,
                         "min_plus": np.min, "plus_first": np.sum}[semiring](prods)
    return pat, val


def _pat(a):
    out = np.zeros(a.shape, bool)
    c = a.tocoo()
    out[c.row, c.col] = True
    return out


def _layouts(case):
    if case["algo"] == "1d":
        return Layout("row", row_splits=case["rows"]), Layout("row", row_splits=case["brows"])
    return Layout("row", "col"), Layout("row", "col")


def check_mxm(comm, case, backend="numpy"):
    p, algo = case["p"], case["algo"]
    q = int(round(p ** 0.5))
    grid = (ProcessGrid(comm, (p,), ("row",)) if algo == "1d"
            else ProcessGrid(comm, (q, q), ("row", "col")))
    a = random_sparse((case["m"], case["k"]), case["da"], case["seed"])
    b = random_sparse((case["k"], case["n"]), case["db"], case["seed"] + 1)
    c0 = random_sparse((case["m"], case["n"]), 0.3, case["seed"] + 2)
    mk = random_sparse((case["m"], case["n"]), 0.4, case["seed"] + 3)
    if mk.nnz:
        mk.data[::3] = 0.0                      # explicit zeros tell value from structure
    la, lb = _layouts(case)
    A = DistSparseMatrix.from_global(a, grid, la, backend=backend)
    B = DistSparseMatrix.from_global(b, grid, lb, backend=backend)
    lc = (Layout("row", row_splits=case["rows"]) if algo == "1d"
          else Layout("row", "col"))
    M = DistSparseMatrix.from_global(mk, grid, lc, backend=backend)
    mask = None
    if case["mask"]:
        mask = Mask(M, structure="S" in case["mask"], complement="~" in case["mask"])
    out = DistSparseMatrix.from_global(c0, grid, lc, backend=backend) if case["accum"] or \
        case["replace"] else None
    with comm.track("mxm-first") as first:
        C = mxm(A, B, case["semiring"], mask=mask, accum=case["accum"], out=out,
                replace=case["replace"], algorithm=algo)
    first = first.events
    got = C.to_global()

    # reference: GraphBLAS's output rule on dense arrays
    pat, val = _ref(a, b, case["semiring"])
    if out is not None:
        cpat, cval = _pat(c0), c0.toarray()
        if case["accum"]:
            zval = np.where(pat & cpat, cval + val, np.where(pat, val, cval))
            zpat = pat | cpat
        else:
            zpat, zval = pat, val
    else:
        cpat, cval = np.zeros_like(pat), np.zeros_like(val)
        zpat, zval = pat, val
    if mask is not None:
        allow = _pat(mk) if mask.structure else (mk.toarray() != 0)
        allow = ~allow if mask.complement else allow
        keep_old = np.zeros_like(allow) if (case["replace"] or out is None) else ~allow
        epat = (zpat & allow) | (cpat & keep_old)
        evals = np.where(zpat & allow, zval, np.where(cpat & keep_old, cval, 0))
    else:
        epat, evals = zpat, zval
    gpat = _pat(got)
    collective_assert(comm, np.array_equal(gpat, epat), f"pattern differs for {case}")
    collective_assert(comm, np.allclose(got.toarray(), np.where(epat, evals, 0), atol=1e-9),
                      f"values differ for {case}")
    collective_assert(comm, C.layout == lc, f"layout {C.layout!r} != {lc!r}")

    # ledger == planner, byte for byte: setup + first call, then a second call
    plan = plan_mxm(a, b, algo, p, offsets=A.layout.offsets(grid, a.shape[0], 0) if algo == "1d"
                    else None, b_offsets=B.layout.offsets(grid, b.shape[0], 0)
                    if algo == "1d" else None, itemsize=8)
    mine = [e for e in first if e.label.startswith("mxm-")]
    want = _by_key_plan(plan, ("setup", "spmm"), comm.rank)
    collective_assert(comm, _strip(_by_key(mine)) == _strip(want),
                      f"ledger {_by_key(mine)} != plan {want} for {case}")
    with comm.track("mxm-again") as again:
        mxm(A, B, case["semiring"], algorithm=algo)
    again = [e for e in again.events if e.label.startswith("mxm-")]
    collective_assert(comm, _strip(_by_key(again)) == _strip(_by_key_plan(plan, ("spmm",), comm.rank)),
                      f"second call ledger differs from plan for {case}")


def _by_key(events):
    out = {}
    for e in events:
        key = (e.op, e.label, tuple(e.axis))
        s, r, m = out.get(key, (0, 0, 0))
        out[key] = (s + e.bytes_sent, r + e.bytes_recv, m + e.messages)
    return out


def _by_key_plan(plan, phases, rank):
    out = {}
    for e in plan.events:
        if e.phase not in phases:
            continue
        key = (e.op, e.label, tuple(e.axis))
        s, r, m = out.get(key, (0, 0, 0))
        out[key] = (s + int(e.sent[rank]), r + int(e.recv[rank]), m + int(e.messages[rank]))
    return out


def _strip(d):
    return {k: v for k, v in d.items() if any(v)}


def check_nonsquare_grid(comm, backend="numpy"):
    """SUMMA on a non-square grid raises GridError on every rank, before communicating."""
    p = comm.size
    if p < 2:
        return
    grid = ProcessGrid(comm, (p, 1), ("row", "col"))
    a = random_sparse((6, 6), 0.3, 0)
    A = DistSparseMatrix.from_global(a, grid, Layout("row", "col"), backend=backend)
    with comm.track("mxm-bad") as seen:
        try:
            mxm(A, A, algorithm="summa")
            raised = False
        except GridError:
            raised = True
    collective_assert(comm, raised, "non-square grid accepted")
    collective_assert(comm, len(seen.events) == 0, "communicated before raising")


def properties(comm, args):
    yield "mxm", case_mxm(comm.size), lambda case: check_mxm(comm, case, args.backend)


if __name__ == "__main__":
    from spgnn.testing.mpi import run_property_checks

    run_property_checks("mxm_checks", properties, examples=15,
                        after=lambda comm, args: check_nonsquare_grid(comm, args.backend))
