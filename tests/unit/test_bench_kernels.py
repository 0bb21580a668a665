"""``python -m spgnn bench kernels --quick --json`` runs and reports the documented structure.

Structure only: timings are never asserted (a shared 2-core machine makes
them noise at this size); correctness flags computed by the benchmark
against scipy are checked, since those are exact properties.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from spgnn.testing.data import REPO_ROOT

#: The command of the kernels suite (benchmarks/kernels.py).
SCRIPT = ["-m", "spgnn", "bench", "kernels"]

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed"),
    pytest.mark.skipif(importlib.util.find_spec("graphblas") is None,
                       reason="python-graphblas not installed (pip install 'spgnn[bench]')"),
    pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                       reason="torch not installed (pip install 'spgnn[bench]')"),
]


@pytest.fixture(scope="module")
def report():
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, *SCRIPT, "--quick", "--json", "--threads", "1",
         "--graphs", "rmat:8", "--sample-rows", "64"],
        capture_output=True, text=True, timeout=600, env=env, cwd=str(REPO_ROOT))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_top_level_keys(report):
    for key in ("command", "machine", "versions", "missing", "repeat", "traffic_model",
                "dense_operands", "bandwidth", "first_calls", "cold_start", "spmm",
                "semiring_spmm", "sddmm", "spgemm", "locality", "skipped", "wall_s", "targets"):
        assert key in report, key
    assert report["missing"] == []
    m = report["machine"]
    assert m["threads"] == 1 and len(m["loadavg_start"]) == 3 and len(m["loadavg_end"]) == 3
    b = report["bandwidth"]
    assert b["median_gbs"] > 0 and b["bound_gbs"] > 0 and b["compile_s"] >= 0


def test_targets_are_checked_on_the_cases_they_cover(report):
    t = {r["target"]: r for r in report["targets"]}
    assert t["SpMM vs scipy"]["cases"] == len(report["spmm"]) == 2
    assert t["SpGEMM vs GraphBLAS"]["cases"] == len(report["spgemm"])
    # the only graph is R-MAT, which is not locality-ordered: no bound case
    bound = t["SpMM fraction of the bandwidth bound, locality-ordered graphs"]
    assert bound["cases"] == 0 and bound["met"] is None


def test_spmm_records(report):
    assert {r["f"] for r in report["spmm"]} == {16, 64}
    for r in report["spmm"]:
        assert r["graph"] == "rmat:8" and r["correct"] is True
        assert set(r["times_s"]) == {"spgnn", "scipy", "torch_csr", "graphblas"}
        assert set(r["speedup_vs"]) == {"scipy", "torch_csr", "graphblas"}
        assert r["model_bytes"] == r["nnz"] * (4 * r["f"] + 8) + r["m"] * r["f"] * 4
        assert r["triad_gbs"] > 0
        assert r["fraction_of_bound"] == pytest.approx(r["spgnn_model_gbs"] / r["triad_gbs"])


def test_semiring_spmm_records(report):
    # one f (16 with --quick) per graph, every semiring of the table, checked
    # bit for bit against the scalar kernel
    rows = report["semiring_spmm"]
    assert [r["semiring"] for r in rows] == ["max_second", "plus_second", "min_plus"]
    for r in rows:
        assert r["graph"] == "rmat:8" and r["f"] == 16 and r["correct"] is True
        assert set(r["times_s"]) == {"spgnn", "scalar_kernel", "graphblas"}


def test_sddmm_spgemm_locality_records(report):
    (sd,) = report["sddmm"]
    assert sd["correct"] is True and sd["best_alternative"] in sd["times_s"]
    kinds = {r["kind"] for r in report["spgemm"]}
    assert kinds == {"Q·A", "A·A"}
    for r in report["spgemm"]:
        assert r["correct"] is True
        assert set(r["times_s"]) == {"spgnn", "scipy", "graphblas"}
    (loc,) = report["locality"]
    assert set(loc["orders"]) >= {"original", "rcm", "degree"}
    assert loc["triad_gbs"] > 0
    for order in loc["orders"].values():
        assert order["time_s"] > 0 and order["fraction_of_bound"] > 0
    for name in ("spmm", "sddmm", "spgemm", "spgemm_selection"):
        assert report["first_calls"][name]["first_call_s"] >= 0
