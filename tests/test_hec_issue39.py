"""Issue 39: ``--hec none`` (no halo traffic), ``--hec-push-cap auto`` (planned pushes within a
byte budget), the use accounting of pushed lines, the refusal of an oversized ``--hec-reset never``.

Three loopback ranks in this process (the command's ``train`` function), except the refusal, which
needs the command's one-line error under mpiexec."""

import argparse
import os

from spgnn.cli import train as cli_train
from spgnn.comm import run_loopback
from spgnn.testing.mpi import mpi_test_marks, run_mpi

BASE = ["--graph", "sbm:400:3:0", "--model", "sage", "--no-progress",
        "--fanout", "4,3", "--batch-size", "16", "--hidden", "8", "--partition", "metis",
        "--epochs", "2"]


def _json(nprocs, *extra):
    parser = argparse.ArgumentParser()
    cli_train.add_parser(parser.add_subparsers())
    config = cli_train.config_from_args(parser.parse_args(["train", *BASE, *extra]))
    reports = run_loopback(nprocs, lambda comm: cli_train.train(comm, config), timeout=300)
    return reports[0]


def test_hec_none_moves_no_halo_bytes():
    r = _json(3, "--hec", "none")
    assert r["hec"] == "none"
    # the ledger counts every collective: only the gradient all-reduce is left
    assert set(r["bytes_per_epoch_by_label"]) == {"hec:grad-allreduce"}
    assert r["nongrad_bytes_per_epoch_mean"] == 0
    assert 0 <= r["test_acc"] <= 1


def _use_is_consistent(r):
    for lv in r["hec_pushed"]:
        # every received line is read, wasted (expired / overwritten unread) or still live
        assert r["hec_stored"][lv] == r["hec_pushed"][lv]
        assert r["hec_stored"][lv] == (r["hec_read"][lv] + r["hec_wasted"][lv]
                                       + r["hec_live"][lv]), (lv, r)


def test_auto_pushes_are_read_and_cost_less_than_the_fetch():
    off = _json(3, "--hec", "off")
    on = _json(3, "--hec", "on")                     # defaults: --hec-push-cap auto
    assert on["hec_config"]["nc"] == "auto"
    _use_is_consistent(on)
    # planned pushes serve known reads: none expires unread
    assert sum(on["hec_wasted"].values()) == 0
    assert sum(on["hec_pushed"].values()) > 0
    # --hec off's non-gradient bytes are its halo fetch
    assert set(off["bytes_per_epoch_by_label"]) == {"hec:grad-allreduce", "halo-fetch:ids",
                                                    "halo-fetch:rows"}
    # the budget: a quarter of the fetch's bytes (plus the per-iteration counts)
    assert on["nongrad_bytes_per_epoch_mean"] < off["nongrad_bytes_per_epoch_mean"] / 3


def test_speculative_pushes_account_wasted_lines():
    r = _json(3, "--hec", "on", "--hec-push-cap", "20", "--miss-policy", "drop")
    _use_is_consistent(r)
    assert sum(r["hec_wasted"].values()) > 0         # speculative: some expire unread


def _mpi(test):
    for mark in mpi_test_marks():
        test = mark(test)
    return test


@_mpi
def test_oversized_reset_never_is_refused_on_every_rank():
    proc = run_mpi(["-m", "spgnn", "train", *BASE, "--json", "--hec", "on", "--hec-reset",
                    "never"], 2, timeout=120,
                   env=dict(os.environ, SPGNN_HOST_MEMORY="1000000"))
    assert proc.returncode != 0
    errors = [line for line in proc.stdout.splitlines() if "spgnn train: error:" in line]
    assert errors and "the caches need" in errors[0] and "--hec-capacity" in errors[0], \
        proc.stdout[-3000:]
