"""Distributed matrices and SpMM on the loopback transport, against scipy.

Hypothesis draws grids (P in 1, 2, 3, 4, 8 with every factorisation into up
to three axes), shapes (including n < P and empty blocks), explicit uneven
splits, densities, dtypes and semirings; P virtual ranks run as threads of
this process.  tests/mpi/dist_checks.py runs the same checks under mpiexec.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given

from spgnn import DistDenseMatrix, DistSparseMatrix, Layout, ProcessGrid, run_loopback, spmm
from spgnn.testing.strategies_dist import random_sparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dist_cases import (check_dense_placement, check_gather_rows, check_sparse_placement,  # noqa: E402
                        check_spmm_1d, gather_case, lambda_volume, placement_case, spmm_case)


# A deadlock in a test surfaces as TimeoutError after this many seconds
# (kept short so that Hypothesis shrinking of a hang stays quick).
TIMEOUT = 15


def _ranks(case):
    return int(np.prod(case["grid"][0]))


@given(placement_case())
def test_dense_place_redistribute_gather(case):
    run_loopback(_ranks(case), check_dense_placement, case, timeout=TIMEOUT)


@given(placement_case())
def test_sparse_place_redistribute_gather(case):
    run_loopback(_ranks(case), check_sparse_placement, case, timeout=TIMEOUT)


@given(gather_case())
def test_gather_rows_matches_indexing(case):
    run_loopback(_ranks(case), check_gather_rows, case, timeout=TIMEOUT)


@pytest.mark.parametrize("grid, rows", [
    (((2, 2), ("row", "col")), ("col", "row")),       # block order != sub-communicator order
    (((2, 3), ("row", "layer")), ("row",)),           # replicas fetch within their group
    (((2, 2, 2), ("row", "col", "layer")), ("layer", "row")),
])
def test_gather_rows_on_multi_axis_layouts(grid, rows):
    case = dict(grid=grid, shape=(11, 3), layout=Layout(rows), seed=5, count=9)
    run_loopback(int(np.prod(grid[0])), check_gather_rows, case, timeout=TIMEOUT)


@given(spmm_case())
def test_spmm_1d_matches_reference(case):
    run_loopback(case["p"], check_spmm_1d, case, timeout=TIMEOUT)


def _aware_bytes(a, p, f):
    n = a.shape[0]
    off = [i * n // p for i in range(p)] + [n]
    x = np.ones((n, f), dtype=np.float32)

    def body(comm):
        grid = ProcessGrid(comm, (p,), ("row",))
        A = DistSparseMatrix.from_global(a, grid, Layout("row", row_splits=off), backend="numpy")
        X = DistDenseMatrix.from_global(x, grid, Layout("row", row_splits=off), backend="numpy")
        spmm(A, X, algorithm="1d-aware")  # builds and caches the exchange plan
        with comm.track("aware") as stats:
            spmm(A, X, algorithm="1d-aware")
        return (stats.total("bytes_sent", op="alltoallv"), stats.total("bytes_recv", op="alltoallv"))

    return off, run_loopback(p, body, timeout=TIMEOUT)


def test_spmm_1d_aware_ring_example():
    """The report's worked example: 8-cycle, 4 parts, f=3, fp32 -> 96 B, 24 B per rank."""
    n = 8
    i = np.arange(n)
    a = sp.csr_array((np.ones(2 * n, dtype=np.float32), (np.r_[i, i], np.r_[(i + 1) % n, (i - 1) % n])),
                     shape=(n, n))
    _, res = _aware_bytes(a, 4, 3)
    assert [s for s, _ in res] == [24, 24, 24, 24]
    assert [r for _, r in res] == [24, 24, 24, 24]


def test_spmm_1d_aware_moves_sum_of_lambda_rows():
    a = sp.csr_array(random_sparse((60, 60), 0.06, 11), dtype=np.float32)
    for p in (2, 3, 5):
        off, res = _aware_bytes(a, p, 4)
        want = lambda_volume(a, off) * 4 * 4
        assert sum(s for s, _ in res) == want
        assert sum(r for _, r in res) == want


def test_matmul_operator_is_spmm():
    """``A @ X`` is ``spmm(A, X)``: same bits, same ledger events; a foreign operand is a TypeError."""
    a = sp.csr_array(random_sparse((30, 30), 0.1, 5), dtype=np.float32)
    x = np.random.default_rng(0).standard_normal((30, 4)).astype(np.float32)

    def fn(comm):
        grid = ProcessGrid(comm, (comm.size,), ("row",))
        A, B = (DistSparseMatrix.from_global(a, grid, Layout("row")) for _ in range(2))
        X = DistDenseMatrix.from_global(x, grid, Layout("row"))
        with comm.track("op") as op:
            Y = A @ X
        with comm.track("fn") as fn_:
            Z = spmm(B, X)      # a fresh matrix: its exchange plan is built too
        with pytest.raises(TypeError, match="DistDenseMatrix"):
            A @ x
        return (Y.layout == Z.layout, np.array_equal(Y.local, Z.local),
                [(e.op, e.bytes_sent) for e in op.events] == [(e.op, e.bytes_sent) for e in fn_.events])

    assert run_loopback(3, fn, timeout=TIMEOUT) == [(True, True, True)] * 3
