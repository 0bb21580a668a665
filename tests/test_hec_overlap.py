"""Issue 39, wall clock: ``--hec-push-cap auto`` pushes need no per-iteration counts exchange (the
counts travel once per epoch with the plan, ``hec:plan:counts``), and neither that nor the
progress calls between the layers' kernels (``Request.test``) change what is trained.

Three loopback ranks in this process (the command's ``train`` function)."""

import argparse

import numpy as np
import pytest

from spgnn.cli import train as cli_train
from spgnn.comm import run_loopback

BASE = ["--graph", "sbm:400:3:0", "--model", "sage", "--no-progress",
        "--fanout", "4,3", "--batch-size", "16", "--hidden", "8", "--partition", "metis",
        "--epochs", "3", "--hec", "on"]

#: ``BASE`` at 97b2cac, before this change (blocking ``hec:push:L*:counts`` every iteration):
#: the same losses (bit for bit on the machine that recorded them) and payload bytes
BEFORE_LOSSES = [1.0433545204663368, 0.9743668324238545, 0.8600037254421867]
BEFORE_PAYLOAD = {"hec:grad-allreduce": 55104, "hec:push:L0:ids": 968, "hec:push:L0:rows": 15008,
                  "hec:push:L1:ids": 192, "hec:push:L1:rows": 768, "hec:want": 1624}


def _json(nprocs, *extra):
    parser = argparse.ArgumentParser()
    cli_train.add_parser(parser.add_subparsers())
    config = cli_train.config_from_args(parser.parse_args(["train", *BASE, *extra]))
    return run_loopback(nprocs, lambda comm: cli_train.train(comm, config), timeout=300)[0]


def test_planned_pushes_send_no_counts_and_train_as_before(monkeypatch):
    on = _json(3)
    lab = dict(on["bytes_per_epoch_by_label"])
    assert not [k for k in lab if k.startswith("hec:push:") and k.endswith(":counts")], lab
    # one table per epoch: P x (1 + (levels - 1) x (M - d)) int64, to the P - 1 peers
    M, d, P = on["steps_per_epoch"], on["hec_config"]["d"], 3
    assert lab.pop("hec:plan:counts") == P * (P - 1) * 8 * (1 + (M - d))
    assert lab == BEFORE_PAYLOAD
    assert on["loss_history"] == pytest.approx(BEFORE_LOSSES, rel=1e-6)
    # the unoverlapped baseline (each push waited at once, no progress calls): the same run
    monkeypatch.setenv("SPGNN_HEC_OVERLAP", "0")
    flat = _json(3)
    for k in ("loss_history", "eval_history", "test_acc", "hec_hits", "hec_pushed",
              "bytes_per_epoch_by_label"):
        assert flat[k] == on[k], k


def test_request_test_progresses_and_wait_still_records():
    def body(comm):
        x = np.arange(4, dtype=np.float64) + 10 * comm.rank
        req = comm.ialltoallv(x, [2, 2], [2, 2], label="t:overlap", split=False)
        done = req.test()                     # loopback completes at the start
        n0 = len(comm.ledger.stats.events)
        got = req.wait()
        assert req.test()
        return done, len(comm.ledger.stats.events) - n0, got.tolist()

    out = run_loopback(2, body)
    assert [o[0] for o in out] == [True, True]
    assert [o[1] for o in out] == [1, 1]      # the event is recorded by wait, once
    assert out[0][2] == [0.0, 1.0, 10.0, 11.0]
    assert out[1][2] == [2.0, 3.0, 12.0, 13.0]
