"""``TrainConfig``: an option that does not apply to the chosen model, algorithm or mode is
refused by name (issue 38: ``--hec on`` with ``--model gcn`` used to train a plain GCN with rc
0), defaults come from the model, and the config is the same from Python and from the command
line.  Local: no MPI, no graph is loaded."""

import argparse
import dataclasses

import pytest

from spgnn.cli import train as cli_train
from spgnn.gnn.config import APPLIES, TrainConfig
from spgnn.gnn.registry import MODELS

G = "sbm:60:3:0"


@pytest.mark.parametrize("kw, needle", [
    (dict(model="gcn", partition="random", hec="on"), "--hec applies only to --model sage"),
    (dict(model="gcn", batch_size=64), "--batch-size applies only to --model sage"),
    (dict(model="gcn", fanout="5,5"), "--fanout applies only to --model sage"),
    (dict(model="gcn", batch_size=64, fanout="5,5"),
     "--batch-size, --fanout apply only to --model sage"),
    (dict(model="sage", quantize="int2"), "--quantize needs a full-graph model with --algo 1d-aware"),
    (dict(model="gcn", algo="1d", rounding="nearest"), "--rounding needs a full-graph model"),
    (dict(model="gcn", algo="1d-aware", permute="double"), "--permute and --agg-blocks apply"),
    (dict(model="gcn", algo="15d", grid="1x1x2"), "--grid applies to --algo 3d"),
    (dict(model="sage", sampler="ladies", hec="on", partition="metis"),
     "--hec applies to --model sage --sampler sage"),
    (dict(model="sage", partition="metis", hec="off", hec_capacity=10),
     "--hec-capacity applies only to --hec on"),
    (dict(model="sage", hec_life=3), "--hec-life applies only to --hec on"),
    (dict(model="sage", hec_reset="never"), "--hec-reset applies to --hec on|off"),
    (dict(model="sage", partition="metis", hec="on", bulk=16), "--bulk 16 does not apply"),
    (dict(model="gcn", model_options={"heads": 2}), "--heads applies only to --model gat"),
    (dict(model="gat", model_options={"heads": 0}), "--heads must be >= 1, but got 0"),
    (dict(model="sage", model_options={"input_dropout": 1.0}), "--input-dropout must lie in"),
    (dict(model="gcn", algo="2d"), "--algo must be one of ('auto', '1d'"),
    (dict(model="gcn", dtype="float16"), "--dtype must be one of ('float32', 'float64')"),
    (dict(model="gcn", collective_timeout=-1.0), "--collective-timeout must be a number of sec"),
    (dict(model="gcn", seed=-1), "--seed must be >= 0"),
])
def test_options_that_do_not_apply_are_refused_by_name(kw, needle):
    with pytest.raises(ValueError, match=None) as info:
        TrainConfig(graph=G, **kw)
    assert needle in str(info.value), str(info.value)


def test_every_option_of_the_table_is_a_field():
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    for options, _, _ in APPLIES:
        assert set(options) <= names, set(options) - names


def test_defaults_come_from_the_model_and_the_mode():
    gcn = TrainConfig(graph=G)
    assert (gcn.epochs, gcn.hidden, gcn.dropout, gcn.layers) == (200, 16, 0.5, 2)
    assert gcn.batch_size is None and gcn.bulk is None and gcn.hec_capacity is None
    sage = TrainConfig(graph=G, model="sage", fanout="5,5")
    assert sage.fanout == (5, 5) and sage.layers == 2 and sage.bulk == 16
    assert sage.option("input_dropout") == MODELS["sage"].options[0].default
    hec = TrainConfig(graph=G, model="sage", partition="metis", hec="on")
    assert hec.bulk is None and hec.hec_push_cap == hec.hec_config().nc
    # reduced exchanges choose their one algorithm; a replace re-checks and keeps it
    q = TrainConfig(graph=G, quantize="int2")
    assert q.algo == "1d-aware" and dataclasses.replace(q, epochs=3).algo == "1d-aware"
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.epochs = 1


def test_the_command_line_builds_the_same_config():
    parser = argparse.ArgumentParser()
    cli_train.add_parser(parser.add_subparsers())
    argv = ["train", "--graph", G, "--model", "gat", "--heads", "4", "--algo", "1d", "--lr",
            "0.02", "--no-progress"]
    cfg = cli_train.config_from_args(parser.parse_args(argv))
    assert cfg == TrainConfig(graph=G, model="gat", algo="1d", lr=0.02,
                              model_options={"heads": 4})
    assert cfg.record(2)["heads"] == 4 and cfg.record(2)["ranks"] == 2


def test_rank_dependent_checks():
    with pytest.raises(ValueError, match="--replication must divide the 3 ranks"):
        TrainConfig(graph=G, algo="15d", replication=2).check_ranks(3)
    TrainConfig(graph=G, algo="15d", replication=2).check_ranks(4)


def _zero_feature_graph():
    import numpy as np

    from spgnn.io import Graph, sbm

    adj, x, y = sbm(60, 3, avg_degree=4, num_features=5, seed=0)
    return Graph(adj=adj, features=np.zeros_like(x), labels=y).random_split(0.5, 0.2, seed=0)


def test_negative_gcn_weights_are_refused_naming_the_edge():
    """Issue 38: every edge weight -1 trained at a constant loss ln 4, rc 0, no word."""
    from spgnn.comm import run_loopback
    from spgnn.gnn import DistGraph

    g = _zero_feature_graph()
    g = dataclasses.replace(g, adj=-g.adj)
    with pytest.raises(ValueError, match=r"has weight -1.0; GCN's normalisation"):
        run_loopback(1, lambda comm: DistGraph.from_graph(g, comm, "1d"))
    # the mean aggregator reads the pattern only
    run_loopback(1, lambda comm: DistGraph.from_graph(g, comm, "1d", adjacency="mean"))


def test_a_loss_that_does_not_move_warns_once():
    """Zero features and no bias: every logit is 0, the loss is ln C in every epoch."""
    from spgnn.comm import run_loopback
    from spgnn.errors import SpgnnTrainingWarning
    from spgnn.gnn import GCN, Adam, DistGraph, Trainer
    from spgnn.gnn.hooks import StalledLoss

    g = _zero_feature_graph()

    def run(comm):
        dg = DistGraph.from_graph(g, comm, "1d", normalize_features=False)
        model = GCN(dg.num_features, 4, dg.num_classes, dropout=0.0)
        tr = Trainer(model, dg, Adam(model.param_groups(), lr=0.01))
        tr.fit(6, evaluate=False, hooks=[StalledLoss(patience=4)])

    with pytest.warns(SpgnnTrainingWarning, match="has stayed at 1.09861 for 4 epochs") as got:
        run_loopback(1, run)
    assert len([w for w in got if issubclass(w.category, SpgnnTrainingWarning)]) == 1
