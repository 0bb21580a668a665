"""Fault class 8 (issue 28): options no run can use are refused with one line, never
silently replaced or ignored.

Each case runs the real command (one process: these are checked before MPI
matters) and expects exit status 2, one ``spgnn CMD: error:`` line naming the
option, and no traceback.
"""

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from spgnn.io import load_graph, save_npz

CASES = {
    "plan-itemsize-0": (["plan", "--graph", "rmat:8", "--itemsize", "0"], "--itemsize"),
    "plan-alpha-negative": (["plan", "--graph", "rmat:8", "--alpha", "-1", "--beta", "1e-9"],
                            "--alpha must be a finite number >= 0"),
    "plan-beta-nan": (["plan", "--graph", "rmat:8", "--alpha", "1e-6", "--beta", "nan"],
                      "--beta must be a finite number >= 0"),
    "plan-memory-without-time": (["plan", "--graph", "rmat:8", "--memory"],
                                 "--memory applies with --time"),
    "plan-ranks-huge": (["plan", "--graph", "rmat:8", "--ranks", "100000000"],
                        "--ranks must be at most"),
    "spmm-grid-not-3d": (["spmm", "--graph", "rmat:8", "--algo", "1d-aware", "--grid", "1x1x1"],
                         "--grid applies to --algo 3d (or auto) only"),
    "train-grid-not-3d": (["train", "--graph", "sbm:300:3:0", "--algo", "1d-aware", "--grid",
                           "1x1x1"], "--grid applies to --algo 3d (or auto) only"),
    "train-ladies-size-0": (["train", "--graph", "sbm:300:3:0", "--model", "sage", "--sampler",
                             "ladies", "--ladies-size", "0"], "--ladies-size must be >= 1"),
    "train-sage-layers": (["train", "--graph", "sbm:300:3:0", "--model", "sage", "--fanout",
                           "5,5", "--layers", "3"], "one layer per --fanout hop"),
    "train-best-val-no-val": (["train", "--graph", "sbm:300:3:0", "--model", "sage", "--split",
                               "0.8:0"], "needs validation vertices"),
    "train-no-training-vertices": (["train", "--graph", "{d}/notrain.npz"],
                                   "has no training vertices"),
    "train-gcn-sage-option": (["train", "--graph", "sbm:300:3:0", "--eval-every", "2"],
                              "--eval-every applies only to --model sage"),
    # issue 38: --hec on with a full-graph model trained a plain GCN, rc 0
    "train-hec-gcn": (["train", "--graph", "sbm:300:3:0", "--model", "gcn", "--partition",
                       "random", "--hec", "on"], "--hec applies only to --model sage"),
    # issue 38: a NaN tolerance ran to max_iter and printed a normal result
    "graph-pagerank-tol-nan": (["graph", "pagerank", "--graph", "rmat:6", "--tol", "nan"],
                               "pagerank: tol (the L1 tolerance) must be a finite number > 0"),
    # issue 38: argparse took -1,5,5 for an unknown option
    "train-fanout-negative": (["train", "--graph", "sbm:300:3:0", "--model", "sage", "--fanout",
                               "-1,5,5"], "--fanout needs positive ints, but got '-1,5,5'"),
    # issue 38: a KeyError traceback
    "datasets-unknown-name": (["datasets", "info", "coraa"],
                              "unknown dataset 'coraa' (did you mean 'cora'?)"),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("val")
    g = load_graph("sbm:300:3:0")
    save_npz(dataclasses.replace(g, train_mask=np.zeros(g.num_nodes, bool), name="notrain"),
             d / "notrain.npz")
    return d


@pytest.mark.parametrize("name", sorted(CASES))
def test_unusable_options_are_one_line(name, files):
    argv, message = CASES[name]
    argv = [a.format(d=files) for a in argv]
    proc = subprocess.run([sys.executable, "-m", "spgnn", *argv, "--no-progress"
                           if argv[0] == "train" else "--json"], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    lines = [ln for ln in proc.stderr.splitlines() if f"spgnn {argv[0]}: error:" in ln]
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


def test_spmm_bad_replication_is_one_line_on_two_ranks():
    """Issue 38: every rank printed the message (two ranks' lines ran together), without the
    command's prefix, and the job exited 0 or 1; now one agreed line and exit 2."""
    from spgnn.testing.mpi import run_mpi

    proc = run_mpi(["-m", "spgnn", "spmm", "--graph", "rmat:8", "--algo", "15d",
                    "--replication", "3"], 2, timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if "spgnn spmm: error:" in ln]
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout
    assert "--replication must divide the 2 ranks, but got 3" in lines[0], proc.stdout


def test_demo_sizes_are_checked_by_name():
    """Issue 38: ``demo --feat 0`` ended in a numpy error that named no option."""
    proc = subprocess.run([sys.executable, "-m", "spgnn", "demo", "--feat", "0"],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    lines = [ln for ln in proc.stderr.splitlines() if "spgnn demo: error:" in ln]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "--feat must be >= 1, but got 0" in lines[0], proc.stderr
