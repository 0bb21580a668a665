"""Partitioned minibatch training / HEC under real mpiexec (tests/mpi/hec_checks.py)."""

import os

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 300

pytestmark = mpi_test_marks()


@pytest.mark.parametrize("nprocs", [1, 2, 4, 8])
def test_hec_checks(nprocs):
    proc = run_mpi([os.path.join(HERE, "mpi", "hec_checks.py")], nprocs, timeout=TIMEOUT)
    tail = proc.stdout[-5000:]
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{tail}"
    assert f"OK hec_checks {nprocs} ranks" in proc.stdout, tail
