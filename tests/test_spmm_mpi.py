"""1.5D and 3D SpMM under real mpiexec, checked against scipy with collective asserts.

Each job runs tests/mpi/spmm_checks.py (Hypothesis derandomized, so every
rank draws the same examples): 15d / 15d-aware at P = 2 (c=2), 4 (c=2),
8 (c=2 and c=4); 3d at P = 8 as 2 x 2 x 2 and at P = 1, 2, 3, 4 over every
X x Y x Z factorisation (numba backend at 2 and 4 ranks, numpy elsewhere).
"""

import os

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 300

pytestmark = mpi_test_marks()


@pytest.mark.parametrize("nprocs,c,grid3d", [
    (1, "", "all"),
    (2, "2", "all"),
    (3, "", "all"),
    (4, "2", "all"),
    (8, "2,4", "2,2,2"),
])
def test_spmm_15d_3d_under_mpi(nprocs, c, grid3d):
    # numba at 2 and 4 ranks (compiled kernels, cached on disk), numpy elsewhere
    backend = "numba" if nprocs in (2, 4) else "numpy"
    args = [os.path.join(HERE, "mpi", "spmm_checks.py"), "--grid3d", grid3d, "--examples", "25",
            "--backend", backend]
    if c:
        args += ["--c", c]
    proc = run_mpi(args, nprocs, timeout=TIMEOUT)
    tail = proc.stdout[-5000:]
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{tail}"
    assert f"OK spmm_checks {nprocs} ranks c={c or '-'} grid3d={grid3d}" in proc.stdout, tail
