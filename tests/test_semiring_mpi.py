"""SpMM and SDDMM over GraphBLAS and user-registered semirings under real mpiexec
(tests/mpi/semiring_checks.py against a brute-force scalar reference): numba at 2 ranks
(1d, 1d-aware, 15d, 15d-aware), numpy at 3 and 4."""

import os

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = mpi_test_marks()


@pytest.mark.parametrize("nprocs,backend", [(2, "numba"), (3, "numpy"), (4, "numpy")])
def test_semirings_under_mpi(nprocs, backend):
    # numba compiles the generic kernels once per machine (then loads them from disk)
    proc = run_mpi([os.path.join(HERE, "mpi", "semiring_checks.py"), "--backend", backend],
                   nprocs, timeout=600)
    tail = proc.stdout[-5000:]
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{tail}"
    assert f"OK semiring_checks {nprocs} ranks backend={backend}" in proc.stdout, tail
