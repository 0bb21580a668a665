"""``--backend cupy`` on the commands (issue 25): the error without a device, and the GPU path on CPU.

Without a usable device every rank raises the same one-line error (printed
once, exit 2, no traceback, no MPI_Abort).  With the cupy backend emulated
(tests/cuda_host/emulated_cli.py and emulated_pair.py: the host build of
the kernels, device arrays stood in for by the strict CuPy stand-in),
``spmm`` and ``train`` run their cupy path and give the numba backend's
results and bytes: GCN, GraphSAGE with the GraphSAGE and LADIES samplers,
full-neighbourhood SAGE, GAT, and on 2 ranks the hybrid aggregation with
the int2 codec and the HEC.
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


#: ``train`` cases run on the emulated device and on numba (one process: ``emulated_pair.py``).
#: 32 vertices: the host build runs every CUDA thread as an OS thread (and its warp
#: shuffles as barriers), so the emulated cost grows with the launch sizes, not the proof.
SMALL = ["--graph", "rmat:5:3"]
SINGLE = {"gcn": SMALL,
          "sage-sampler": ["--model", "sage", "--fanout", "4,3", "--hidden", "8", "--epochs", "1",
                           *SMALL],
          "sage-ladies": ["--model", "sage", "--sampler", "ladies", "--fanout", "4,3",
                          "--ladies-size", "24", "--hidden", "8", "--epochs", "1", *SMALL],
          "sage-full": ["--model", "sage-full", "--hidden", "8", *SMALL],
          "gat": ["--model", "gat", "--hidden", "4", "--heads", "2", "--epochs", "1", *SMALL]}
#: The same on 2 ranks (the exchanges: hybrid aggregation with the int2 codec, the HEC).
MULTI = {"hybrid-int2": ["--aggregation", "hybrid", "--quantize", "int2"],
         "hec-on": ["--model", "sage", "--fanout", "4,3", "--hidden", "8", "--hec", "on",
                    "--partition", "random", "--batch-size", "16"]}
PAIR = os.path.join(HERE, "emulated_pair.py")


def _pairs(cases, stdout):
    """``{case: (numba result, cupy result)}`` from emulated_pair.py's JSON lines."""
    res = [json.loads(ln) for ln in stdout.splitlines() if ln.startswith("{")]
    assert len(res) == 2 * len(cases), stdout[-3000:]
    return {c: (res[2 * i], res[2 * i + 1]) for i, c in enumerate(cases)}


def _check_equal(got):
    for case, (ref, dev) in got.items():
        assert dev["loss_history"] == pytest.approx(ref["loss_history"], rel=1e-5), case
        assert dev["bytes_per_epoch"] == ref["bytes_per_epoch"], case
        assert dev["test_acc"] == ref["test_acc"], case
        assert (dev["backend"], dev["gpu_comm"]) == ("cupy", "staged"), case
        assert "backend" not in ref, case


def _pair_args(cases):
    args = []
    for c in cases:
        args += [*TRAIN, *cases[c], "::"]
    return args[:-1]


@pytest.mark.slow
def test_train_cli_on_emulated_device_equals_numba(emulated):
    """GCN, GraphSAGE with both samplers, full-neighbourhood SAGE and GAT: numba's losses."""
    proc = subprocess.run([sys.executable, PAIR, *_pair_args(SINGLE)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _check_equal(_pairs(SINGLE, proc.stdout))


@_mpi
@pytest.mark.slow
def test_train_cli_exchanges_on_emulated_device_equal_numba(emulated):
    """2 ranks: hybrid aggregation with the int2 codec, and HEC pushes, on device arrays."""
    proc = run_mpi([PAIR, *_pair_args(MULTI)], 2, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    _check_equal(_pairs(MULTI, proc.stdout))
