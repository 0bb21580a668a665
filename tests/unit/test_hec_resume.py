"""``--hec on --hec-push-cap auto`` (the default) resumes bit for bit (loopback ranks).

The auto plan carries state across epochs (the level-0 cache, the cumulative
byte budgets, the clock); ``--resume`` rebuilds it by replaying the earlier
epochs' plans (:meth:`spgnn.gnn.sources.Halo.replay_hec_plans`).  Without the
replay the resumed epoch re-sends level-0 rows and restarts its budgets, so its
cache hits and loss differ.
"""

import argparse

import numpy as np

from spgnn.cli import train as cli_train
from spgnn.comm import run_loopback

ARGV = ["train", "--graph", "sbm:300:3:0", "--model", "sage", "--no-progress", "--fanout", "4,3",
        "--batch-size", "16", "--hidden", "8", "--partition", "metis", "--hec", "on",
        "--model-selection", "last"]


def _run(*argv):
    parser = argparse.ArgumentParser()
    cli_train.add_parser(parser.add_subparsers())
    cfg = cli_train.config_from_args(parser.parse_args([*ARGV, *argv]))
    return run_loopback(2, lambda comm: cli_train.train(comm, cfg))[0]


def test_auto_cap_resume_is_bit_identical(tmp_path):
    full = _run("--epochs", "2", "--save-weights", str(tmp_path / "a.npz"))
    ck = str(tmp_path / "ck")
    _run("--epochs", "1", "--checkpoint", ck, "--every", "1")
    res = _run("--epochs", "2", "--resume", ck, "--save-weights", str(tmp_path / "c.npz"))
    assert res["resumed_from"] == 1 and res["hec_config"]["nc"] == "auto"
    assert res["loss_history"] == full["loss_history"][1:]
    assert (res["hec_pushed"], res["hec_hits"]) == (full["hec_pushed"], full["hec_hits"])
    with np.load(tmp_path / "a.npz") as a, np.load(tmp_path / "c.npz") as c:
        assert a.files == c.files and all(np.array_equal(a[k], c[k]) for k in a.files)
