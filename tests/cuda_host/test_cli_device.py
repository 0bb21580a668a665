"""``--backend cupy`` on the commands (issue 25): the error without a device, and the GPU path on CPU.

Without a usable device every rank raises the same one-line error (printed
once, exit 2, no traceback, no MPI_Abort).  With the cupy backend emulated
(tests/cuda_host/emulated_cli.py: the host build of the kernels, device
arrays stood in for), ``spmm``, ``train`` (GCN) and the sampler
(``train --model sage``) run their cupy path and give the numba backend's
results and bytes.
"""

import json
import os
import subprocess
import sys

import pytest

from spgnn.backends.cupy_backend import CupyBackend
from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, "emulated_cli.py")
SPMM = ["spmm", "--graph", "rmat:7:4", "--feat", "6", "--repeat", "1", "--check", "--json"]
TRAIN = ["train", "--graph", "rmat:7:4", "--features", "random:8", "--labels", "random:3",
         "--epochs", "2", "--json", "--no-progress"]


def _json(out):
    return json.loads(out.strip().splitlines()[-1])


def _mpi(test):
    """Marked ``mpi`` and skipped, with the reason, without mpiexec."""
    for mark in mpi_test_marks():
        test = mark(test)
    return test


def _run1(args):
    """The emulated command line in one process (an MPI singleton)."""
    proc = subprocess.run([sys.executable, CLI, *args], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return _json(proc.stdout)


@_mpi
def test_no_device_is_one_clean_error_on_every_rank():
    if CupyBackend.unavailable_reason() is None:
        pytest.skip("a usable GPU is present: the error path cannot be shown here")
    proc = run_mpi(["-m", "spgnn", *SPMM, "--backend", "cupy"], 2, timeout=120)
    out = proc.stdout
    assert proc.returncode == 2, out[-3000:]
    lines = [ln for ln in out.splitlines() if "error" in ln]
    assert lines == [f"spgnn spmm: error: rank 0: backend 'cupy' is unavailable: "
                     f"{CupyBackend.unavailable_reason()}"], out[-3000:]
    assert "Traceback" not in out and "Abort" not in out, out[-3000:]


@_mpi
def test_spmm_cli_on_emulated_device_equals_numba(emulated):
    got = {}
    for backend, extra in (("numba", []), ("cupy", ["--gpu-comm", "cuda-aware"])):
        proc = run_mpi([CLI, *SPMM, "--backend", backend, *extra], 2, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:]
        got[backend] = _json(proc.stdout)
    ref, dev = got["numba"], got["cupy"]
    assert dev["check_passed"] and dev["backend"] == "cupy"
    assert (dev["bytes_total"], dev["messages_total"]) == (ref["bytes_total"], ref["messages_total"])
    assert dev["gpu_comm"] == "cuda-aware" and dev["staged_bytes_total"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--model", "sage", "--fanout", "4,3", "--hidden", "8",
                                        "--epochs", "1"]], ids=["gcn", "sage-sampler"])
def test_train_cli_on_emulated_device_equals_numba(emulated, extra):
    ref = _run1([*TRAIN, "--backend", "numba", *extra])
    dev = _run1([*TRAIN, "--backend", "cupy", *extra])
    assert dev["loss_history"] == pytest.approx(ref["loss_history"], rel=1e-5)
    assert dev["bytes_per_epoch"] == ref["bytes_per_epoch"]
    assert dev["test_acc"] == ref["test_acc"]
    assert (dev["backend"], dev["gpu_comm"]) == ("cupy", "staged") and "backend" not in ref
