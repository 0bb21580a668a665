"""Distributed sampling under real mpiexec at 1, 2, 4 and 8 ranks (tests/mpi/sampling_checks.py)."""

import os

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 300

pytestmark = mpi_test_marks()


@pytest.mark.parametrize("nprocs", [1, 2, 4, 8])
def test_sampling_checks(nprocs):
    proc = run_mpi([os.path.join(HERE, "mpi", "sampling_checks.py"), "--examples", "6"], nprocs,
                   timeout=TIMEOUT)
    tail = proc.stdout[-5000:]
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{tail}"
    assert f"OK sampling_checks {nprocs} ranks" in proc.stdout, tail
