"""Distributed mxm (1d, summa) against a dense reference, and its ledger against the planner,
on loopback ranks (tests/test_mxm_mpi.py runs the same checks under real mpiexec)."""

import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spgnn import run_loopback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mpi"))
from mxm_checks import case_mxm, check_mxm, check_nonsquare_grid  # noqa: E402


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([1, 2, 3, 4]).flatmap(case_mxm))
def test_mxm_matches_reference_and_plan(case):
    run_loopback(case["p"], lambda comm: check_mxm(comm, case), timeout=60)


@pytest.mark.parametrize("p", [2, 3])
def test_summa_refuses_non_square_grid_before_communicating(p):
    run_loopback(p, lambda comm: check_nonsquare_grid(comm), timeout=30)
