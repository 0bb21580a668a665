"""Distributed matrices, SpMM, errors and the commands under real mpiexec.

pytest launches each job itself with the ``mpiexec`` beside the interpreter
(``pip install -e ".[mpich]"``), at 1, 2, 3, 4 and 8 ranks.
"""

import os
import time

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 300

pytestmark = mpi_test_marks()


def _check(proc, expect):
    tail = proc.stdout[-5000:]
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{tail}"
    assert expect in proc.stdout, tail


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 8])
def test_dist_checks(nprocs):
    # numba at 2 and 4 ranks (compiled kernels, cached on disk), numpy elsewhere
    backend = "numba" if nprocs in (2, 4) else "numpy"
    proc = run_mpi([os.path.join(HERE, "mpi", "dist_checks.py"), "--backend", backend], nprocs,
                   timeout=TIMEOUT)
    _check(proc, f"OK dist_checks {nprocs} ranks backend={backend}")


@pytest.mark.parametrize("nprocs", [1, 3, 4])
def test_bad_input_raises_on_every_rank(nprocs):
    proc = run_mpi(os.path.join(HERE, "mpi", "error_checks.py"), nprocs, timeout=TIMEOUT)
    _check(proc, f"OK error_checks {nprocs} ranks")


@pytest.mark.parametrize("via_mpi4py", [True, False], ids=["python-m-mpi4py", "plain-python"])
def test_dying_rank_aborts_the_job(via_mpi4py):
    t0 = time.monotonic()
    proc = run_mpi(os.path.join(HERE, "mpi", "dying_rank.py"), 3, timeout=TIMEOUT,
                   via_mpi4py=via_mpi4py)
    elapsed = time.monotonic() - t0
    # The dying rank's traceback is usually in the output, but MPI_Abort may
    # kill the job before mpiexec forwards it, so only the outcome is asserted.
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "UNREACHABLE" not in proc.stdout
    assert elapsed < 60, f"abort took {elapsed:.1f} s"


@pytest.mark.parametrize("nprocs", [1, 4])
def test_demo_command(nprocs):
    proc = run_mpi(["-m", "spgnn", "demo", "--scale", "9", "--feat", "8"], nprocs, timeout=TIMEOUT)
    _check(proc, "[1d-aware] max |Y - scipy|")
    assert proc.stdout.count("PASS") == 2, proc.stdout[-3000:]


def test_info_command():
    proc = run_mpi(["-m", "spgnn", "info"], 2, timeout=TIMEOUT)
    _check(proc, "mpi_library")
    assert "MPICH" in proc.stdout or "Open MPI" in proc.stdout, proc.stdout
    assert "numpy" in proc.stdout and "cupy" in proc.stdout
