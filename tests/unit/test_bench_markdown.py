"""``python -m spgnn bench kernels --markdown REPORT`` renders a saved report (no timing, no extras)."""

import json
import subprocess
import sys

from spgnn.testing.data import REPO_ROOT

#: The command of the kernels suite (benchmarks/kernels.py).
SCRIPT = ["-m", "spgnn", "bench", "kernels"]


def _report():
    spmm = {"graph": "g", "f": 16, "times_s": {"spgnn": 0.001, "scipy": 0.003},
            "speedup_vs": {"scipy": 3.0}, "spgnn_model_gbs": 12.5, "triad_gbs": 25.0,
            "fraction_of_bound": 0.5}
    sddmm = {"graph": "g", "f": 64, "times_s": {"spgnn": 0.002, "numpy_gather": 0.02},
             "best_alternative": "numpy_gather", "speedup_vs_best": 10.0}
    spgemm = {"graph": "g", "kind": "Q·A", "flops": 1000, "nnz_c": 900,
              "times_s": {"spgnn": 0.0005, "scipy": 0.001, "graphblas": 0.0004},
              "speedup_vs": {"scipy": 2.0, "graphblas": 0.8}}
    order = {"time_s": 0.004, "fraction_of_bound": 0.7, "speedup_vs_original": 1.0}
    locality = {"graph": "g", "f": 64, "reorder_time_s": {"rcm": 0.1, "degree": 0.05, "metis": 1.0},
                "orders": {k: dict(order) for k in ("original", "rcm", "degree", "metis")}}
    semiring = {"graph": "g", "f": 64, "semiring": "max_second",
                "times_s": {"spgnn": 0.002, "scalar_kernel": 0.005, "graphblas": 0.01},
                "speedup_vs": {"scalar_kernel": 2.5, "graphblas": 5.0}}
    return {"spmm": [spmm], "semiring_spmm": [semiring], "sddmm": [sddmm], "spgemm": [spgemm],
            "locality": [locality]}


def test_markdown_tables_from_a_saved_report(tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps(_report()))
    proc = subprocess.run([sys.executable, *SCRIPT, "--markdown", str(path)],
                          capture_output=True, text=True, timeout=120, cwd=str(REPO_ROOT))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "| g | 16 | 1 | 3 | nan | nan | nanx | 3.00x | 12.5 | 25.0 | 0.50 |" in lines
    assert "| g | 64 | max_second | 2 | 5 | 10 | 2.50x | 5.00x |" in lines
    assert "| g | 64 | 2 | nan | 20 | 10.00x (numpy_gather) |" in lines
    assert "| g | Q·A | 1.00e+03 | 9.00e+02 | 0.5 | 1 | 0.4 | 0.80x | 2.00x |" in lines
    assert "| g | 64 | 4 (0.70) | 4 (0.70) | 4 (0.70) | 4 (0.70) | 1.00x | 0.10 / 0.05 / 1.00 |" in lines


def test_targets_table_names_the_worst_case_and_every_miss(tmp_path):
    report = _report()
    base = report["spmm"][0]
    report["spmm"] = [
        dict(base, graph="rmat:20", f=16, fraction_of_bound=0.2,       # not locality-ordered
             speedup_vs={"scipy": 5.0, "torch_csr": 2.0}),
        dict(base, graph="road", f=16, fraction_of_bound=0.6,
             speedup_vs={"scipy": 2.5, "torch_csr": 1.3}),
        dict(base, graph="road", f=256, fraction_of_bound=0.9,
             speedup_vs={"scipy": 2.9, "torch_csr": 4.0}),
    ]
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    proc = subprocess.run([sys.executable, *SCRIPT, "--markdown", str(path)],
                          capture_output=True, text=True, timeout=120, cwd=str(REPO_ROOT))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "| SpMM vs torch CSR | 1.2 | 3 | 1.30 | road f = 16 | yes |" in lines
    assert ("| SpMM vs scipy | 3 | 3 | 2.50 | road f = 16 | **no**: road f = 16, "
            "road f = 256 |") in lines
    assert ("| SpMM fraction of the bandwidth bound, locality-ordered graphs | 0.5 | 2 | 0.60 | "
            "road f = 16 | yes |") in lines
    assert "| SpGEMM vs GraphBLAS | 1 | 1 | 0.80 | g Q·A | **no**: g Q·A |" in lines


def _spmm_case(graph, f, spgnn_s, scipy_s, fraction):
    return {"graph": graph, "f": f, "correct": True,
            "times_s": {"spgnn": spgnn_s, "scipy": scipy_s},
            "speedup_vs": {"scipy": scipy_s / spgnn_s}, "spgnn_model_gbs": 10.0,
            "triad_gbs": 20.0, "fraction_of_bound": fraction}


def _run(*spmm, correct=True):
    report = _report()
    report["spmm"] = [dict(case, correct=correct) for case in spmm]
    report["command"] = "python benchmarks/bench_kernels.py"
    return report


def _bench_module():
    """The kernels suite (``spgnn._benchmarks.kernels``); importing it may set thread variables
    in ``os.environ`` for the libraries it times, which must not leak into other tests."""
    import importlib
    import os
    from unittest import mock
    with mock.patch.dict(os.environ):
        return importlib.import_module("spgnn._benchmarks.kernels")


def test_combined_cases_are_medians_of_the_runs_own_values():
    bench = _bench_module()
    runs = [_run(_spmm_case("road", 256, 0.010, 0.025, 0.9),
                 _spmm_case("road", 16, 0.001, 0.004, 1.0)),
            _run(_spmm_case("road", 256, 0.006, 0.030, 1.2), correct=False),
            _run(_spmm_case("road", 256, 0.007, 0.028, 1.1),
                 _spmm_case("road", 16, 0.001, 0.005, 1.5))]
    combined = bench.combine_reports(runs)
    big, small = combined["spmm"]
    assert (big["graph"], big["f"], big["runs"]) == ("road", 256, 3)
    assert big["times_s"] == {"spgnn": 0.007, "scipy": 0.028}
    # the median of the runs' ratios (2.5, 5.0, 4.0), not 0.028 / 0.007
    assert big["speedup_vs"]["scipy"] == 4.0
    assert big["fraction_of_bound"] == 1.1
    assert big["correct"] is False                       # a wrong result in any run stays wrong
    assert (small["f"], small["runs"], small["speedup_vs"]["scipy"]) == (16, 2, 4.5)
    assert [run["name"] for run in combined["combined_from"]] == ["run 1", "run 2", "run 3"]
    def scipy_target(targets):
        return [t for t in targets if t["target"] == "SpMM vs scipy"][0]
    # run 1 alone missed 3x scipy (2.5x); the medians meet it
    assert scipy_target(combined["combined_from"][0]["targets"])["met"] is False
    assert (scipy_target(combined["targets"])["met"], scipy_target(combined["targets"])["worst"]) \
        == (True, 4.0)


def test_markdown_of_several_reports_combines_them(tmp_path):
    paths = []
    for i, run in enumerate([_run(_spmm_case("road", 256, 0.010, 0.025, 0.9)),
                             _run(_spmm_case("road", 256, 0.006, 0.030, 1.2)),
                             _run(_spmm_case("road", 256, 0.007, 0.028, 0.4))]):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(json.dumps(run))
    out = tmp_path / "combined.json"
    proc = subprocess.run([sys.executable, *SCRIPT, "--markdown", *map(str, paths),
                           "--out", str(out)],
                          capture_output=True, text=True, timeout=120, cwd=str(REPO_ROOT))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "| road | 256 | 7 | 28 | nan | nan | nanx | 4.00x | 10.0 | 20.0 | 0.90 |" in lines
    assert "* r0.json: `python benchmarks/bench_kernels.py`" in lines
    assert ("| SpMM vs scipy | 3 | 1 | 4.00 | road f = 256 | yes | "
            "2 of 3 (r0.json: road f = 256) |") in lines
    assert ("| SpMM fraction of the bandwidth bound, locality-ordered graphs | 0.5 | 1 | 0.90 | "
            "road f = 256 | yes | 2 of 3 (r2.json: road f = 256) |") in lines
    assert json.loads(out.read_text())["spmm"][0]["runs"] == 3


def test_docs_tables_are_the_committed_runs_combined():
    """docs/performance.md's local-kernel tables are rendered from the reports committed beside
    it, not typed in: every row of the combined SpMM, semiring, SDDMM, SpGEMM, locality and
    targets tables appears in the docs verbatim."""
    runs = sorted((REPO_ROOT / "docs" / "results" / "kernels-2026-11-24").glob("run*.json"))
    assert len(runs) == 5
    proc = subprocess.run([sys.executable, *SCRIPT, "--markdown", *map(str, runs)],
                          capture_output=True, text=True, timeout=120, cwd=str(REPO_ROOT))
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines()
            if line.startswith("| ") and not line.startswith(("| graph |", "| target |"))]
    assert len(rows) == 18 + 18 + 6 + 10 + 4 + 4          # the data tables, then the targets
    docs = (REPO_ROOT / "docs" / "performance.md").read_text().splitlines()
    assert [row for row in rows if row not in docs] == []
