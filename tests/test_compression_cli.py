"""``train --aggregation/--quantize/--label-prop`` under mpiexec: the JSON bytes by label."""

import json

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

pytestmark = mpi_test_marks()

GRAPH = ["--graph", "sbm:300:3:0", "--feature-dim", "64", "--hidden", "64"]


def _train(nprocs, *extra):
    proc = run_mpi(["-m", "spgnn", "train", *GRAPH, "--no-progress", "--json", "--epochs", "2",
                    "--algo", "1d-aware", *extra], nprocs, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs():
    out = {(agg, "none"): _train(2, "--aggregation", agg) for agg in ("post", "pre", "hybrid")}
    out["hybrid", "int2"] = _train(2, "--aggregation", "hybrid", "--quantize", "int2")
    return out


def exchange(r):
    return sum(v for k, v in r["bytes_per_epoch_by_label"].items() if ":exchange" in k)


def test_bytes_by_label(runs):
    for (agg, q), r in runs.items():
        lab = r["bytes_per_epoch_by_label"]
        assert sum(lab.values()) == r["bytes_per_epoch"]          # every byte has a label
        assert any("grad" in k for k in lab)
        name = "spmm-1d-aware:exchange" if agg == "post" else f"spmm-1d-{agg}:exchange"
        if q == "none":
            assert name in lab and not any(k.endswith((":data", ":params")) for k in lab)
        else:
            assert {f"spmm-1d-{agg}:exchange:data", f"spmm-1d-{agg}:exchange:params"} <= set(lab)
    hyb = exchange(runs["hybrid", "none"])
    assert hyb <= min(exchange(runs["pre", "none"]), exchange(runs["post", "none"]))
    # Codes alone are 16x smaller than fp32 rows, less the padding of each peer
    # segment to a whole byte (the exact formula, parameters included, is
    # tested in tests/unit/test_quant_codec.py).
    data = runs["hybrid", "int2"]["bytes_per_epoch_by_label"]["spmm-1d-hybrid:exchange:data"]
    assert 14 < exchange(runs["hybrid", "none"]) / data <= 16
    q = runs["hybrid", "int2"]
    assert q["quantize"] == "int2" and q["rounding"] == "stochastic" and 0 <= q["test_acc"] <= 1


def test_refused_outside_1d_aware():
    proc = run_mpi(["-m", "spgnn", "train", *GRAPH, "--no-progress", "--epochs", "1",
                    "--algo", "1d", "--quantize", "int2"], 2, timeout=120)
    assert proc.returncode != 0
    assert "--quantize needs a full-graph model with --algo 1d-aware" in proc.stdout
    proc = run_mpi(["-m", "spgnn", "train", *GRAPH, "--no-progress", "--epochs", "1",
                    "--algo", "1d-aware", "--label-prop", "1.5"], 2, timeout=120)
    assert proc.returncode != 0 and "--label-prop must lie in [0, 1)" in proc.stdout
