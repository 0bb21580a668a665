"""1.5D and 3D SpMM checks, shared by the loopback property tests and real mpiexec runs.

Each ``check_*(comm, case)`` is collective over ``comm`` (a Communicator of
``case``'s grid size), compares the distributed result with scipy/numpy on
every rank, checks the output layout and the exact bytes of the ledger
against independently computed volumes, and raises AssertionError on every
rank together (collective asserts).

Run under MPI: ``mpiexec -n P python -m mpi4py tests/mpi/spmm_checks.py
[--examples N] [--c 2,4] [--grid3d 2,2,2]``; Hypothesis runs derandomized so
every rank draws the same examples.
"""

import numpy as np
from hypothesis import strategies as st

from spgnn import DistDenseMatrix, DistSparseMatrix, Layout, ProcessGrid, spmm
from spgnn.comm.stats import block_size
from spgnn.core.depth import nested_splits
from spgnn.grid import roles_for_layer
from spgnn.layout import block_bounds
from spgnn.local.semiring import SEMIRINGS
from spgnn.testing.asserts import assert_dist_allclose, assert_dist_equal
from spgnn.testing.reference import reference_spmm
from spgnn.testing.strategies_dist import random_sparse, splits_for

SIZES = (1, 2, 3, 4, 8)


def _divisors(p):
    return [c for c in range(1, p + 1) if p % c == 0]


def _shapes3(p):
    return [(a, b, p // (a * b)) for a in _divisors(p) for b in _divisors(p // a)]


# ----------------------------------------------------------------------------- 1.5D


@st.composite
def case_15d(draw, sizes=SIZES, cs=None, max_dim=18):
    p = draw(st.sampled_from(sizes))
    c = draw(st.sampled_from([c for c in _divisors(p) if cs is None or c in cs]))
    k = p // c
    n = draw(st.integers(0, max_dim))
    m = n if draw(st.booleans()) else draw(st.integers(0, max_dim))   # A is n x m, X is m x f
    form = draw(st.sampled_from(["slab-default", "slab-random", "whole"]))
    algos = ["15d", "15d-aware"] + ([None] if form != "whole" else [])
    return dict(p=p, c=c, n=n, m=m, f=draw(st.integers(0, 4)), rows=draw(splits_for(n, k)),
                xrows=draw(splits_for(m, k)),
                cols=draw(splits_for(m, c)) if form == "slab-random" else None, form=form,
                algo=draw(st.sampled_from(algos)),
                semiring=draw(st.sampled_from(sorted(SEMIRINGS))),
                dtype=draw(st.sampled_from(["float32", "float64"])),
                density=draw(st.sampled_from([0.0, 0.1, 0.4])),
                seed=draw(st.integers(0, 2**31 - 1)))


def layouts_for_15d(case, grid):
    m, k, c = case["m"], case["p"] // case["c"], case["c"]
    xl = Layout("row", row_splits=case["xrows"])
    if case["form"] == "whole":
        return Layout("row", row_splits=case["rows"]), xl
    cols = case["cols"]
    if cols is None:       # the report's Q_j: X blocks block_bounds(k, c, j)
        xoff = xl.offsets(grid, m, 0)
        cols = tuple(xoff[block_bounds(k, c, j)[0]] for j in range(c)) + (m,)
    return Layout("row", "layer", row_splits=case["rows"], col_splits=cols), xl


def check_spmm_15d(comm, case, backend="numpy"):
    p, c, n, m, f = case["p"], case["c"], case["n"], case["m"], case["f"]
    dtype, semiring, algo = np.dtype(case["dtype"]), SEMIRINGS[case["semiring"]], case["algo"]
    a = random_sparse((n, m), case["density"], case["seed"], dtype=dtype)
    x = np.random.default_rng(case["seed"] + 1).standard_normal((m, f)).astype(dtype)
    expected = reference_spmm(a, x, semiring)
    grid = ProcessGrid(comm, (p // c, c), ("row", "layer"))
    la, lx = layouts_for_15d(case, grid)
    A = DistSparseMatrix.from_global(a, grid, la, backend=backend)
    X = DistDenseMatrix.from_global(x, grid, lx, backend=backend)
    spmm(A, X, semiring, algorithm=algo)           # the first call builds and caches plans
    with comm.track("spmm15") as stats:
        Y = spmm(A, X, semiring, algorithm=algo)
    assert_dist_equal(comm, np.array(Y.layout == Layout("row", row_splits=case["rows"])),
                      np.array(True), "output layout")
    (r0, r1), _ = Y.layout.bounds(grid, Y.shape)
    assert_dist_allclose(comm, Y.local, expected[r0:r1], what=f"{algo} {semiring.name}")

    # Exact bytes, computed here from the global matrix (independently of the plan).
    i, j = grid.coords
    xoff = lx.offsets(grid, m, 0)
    if la.cols:
        c0, c1 = la.bounds(grid, (n, m))[1]
    else:
        q0, q1 = block_bounds(p // c, c, j)
        c0, c1 = xoff[q0], xoff[q1]
    x0, x1 = xoff[i], xoff[i + 1]
    w = dtype.itemsize
    if algo == "15d":
        own = max(0, min(x1, c1) - max(x0, c0))
        want = ((c1 - c0) - own) * f * w
        got = stats.total("bytes_recv", op="bcast")
    else:
        cols = np.unique(a[r0:r1][:, c0:c1].tocoo().col + c0)
        want = int(np.count_nonzero((cols < x0) | (cols >= x1))) * f * w
        got = stats.total("bytes_recv", op="alltoallv")
    assert_dist_equal(comm, np.array(got), np.array(want), f"{algo} row exchange bytes")
    size = (r1 - r0) * f
    want_ar = 2 * (size - block_size(size, c, j)) * w if c > 1 else 0
    assert_dist_equal(comm, np.array(stats.total("bytes_sent", op="allreduce", axis="layer")),
                      np.array(want_ar), "replica all-reduce bytes")
    others = {ev.op for ev in stats} - {"bcast", "alltoallv", "allreduce"}
    assert_dist_equal(comm, np.array(not others), np.array(True),
                      f"no other communication (got {sorted(others)})")


# ----------------------------------------------------------------------------- 3D


@st.composite
def case_3d(draw, sizes=SIZES, shapes=None, max_dim=16):
    p = draw(st.sampled_from(sizes))
    shape = draw(st.sampled_from([s for s in _shapes3(p) if shapes is None or s in shapes]))
    layer = draw(st.integers(0, 2))
    g = dict(zip(("x", "y", "z"), shape))
    o, i, d = roles_for_layer(layer)
    n = draw(st.integers(0, max_dim))
    m = n if draw(st.booleans()) else draw(st.integers(0, max_dim))
    f = draw(st.integers(0, 6))
    return dict(p=p, shape=shape, layer=layer, n=n, m=m, f=f,
                rows=draw(splits_for(n, g[d])), ocols=draw(splits_for(m, g[o])),
                fcols=draw(splits_for(f, g[i])), sharded=draw(st.booleans()),
                algo=draw(st.sampled_from(["3d", None])),
                semiring=draw(st.sampled_from(sorted(SEMIRINGS))),
                dtype=draw(st.sampled_from(["float32", "float64"])),
                density=draw(st.sampled_from([0.0, 0.1, 0.4])),
                seed=draw(st.integers(0, 2**31 - 1)),
                blocks=draw(st.sampled_from([1, 2, 3, 7])))     # blocked aggregation


def check_spmm_3d(comm, case, backend="numpy"):
    n, m, f = case["n"], case["m"], case["f"]
    dtype, semiring, algo = np.dtype(case["dtype"]), SEMIRINGS[case["semiring"]], case["algo"]
    a = random_sparse((n, m), case["density"], case["seed"], dtype=dtype)
    x = np.random.default_rng(case["seed"] + 1).standard_normal((m, f)).astype(dtype)
    expected = reference_spmm(a, x, semiring)
    grid = ProcessGrid(comm, case["shape"], ("x", "y", "z"))
    o, i, d = roles_for_layer(case["layer"])
    go, gd = grid.axis_size(o), grid.axis_size(d)
    la = Layout(d, o, row_splits=case["rows"], col_splits=case["ocols"])
    ooff = la.offsets(grid, m, 1)
    if case["sharded"]:
        lx = Layout((o, d), i, row_splits=nested_splits(ooff, gd), col_splits=case["fcols"])
    else:
        lx = Layout(o, i, row_splits=case["ocols"], col_splits=case["fcols"])
    A = DistSparseMatrix.from_global(a, grid, la, backend=backend)
    X = DistDenseMatrix.from_global(x, grid, lx, backend=backend)
    blocks = case.get("blocks", 1)          # row chunks: the same bytes and values
    spmm(A, X, semiring, algorithm=algo, row_blocks=blocks)
    with comm.track("spmm3d") as stats:
        Y = spmm(A, X, semiring, algorithm=algo, row_blocks=blocks)
    want_layout = Layout(d, i, row_splits=case["rows"], col_splits=case["fcols"])
    assert_dist_equal(comm, np.array(Y.layout == want_layout), np.array(True), "output layout")
    (r0, r1), (f0, f1) = Y.layout.bounds(grid, Y.shape)
    assert_dist_allclose(comm, Y.local, expected[r0:r1, f0:f1],
                         what=f"3d {case['shape']} roles {(o, i, d)} {semiring.name}")
    # Exact bytes: all-gather over d (first layer) and all-reduce over o.
    w = dtype.itemsize
    ob = grid.axis_index(o)
    orows = ooff[ob + 1] - ooff[ob]
    if case["sharded"] and gd > 1:
        (s0, s1), _ = lx.bounds(grid, (m, f))
        want_ag = (orows - (s1 - s0)) * (f1 - f0) * w
    else:
        want_ag = 0
    assert_dist_equal(comm, np.array(stats.total("bytes_recv", op="allgatherv", axis=d)),
                      np.array(want_ag), "all-gather over d bytes")
    size = (r1 - r0) * (f1 - f0)
    want_ar = 2 * (size - block_size(size, go, ob)) * w if go > 1 else 0
    assert_dist_equal(comm, np.array(stats.total("bytes_sent", op="allreduce", axis=o)),
                      np.array(want_ar), "all-reduce over o bytes")
    others = {ev.op for ev in stats} - {"allgatherv", "allgather:counts", "allreduce"}
    assert_dist_equal(comm, np.array(not others), np.array(True),
                      f"no other communication (got {sorted(others)})")


def properties(comm, args):
    p = comm.size
    if args.c:
        cs = tuple(int(v) for v in args.c.split(","))
        yield ("spmm15", case_15d(sizes=(p,), cs=cs),
               lambda case: check_spmm_15d(comm, case, args.backend))
    shapes = None if args.grid3d == "all" else [tuple(int(v) for v in s.split(","))
                                                 for s in args.grid3d.split(";")]
    yield ("spmm3", case_3d(sizes=(p,), shapes=shapes),
           lambda case: check_spmm_3d(comm, case, args.backend))


def options(parser):
    parser.add_argument("--c", default="", help="comma-separated replication factors for 15d "
                        "(empty: skip 1.5D)")
    parser.add_argument("--grid3d", default="all", help="'all' (every X x Y x Z shape), or "
                        "shapes like 2,2,2;1,2,4")


if __name__ == "__main__":
    from spgnn.testing.mpi import run_property_checks

    run_property_checks("spmm_checks", properties, examples=12, options=options,
                        summary=lambda args: f" c={args.c or '-'} grid3d={args.grid3d}")
