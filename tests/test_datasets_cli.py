"""Commands with dataset names and the bench command, under real ``mpiexec``.

``--graph cora`` on 2 ranks downloads once (rank 0) from a local server into
an empty cache, then trains; ``bench`` writes JSON and a figure.  No internet.
"""

import json
import os
import subprocess
import sys

import pytest

from spgnn.testing.data import shared_data_path
from spgnn.testing.http_server import FileServer
from spgnn.testing.mpi import mpi_test_marks, run_mpi

pytestmark = mpi_test_marks()


def _env(cache, url=None):
    env = {"SPGNN_DATA": str(cache), "SPGNN_OFFLINE": "0" if url else "1"}
    if url:
        env["SPGNN_DATA_MIRROR"] = url
    return env


def test_train_by_name_downloads_once_on_rank_zero(tmp_path):
    with FileServer(shared_data_path()) as server:
        proc = run_mpi(["-m", "spgnn", "train", "--graph", "cora", "--epochs", "5", "--json",
                        "--no-progress"], 2, timeout=180, env=_env(tmp_path, server.url))
    assert proc.returncode == 0, proc.stdout
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (report["graph"], report["n"], report["ranks"]) == ("cora", 2708, 2)
    # 8 Planetoid files, each requested once, although 2 ranks asked for the graph
    assert sorted(r[0] for r in server.gets()) == sorted(
        f"planetoid/ind.cora.{p}" for p in ("x", "y", "tx", "ty", "allx", "ally", "graph",
                                             "test.index"))


def test_offline_name_is_one_error_on_every_rank_naming_the_files(tmp_path):
    proc = run_mpi(["-m", "spgnn", "spmm", "--graph", "ego-facebook", "--json"], 2, timeout=120,
                   env=_env(tmp_path))
    assert proc.returncode != 0
    lines = [ln for ln in proc.stdout.splitlines() if "spgnn spmm: error:" in ln]
    assert len(lines) == 1 and "missing from the dataset cache" in lines[0], proc.stdout
    assert str(tmp_path / "snap_facebook_combined" / "facebook_combined.txt.gz") in proc.stdout
    assert "Traceback" not in proc.stdout


def test_edge_list_trains_with_synthetic_features_and_labels(tmp_path):
    env = _env(shared_data_path())
    bare = run_mpi(["-m", "spgnn", "train", "--graph", "email-enron", "--epochs", "2"], 2,
                   timeout=120, env=env)
    assert bare.returncode != 0 and "--features random:F" in bare.stdout
    proc = run_mpi(["-m", "spgnn", "train", "--graph", "ego-facebook", "--features", "degree",
                    "--labels", "random:4", "--epochs", "3", "--json", "--no-progress"], 2,
                   timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["classes"] == 4 and report["features"] == 11 and report["n"] == 4039


def test_bench_spmm_writes_json_and_a_figure(tmp_path):
    plot = tmp_path / "spmm.png"
    proc = run_mpi(["-m", "spgnn", "bench", "spmm", "--graph", "rmat:9", "--graph",
                    "ego-facebook", "--algos", "1d,1d-aware", "--repeat", "2", "--json",
                    "--plot", str(plot)], 2, timeout=180, env=_env(shared_data_path()))
    assert proc.returncode == 0, proc.stdout
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {(r["graph"], r["algorithm"]) for r in out["results"]} == {
        (g, a) for g in ("rmat:9", "ego-facebook") for a in ("1d", "1d-aware")}
    assert all(r["check_passed"] and r["seconds_min"] <= r["seconds"] <= r["seconds_max"]
               for r in out["results"])
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_gcn_on_a_named_graph_without_pyg_timing(tmp_path):
    plot = tmp_path / "gcn.svg"
    proc = subprocess.run([sys.executable, "-m", "spgnn", "bench", "gcn", "--graph", "cora",
                           "--hidden", "8", "--repeat", "2", "--warmup", "1", "--no-pyg",
                           "--threads", "1", "--json", "--plot", str(plot)],
                          capture_output=True, text=True, timeout=180,
                          env={**os.environ, **_env(shared_data_path())})
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rec["threads"] == 1 and rec["rows"][0]["graph"] == "cora"
    assert "<svg" in plot.read_text()


def test_datasets_command_lists_the_registry(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "spgnn", "datasets", "--json"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **_env(shared_data_path())})
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)["datasets"]}
    assert rows["cora"]["cached"] == "yes" and rows["ogbn-arxiv"]["verified_by"] == "format"
    with pytest.raises(subprocess.CalledProcessError):
        subprocess.run([sys.executable, "-m", "spgnn", "datasets", "info", "no-such"],
                       capture_output=True, check=True, timeout=60)
