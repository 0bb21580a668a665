"""The ``spmm`` and ``plan`` commands under real mpiexec: the plan equals the ledger exactly.

For every configuration that fits in 8 ranks, ``python -m spgnn plan``
predicts the bytes a real ``mpiexec -n P python -m spgnn spmm`` run records,
with the same partition (passed through ``--save-partition`` /
``--partition-file``).
"""

import json
import os
import subprocess
import sys

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

pytestmark = mpi_test_marks()

GRAPH = "rmat:9:8:3"
FEAT = 8
PARTITION = os.environ.get("SPGNN_TEST_PARTITION", "metis")


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    pytest.importorskip("pymetis", reason="METIS partitioning needs pymetis (pip install -e '.[partition]')")
    out = tmp_path_factory.mktemp("plan")
    cmd = [sys.executable, "-m", "spgnn", "plan", "--graph", GRAPH, "--ranks", "1,2,3,4,8",
           "--feat", str(FEAT), "--partition", PARTITION, "--alpha", "1e-6", "--beta", "1e-10",
           "--save-partition", str(out / "part"), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    return data, out


CASES = [(p, algo) for p in (1, 2, 3, 4, 8) for algo in ("1d", "1d-aware", "15d", "15d-aware", "3d")
         if not (algo.startswith("15d") and p % 2)]


@pytest.mark.parametrize("ranks, algo", CASES, ids=[f"{a}-P{p}" for p, a in CASES])
def test_planned_bytes_equal_the_ledger(plans, ranks, algo):
    data, out = plans
    plan = next(r for r in data["plans"] if r["ranks"] == ranks and r["algorithm"] == algo)
    args = ["-m", "spgnn", "spmm", "--graph", GRAPH, "--feat", str(FEAT), "--algo", algo,
            "--repeat", "1", "--check", "--json", "--backend", "numpy"]
    if algo == "3d":
        args += ["--grid", plan["grid"]]
    else:
        blocks = ranks // 2 if algo.startswith("15d") else ranks
        args += ["--partition-file", str(out / f"part.{blocks}")]
    proc = run_mpi(args, ranks, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["check_passed"], got
    for key in ("bytes_total", "bytes_max_rank", "setup_bytes_total"):
        assert got[key] == plan[key], (key, got[key], plan[key])


def test_plan_for_thousands_of_ranks_runs_quickly():
    cmd = [sys.executable, "-m", "spgnn", "plan", "--graph", "rmat:11", "--ranks", "1024,4096",
           "--feat", "64", "--partition", "none", "--alpha", "1e-6", "--beta", "1e-10", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    algos = {(r["ranks"], r["algorithm"]) for r in data["plans"]}
    assert (4096, "3d") in algos and (4096, "1d-aware") in algos
    # the oblivious 1D volume is exact: every rank receives every other block of X
    n = data["n"]
    one_d = next(r for r in data["plans"] if r["ranks"] == 1024 and r["algorithm"] == "1d")
    assert one_d["bytes_total"] == (1024 - 1) * n * 64 * 4


def test_spmm_command_reports_a_bad_graph_cleanly():
    # as users run it (plain python, not -m mpi4py, which aborts on any non-zero exit)
    proc = run_mpi(["-m", "spgnn", "spmm", "--graph", "/no/such/graph.txt", "--algo", "1d"], 2,
                   timeout=120, via_mpi4py=False)
    assert proc.returncode != 0
    # every rank raises the agreed error; rank 0 prints it once and all exit
    assert proc.stdout.count("error: load_graph") == 1, proc.stdout
    assert "Abort" not in proc.stdout, proc.stdout
