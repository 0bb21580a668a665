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
