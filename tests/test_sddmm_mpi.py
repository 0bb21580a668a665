"""Distributed SDDMM, edge softmax and the reversed-plan ``Aᵀ·G`` under real mpiexec.

tests/mpi/sddmm_checks.py at 1, 2, 3, 4 and 8 ranks (Hypothesis
derandomized: every rank draws the same examples), numba at 2 and 4 ranks.
"""

import os

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = mpi_test_marks()


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 8])
def test_sddmm_under_mpi(nprocs):
    backend = "numba" if nprocs in (2, 4) else "numpy"
    proc = run_mpi([os.path.join(HERE, "mpi", "sddmm_checks.py"), "--examples", "10",
                    "--backend", backend], nprocs, timeout=300)
    tail = proc.stdout[-5000:]
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{tail}"
    assert f"OK sddmm_checks {nprocs} ranks backend={backend}" in proc.stdout, tail
