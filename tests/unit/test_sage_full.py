"""``FullBatchSAGE`` / ``--model sage-full`` (paper 004's model) on loopback ranks.

Gradients against finite differences (LayerNorm alone, and the whole model)
and against an independent torch autograd model (skipped, saying so, without
torch); with ``--quantize none`` the losses of every aggregation mode and
rank count agree; ``bytes_by_label`` equals the wire-format formulas.  The
same checks under real mpiexec: tests/test_sage_full_mpi.py.
"""

import os
import sys

import numpy as np
import pytest

from spgnn.comm import run_loopback
from spgnn.errors import LayoutMismatch
from spgnn.gnn import FullBatchSAGE, LayerNorm, local_grid
from spgnn.gnn.context import Context
from spgnn.core.dist_dense import DistDenseMatrix
from spgnn.layout import Layout

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "mpi"))
from sage_full_checks import (HIDDEN, LAYERS, LR, SEED, check_epoch_bytes,  # noqa: E402
                              mean_pattern, sage_full_graph, train_sage_full)

G = sage_full_graph()


def _dense(x):
    return DistDenseMatrix(np.ascontiguousarray(x), x.shape, local_grid(), Layout())


def test_layer_norm_gradient_finite_differences():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 4)) * 3 + 1
    dy = rng.normal(size=(5, 4))
    ln = LayerNorm(4)
    ctx = Context(local_grid(), np.float64)
    ctx.need_input_grad = True
    ln.forward(ctx, _dense(x))
    ln.weight.value[...] = rng.normal(size=(1, 4))
    ln.bias.value[...] = rng.normal(size=(1, 4))

    def loss(xx):
        return float((np.asarray(ln.forward(ctx, _dense(xx)).local) * dy).sum())

    base = loss(x)
    for p in ln.parameters():
        p.zero_grad()
    dx = np.asarray(ln.backward(ctx, _dense(dy)).local)
    eps = 1e-6
    num = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp = x.copy()
        xp[i] += eps
        xm = x.copy()
        xm[i] -= eps
        num[i] = (loss(xp) - loss(xm)) / (2 * eps)
    np.testing.assert_allclose(dx, num, rtol=1e-6, atol=1e-8)
    for p in ln.parameters():
        num = np.zeros_like(p.value)
        for i in np.ndindex(p.value.shape):
            keep = p.value[i]
            p.value[i] = keep + eps
            up = loss(x)
            p.value[i] = keep - eps
            down = loss(x)
            p.value[i] = keep
            num[i] = (up - down) / (2 * eps)
        np.testing.assert_allclose(p.grad, num, rtol=1e-6, atol=1e-8)
    assert abs(loss(x) - base) < 1e-12
    # the normalised rows: mean 0, variance 1 (γ = 1, β = 0)
    y = np.asarray(LayerNorm(4).forward(ctx, _dense(x)).local)
    np.testing.assert_allclose(y.mean(1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(1), 1, rtol=1e-4)


def test_layer_norm_needs_whole_rows():
    x = _dense(np.ones((3, 4)))
    with pytest.raises(LayoutMismatch, match="whole rows"):
        LayerNorm(5).forward(Context(local_grid(), np.float64), x)


def test_model_structure():
    m = FullBatchSAGE(7, 6, 3, layers=3, dropout=0.5)
    names = [type(x).__name__ for x in m.layers]
    assert names == ["SAGEConv", "Dropout", "LayerNorm", "ReLU"] * 2 + ["SAGEConv"]
    groups = m.param_groups(1e-3)
    assert groups[0]["weight_decay"] == 1e-3 and len(groups[0]["params"]) == 6
    assert {p.name for p in groups[1]["params"]} == {"bias", "weight"}
    with pytest.raises(ValueError, match="layers"):
        FullBatchSAGE(7, 6, 3, layers=0)


def _first_epoch(comm, aggregation, p_dropout=0.0):
    """(loss, {name: global grad}, {name: global initial value}) of epoch 0."""
    recs, tr = train_sage_full(comm, G, aggregation, epochs=0, dropout=p_dropout)
    init = {n: np.array(p.to_global(), copy=True) for n, p in tr.model.named_parameters()}
    rec = tr.train_epoch()
    grads = {}
    for n, p in tr.model.named_parameters():
        grads[n] = p.grad.copy()         # replicated parameters: the complete gradient
    return rec["loss"], grads, init


def test_model_gradient_finite_differences():
    """Whole-model gradients (one rank, dropout off) against central differences of the loss."""
    def fn(comm):
        loss, grads, _ = _first_epoch(comm, "post")
        _, tr = train_sage_full(comm, G, "post", epochs=0, dropout=0.0)
        ctx_loss = []

        def f():
            ctx = tr.graph.context(training=True, epoch=0, seed=tr.seed)
            lg = tr.model.forward(ctx, tr.graph.features)
            return ctx.loss(lg, "train")[0]

        assert abs(f() - loss) < 1e-12
        rng = np.random.default_rng(1)
        for name, p in tr.model.named_parameters():
            for _ in range(3):
                i = tuple(rng.integers(0, s) for s in p.value.shape)
                keep = p.value[i]
                p.value[i] = keep + 1e-6
                up = f()
                p.value[i] = keep - 1e-6
                down = f()
                p.value[i] = keep
                ctx_loss.append((name, grads[name][i], (up - down) / 2e-6))
        return ctx_loss

    for name, got, num in run_loopback(1, fn)[0]:
        assert abs(got - num) <= 1e-6 * max(1.0, abs(num)), (name, got, num)


def torch_reference(init, epochs=1):
    """Loss history and first-epoch gradients of the same model in torch (float64, no dropout)."""
    torch = pytest.importorskip("torch", reason="the autograd reference needs torch")
    a = torch.tensor(mean_pattern(G.adj).toarray())
    x = torch.tensor(np.asarray(G.features, dtype=np.float64))
    y = torch.tensor(G.labels.astype(np.int64))
    train = torch.tensor(G.train_mask)
    params = {n: torch.tensor(v, requires_grad=True) for n, v in init.items()}
    opt_w = [params[n] for n in params if n.endswith(("w_self", "w_neigh"))]
    opt_r = [params[n] for n in params if not n.endswith(("w_self", "w_neigh"))]
    opt = torch.optim.Adam([{"params": opt_w, "weight_decay": 5e-4},
                            {"params": opt_r, "weight_decay": 0.0}], lr=LR)
    losses, grads = [], None
    for _ in range(epochs):
        opt.zero_grad()
        h = x
        for k in range(LAYERS):
            c = 4 * k
            z = h @ params[f"{c}.w_self"] + (a @ h) @ params[f"{c}.w_neigh"] + params[f"{c}.bias"]
            if k < LAYERS - 1:
                z = torch.nn.functional.layer_norm(z, (HIDDEN,), params[f"{c + 2}.weight"][0],
                                                   params[f"{c + 2}.bias"][0], eps=1e-5)
                z = torch.relu(z)
            h = z
        loss = torch.nn.functional.cross_entropy(h[train], y[train])
        loss.backward()
        losses.append(float(loss.detach()))
        if grads is None:
            grads = {n: t.grad.detach().numpy().copy() for n, t in params.items()}
        opt.step()
    return losses, grads


@pytest.mark.parametrize("p,aggregation", [(1, "post"), (2, "hybrid"), (3, "pre")])
def test_gradients_equal_torch(p, aggregation):
    out = run_loopback(p, lambda c: _first_epoch(c, aggregation))
    loss, grads, init = out[0]
    ref_losses, ref_grads = torch_reference(init)
    assert abs(loss - ref_losses[0]) < 1e-10
    for rank_out in out:
        for n, g in rank_out[1].items():
            np.testing.assert_allclose(g, ref_grads[n], rtol=1e-8, atol=1e-11, err_msg=n)


def test_losses_equal_torch_over_epochs():
    def fn(c):
        _, tr = train_sage_full(c, G, "hybrid", epochs=0, dropout=0.0)
        init = {n: np.array(p.to_global(), copy=True) for n, p in tr.model.named_parameters()}
        return init, [tr.train_epoch()["loss"] for _ in range(4)]

    init, losses = run_loopback(2, fn)[0]
    np.testing.assert_allclose(losses, torch_reference(init, epochs=4)[0], rtol=1e-9)


def test_unquantized_losses_equal_across_modes_and_ranks():
    """Dropout on: its masks do not depend on P or the aggregation mode."""
    def losses(p, agg):
        return run_loopback(p, lambda c: train_sage_full(c, G, agg, epochs=2)[0])

    ref = [r["loss"] for r in losses(1, "post")[0]]
    for p in (2, 4):
        for agg in ("post", "pre", "hybrid"):
            recs = losses(p, agg)
            for rank_recs in recs:
                np.testing.assert_allclose([r["loss"] for r in rank_recs], ref, rtol=1e-9,
                                           err_msg=f"P={p} {agg}")
    recs = run_loopback(4, lambda c: train_sage_full(c, G, algorithm="15d", replication=2,
                                                     epochs=2)[0])
    np.testing.assert_allclose([r["loss"] for r in recs[0]], ref, rtol=1e-9, err_msg="15d")


@pytest.mark.parametrize("p,aggregation,quantize,label_prop", [
    (1, "post", "none", 0.0), (3, "hybrid", "none", 0.0), (3, "pre", "int8", 0.0),
    (4, "hybrid", "int2", 0.0), (3, "post", "int2", 0.6)])
def test_bytes_by_label_exact(p, aggregation, quantize, label_prop):
    got = run_loopback(p, lambda c: check_epoch_bytes(c, G, aggregation, quantize,
                                                       label_prop))[0]
    if p > 1:
        assert any(k.endswith(":exchange") or k.endswith(":data") for k in got)
        assert "gnn:grad-allreduce-dW" in got


def test_quantized_training_learns():
    """int2 + hybrid, forward and gradient messages coded: losses stay near fp32's; evaluation
    exchanges fp32 rows."""
    def quantized(c):
        recs, tr = train_sage_full(c, G, "hybrid", "int2", epochs=5)
        with c.track("eval") as st:
            tr.evaluate()
        return recs, set(st.by_label())

    ref = run_loopback(3, lambda c: train_sage_full(c, G, "hybrid", epochs=5)[0])[0]
    got, eval_labels = run_loopback(3, quantized)[0]
    assert any(k.endswith("spmm-1d-hybrid:exchange") for k in eval_labels), eval_labels
    assert not any(k.endswith((":data", ":params")) for k in eval_labels), eval_labels
    np.testing.assert_allclose([r["loss"] for r in got], [r["loss"] for r in ref], rtol=0.1)
    assert got[-1]["loss"] < got[0]["loss"]
    assert "spmm-1d-hybrid:exchange" not in got[-1]["bytes_by_label"]   # no fp32 rows in training


def test_cli_registry_entry():
    from spgnn.gnn import MODELS, TrainConfig

    spec = MODELS["sage-full"]
    assert spec.training == "full-graph" and spec.adjacency == "mean"
    assert "3d" not in spec.algorithms and "1d-aware" in spec.algorithms
    m = spec.build(10, 3, TrainConfig(graph="sbm:60:3:0", model="sage-full", hidden=8, layers=2,
                                      dropout=0.1, seed=SEED))
    assert isinstance(m, FullBatchSAGE) and m.dims == [10, 8, 3]
