"""GAT: the hand-written backward against torch autograd and finite differences, P-invariance.

The reference is an independent dense torch implementation of the same
equations (masked softmax over the rows of ``A + I``); the finite-difference
check runs with dropout on (node and attention masks are counter-based, so
a training context with a fixed epoch is a deterministic function).
"""

import numpy as np
import pytest

from spgnn import LayoutMismatch, run_loopback
from spgnn.gnn import Adam, DistGraph, Trainer
from spgnn.gnn.gat import GAT, GATConv
from spgnn.io import Graph, sbm

TIMEOUT = 120


def _graph(n=23, seed=3):
    adj, x, y = sbm(n, 3, avg_degree=3.0, num_features=6, seed=seed)
    idx = np.arange(n)
    return Graph(adj, features=x, labels=y, train_mask=idx % 3 != 2, val_mask=idx % 3 == 2,
                 test_mask=idx % 3 == 2, name="sbm")


def _setup(comm, graph, dropout, algorithm="1d-aware", heads=3):
    g = DistGraph.from_graph(graph, comm, algorithm, dtype=np.float64,
                             sparse_features=False)
    model = GAT(g.num_features, 4, g.num_classes, heads=heads, dropout=dropout, seed=1)
    tr = Trainer(model, g, Adam(model.param_groups(0.0), lr=0.01))
    return g, model, tr


def _loss_and_grads(g, model, training, epoch=0):
    ctx = g.context(training=training, epoch=epoch, seed=0)
    logits = model.forward(ctx, g.features)
    loss, dlogits, _ = ctx.loss(logits, "train")
    model.zero_grad()
    model.backward(ctx, dlogits)
    return loss


def _torch_reference(graph_dense, x, labels, train, params, heads):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    mask = torch.tensor(graph_dense != 0)
    h = torch.tensor(x)
    leaves = [torch.tensor(p, requires_grad=True) for p in params]
    convs = [leaves[0:3], leaves[3:6]]
    for li, (w, att, b) in enumerate(convs):
        K = heads if li == 0 else 1
        F = w.shape[1] // K
        z = h @ w
        st = z @ att
        outs = []
        for k in range(K):
            e = st[:, k][:, None] + st[:, K + k][None, :]
            e = tf.leaky_relu(e, 0.2).masked_fill(~mask, float("-inf"))
            outs.append(torch.softmax(e, dim=1) @ z[:, k * F:(k + 1) * F])
        h = (torch.cat(outs, 1) if li == 0 else sum(outs) / K) + b
        if li == 0:
            h = tf.elu(h)
    lab = torch.tensor(labels)
    tr = torch.tensor(train)
    loss = tf.cross_entropy(h[tr], lab[tr])
    loss.backward()
    return float(loss.detach()), [p.grad.numpy() for p in leaves]


@pytest.mark.parametrize("p", [1, 3])
def test_gat_backward_matches_torch_autograd(p):
    graph = _graph()

    def body(comm):
        g, model, _ = _setup(comm, graph, dropout=0.0)
        loss = _loss_and_grads(g, model, training=True)
        params = model.parameters()
        return (loss, [q.to_global() for q in params], [q.as_dist().like(q.grad).to_global()
                                                        for q in params],
                g.A.to_global().toarray(), g.features.to_global(), g.node_block(g.features.layout))

    res = run_loopback(p, body, timeout=TIMEOUT)
    loss, values, grads, adj, x, _ = res[0]
    want_loss, want_grads = _torch_reference(adj, x, graph.labels, graph.train_mask, values, 3)
    assert loss == pytest.approx(want_loss, rel=1e-10)
    # att's off-diagonal blocks are fixed zeros (not trained): mask the reference there
    want_grads = [w * (v != 0) if k % 3 == 1 else w
                  for k, (w, v) in enumerate(zip(want_grads, values))]
    for got, want in zip(grads, want_grads):
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-12)
    for r in res[1:]:                                  # every rank: the same complete gradients
        for got, mine in zip(r[2], grads):
            np.testing.assert_array_equal(got, mine)


def test_gat_backward_with_dropout_matches_finite_differences():
    graph = _graph(seed=5)

    def body(comm):
        g, model, _ = _setup(comm, graph, dropout=0.5)
        _loss_and_grads(g, model, training=True, epoch=2)
        checks = []
        rng = np.random.default_rng(0)
        for q in model.parameters():
            grad = q.grad.copy()
            for _ in range(3):
                idx = tuple(rng.integers(0, s) for s in q.value.shape)
                if q.name == "att" and grad[idx] == 0:
                    continue                          # off the block diagonal: not trained
                # ELU's second derivative jumps at 0, so a central difference is
                # only O(eps) accurate where a pre-activation sits near 0: a small eps
                old, eps = q.value[idx], 1e-7
                q.value[idx] = old + eps
                up = _loss_and_grads(g, model, training=True, epoch=2)
                q.value[idx] = old - eps
                down = _loss_and_grads(g, model, training=True, epoch=2)
                q.value[idx] = old
                checks.append(((up - down) / (2 * eps), grad[idx]))
        return checks

    for fd, analytic in run_loopback(1, body, timeout=TIMEOUT)[0]:
        assert analytic == pytest.approx(fd, rel=1e-5, abs=1e-8)


def test_gat_losses_equal_on_1_2_and_4_ranks_with_constant_bytes():
    graph = _graph(n=40, seed=7)

    def body(comm):
        _, _, tr = _setup(comm, graph, dropout=0.6)
        recs = [tr.train_epoch() for _ in range(4)]
        return [r["loss"] for r in recs], [r["bytes"] for r in recs]

    base = run_loopback(1, body, timeout=TIMEOUT)[0][0]
    for p in (2, 4):
        res = run_loopback(p, body, timeout=TIMEOUT)
        np.testing.assert_allclose(res[0][0], base, rtol=1e-10)
        for _, nbytes in res:                         # plans are built before epoch 0
            assert len(set(nbytes)) == 1


def test_gat_refuses_layouts_without_whole_rows_and_blocks():
    graph = _graph()

    def body(comm):
        with pytest.raises(LayoutMismatch, match="1d or 1d-aware"):
            _setup(comm, graph, dropout=0.0, algorithm="15d-aware")
        return True

    assert all(run_loopback(2, body, timeout=TIMEOUT))
    with pytest.raises(ValueError, match="heads"):
        GATConv(3, 4, heads=0)
