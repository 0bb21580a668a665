"""benchmarks/gpu.py (``python -m spgnn bench gpu``): a clear exit without a GPU, and its whole harness in a CPU dry run.

The dry run (``--dry-run``) runs every part (SpMM/SDDMM vs cuSPARSE and
torch, SpGEMM vs cuSPARSE, a GCN epoch vs PyG) with the cupy backend
emulated on CPU at toy sizes; its times mean nothing.
"""

import json
import os
import subprocess
import sys

import pytest

from spgnn.backends.cupy_backend import CupyBackend

BENCH = ["-m", "spgnn", "bench", "gpu"]
TINY = ["--n", "24", "--deg", "2", "--f", "4", "--spgemm-n", "24", "--spgemm-deg", "2",
        "--gcn-n", "30", "--gcn-deg", "3", "--gcn-f", "6", "--hidden", "4", "--classes", "3",
        "--epochs", "1", "--reps", "1", "--warmup", "0"]


def _run(args):
    return subprocess.run([sys.executable, *BENCH, *args], capture_output=True, text=True,
                          timeout=600)


def test_without_gpu_exits_2_saying_why():
    why = CupyBackend.unavailable_reason()
    if why is None:
        pytest.skip("a usable GPU is present")
    proc = _run(["--only", "spmm"])
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"bench_gpu: no usable GPU: {why} (--dry-run checks the "
                                   f"harness on CPU)")


@pytest.mark.slow
def test_dry_run_covers_every_part(emulated, tmp_path):
    out = tmp_path / "bench.json"
    proc = _run(["--dry-run", *TINY, "--out", str(out)])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rec = json.loads(out.read_text())
    assert rec["dry_run"] and [r["part"] for r in rec["rows"]] == ["spmm", "spgemm", "gcn"]
    spmm, spgemm, gcn = rec["rows"]
    assert spmm["spmm_kernel_s"] > 0 and spmm["spmm_cusparse_s"] > 0 and spmm["sddmm_kernel_s"] > 0
    assert spgemm["nnz_c"] == spgemm["nnz_c_cusparse"] and spgemm["spgemm_spgnn_s"] > 0
    assert gcn["epoch_spgnn_s"] > 0
    assert gcn["spgnn_node_data"] == "spgnn.testing.fake_device.FakeDeviceArray"
    for adjacency in ("edge_index", "sparse"):       # PyG ran (on CPU) or says why not
        assert f"epoch_pyg_{adjacency}_s" in gcn or \
            gcn[f"epoch_pyg_{adjacency}"].startswith("not run: ")
