"""Distributed assign (GrB_assign) against a dense numpy reference and its ledger bytes, on
loopback ranks (n < P, empty index lists, every mask/accum/replace, matrix and scalar values,
plain function and expression API); errors on every rank before communicating.
tests/test_assign_mpi.py runs the same checks under real mpiexec."""

import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spgnn import run_loopback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mpi"))
from assign_checks import case_assign, check_assign, check_assign_errors  # noqa: E402


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([1, 2, 3, 4]).flatmap(case_assign))
def test_assign_matches_reference_and_ledger(case):
    run_loopback(case["p"], lambda comm: check_assign(comm, case), timeout=60)


@pytest.mark.parametrize("p", [1, 3])
def test_assign_errors_on_every_rank_before_communicating(p):
    run_loopback(p, lambda comm: check_assign_errors(comm), timeout=60)


def test_assign_expression_forms():
    """``C[rows, cols] << expr`` evaluates the expression first; ``:`` means all;
    ``C[rows, cols].new()`` extracts; a key that is not a pair is a TypeError."""
    import numpy as np

    from spgnn import DistSparseMatrix, Layout, ProcessGrid, extract
    from spgnn.testing.strategies_dist import random_sparse

    c0 = random_sparse((5, 4), 0.5, 7)
    a = random_sparse((2, 4), 0.6, 8)

    def body(comm):
        grid = ProcessGrid(comm, (comm.size,), ("row",))
        C = DistSparseMatrix.from_global(c0, grid, Layout("row"), backend="numpy")
        A = DistSparseMatrix.from_global(a, grid, Layout("row"), backend="numpy")
        C[[4, 1], :] << A.apply("ainv")
        C[:, [2]] << 1.5
        sub = C[[0, 4], [3, 2]].new().to_global().toarray()
        ref = extract(C, [0, 4], [3, 2]).to_global().toarray()
        try:
            C[1]
            bad = None
        except TypeError as e:
            bad = str(e)
        return C.to_global().toarray(), sub, ref, bad

    for got, sub, ref, bad in run_loopback(2, body, timeout=60):
        want = c0.toarray()
        want[[4, 1], :] = -a.toarray()
        want[:, 2] = 1.5
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(sub, ref)
        np.testing.assert_array_equal(sub, want[np.ix_([0, 4], [3, 2])])
        assert bad is not None and "C[rows, cols]" in bad
