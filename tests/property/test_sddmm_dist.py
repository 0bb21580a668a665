"""Distributed SDDMM, edge softmax and ``Aᵀ·G`` (reversed plan) on the loopback transport.

Hypothesis draws P in 1, 2, 3, 4, 8, shapes with n < P and empty blocks,
uneven row splits for A/X and for Y, semirings, dtypes and densities; the
checks (tests/mpi/sddmm_checks.py, shared with the mpiexec runs) compare
with scipy/numpy and assert the ledger's bytes exactly.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings

from spgnn import (DimensionMismatch, DistDenseMatrix, DistSparseMatrix, Layout, LayoutMismatch,
                   ProcessGrid, grid_15d, run_loopback, spmm)
from spgnn.core.edge_softmax import edge_softmax, with_values
from spgnn.core.sddmm import sddmm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mpi"))
from sddmm_checks import (check_sddmm, check_sddmm_15d, check_softmax_and_transpose,  # noqa: E402
                          sddmm15_case, sddmm_case)

TIMEOUT = 20


@settings(max_examples=20)
@given(sddmm_case())
def test_sddmm_matches_reference(case):
    run_loopback(case["p"], check_sddmm, case, timeout=TIMEOUT)


@settings(max_examples=12)
@given(sddmm_case())
def test_edge_softmax_and_reverse_spmm(case):
    run_loopback(case["p"], check_softmax_and_transpose, case, timeout=TIMEOUT)


@settings(max_examples=15)
@given(sddmm15_case())
def test_sddmm_15d_aware_matches_reference(case):
    run_loopback(case["p"], check_sddmm_15d, case, timeout=TIMEOUT)


def _ring(n=8):
    i = np.arange(n)
    return sp.csr_array((np.ones(2 * n), (np.r_[i, i], np.r_[(i + 1) % n, (i - 1) % n])),
                        shape=(n, n))


def test_sddmm_reuses_the_spmm_plan_and_with_values_keeps_it():
    """One plan for SpMM and SDDMM; with_values carries it, so nothing is rebuilt."""
    a = _ring()
    x = np.arange(24, dtype=np.float64).reshape(8, 3)

    def body(comm):
        grid = ProcessGrid(comm, (4,), ("row",))
        A = DistSparseMatrix.from_global(a, grid, Layout("row"))
        X = DistDenseMatrix.from_global(x, grid, Layout("row"))
        spmm(A, X, algorithm="1d-aware")                     # builds the plan
        with comm.track("s") as stats:
            C = sddmm(A, X, X)
            B = with_values(A, C.local.data)
            Y = spmm(B, X, algorithm="1d-aware")
        labels = sorted({ev.label for ev in stats})
        return labels, stats.total("bytes_recv"), Y.to_global(), C.to_global().toarray()

    res = run_loopback(4, body, timeout=TIMEOUT)
    labels, got, y, c = res[0]
    # each rank needs its two ring neighbours' rows of X: 2 rows x 3 x 8 B, twice
    assert labels == ["sddmm-1d-aware:exchange", "spmm-1d-aware:exchange"]
    assert [r[1] for r in res] == [2 * 2 * 3 * 8] * 4
    want_c = a.toarray() * (x @ x.T)
    np.testing.assert_allclose(c, want_c)
    np.testing.assert_allclose(y, sp.csr_array(want_c) @ x)


def test_sddmm_refuses_other_layouts_on_every_rank():
    a = _ring()
    x = np.ones((8, 2))

    def body(comm):
        errs = []
        grid = grid_15d(2, comm)
        A = DistSparseMatrix.from_global(a, grid, Layout("row", "layer"))   # 2D: Y over "layer"
        X = DistDenseMatrix.from_global(x, grid, Layout("row"))
        Yl = DistDenseMatrix.from_global(x, grid, Layout("layer"))
        try:
            sddmm(A, X, Yl)
        except LayoutMismatch as exc:
            errs.append(type(exc).__name__)
        g1 = ProcessGrid(comm, (4,), ("row",))
        A1 = DistSparseMatrix.from_global(a, g1, Layout("row", row_splits=(0, 2, 4, 6, 8)))
        Xo = DistDenseMatrix.from_global(x, g1, Layout("row", row_splits=(0, 1, 4, 6, 8)))
        for args, want in (((A1, Xo, Xo), LayoutMismatch),
                           ((A1, DistDenseMatrix.from_global(np.ones((8, 3)), g1, Layout("row")),
                             DistDenseMatrix.from_global(x, g1, Layout("row"))), DimensionMismatch)):
            try:
                sddmm(*args)
            except want as exc:
                errs.append(type(exc).__name__)
        with comm.track("none") as stats:
            try:
                sddmm(A1, Xo, Xo, "mean")
            except ValueError:
                errs.append("ValueError")
        return errs, len(list(stats))

    for errs, events in run_loopback(4, body, timeout=TIMEOUT):
        assert errs == ["LayoutMismatch", "LayoutMismatch", "DimensionMismatch", "ValueError"]
        assert events == 0


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_sddmm_backends_agree(backend):
    case = dict(p=3, n=11, k=9, d=3, rows=None, yrows=(0, 0, 4, 9), algo="1d-aware",
                semiring="plus_times", dtype="float64", density=0.4, f=2, seed=7)
    run_loopback(3, check_sddmm, case, backend, timeout=60)
