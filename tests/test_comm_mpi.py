"""Run tests/mpi/comm_checks.py under real MPI at several world sizes.

Skips when no ``mpiexec`` sits beside the interpreter (``pip install mpich``).
"""

import os
import time

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

SCRIPT = os.path.join(os.path.dirname(__file__), "mpi", "comm_checks.py")
TIMEOUT = 120

pytestmark = mpi_test_marks()


def _tail(proc, n=4000):
    return proc.stdout[-n:]


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 8])
def test_comm_checks_under_mpi(nprocs):
    pytest.importorskip("mpi4py")
    proc = run_mpi([SCRIPT, "--expect-size", str(nprocs)], nprocs, timeout=TIMEOUT)
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{_tail(proc)}"
    assert f"OK comm {nprocs} ranks" in proc.stdout, _tail(proc)


def test_raising_rank_aborts_the_job():
    pytest.importorskip("mpi4py")
    t0 = time.monotonic()
    proc = run_mpi([SCRIPT, "--fail-rank", "1"], 3, timeout=TIMEOUT)
    elapsed = time.monotonic() - t0
    assert proc.returncode != 0, _tail(proc)
    assert "fails on purpose" in proc.stdout, _tail(proc)
    assert elapsed < 30, f"abort took {elapsed:.1f} s"
