"""Double permutation and blocked aggregation in 3D training under real mpiexec (issue 26).

tests/mpi/gnn_checks.py --plexus: on every 3d grid of P (2x2x2 and 2x1x4 at 8
ranks), ``permute="double"`` and ``agg_blocks=3`` (alone and together) train
3 epochs whose losses equal the numpy reference and the plain 3d run's, with
every rank's ledger bytes per label equal to the plain run's, and one epoch's
ledger equal to the planner's exact events (``plan_gcn_3d(agg_blocks=K)``:
bytes and messages, every rank, in order).
"""

import os

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = mpi_test_marks()


@pytest.mark.parametrize("nprocs", [2, 8])
def test_double_permutation_and_blocked_aggregation_under_mpi(nprocs):
    proc = run_mpi([os.path.join(HERE, "mpi", "gnn_checks.py"), "--skip-sbm", "--plexus"],
                   nprocs, timeout=300)
    tail = proc.stdout[-5000:]
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{tail}"
    assert f"OK gnn_checks {nprocs} ranks" in proc.stdout, tail
    grids = {2: 2, 8: 2}[nprocs]
    assert proc.stdout.count("ok plexus") == 3 * grids, tail


def _train_json(extra, nprocs=4):
    import json

    proc = run_mpi(["-m", "spgnn", "train", "--graph", "sbm:120:3:0", "--epochs", "2", "--json",
                    "--no-progress", *extra], nprocs, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_train_cli_permute_double_and_agg_blocks():
    """Dropout on (masks keyed by original ids): the same losses and bytes per epoch."""
    plain = _train_json(["--algo", "3d", "--grid", "2x1x2"])
    both = _train_json(["--algo", "3d", "--grid", "2x1x2", "--permute", "double",
                        "--agg-blocks", "4"])
    assert both["permute"] == "double" and both["agg_blocks"] == 4
    assert plain["permute"] == "none" and plain["agg_blocks"] == 1
    assert both["loss_history"] == pytest.approx(plain["loss_history"], rel=1e-5)
    assert both["test_acc"] == plain["test_acc"]
    assert both["bytes_per_epoch"] == plain["bytes_per_epoch"]
    assert both["bytes_per_epoch_by_label"] == plain["bytes_per_epoch_by_label"]
    auto = _train_json(["--permute", "double"], nprocs=2)       # auto: 3d grids only
    assert auto["algorithm"] == "3d" and all(a["algorithm"] == "3d" for a in auto["auto"])


def test_train_cli_refuses_permute_off_3d():
    proc = run_mpi(["-m", "spgnn", "train", "--graph", "sbm:60:3:0", "--epochs", "1",
                    "--algo", "1d", "--permute", "double", "--no-progress"], 2, timeout=120)
    assert proc.returncode != 0
    assert "--permute and --agg-blocks apply to --algo 3d" in proc.stdout, proc.stdout[-2000:]
    assert "Traceback" not in proc.stdout
