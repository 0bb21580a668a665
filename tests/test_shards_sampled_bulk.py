"""Issue 37: bulk minibatch training (``--model sage``, GraphSAGE or LADIES) from shards.

``train --graph DIR --partition-mode partitioned`` reads each rank's own rows
(``MinibatchGraph.from_shards``): the sampler's ``A`` in block rows on ``grid_15d(c)``,
evaluation on a ``DistGraph`` of the same rows.  The sampled blocks do not depend on the row
split, so on shards written in the graph's own order (``--method none``) training and
evaluation equal the in-memory ``--partition-mode partitioned`` run bit for bit, ``K = P`` or
not.  The replicated mode is refused by name.  Loopback ranks in this process."""

import argparse

import pytest

from spgnn.cli import train as cli_train
from spgnn.comm import run_loopback
from spgnn.errors import GridError
from spgnn.gnn.minibatch import MinibatchGraph
from spgnn.io import load_graph
from spgnn.io.shards import read_manifest
from spgnn.partition.to_shards import partition_to_shards

GRAPH = "sbm:400:3:0"
BASE = ["--model", "sage", "--no-progress", "--fanout", "4,3", "--batch-size", "16",
        "--hidden", "8", "--epochs", "1", "--bulk", "4", "--partition-mode", "partitioned"]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """``{K: directory}``: the graph in its own order as K = 2, 3, 4 parts."""
    graph = load_graph(GRAPH)
    root = tmp_path_factory.mktemp("shards")
    out = {}
    for k in (2, 3, 4):
        out[k] = root / f"k{k}"
        partition_to_shards(graph, out[k], k, "none", 0)
    return out


def _config(*extra):
    parser = argparse.ArgumentParser()
    cli_train.add_parser(parser.add_subparsers())
    return cli_train.config_from_args(parser.parse_args(["train", *BASE, *extra]))


def _train(nprocs, *extra):
    config = _config(*extra)
    return run_loopback(nprocs, lambda comm: cli_train.train(comm, config), timeout=300)[0]


@pytest.mark.parametrize("parts,extra", [(2, ["--replication", "2"]),
                                         (4, ["--replication", "1", "--sampler", "ladies"])])
def test_from_shards_equals_the_in_memory_partitioned_sampling_run(shards, parts, extra):
    got = _train(2, "--graph", str(shards[parts]), *extra)
    want = _train(2, "--graph", GRAPH, *extra)
    # the same sampled blocks, features, labels and schedule: every float equal
    assert got["loss_history"] == want["loss_history"]
    assert got["bytes_per_epoch_by_label"] == want["bytes_per_epoch_by_label"]
    for key in ("test_acc", "val_acc", "train_acc", "test_loss", "val_loss", "eval_history",
                "n", "features", "classes", "replication", "fetch_bytes_per_epoch"):
        assert got[key] == want[key], key
    assert got["partition_mode"] == "partitioned" and got["graph"] == GRAPH


def _held(comm, directory, c):
    mg = MinibatchGraph.from_shards(directory, comm, replication=c)
    sg = mg.sampling_graph
    return dict(block=[int(v) for v in sg.offsets[sg.i:sg.i + 2]],
                a_rows=int(sg.local.shape[0]), feature_rows=int(mg.features.local.shape[0]),
                feature_offsets=[int(v) for v in mg.features.offsets],
                labels=int(mg.labels.values.size), train=int(mg.train_ids().size))


def test_each_rank_holds_its_block_rows_of_a_and_its_feature_rows(shards):
    man = read_manifest(shards[4])
    off = man["offsets"][::2]                      # K = 4 parts on 2 ranks
    for c, blocks in ((1, off), (2, [0, man["n"]])):
        got = run_loopback(2, _held, shards[4], c, timeout=120)
        for r, g in enumerate(got):
            i = r // c
            assert g["block"] == [blocks[i], blocks[i + 1]] and \
                g["a_rows"] == blocks[i + 1] - blocks[i], (c, r)
            assert g["feature_offsets"] == list(off) and g["feature_rows"] == off[r + 1] - off[r]
            # only the training vertices' ids and labels on every rank (the schedule
            # permutes all of them; no other label, no mask), as in memory
            assert g["labels"] == g["train"] == man["counts"]["train"] < man["n"]


def test_the_replicated_mode_and_an_unusable_k_are_refused_by_name(shards):
    with pytest.raises(ValueError, match="holds shards: .*give --partition-mode partitioned"):
        _config("--graph", str(shards[2]), "--partition-mode", "replicated")
    with pytest.raises(GridError, match="K=3 parts.*--parts 2"):
        run_loopback(2, lambda comm: MinibatchGraph.from_shards(shards[3], comm), timeout=60)
    with pytest.raises(ValueError, match="replication 3 must divide the 2 ranks"):
        run_loopback(2, lambda comm: MinibatchGraph.from_shards(shards[2], comm, replication=3),
                     timeout=60)
