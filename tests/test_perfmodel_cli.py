"""``--algo auto``, ``plan --time`` and calibration files through the real commands."""

import json
import subprocess
import sys

import pytest

from spgnn.plan.choose import aggregation_pattern
from spgnn.io import load_graph
from spgnn.plan.model import Calibration, load_calibration, rank_configs
from spgnn.testing.mpi import mpi_test_marks, run_mpi

pytestmark = mpi_test_marks()

GRAPH = "sbm:300:3:0"
# communication dear, compute cheap: a ranking that differs from the defaults'
CAL = Calibration({"default": (5e-5, 1e-9), "alltoall": (1e-3, 1e-9)},
                  (1e-6, 1e-9, 1e-9, 1e-10, 0.0), (1e-6, 1e-11, 1e-10), {"source": "test"})


def _last_json(proc):
    assert proc.returncode == 0, proc.stdout
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def cal_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cal") / "cal.json"
    CAL.save(path)
    return path


def test_auto_trains_the_configuration_the_model_ranks_first(cal_file):
    proc = run_mpi(["-m", "spgnn", "train", "--graph", GRAPH, "--epochs", "2", "--json",
                    "--no-progress"], 4, env={"SPGNN_CALIBRATION": str(cal_file)})
    r = _last_json(proc)
    g = load_graph(GRAPH)
    expect = rank_configs(aggregation_pattern(g.adj), 4, [g.features.shape[1], 16,
                                                            g.num_classes], load_calibration(cal_file))
    assert [a["algorithm"] for a in r["auto"]] == [p.algorithm for p in expect[:3]]
    assert [a["seconds"] for a in r["auto"]] == pytest.approx([p.seconds for p in expect[:3]])
    assert r["algorithm"] == expect[0].algorithm
    assert "--algo auto chose" in proc.stdout


def test_auto_with_a_grid_trains_3d_on_it(cal_file):
    r = _last_json(run_mpi(["-m", "spgnn", "train", "--graph", GRAPH, "--epochs", "1", "--json",
                            "--no-progress", "--grid", "2x1x2"], 4,
                           env={"SPGNN_CALIBRATION": str(cal_file)}))
    assert r["algorithm"] == "3d" and r["auto"][0]["grid"] == "2x1x2"


def test_bad_calibration_file_is_one_line_error_on_every_rank(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "spgnn-calibration/1", "comm": {}}')
    proc = run_mpi(["-m", "spgnn", "train", "--graph", GRAPH, "--epochs", "1", "--json",
                    "--no-progress"], 2, env={"SPGNN_CALIBRATION": str(bad)})
    assert proc.returncode != 0
    errors = [line for line in proc.stdout.splitlines() if "spgnn train: error:" in line]
    assert errors and str(bad) in errors[0], proc.stdout
    assert "Traceback" not in proc.stdout


def test_plan_time_ranks_every_configuration(cal_file):
    out = subprocess.run([sys.executable, "-m", "spgnn", "plan", "--graph", "rmat:8",
                          "--ranks", "4,512", "--algos", "1d", "--alpha", "1e-6", "--beta",
                          "1e-10", "--time", "--dims", "32,16,4", "--calibration",
                          str(cal_file), "--json"], capture_output=True, text=True, timeout=120)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    for entry in data["timed"]:
        times = [r["seconds"] for r in entry["ranking"]]
        assert times == sorted(times) and len(times) > 5
    assert {e["ranks"] for e in data["timed"]} == {4, 512}
    table = subprocess.run([sys.executable, "-m", "spgnn", "plan", "--graph", "rmat:8",
                            "--ranks", "8", "--algos", "1d", "--alpha", "1e-6", "--beta",
                            "1e-10", "--time", "--calibration", str(cal_file)],
                           capture_output=True, text=True, timeout=120).stdout
    assert "chosen:" in table and "predicted GCN epoch" in table


def test_auto_prices_permute_double_and_agg_blocks(cal_file):
    """``--permute double --agg-blocks 2`` with auto: 3d grids priced on the run's own P_r, P_c
    (drawn from --seed) and with the chunked all-reduces; the grid trained is the model's first."""
    from spgnn.partition import double_permutation
    from spgnn.plan.model import candidate_configs

    proc = run_mpi(["-m", "spgnn", "train", "--graph", GRAPH, "--epochs", "1", "--json",
                    "--no-progress", "--permute", "double", "--agg-blocks", "2", "--seed", "3"],
                   4, env={"SPGNN_CALIBRATION": str(cal_file)})
    r = _last_json(proc)
    g = load_graph(GRAPH)
    a = aggregation_pattern(g.adj)
    dims, cal = [g.features.shape[1], 16, g.num_classes], load_calibration(cal_file)
    configs = candidate_configs(4, ("3d",))
    expect = rank_configs(a, 4, dims, cal, configs=configs, agg_blocks=2,
                          permutation_for=lambda m: double_permutation(m, 3))
    assert [a["grid"] for a in r["auto"]] == ["x".join(map(str, p.grid)) for p in expect[:3]]
    assert [a["seconds"] for a in r["auto"]] == pytest.approx([p.seconds for p in expect[:3]])
    assert all(a["permute"] == "double" and a["agg_blocks"] == 2 for a in r["auto"])
    assert (r["algorithm"], r["permute"], r["agg_blocks"]) == ("3d", "double", 2)
    assert "--permute double --agg-blocks 2" in proc.stdout
    # the options move the prediction: a ranking that ignored them would fail the test above
    plain = rank_configs(a, 4, dims, cal, configs=configs)
    assert [p.seconds for p in plain[:3]] != pytest.approx([p.seconds for p in expect[:3]])


def test_plan_time_prices_permute_and_agg_blocks(cal_file):
    from spgnn.partition import double_permutation

    out = subprocess.run([sys.executable, "-m", "spgnn", "plan", "--graph", "rmat:8", "--ranks",
                          "8", "--algos", "1d", "--alpha", "1e-6", "--beta", "1e-10", "--time",
                          "--dims", "32,16,4", "--calibration", str(cal_file), "--json",
                          "--partition", "none", "--permute", "double", "--agg-blocks", "3",
                          "--seed", "2"], capture_output=True, text=True, timeout=120)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    ranking = data["timed"][0]["ranking"]
    g = load_graph("rmat:8")
    expect = rank_configs(aggregation_pattern(g.adj), 8, [32, 16, 4], load_calibration(cal_file),
                          agg_blocks=3, permutation_for=lambda m: double_permutation(m, 2))
    assert [r["seconds"] for r in ranking] == pytest.approx([p.seconds for p in expect])
    assert {(r["permute"], r["agg_blocks"]) for r in ranking if r["algorithm"] == "3d"} == \
        {("double", 3)}
    bad = subprocess.run([sys.executable, "-m", "spgnn", "plan", "--graph", "rmat:8", "--ranks",
                          "8", "--algos", "1d", "--alpha", "1e-6", "--beta", "1e-10", "--time",
                          "--agg-blocks", "0"], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "--agg-blocks must be >= 1" in bad.stderr + bad.stdout
