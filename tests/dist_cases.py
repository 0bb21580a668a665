"""Distributed checks shared by the loopback property tests and the real-MPI scripts.

Each ``check_*(comm, case)`` is collective over ``comm`` (a Communicator of
``case``'s grid size) and raises AssertionError on every rank together.
Strategies take the allowed world sizes so that a run under ``mpiexec -n P``
draws only grids of P ranks.
"""

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st

from spgnn import (AbstractGrid, DistDenseMatrix, DistSparseMatrix, Layout, ProcessGrid, spmm)
from spgnn.local.semiring import SEMIRINGS
from spgnn.testing.asserts import assert_dist_allclose, assert_dist_equal
from spgnn.testing.reference import reference_spmm
from spgnn.testing.strategies_dist import grid_shapes, layouts_for, random_sparse, splits_for

SIZES = (1, 2, 3, 4, 8)


@st.composite
def placement_case(draw, sizes=SIZES, max_dim=14):
    shape, names = draw(grid_shapes(sizes))
    ag = AbstractGrid(shape, names)
    mshape = (draw(st.integers(0, max_dim)), draw(st.integers(0, max_dim)))
    return dict(grid=(shape, names), shape=mshape, src=draw(layouts_for(ag, mshape)),
                dst=draw(layouts_for(ag, mshape)), density=draw(st.sampled_from([0.0, 0.1, 0.5])),
                seed=draw(st.integers(0, 2**31 - 1)), root=draw(st.sampled_from([None, 0])))


def check_dense_placement(comm, case, backend="numpy"):
    shape, names = case["grid"]
    mshape, src, dst, root = case["shape"], case["src"], case["dst"], case["root"]
    x = np.random.default_rng(case["seed"]).standard_normal(mshape)
    grid = ProcessGrid(comm, shape, names)
    X = DistDenseMatrix.from_global(x if (root is None or comm.rank == root) else None,
                                    grid, src, backend=backend, root=root)
    Y = X.redistribute(dst)
    (r0, r1), (c0, c1) = dst.bounds(grid, mshape)
    assert_dist_equal(comm, Y.local, x[r0:r1, c0:c1], "redistributed block")
    got = Y.to_global(root=root)
    if root is None or comm.rank == root:
        assert_dist_equal(comm, got, x, "to_global")
    else:
        assert_dist_equal(comm, np.array(got is None), np.array(True), "non-root gets None")


def check_sparse_placement(comm, case, backend="numpy"):
    shape, names = case["grid"]
    mshape, src, dst, root = case["shape"], case["src"], case["dst"], case["root"]
    a = random_sparse(mshape, case["density"], case["seed"])
    grid = ProcessGrid(comm, shape, names)
    A = DistSparseMatrix.from_global(a if (root is None or comm.rank == root) else None,
                                     grid, src, backend=backend, root=root)
    assert_dist_equal(comm, np.array(A.nnz), np.array(a.nnz), "global nnz")
    B = A.redistribute(dst)
    (r0, r1), (c0, c1) = dst.bounds(grid, mshape)
    assert_dist_equal(comm, B.local.toarray(), a[r0:r1][:, c0:c1].toarray(), "block")
    full = B.to_global(root=root)
    if root is None or comm.rank == root:
        assert_dist_equal(comm, full.toarray(), a.toarray(), "to_global")
    else:
        assert_dist_equal(comm, np.array(full is None), np.array(True), "non-root gets None")


@st.composite
def gather_case(draw, sizes=SIZES, max_dim=14):
    """A dense matrix in a rows-only layout (columns never split, other axes replicas)."""
    shape, names = draw(grid_shapes(sizes))
    ag = AbstractGrid(shape, names)
    mshape = (draw(st.integers(0, max_dim)), draw(st.integers(0, 6)))
    rows = [a for a in names if draw(st.booleans())]
    if draw(st.booleans()):
        rows.reverse()                  # layout order differs from grid order
    lay = Layout(tuple(rows))
    lay = lay.replace(row_splits=draw(splits_for(mshape[0], lay.parts(ag, 0))))
    return dict(grid=(shape, names), shape=mshape, layout=lay, seed=draw(st.integers(0, 2**31 - 1)),
                count=draw(st.integers(0, 20)))


def check_gather_rows(comm, case, backend="numpy"):
    """``gather_rows`` = ``X[ids]`` for ids that differ per rank; ledger = distinct remote rows."""
    shape, names = case["grid"]
    mshape, lay = case["shape"], case["layout"]
    x = np.random.default_rng(case["seed"]).standard_normal(mshape).astype(np.float32)
    grid = ProcessGrid(comm, shape, names)
    X = DistDenseMatrix.from_global(x, grid, lay, backend=backend)
    rng = np.random.default_rng([case["seed"], comm.rank])
    ids = rng.integers(0, mshape[0], size=case["count"] if mshape[0] else 0)
    with comm.track("gather") as stats:
        got = X.gather_rows(ids, label="g")
    assert_dist_equal(comm, got, x[ids], "gathered rows")
    # my row group's blocks: what I hold is local, everything else moves once
    (r0, r1), _ = lay.bounds(grid, mshape)
    distinct = np.unique(ids)
    remote = int(np.count_nonzero((distinct < r0) | (distinct >= r1))) if lay.rows else 0
    want = remote * mshape[1] * 4
    assert_dist_equal(comm, np.array(stats.total("bytes_recv", label="g:rows")), np.array(want),
                      "row bytes received")
    assert_dist_equal(comm, np.array(stats.total("bytes_sent", op="alltoallv", label="g:ids")),
                      np.array(8 * remote), "id bytes sent")


@st.composite
def spmm_case(draw, sizes=SIZES, max_dim=20):
    p = draw(st.sampled_from(sizes))
    n = draw(st.integers(0, max_dim))
    k = n if draw(st.booleans()) else draw(st.integers(0, max_dim))
    return dict(p=p, n=n, k=k, f=draw(st.integers(0, 5)), rows=draw(splits_for(n, p)),
                xrows=draw(splits_for(k, p)), semiring=draw(st.sampled_from(sorted(SEMIRINGS))),
                algo=draw(st.sampled_from(["1d", "1d-aware", None])),
                dtype=draw(st.sampled_from(["float32", "float64"])),
                density=draw(st.sampled_from([0.0, 0.1, 0.4])), seed=draw(st.integers(0, 2**31 - 1)))


def check_spmm_1d(comm, case, backend="numpy"):
    p, n, k, f, dtype = case["p"], case["n"], case["k"], case["f"], np.dtype(case["dtype"])
    semiring, algo = SEMIRINGS[case["semiring"]], case["algo"]
    a = random_sparse((n, k), case["density"], case["seed"], dtype=dtype)
    x = np.random.default_rng(case["seed"] + 1).standard_normal((k, f)).astype(dtype)
    expected = reference_spmm(a, x, semiring)
    grid = ProcessGrid(comm, (p,), ("row",))
    A = DistSparseMatrix.from_global(a, grid, Layout("row", row_splits=case["rows"]), backend=backend)
    X = DistDenseMatrix.from_global(x, grid, Layout("row", row_splits=case["xrows"]), backend=backend)
    with comm.track("spmm") as stats:
        Y = spmm(A, X, semiring, algorithm=algo)
    (r0, r1), _ = Y.layout.bounds(grid, Y.shape)
    assert_dist_allclose(comm, Y.local, expected[r0:r1], what=f"{algo} {semiring.name}")
    if algo == "1d":  # exact: every rank receives every other rank's block of X
        xoff = X.layout.offsets(grid, k, 0)
        want = (k - (xoff[comm.rank + 1] - xoff[comm.rank])) * f * dtype.itemsize
        assert_dist_equal(comm, np.array(stats.total("bytes_recv", op="allgatherv")), np.array(want),
                          "1d bytes received")


def lambda_volume(a, offsets):
    """Σ_v λ_v: for each column v, the parts other than part(v) that hold a row using v."""
    n = a.shape[1]
    part = np.searchsorted(offsets, np.arange(n), side="right") - 1
    rpart = np.searchsorted(offsets, np.arange(a.shape[0]), side="right") - 1
    coo = sp.coo_array(a)
    pairs = np.unique(np.stack([coo.col, rpart[coo.row]], axis=1), axis=0)
    return int(np.sum(pairs[:, 1] != part[pairs[:, 0]])) if pairs.size else 0
