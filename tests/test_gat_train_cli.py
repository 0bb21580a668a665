"""``python -m spgnn train --model gat`` under real mpiexec: equal losses on 1 and 4 ranks,
constant bytes per epoch, and the options and algorithms it refuses."""

import json

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

pytestmark = mpi_test_marks()

GAT = ["-m", "spgnn", "train", "--graph", "sbm:300:3:0", "--model", "gat", "--no-progress"]


def _report(nprocs, *extra):
    proc = run_mpi([*GAT, "--epochs", "4", "--heads", "2", "--hidden", "4", "--json", *extra],
                   nprocs, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_gat_trains_alike_on_1_and_4_ranks():
    one, four = _report(1), _report(4)
    assert one["model"] == four["model"] == "gat" and four["ranks"] == 4
    assert len(one["loss_history"]) == 4
    # counter-based node and edge dropout, global normalisation: the same model at any P
    assert four["loss_history"] == pytest.approx(one["loss_history"], rel=1e-5)
    # attention plans are built in the placement pass, before epoch 0
    assert four["bytes_per_epoch_constant"] and four["bytes_per_epoch"] > 0
    assert one["bytes_per_epoch"] == 0


@pytest.mark.parametrize("args, message", [
    (["--model", "gcn", "--heads", "2"], "--heads applies only to --model gat"),
    (["--algo", "3d"], "1d or 1d-aware"),
    (["--grid", "1x1x2"], "1d or 1d-aware (or auto), not --grid"),
])
def test_gat_refusals_are_one_line_errors(args, message):
    base = GAT if args[0] != "--model" else [a for a in GAT if a not in ("--model", "gat")]
    proc = run_mpi([*base, "--epochs", "1", *args], 2, timeout=120)
    assert proc.returncode != 0
    assert message in proc.stdout, proc.stdout[-3000:]
