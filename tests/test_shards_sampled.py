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
from spgnn.errors import GridError, NonFiniteError, ShardError
from spgnn.gnn.minibatch import MinibatchGraph
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


def _share(comm, make):
    """What rank ``comm.rank`` holds of a HaloGraph ``make(comm)`` builds (arrays). Collective."""
    hg = make(comm)
    mg, a = hg.mg, hg.view.a
    ev = mg.full.A.local
    return dict(offsets=np.asarray(hg.offsets), view_indptr=np.asarray(a.indptr),
                view_indices=np.asarray(a.indices), features=np.asarray(hg.features.local),
                labels=np.asarray(mg.labels.values), train=mg.train_ids(), orig=np.asarray(mg.orig),
                degree=np.asarray(hg.degree.values), dmax=np.asarray(hg.degree.max(initial=1)),
                eval_indptr=np.asarray(ev.indptr), eval_indices=np.asarray(ev.indices),
                eval_data=np.asarray(ev.data), perm=hg.perm,
                nodes=mg.full.node_block(mg.full.features.layout).packed())


@pytest.mark.parametrize("ranks", [2, 3])
def test_build_sends_each_rank_the_rows_a_shard_read_gives_and_no_more(shards, ranks):
    """In memory, rank 0 partitions and sends each rank its rows (no replicated graph): every
    array a rank builds equals, bit for bit, what it builds from the rows it reads from shards
    written with the same partition."""
    graph = load_graph(GRAPH)
    got = run_loopback(ranks, _share, lambda comm: HaloGraph.build(
        graph if comm.rank == 0 else None, comm, method="random", seed=0), timeout=120)
    want = run_loopback(ranks, _share, lambda comm: HaloGraph.from_shards(shards[ranks], comm),
                        timeout=120)
    for r in range(ranks):
        g, w = got[r], want[r]
        assert g.pop("perm") is None and w.pop("perm") is None
        for key in w:
            assert g[key].dtype == w[key].dtype and np.array_equal(g[key], w[key]), (r, key)
        lo, hi = (int(v) for v in g["offsets"][r:r + 2])
        # this rank's rows only: features, labels, degrees, node data; the view has no row
        # outside lo:hi
        assert g["features"].shape[0] == g["labels"].size == g["degree"].size == hi - lo > 0
        assert g["nodes"].shape[0] == hi - lo
        assert g["view_indptr"][lo] == 0 and g["view_indptr"][hi] == g["view_indptr"][-1]
        assert np.all((g["train"] >= lo) & (g["train"] < hi))


def _error_on_each_rank(comm, make):
    try:
        make(comm)
    except Exception as exc:                # noqa: BLE001 - the test compares what each raised
        return type(exc).__name__, str(exc)
    return None


@pytest.mark.parametrize("defect,error", [("nan", NonFiniteError), ("no-train", ValueError),
                                          ("no-features", ValueError)])
def test_bad_input_to_build_is_one_typed_error_on_every_rank(defect, error):
    import dataclasses

    graph = load_graph(GRAPH)
    if defect == "nan":
        x = graph.features.copy()
        x[7, 3] = np.nan
        graph = dataclasses.replace(graph, features=x)
    else:
        graph = dataclasses.replace(graph, **{"no-train": {"train_mask": None},
                                              "no-features": {"features": None}}[defect])
    got = run_loopback(2, _error_on_each_rank, lambda comm: HaloGraph.build(
        graph if comm.rank == 0 else None, comm, method="random"), timeout=60)
    # rank 0's error, agreed: the other rank raises the same type, naming rank 0
    assert got[0] is not None and got[0][0] == got[1][0] == error.__name__, got
    assert got[1][1] == f"rank 0: {got[0][1]}", got


def _labels_held(comm, graph, mode):
    mg = MinibatchGraph.from_graph(graph if comm.rank == 0 else None, comm, mode=mode,
                                   replication=comm.size if mode == "partitioned" else 1)
    ids = mg.train_ids()
    other = np.setdiff1d(np.arange(mg.n), ids)[:1]
    try:
        mg.labels[other]
        refused = False
    except IndexError:
        refused = True
    return ids, mg.labels[ids], mg.labels.values.size, hasattr(mg, "val_mask"), refused


@pytest.mark.parametrize("mode", ["partitioned", "replicated"])
def test_minibatch_graph_holds_only_the_training_vertices_labels(mode):
    """The schedule permutes every training id on every rank, and a rank may train any of
    them: every rank holds those ids and labels, nothing else of the O(n) node data."""
    graph = load_graph(GRAPH)
    train = np.flatnonzero(graph.train_mask)
    for ids, labels, held, masks, refused in run_loopback(2, _labels_held, graph, mode,
                                                          timeout=60):
        assert np.array_equal(ids, train) and labels.dtype == np.int64
        assert np.array_equal(labels, graph.labels[train])
        assert held == train.size < graph.num_nodes and not masks and refused


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
