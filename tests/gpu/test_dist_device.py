"""The distributed paths on a real device: CuPy blocks, the communicator moving device buffers.

The same cases as tests/cuda_host/test_dist_device.py (there on the CPU
emulation), here with the real cupy backend: distributed SpMM and GCN
training equal the numba backend (results, ledger bytes), the mode is
recorded, staging bytes follow their formula.  On loopback ranks both modes
run (the loopback transport copies device arrays with CuPy); under mpiexec
only ``staged`` (the pip MPICH is not CUDA-aware: a CUDA-aware run needs an
MPI built with CUDA, ``SPGNN_GPU_COMM=cuda-aware``, docs/gpu.md).
Skipped, saying why, without a device (``SPGNN_REQUIRE_GPU=1`` fails).
"""

import os

import numpy as np
import pytest

from spgnn.comm import device as D
from spgnn.comm.loopback import run_loopback
from spgnn.testing.device_cases import gcn_device_case, spmm_device_case
from spgnn.testing.mpi import find_mpiexec, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("mode", D.MODES)
@pytest.mark.parametrize("alg,nranks", [("1d", 1), ("1d", 2), ("1d-aware", 2), ("15d", 2),
                                        ("15d-aware", 4)])
def test_spmm_on_device_equals_numba(gpu, alg, nranks, mode):
    for res in run_loopback(nranks, spmm_device_case, alg, mode, backend=gpu):
        assert res["err"] < 1e-9, res
        assert res["ledger_equal"] and res["on_device"], res
        assert res["modes"] == {mode}, res
        if res["staged_expected"] is not None:
            assert res["staged"] == res["staged_expected"], res


@pytest.mark.parametrize("mode", D.MODES)
@pytest.mark.parametrize("alg,nranks", [("1d", 2), ("1d-aware", 2), ("3d", 2)])
def test_gcn_training_on_device_equals_numba(gpu, alg, nranks, mode):
    for res in run_loopback(nranks, gcn_device_case, alg, mode, backend=gpu):
        np.testing.assert_allclose(res["losses"], res["ref_losses"], rtol=1e-5)
        assert res["weights_err"] < 1e-4, res
        assert res["ledger_equal"] and res["on_device"] and res["modes"] == {mode}, res


def test_under_mpiexec_staged(gpu):
    if find_mpiexec() is None:
        pytest.skip("no mpiexec next to sys.executable (pip install -e '.[mpich]')")
    proc = run_mpi([os.path.join(HERE, "..", "mpi", "device_checks.py"), "--device", "cupy",
                    "--modes", "staged", "--algorithms", "1d,1d-aware"], 2, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert "OK device_checks 2 ranks 1d,1d-aware gcn 1d,1d-aware" in proc.stdout, proc.stdout[-5000:]
