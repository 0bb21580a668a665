"""``spmm --algo auto``, ``--replication auto`` (spmm and train) under mpiexec (issue 26).

Rank 0 ranks the configurations with the performance model and broadcasts
its choice; the run must use the configuration the model ranks first (the
same ranking recomputed here), record the top 3 in the JSON and print them.
"""

import json

import pytest

from spgnn.plan.choose import aggregation_pattern
from spgnn.io import load_adjacency, load_graph
from spgnn.plan.model import (Calibration, candidate_configs, load_calibration, rank_configs,
                             rank_spmm_configs)
from spgnn.testing.mpi import mpi_test_marks, run_mpi

pytestmark = mpi_test_marks()

GRAPH = "sbm:300:3:0"
# communication dear: a ranking where 1.5D's c and 3d's grid matter
CAL = Calibration({"default": (5e-5, 1e-9), "alltoall": (1e-3, 1e-9)},
                  (1e-6, 1e-9, 1e-9, 1e-10, 0.0), (1e-6, 1e-11, 1e-10), {"source": "test"})


@pytest.fixture(scope="module")
def cal_env(tmp_path_factory):
    path = tmp_path_factory.mktemp("cal") / "cal.json"
    CAL.save(path)
    return {"SPGNN_CALIBRATION": str(path)}


def _json(args, nprocs, env):
    proc = run_mpi(["-m", "spgnn", *args, "--json"], nprocs, env=env, timeout=240)
    assert proc.returncode == 0, proc.stdout[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stdout


def _names(preds):
    return [(p.algorithm, p.replication, "x".join(map(str, p.grid)) if p.grid else None)
            for p in preds]


def _got(top):
    return [(r["algorithm"], r["replication"], r["grid"]) for r in top]


def test_spmm_algo_auto_runs_the_models_first_choice(cal_env):
    r, out = _json(["spmm", "--graph", GRAPH, "--algo", "auto", "--check", "--repeat", "1"], 4,
                   cal_env)
    adj, _ = load_adjacency(GRAPH)
    want = rank_spmm_configs(adj, 4, 64, CAL)
    assert _got(r["auto"]) == _names(want[:3])
    assert r["auto"][0]["seconds"] == pytest.approx(want[0].seconds)
    assert r["algorithm"] == want[0].algorithm and r["check_passed"]
    if want[0].grid:
        assert r["grid"] == "x".join(map(str, want[0].grid))
    assert "--algo auto chose" in out and "ms/multiply" in out


def test_spmm_replication_auto_picks_c(cal_env):
    r, _ = _json(["spmm", "--graph", GRAPH, "--algo", "15d", "--replication", "auto", "--check",
                  "--repeat", "1", "--feat", "16"], 4, cal_env)
    adj, _ = load_adjacency(GRAPH)
    want = rank_spmm_configs(adj, 4, 16, CAL, configs=candidate_configs(4, ("15d",)))
    assert r["algorithm"] == "15d" and r["replication"] == want[0].replication
    assert _got(r["auto"]) == _names(want[:3]) and r["check_passed"]


def test_train_replication_auto_picks_c(cal_env):
    r, out = _json(["train", "--graph", GRAPH, "--algo", "15d-aware", "--replication", "auto",
                    "--epochs", "1", "--no-progress"], 4, cal_env)
    g = load_graph(GRAPH)
    want = rank_configs(aggregation_pattern(g.adj), 4, [g.features.shape[1], 16,
                                                         g.num_classes],
                        load_calibration(cal_env["SPGNN_CALIBRATION"]),
                        configs=candidate_configs(4, ("15d-aware",)))
    assert r["algorithm"] == "15d-aware" and r["replication"] == want[0].replication
    assert _got(r["auto"]) == _names(want[:3])
    assert "--algo auto chose 15d-aware --replication" in out


@pytest.mark.parametrize("args,message", [
    (["spmm", "--graph", GRAPH, "--algo", "1d", "--replication", "auto"],
     "--replication auto applies to --algo 15d"),
    (["train", "--graph", GRAPH, "--algo", "1d", "--replication", "auto", "--epochs", "1"],
     "--replication auto applies to --algo 15d"),
])
def test_replication_auto_refused_elsewhere(args, message):
    proc = run_mpi(["-m", "spgnn", *args], 2, timeout=120)
    assert proc.returncode != 0 and message in proc.stdout, proc.stdout[-2000:]
    assert "Traceback" not in proc.stdout
