"""The cupy backend's distributed SpMM and GCN training on CPU under real mpiexec (1 and 2 ranks).

Runs tests/mpi/device_checks.py: per algorithm and ``gpu_comm`` mode, the
cupy backend's code on stand-in device arrays and host-built kernels equals
the numba backend (results, ledger bytes), records the mode, stages the
formula's bytes, and makes no host copy in CUDA-aware mode (mpi4py passes
the device buffers to MPI).
"""

import os

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))
pytestmark = mpi_test_marks()


@pytest.mark.parametrize("nprocs,algorithms", [(1, "1d,1d-aware"), (2, "1d,1d-aware,15d-aware")])
def test_device_spmm_under_mpi(emulated, nprocs, algorithms):
    proc = run_mpi([os.path.join(HERE, "..", "mpi", "device_checks.py"), "--algorithms",
                    algorithms], nprocs, timeout=300)
    tail = proc.stdout[-5000:]
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{tail}"
    assert f"OK device_checks {nprocs} ranks {algorithms} gcn 1d,1d-aware" in proc.stdout, tail
