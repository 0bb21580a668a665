"""Where an epoch goes (issue 37): ``epoch_seconds_by_phase`` of ``train --json``.

Per epoch and rank: ``compute`` (the rest), ``comm`` (per ledger label, the
time inside the calls), ``quantize`` (the exchange codec) and ``wait`` (timed
barriers before the collectives, with ``--phases``); they sum to the epoch's
wall time.  No assertion on timed values but their signs and their sum, and
lower bounds that a ``sleep`` guarantees.  Two virtual ranks
(``run_loopback``).
"""

import argparse
import time

import numpy as np
import pytest

from spgnn.cli import train as cli_train
from spgnn.comm import run_loopback

BASE = ["--graph", "sbm:120:3:0", "--feature-dim", "16", "--hidden", "8", "--no-progress",
        "--epochs", "3"]
QUANT = ["--algo", "1d-aware", "--layers", "2", "--aggregation", "hybrid", "--quantize", "int2"]
HEC = ["--model", "sage", "--hec", "on", "--partition", "metis", "--batch-size", "16",
       "--fanout", "4,4"]


def _run(*argv):
    parser = argparse.ArgumentParser()
    cli_train.add_parser(parser.add_subparsers())
    config = cli_train.config_from_args(parser.parse_args(["train", *BASE, *argv]))
    return run_loopback(2, lambda comm: cli_train.train(comm, config))[0]


def _check(report, waits):
    ph = report["epoch_seconds_by_phase"]
    assert set(ph) == {"epoch", "compute", "comm", "quantize", "wait"}
    # the same labels as the bytes: every call of the epoch's steps, by label
    assert set(ph["comm"]) == set(report["bytes_per_epoch_by_label"])
    parts = [ph["compute"], ph["quantize"], *ph["comm"].values()]
    if waits:
        parts.append(ph["wait"])
    else:
        assert ph["wait"] is None
    assert min(parts) >= 0, ph
    assert sum(parts) == pytest.approx(ph["epoch"], rel=1e-9)
    # the mean over ranks of the epochs that seconds_per_epoch (slowest rank) averages
    assert ph["epoch"] <= report["seconds_per_epoch"] * (1 + 1e-9)
    return ph


@pytest.mark.parametrize("phases", [True, False])
def test_full_graph_phases_sum_to_the_epoch(phases):
    ph = _check(_run(*QUANT, *(["--phases"] if phases else [])), waits=phases)
    assert ph["quantize"] > 0                       # the codec ran (int2 exchanges)


def test_hec_phases_sum_to_the_epoch():
    """Minibatches with non-blocking cache pushes: their start and wait, not the overlap."""
    ph = _check(_run(*HEC, "--phases"), waits=True)
    assert ph["quantize"] == 0.0                    # no codec: nothing on its clock


def test_a_timed_barrier_holds_the_wait_for_a_slower_rank():
    def body(comm):
        comm.ledger.time_waits = True
        if comm.rank == 1:
            time.sleep(0.5)
        comm.allreduce(np.ones(4), label="x")
        ev = comm.ledger.stats.events[-1]
        return ev.wait_seconds, ev.seconds, comm.ledger.clocks["wait"]

    (w0, s0, c0), (w1, _, c1) = run_loopback(2, body)
    assert w0 >= 0.25 and c0 == w0 and c1 == w1       # rank 0 waited for rank 1's sleep
    assert s0 >= 0


def test_a_non_blocking_call_is_blocked_for_its_start_and_wait_only():
    def body(comm):
        req = comm.ialltoallv(np.arange(4.0), [2, 2], [2, 2], label="y")
        time.sleep(0.3)                                 # overlapped computation
        req.wait()
        ev = comm.ledger.stats.events[-1]
        return ev.seconds, ev.blocked_seconds

    for seconds, blocked in run_loopback(2, body):
        assert seconds >= 0.3 and 0 <= blocked <= seconds - 0.2
