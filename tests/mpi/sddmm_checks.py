"""Distributed SDDMM, edge softmax and the reverse-plan ``Aᵀ·G``: checks shared by the
loopback property tests (tests/property/test_sddmm_dist.py) and real mpiexec runs.

Each ``check_*(comm, case)`` is collective, compares with scipy/numpy on
every rank, and asserts the exact bytes of the ledger against volumes
computed here from the global matrix (independently of the exchange plan).

Run under MPI: ``mpiexec -n P python tests/mpi/sddmm_checks.py [--examples N]
[--backend numba]``; Hypothesis runs derandomized so every rank draws the
same examples.
"""

import numpy as np
from hypothesis import strategies as st

from spgnn import DistDenseMatrix, DistSparseMatrix, Layout, ProcessGrid
from spgnn.core.edge_softmax import edge_softmax, edge_softmax_backward, row_reduce
from spgnn.core.sddmm import sddmm
from spgnn.core.spmm_reverse import spmm_transpose
from spgnn.local.semiring import SEMIRINGS
from spgnn.testing.asserts import assert_dist_allclose, assert_dist_equal
from spgnn.testing.strategies_dist import random_sparse, splits_for

SIZES = (1, 2, 3, 4, 8)
#: SDDMM accepts every semiring except the row_mean ones.
SDDMM_SEMIRINGS = sorted(name for name, s in SEMIRINGS.items() if not s.row_mean)


@st.composite
def sddmm_case(draw, sizes=SIZES, max_dim=18):
    p = draw(st.sampled_from(sizes))
    n = draw(st.integers(0, max_dim))
    k = n if draw(st.booleans()) else draw(st.integers(0, max_dim))
    return dict(p=p, n=n, k=k, d=draw(st.integers(0, 4)), rows=draw(splits_for(n, p)),
                yrows=draw(splits_for(k, p)), algo=draw(st.sampled_from(["1d", "1d-aware", None])),
                semiring=draw(st.sampled_from(SDDMM_SEMIRINGS)),
                dtype=draw(st.sampled_from(["float32", "float64"])),
                density=draw(st.sampled_from([0.0, 0.1, 0.4])),
                f=draw(st.integers(0, 3)), seed=draw(st.integers(0, 2**31 - 1)))


def reference_sddmm(a, x, y, semiring):
    """Dense-per-entry reference: ``a.data[e] (x) ((+)_k x[i,k] (x) y[j,k])``."""
    coo = a.tocoo()
    terms = semiring.mul(x[coo.row], y[coo.col]) if x.shape[1] else np.zeros((coo.nnz, 0), a.dtype)
    inner = semiring.add.ufunc.reduce(terms, axis=1, initial=semiring.add.identity)
    return coo.row, coo.col, semiring.mul(coo.data, inner.astype(a.dtype))


def _dense_of(S):
    """My block of a DistSparseMatrix as a dense array (global column numbering)."""
    return S.local.to_scipy().toarray()


def check_sddmm(comm, case, backend="numpy"):
    p, n, k, d, dtype = case["p"], case["n"], case["k"], case["d"], np.dtype(case["dtype"])
    semiring, algo = SEMIRINGS[case["semiring"]], case["algo"]
    a = random_sparse((n, k), case["density"], case["seed"], dtype=dtype)
    rng = np.random.default_rng(case["seed"] + 1)
    x = rng.standard_normal((n, d)).astype(dtype)
    y = rng.standard_normal((k, d)).astype(dtype)
    rr, cc, vv = reference_sddmm(a, x, y, semiring)
    want = np.zeros((n, k), dtype=dtype)
    want[rr, cc] = vv
    grid = ProcessGrid(comm, (p,), ("row",))
    la = Layout("row", row_splits=case["rows"])
    A = DistSparseMatrix.from_global(a, grid, la, backend=backend)
    X = DistDenseMatrix.from_global(x, grid, la, backend=backend)
    Y = DistDenseMatrix.from_global(y, grid, Layout("row", row_splits=case["yrows"]),
                                    backend=backend)
    sddmm(A, X, Y, semiring, algorithm=algo)          # the first call builds and caches the plan
    with comm.track("sddmm") as stats:
        C = sddmm(A, X, Y, semiring, algorithm=algo)
    assert_dist_equal(comm, np.array(C.layout == la and C.shape == (n, k)), np.array(True),
                      "output layout")
    assert_dist_equal(comm, np.asarray(C.local.indices), np.asarray(A.local.indices),
                      "pattern and storage order kept")
    (r0, r1), _ = la.bounds(grid, (n, k))
    assert_dist_allclose(comm, _dense_of(C), want[r0:r1], what=f"sddmm {algo} {semiring.name}")

    # exact bytes from the global matrix: Y's rows my block names, minus my own
    yoff = Y.layout.offsets(grid, k, 0)
    y0, y1 = yoff[comm.rank], yoff[comm.rank + 1]
    w = dtype.itemsize
    if algo is None and p == 1:
        want_bytes, op = 0, None                       # local: nothing moves
    elif algo == "1d":
        want_bytes, op = (k - (y1 - y0)) * d * w, "allgatherv"
    else:
        cols = np.unique(a[r0:r1].tocoo().col)
        want_bytes, op = int(np.count_nonzero((cols < y0) | (cols >= y1))) * d * w, "alltoallv"
    got = stats.total("bytes_recv", op=op) if op else stats.total("bytes_recv")
    assert_dist_equal(comm, np.array(got), np.array(want_bytes), f"sddmm {algo} bytes received")
    others = {ev.op for ev in stats} - {op, "allgather:counts"}
    assert_dist_equal(comm, np.array(not others), np.array(True),
                      f"no other communication (got {sorted(others)})")


@st.composite
def sddmm15_case(draw, sizes=SIZES, max_dim=16):
    p = draw(st.sampled_from(sizes))
    c = draw(st.sampled_from([c for c in range(1, p + 1) if p % c == 0]))
    n = draw(st.integers(0, max_dim))
    k = n if draw(st.booleans()) else draw(st.integers(0, max_dim))
    return dict(p=p, c=c, n=n, k=k, d=draw(st.integers(0, 3)), rows=draw(splits_for(n, p // c)),
                yrows=draw(splits_for(k, p // c)), dtype=draw(st.sampled_from(["float32", "float64"])),
                semiring=draw(st.sampled_from(SDDMM_SEMIRINGS)),
                density=draw(st.sampled_from([0.0, 0.1, 0.4])), seed=draw(st.integers(0, 2**31 - 1)))


def check_sddmm_15d(comm, case, backend="numpy"):
    """1.5D column slabs: each replica computes its slab; bytes = Y rows the slab names."""
    from spgnn import layouts_15d

    p, c, n, k, d, dtype = case["p"], case["c"], case["n"], case["k"], case["d"], np.dtype(case["dtype"])
    semiring = SEMIRINGS[case["semiring"]]
    a = random_sparse((n, k), case["density"], case["seed"], dtype=dtype)
    rng = np.random.default_rng(case["seed"] + 1)
    x = rng.standard_normal((n, d)).astype(dtype)
    y = rng.standard_normal((k, d)).astype(dtype)
    rr, cc, vv = reference_sddmm(a, x, y, semiring)
    want = np.zeros((n, k), dtype=dtype)
    want[rr, cc] = vv
    grid = ProcessGrid(comm, (p // c, c), ("row", "layer"))
    la, ly = layouts_15d(grid, n, k, row_splits=case["rows"], x_row_splits=case["yrows"])
    A = DistSparseMatrix.from_global(a, grid, la, backend=backend)
    X = DistDenseMatrix.from_global(x, grid, Layout("row", row_splits=case["rows"]), backend=backend)
    Y = DistDenseMatrix.from_global(y, grid, ly, backend=backend)
    sddmm(A, X, Y, semiring)                           # plans
    with comm.track("sddmm15") as stats:
        C = sddmm(A, X, Y, semiring)
    (r0, r1), (c0, c1) = la.bounds(grid, (n, k))
    assert_dist_equal(comm, np.array(C.layout == la), np.array(True), "output layout")
    assert_dist_allclose(comm, _dense_of(C), want[r0:r1, c0:c1], what=f"sddmm 15d {semiring.name}")
    yoff = ly.offsets(grid, k, 0)
    i = grid.coords[0]
    cols = np.unique(a[r0:r1][:, c0:c1].tocoo().col + c0)
    lam = int(np.count_nonzero((cols < yoff[i]) | (cols >= yoff[i + 1])))
    got = stats.total("bytes_recv", op="alltoallv")
    assert_dist_equal(comm, np.array(got), np.array(lam * d * dtype.itemsize), "15d bytes")
    others = {ev.op for ev in stats} - {"alltoallv"}
    assert_dist_equal(comm, np.array(not others), np.array(True),
                      f"no other communication (got {sorted(others)})")


def check_softmax_and_transpose(comm, case, backend="numpy"):
    """Edge softmax (values and backward) and ``Aᵀ·G`` through the reversed plan, square A."""
    p, n, f, dtype = case["p"], case["n"], case["f"], np.dtype(case["dtype"])
    a = random_sparse((n, n), case["density"], case["seed"], dtype=dtype)
    rng = np.random.default_rng(case["seed"] + 2)
    g = rng.standard_normal((n, f)).astype(dtype)
    grid = ProcessGrid(comm, (p,), ("row",))
    la = Layout("row", row_splits=case["rows"])
    A = DistSparseMatrix.from_global(a, grid, la, backend=backend)
    G = DistDenseMatrix.from_global(g, grid, la, backend=backend)
    (r0, r1), _ = la.bounds(grid, (n, n))

    # softmax over each row's stored entries, and its backward, against numpy
    S = edge_softmax(A)
    dal = rng.standard_normal(a.nnz).astype(dtype)
    dA = a.copy()
    dA.data = dal
    dS = DistSparseMatrix.from_global(dA, grid, la, backend=backend)
    dV = edge_softmax_backward(S, dS)
    want_s, want_dv = np.zeros((n, n)), np.zeros((n, n))
    for i in range(n):
        lo, hi = a.indptr[i], a.indptr[i + 1]
        if hi > lo:
            v = a.data[lo:hi].astype(np.float64)
            s = np.exp(v - v.max())
            s /= s.sum()
            want_s[i, a.indices[lo:hi]] = s
            want_dv[i, a.indices[lo:hi]] = s * (dal[lo:hi] - np.dot(s, dal[lo:hi]))
    assert_dist_allclose(comm, _dense_of(S), want_s[r0:r1].astype(dtype), what="edge softmax")
    assert_dist_allclose(comm, _dense_of(dV), want_dv[r0:r1].astype(dtype), what="softmax bwd")
    sums = row_reduce(S)
    has = np.diff(a.indptr)[r0:r1] > 0
    assert_dist_allclose(comm, sums[has], np.ones(int(has.sum()), dtype), what="rows sum to 1")

    # Aᵀ·G via the reversed exchange: sends exactly what the forward receives
    spmm_transpose(A, G)                              # builds the plan
    with comm.track("spmm-t") as stats:
        T = spmm_transpose(A, G)
    assert_dist_allclose(comm, T.local, (a.T @ g)[r0:r1], what="Aᵀ·G")
    cols = np.unique(a[r0:r1].tocoo().col)
    lam = int(np.count_nonzero((cols < r0) | (cols >= r1))) if p > 1 else 0
    assert_dist_equal(comm, np.array(stats.total("bytes_sent", op="alltoallv") if p > 1 else 0),
                      np.array(lam * f * dtype.itemsize), "Aᵀ·G bytes sent")


def properties(comm, args):
    p, be = comm.size, args.backend
    yield "sddmm", sddmm_case(sizes=(p,)), lambda case: check_sddmm(comm, case, be)
    yield ("softmax", sddmm_case(sizes=(p,)),
           lambda case: check_softmax_and_transpose(comm, case, be))
    yield "sddmm15", sddmm15_case(sizes=(p,)), lambda case: check_sddmm_15d(comm, case, be)


if __name__ == "__main__":
    from spgnn.testing.mpi import run_property_checks

    run_property_checks("sddmm_checks", properties, examples=20,
                        summary=lambda args: f" backend={args.backend}")
