"""Distributed assign under real mpiexec at 1, 2, 3, 4 and 8 ranks (tests/mpi/assign_checks.py:
results against a dense GrB_assign reference, ledger bytes, errors before communicating)."""

import os

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = mpi_test_marks()


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 8])
def test_assign_under_mpi(nprocs):
    examples = "6" if nprocs == 8 else "12"
    proc = run_mpi([os.path.join(HERE, "mpi", "assign_checks.py"), "--examples", examples,
                    "--backend", "numpy"], nprocs, timeout=300)
    tail = proc.stdout[-5000:]
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{tail}"
    assert f"OK assign_checks {nprocs} ranks backend=numpy" in proc.stdout, tail
