"""Training with pre/post/hybrid and quantized exchanges, and label propagation (loopback ranks)."""

import numpy as np
import pytest

from spgnn.comm import run_loopback
from spgnn.gnn import GCN, Adam, DistGraph, Exchange, Row1D, Trainer
from spgnn.gnn.label_prop import LabelPropagation
from spgnn.gnn.sources import FullGraph
from spgnn.io import Graph, sbm
from spgnn.testing.gnn_reference import train_reference

EPOCHS = 3


def graph():
    adj, x, y = sbm(60, 3, avg_degree=5, num_features=7, seed=2)
    return Graph(adj=adj, features=x, labels=y).random_split(0.5, 0.2, seed=2)


G = graph()
REF = train_reference(G.adj, G.features, G.labels, G.train_mask,
                      [G.num_features, 6, G.num_classes], epochs=EPOCHS, lr=0.05,
                      weight_decay=5e-4, seed=1)


def train(comm, aggregation, quantize, label_prop=0.0, epochs=EPOCHS):
    placement = Row1D(exchange=Exchange(aggregation, quantize, "stochastic", seed=3))
    dg = DistGraph.from_graph(G if comm.rank == 0 else None, comm, placement,
                              dtype=np.float64, backend="numba")
    src = FullGraph(dg, LabelPropagation(dg, label_prop, seed=1) if label_prop else None)
    model = GCN(src.num_features, 6, dg.num_classes, layers=2, dropout=0.0, seed=1)
    opt = Adam(model.param_groups(5e-4), lr=0.05)
    tr = Trainer(model, src, opt)
    return [tr.train_epoch() for _ in range(epochs)], tr


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("aggregation", ["post", "pre", "hybrid"])
def test_unquantized_losses_equal_reference(p, aggregation):
    recs = run_loopback(p, lambda c: train(c, aggregation, "none")[0])
    for rank_recs in recs:
        np.testing.assert_allclose([r["loss"] for r in rank_recs], REF[0], rtol=1e-9)
        labels = rank_recs[-1]["bytes_by_label"]
        assert "gnn:grad-allreduce-dW" in labels
        assert not any(k.endswith((":data", ":params")) for k in labels)


def test_quantized_training_bytes_and_losses():
    recs = run_loopback(3, lambda c: train(c, "hybrid", "int8")[0])
    for rank_recs in recs:
        np.testing.assert_allclose([r["loss"] for r in rank_recs], REF[0], rtol=2e-2)
    labels = set().union(*(r[-1]["bytes_by_label"] for r in recs))
    assert {"spmm-1d-hybrid:exchange:data", "spmm-1d-hybrid:exchange:params"} <= labels
    assert "spmm-1d-hybrid:exchange" not in labels     # training sends no fp32 rows


def test_label_propagation_never_leaks():
    def fn(comm):
        _, tr = train(comm, "post", "none", label_prop=0.6, epochs=2)
        lp = tr.source.transform
        nodes = lp.nodes
        C = lp.num_classes
        out = {}
        for e in range(3):
            m = lp.propagation_mask(e)
            assert not np.any(m & ~nodes["train"])
            x = lp.features(np.ones_like(m))     # asking for every row embeds train rows only
            cols = np.asarray(x.local)[:, -C:]
            assert np.array_equal(cols.any(1), nodes["train"])
            rows = np.flatnonzero(cols.any(1))
            assert np.array_equal(cols[rows].argmax(1), nodes["label"][rows])
            out[e] = dict(zip(nodes["orig"].tolist(), m.tolist()))
        ev = np.asarray(tr.source.eval_features.local)[:, -C:]
        assert np.array_equal(ev.any(1), nodes["train"])      # evaluation: every train label
        return out

    one = run_loopback(1, fn)[0]
    three = run_loopback(3, fn)
    for e in range(3):
        merged = {}
        for part in three:
            merged.update(part[e])
        assert merged == one[e]                  # the set does not depend on P
    assert one[0] != one[1]                      # resampled every epoch
    frac = np.mean([v for k, v in one[0].items() if G.train_mask[k]])
    assert 0.3 < frac < 0.9
