"""Pre / post / hybrid and quantized 1D exchanges under real mpiexec (tests/mpi/exchange_checks.py)."""

import os

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = mpi_test_marks()


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 8])
def test_exchange_under_mpi(nprocs):
    proc = run_mpi([os.path.join(HERE, "mpi", "exchange_checks.py"), "--examples", "6"],
                   nprocs, timeout=300)
    tail = proc.stdout[-5000:]
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{tail}"
    assert f"OK exchange_checks {nprocs} ranks" in proc.stdout, tail
