"""Issue 37: partitioned minibatch training (``--model sage --hec off|on|none``) from shards.

``train --graph DIR`` reads each rank's own part (``HaloGraph.from_shards``) instead of loading
the graph on rank 0; on shards written with the partition of the in-memory run
(``--method random``: the same order whatever the pattern) training and the evaluation are the
same bit for bit.  Loopback ranks in this process (the command's ``train`` function), except
the one-line refusal, which needs the command under mpiexec."""

import argparse
import shutil

import numpy as np
import pytest

from spgnn.cli import train as cli_train
from spgnn.comm import run_loopback
from spgnn.errors import GridError, ShardError
from spgnn.gnn.partitioned import HaloGraph
from spgnn.io import load_graph
from spgnn.partition.to_shards import partition_to_shards
from spgnn.testing.mpi import mpi_test_marks, run_mpi

GRAPH = "sbm:400:3:0"
BASE = ["--model", "sage", "--no-progress", "--fanout", "4,3", "--batch-size", "16",
        "--hidden", "8", "--epochs", "2"]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """``{K: directory}``: the graph as K = 2, 3, 4 random parts (seed 0, as ``--seed 0``)."""
    graph = load_graph(GRAPH)
    root = tmp_path_factory.mktemp("shards")
    out = {}
    for k in (2, 3, 4):
        out[k] = root / f"k{k}"
        partition_to_shards(graph, out[k], k, "random", 0)
    return out


def _config(*extra):
    parser = argparse.ArgumentParser()
    cli_train.add_parser(parser.add_subparsers())
    return cli_train.config_from_args(parser.parse_args(["train", *BASE, *extra]))


def _train(nprocs, *extra):
    config = _config(*extra)
    return run_loopback(nprocs, lambda comm: cli_train.train(comm, config), timeout=300)[0]


@pytest.mark.parametrize("ranks,hec", [(2, "off"), (3, "on"), (2, "none")])
def test_from_shards_equals_the_in_memory_partitioned_run(shards, ranks, hec):
    got = _train(ranks, "--graph", str(shards[ranks]), "--hec", hec)
    want = _train(ranks, "--graph", GRAPH, "--partition", "random", "--hec", hec)
    # the same partition, features, sampler views and labels: every float equal
    assert got["loss_history"] == want["loss_history"]
    assert got["bytes_per_epoch_by_label"] == want["bytes_per_epoch_by_label"]
    # evaluation on the shards' own rows (no replicated graph) equals the in-memory one
    for key in ("test_acc", "val_acc", "train_acc", "test_loss", "val_loss", "eval_history",
                "n", "features", "classes", "iterations_per_epoch"):
        assert got[key] == want[key], key
    assert got["hec"] == hec and got["graph"] == GRAPH


def _owned(comm, directory):
    hg = HaloGraph.from_shards(directory, comm)
    mg = hg.mg
    rows = hg.hi - hg.lo
    return dict(offsets=[int(v) for v in hg.offsets], rows=rows,
                feature_rows=int(hg.features.local.shape[0]), labels=int(mg.labels.values.size),
                train=mg.train_ids().tolist(), view_rows=int(np.count_nonzero(
                    np.diff(hg.view.a.indptr[:hg.lo + 1]))) + int(np.count_nonzero(
                        np.diff(hg.view.a.indptr[hg.hi:]))),
                degree_max=int(hg.degree.max(initial=1)))


def test_k_a_multiple_of_p_coarsens_and_each_rank_holds_its_rows_only(shards):
    from spgnn.io.shards import read_manifest

    man = read_manifest(shards[4])
    got = run_loopback(2, _owned, shards[4], timeout=120)
    assert got[0]["offsets"] == man["offsets"][::2]
    graph = load_graph(GRAPH)
    dmax = int(np.diff(graph.adj.indptr).max())
    for r, g in enumerate(got):
        assert g["feature_rows"] == g["labels"] == g["rows"] > 0
        assert g["view_rows"] == 0                  # no row outside my range in the view
        assert all(g["offsets"][r] <= v < g["offsets"][r + 1] for v in g["train"])
        assert g["degree_max"] == dmax              # the push's bias: the global maximum
    assert sum(len(g["train"]) for g in got) == man["counts"]["train"]


def test_unsupported_combinations_are_refused_by_name(shards, tmp_path):
    with pytest.raises(ValueError, match="give --partition-mode partitioned .* or --hec off"):
        _config("--graph", str(shards[2]))
    with pytest.raises(GridError, match="K=3 parts.*--parts 2"):
        _train(2, "--graph", str(shards[3]), "--hec", "off")
    # a damaged part is one ShardError (every rank; rank 1's file, rank 0 fails too)
    bad = tmp_path / "bad"
    shutil.copytree(shards[2], bad)
    part = bad / "part-00001.npz"
    part.write_bytes(part.read_bytes()[:-100])
    with pytest.raises(ShardError, match="part-00001"):
        _train(2, "--graph", str(bad), "--hec", "off")


def _mpi(test):
    for mark in mpi_test_marks():
        test = mark(test)
    return test


@_mpi
def test_another_partition_is_one_line_on_every_rank(shards):
    proc = run_mpi(["-m", "spgnn", "train", *BASE, "--graph", str(shards[2]), "--hec", "off",
                    "--partition", "metis"], 2, timeout=120)
    assert proc.returncode != 0
    errors = [line for line in proc.stdout.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "spgnn train: error: HaloGraph.from_shards:" in errors[0] \
        and "partitioned with 'random'" in errors[0], proc.stdout[-3000:]
