"""The shared Hypothesis-under-MPI runner (spgnn.testing.mpi.run_property_checks) under mpiexec.

tests/mpi/runner_checks.py asserts that every rank drew the same examples and
that two properties over one strategy drew different ones; a failing example
on one rank must end the job non-zero without the OK line.
"""

import os

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

SCRIPT = os.path.join(os.path.dirname(__file__), "mpi", "runner_checks.py")

pytestmark = mpi_test_marks()


def test_every_rank_draws_the_same_examples():
    pytest.importorskip("mpi4py")
    proc = run_mpi([SCRIPT, "--examples", "12"], 3, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "OK runner_checks 3 ranks" in proc.stdout, proc.stdout[-4000:]


def test_a_failing_example_on_one_rank_fails_the_job():
    pytest.importorskip("mpi4py")
    proc = run_mpi([SCRIPT, "--fail-rank", "1"], 2, timeout=120)
    assert proc.returncode != 0, proc.stdout[-4000:]
    assert "fails its third example on purpose" in proc.stdout, proc.stdout[-4000:]
    assert "OK runner_checks" not in proc.stdout, proc.stdout[-4000:]
