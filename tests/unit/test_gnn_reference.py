"""Single-process GNN checks: finite differences, the numpy reference GCN, resumption, errors."""

import numpy as np
import pytest

from spgnn import run_loopback
from spgnn.gnn import (GCN, SGD, Adam, DistGraph, Dropout, GCNConv, Linear, ReLU, Sequential,
                       Trainer)
from spgnn.gnn.functional import dropout_mask, hash_uniform
from spgnn.io import Graph, sbm
from spgnn.testing.gnn_reference import gcn_forward_backward, normalize_adjacency, \
    row_normalize, train_reference


def tiny_graph(n=10, f=4, c=3, seed=0):
    adj, x, y = sbm(n, c, avg_degree=3, num_features=f, seed=seed)
    return Graph(adj=adj, features=x, labels=y).random_split(0.6, 0.2, seed=seed)


def _loss(model, dg, ctx_kwargs):
    ctx = dg.context(**ctx_kwargs)
    logits = model.forward(ctx, dg.features)
    loss, dlogits, _ = ctx.loss(logits, "train")
    return loss, ctx, dlogits


@pytest.mark.parametrize("algo", ["1d", "3d"])
@pytest.mark.parametrize("build", ["gcn-bias-dropout", "gcn-agg-first", "mixed"])
def test_finite_differences_every_parameter(algo, build):
    graph = tiny_graph()

    def body(comm):
        dg = DistGraph.from_graph(graph, comm, algo, dtype=np.float64)
        f, c = dg.num_features, dg.num_classes
        if build == "gcn-bias-dropout":
            model = GCN(f, 3, c, layers=2, dropout=0.3, seed=1, bias=True)
        elif build == "gcn-agg-first":
            model = GCN(f, 5, c, layers=3, dropout=0.0, seed=2, order="aggregate-first")
        else:
            model = Sequential(Dropout(0.2), Linear(f, 3, seed=3), ReLU(),
                               GCNConv(3, c, bias=True, seed=3, index=1))
        Trainer(model, dg, SGD(model.parameters(), lr=0.0))        # places the parameters
        kw = dict(training=True, epoch=4, seed=7)
        for p in model.parameters():
            p.zero_grad()
        _, ctx, dlogits = _loss(model, dg, kw)
        model.backward(ctx, dlogits)
        eps = 1e-6
        for name, p in model.named_parameters():
            analytic = p.grad.copy()
            numeric = np.zeros_like(analytic)
            for idx in np.ndindex(*p.value.shape):
                old = p.value[idx]
                p.value[idx] = old + eps
                lp = _loss(model, dg, kw)[0]
                p.value[idx] = old - eps
                lm = _loss(model, dg, kw)[0]
                p.value[idx] = old
                numeric[idx] = (lp - lm) / (2 * eps)
            np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-8, err_msg=name)
        return True

    assert run_loopback(1, body, timeout=60) == [True]


def test_gradients_equal_numpy_reference():
    graph = tiny_graph(n=14, f=5)

    def body(comm):
        dg = DistGraph.from_graph(graph, comm, "1d-aware", dtype=np.float64)
        model = GCN(dg.num_features, 4, dg.num_classes, layers=3, dropout=0.0, seed=5)
        Trainer(model, dg, SGD(model.parameters(), lr=0.0))
        loss, ctx, dlogits = _loss(model, dg, dict(training=True))
        model.backward(ctx, dlogits)
        return loss, [p.grad.copy() for p in model.parameters()]

    loss, grads = run_loopback(1, body)[0]
    ahat = normalize_adjacency(graph.adj)
    from spgnn.testing.gnn_reference import glorot_weights
    ws = glorot_weights([5, 4, 4, graph.num_classes], 5)
    rl, rgrads, _ = gcn_forward_backward(ahat, row_normalize(graph.features), ws, graph.labels,
                                         graph.train_mask)
    assert loss == pytest.approx(rl, rel=1e-12)
    for g, r in zip(grads, rgrads):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-10), (np.float32, 2e-5)])
def test_training_losses_equal_numpy_reference(dtype, rtol):
    graph = tiny_graph(n=30, f=6, c=3, seed=4)
    epochs = 8

    def body(comm):
        dg = DistGraph.from_graph(graph, comm, "1d", dtype=dtype)
        model = GCN(dg.num_features, 8, dg.num_classes, dropout=0.0, seed=11)
        tr = Trainer(model, dg, Adam(model.param_groups(5e-4), lr=0.05))
        return [tr.train_epoch()["loss"] for _ in range(epochs)], \
            [p.value.copy() for p in model.parameters()]

    losses, ws = run_loopback(1, body)[0]
    ref, rws = train_reference(graph.adj, graph.features, graph.labels, graph.train_mask,
                               [6, 8, 3], epochs=epochs, lr=0.05, weight_decay=5e-4, seed=11)
    np.testing.assert_allclose(losses, ref, rtol=rtol)
    for w, r in zip(ws, rws):
        np.testing.assert_allclose(w, r, rtol=50 * rtol, atol=50 * rtol)


@pytest.mark.parametrize("opt", ["adam", "sgd"])
def test_resume_is_bit_identical(opt):
    graph = tiny_graph(n=20, f=5, seed=3)

    def make(comm):
        dg = DistGraph.from_graph(graph, comm, "1d")
        model = GCN(dg.num_features, 6, dg.num_classes, dropout=0.5, seed=2)
        o = (Adam(model.param_groups(5e-4), lr=0.01) if opt == "adam"
             else SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3))
        return Trainer(model, dg, o)

    def body(comm):
        a = make(comm)
        for _ in range(3):
            a.train_epoch()
        state = a.state_dict()
        first = [a.train_epoch()["loss"] for _ in range(3)]
        b = make(comm)
        b.train_epoch()                                  # diverge, then restore
        b.load_state_dict(state)
        second = [b.train_epoch()["loss"] for _ in range(3)]
        same = all(np.array_equal(p.value, q.value)
                   for p, q in zip(a.model.parameters(), b.model.parameters()))
        return first, second, same

    first, second, same = run_loopback(1, body)[0]
    assert first == second and same


def test_dropout_mask_is_counter_based():
    rows, cols = np.array([5, 9, 2]), np.arange(4)
    full = hash_uniform((1, 2, 3), np.arange(12), np.arange(6), 6)
    part = hash_uniform((1, 2, 3), rows, cols + 2, 6)
    np.testing.assert_array_equal(full[rows][:, 2:6], part)
    assert not np.array_equal(hash_uniform((1, 2, 4), rows, cols, 6),
                              hash_uniform((1, 2, 3), rows, cols, 6))
    m = dropout_mask(0.5, (0, 0, 0), np.arange(400), np.arange(50), 50)
    assert abs((m > 0).mean() - 0.5) < 0.02 and set(np.unique(m)) <= {0.0, 2.0}


def test_bad_input_raises_typed_errors():
    graph = tiny_graph()

    def body(comm):
        with pytest.raises(ValueError, match="unknown algorithm"):
            DistGraph.from_graph(graph, comm, "2d")
        with pytest.raises(ValueError, match="rank 0 must hold"):
            DistGraph.from_graph(None, comm)
        with pytest.raises(ValueError, match="features and labels"):
            DistGraph.from_graph(Graph(adj=graph.adj), comm)
        return True

    run_loopback(1, body)
    with pytest.raises(ValueError):
        GCN(4, 4, 2, layers=0)
    with pytest.raises(ValueError):
        Dropout(1.0)
    with pytest.raises(TypeError):
        Sequential(object())
