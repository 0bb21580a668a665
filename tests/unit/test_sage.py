"""SAGEConv / GraphSAGE on sampled blocks: dense numpy reference and finite differences.

Float64 throughout, tiny random graphs, every sampler layout the layer
accepts (GraphSAGE unique frontier, tree frontier with ``include_dst``,
LADIES with ``include_batch``).
"""

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn import run_loopback
from spgnn.gnn import DistGraph
from spgnn.io import Graph

from spgnn.gnn import BlockContext, BlockOperator, GraphSAGE, SAGEConv
from spgnn.gnn.functional import softmax_cross_entropy
from spgnn.io.preprocess import neighbour_pattern as sage_adjacency
from spgnn.sampling import GraphSAGESampler, LADIESSampler

N = 30


def _forward(model, blocks, x, training=False, key=(0, 0), grid=None):
    """The model on one minibatch's blocks (a BlockContext): ``(ctx, logits array)``."""
    ctx = BlockContext(blocks, dtype=model.dtype, training=training, epoch=key[0],
                       minibatch=key[1], seed=model.seed, grid=grid)
    return ctx, model.forward(ctx, ctx.input(x)).local


def _backward(model, ctx, d, need_input_grad=False):
    ctx.need_input_grad = need_input_grad
    out = model.backward(ctx, ctx.input(d))
    return None if out is None else out.local


def softmax_cross_entropy_sum(logits, labels):
    return softmax_cross_entropy(logits, labels, reduction="sum")


def _graph(seed=0, n=N, density=0.12):
    rng = np.random.default_rng(seed)
    a = sp.random_array((n, n), density=density, rng=rng, format="csr")
    a = sage_adjacency(a)
    # one isolated vertex: its mean aggregates to 0
    a = a.tolil()
    a[3, :] = 0
    a[:, 3] = 0
    return sp.csr_array(a)


SAMPLERS = {
    "sage-unique": lambda hops: GraphSAGESampler(hops, frontier="unique", seed=5),
    "sage-tree": lambda hops: GraphSAGESampler(hops, frontier="tree", include_dst=True, seed=5),
    "ladies": lambda hops: LADIESSampler(tuple(4 * h for h in hops), seed=5),
}


def _bulk(kind, hops=(3, 2, 2), batch=(0, 3, 7, 11)):
    a = _graph()
    return a, SAMPLERS[kind](hops).sample(a, [np.asarray(batch)], epoch=1)


def _dense_layer(blk, h, conv):
    """The textbook formula on dense matrices."""
    d = blk.adj.to_scipy().toarray() != 0
    deg = d.sum(axis=1, keepdims=True)
    mean = np.where(deg > 0, d / np.maximum(deg, 1), 0.0)
    # each row's own vertex: its column in the block (position for tree/unique)
    self_rows = BlockOperator(blk).self_index
    assert np.array_equal(blk.src_ids[self_rows], blk.dst_ids)
    out = h[self_rows] @ conv.w_self.value + mean @ h @ conv.w_neigh.value
    return out + conv.bias.value


@pytest.mark.parametrize("kind", sorted(SAMPLERS))
def test_forward_equals_dense_reference(kind):
    a, bulk = _bulk(kind)
    model = GraphSAGE(5, 4, 3, layers=3, dropout=0.0, seed=2).place(np.float64)
    for c in model.convs:                     # non-zero biases exercise the bias path
        c.bias.value[...] = np.random.default_rng(9).normal(size=c.bias.value.shape)
    blocks = bulk.forward_blocks
    x = np.random.default_rng(1).normal(size=(blocks[0].src_ids.size, 5))
    _, got = _forward(model, blocks, x)
    h = x
    for k, (conv, blk) in enumerate(zip(model.convs, blocks)):
        h = _dense_layer(blk, h, conv)
        if k < 2:
            h = np.maximum(h, 0)
    np.testing.assert_allclose(got, h, rtol=1e-12, atol=1e-12)
    assert got.shape == (bulk.blocks[0].dst_ids.size, 3)


def test_full_inference_equals_sampled_with_all_neighbours():
    """A fanout above every degree samples whole neighbourhoods: infer() must agree."""
    a = _graph(1)
    bulk = GraphSAGESampler((N, N), frontier="unique", seed=0).sample(a, [np.arange(N)])
    # exactly representable in float32, the dtype a Graph stores features in
    x = np.random.default_rng(0).normal(size=(N, 4)).astype(np.float32).astype(np.float64)
    blocks = bulk.forward_blocks
    deg = np.diff(a.indptr)
    mean = sp.diags_array(1.0 / np.maximum(deg, 1)) @ a

    def both(comm):
        # the whole graph with the mean aggregator, on one rank: D^-1 A = `mean`
        dg = DistGraph.from_graph(Graph(adj=a, features=x, labels=np.zeros(N, dtype=np.int64)),
                                  comm, adjacency="mean", dtype=np.float64,
                                  normalize_features=False, sparse_features=False)
        model = GraphSAGE(4, 6, 2, layers=2, dropout=0.0, seed=0).place(np.float64, dg.grid)
        _, sampled = _forward(model, blocks, x[blocks[0].src_ids], grid=dg.grid)
        ctx = dg.context(training=False)
        full = model.forward(ctx, dg.features).to_global()
        return sampled, full, ctx.propagate(dg.features).to_global()

    sampled, full, agg = run_loopback(1, both)[0]
    np.testing.assert_allclose(agg, mean @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sampled, full[bulk.blocks[0].dst_ids], rtol=1e-12, atol=1e-12)


def _loss(model, blocks, x, labels, key):
    ctx, logits = _forward(model, blocks, x, training=True, key=key)
    _loss.ctx = ctx                    # the pass the next backward belongs to
    return softmax_cross_entropy_sum(logits, labels)


@pytest.mark.parametrize("kind", sorted(SAMPLERS))
@pytest.mark.parametrize("dropout", [0.0, 0.4])
def test_gradients_finite_differences(kind, dropout):
    a, bulk = _bulk(kind, hops=(2, 2, 2), batch=(0, 3, 5))
    blocks = [BlockOperator(b) for b in bulk.forward_blocks]
    model = GraphSAGE(4, 5, 3, layers=3, dropout=dropout, input_dropout=dropout / 2,
                      seed=4).place(np.float64)
    rng = np.random.default_rng(7)
    x = rng.normal(size=(blocks[0].num_src, 4))
    labels = rng.integers(0, 3, size=blocks[-1].num_dst)
    key = (3, 11)                      # masks are a function of the key: f is deterministic
    model.zero_grad()
    _, d, _ = _loss(model, blocks, x, labels, key)
    dx = _backward(model, _loss.ctx, d, need_input_grad=True)
    eps = 1e-6
    for name, p in model.named_parameters():
        g = p.grad.copy()
        idx = [tuple(rng.integers(0, s) for s in p.value.shape) for _ in range(6)]
        for i in idx:
            old = p.value[i]
            p.value[i] = old + eps
            fp = _loss(model, blocks, x, labels, key)[0]
            p.value[i] = old - eps
            fm = _loss(model, blocks, x, labels, key)[0]
            p.value[i] = old
            assert abs((fp - fm) / (2 * eps) - g[i]) <= 1e-6 * max(1.0, abs(g[i])), (name, i)
    for i in [tuple(rng.integers(0, s) for s in x.shape) for _ in range(8)]:
        old = x[i]
        x[i] = old + eps
        fp = _loss(model, blocks, x, labels, key)[0]
        x[i] = old - eps
        fm = _loss(model, blocks, x, labels, key)[0]
        x[i] = old
        assert abs((fp - fm) / (2 * eps) - dx[i]) <= 1e-6 * max(1.0, abs(dx[i])), i


def test_backward_accumulates_and_no_input_grad():
    _, bulk = _bulk("sage-unique")
    model = GraphSAGE(5, 4, 3, layers=3, dropout=0.0).place(np.float64)
    x = np.random.default_rng(2).normal(size=(bulk.forward_blocks[0].src_ids.size, 5))
    labels = np.zeros(bulk.blocks[0].dst_ids.size, dtype=np.int64)
    model.zero_grad()
    _, d, _ = _loss(model, bulk.forward_blocks, x, labels, (0, 0))
    assert _backward(model, _loss.ctx, d) is None
    once = [p.grad.copy() for p in model.parameters()]
    _, d, _ = _loss(model, bulk.forward_blocks, x, labels, (0, 0))
    _backward(model, _loss.ctx, d)
    for g1, p in zip(once, model.parameters()):
        np.testing.assert_allclose(p.grad, 2 * g1, rtol=1e-13, atol=0)


def test_tree_without_dst_columns_is_rejected():
    a = _graph()
    bulk = GraphSAGESampler((2, 2), frontier="tree", seed=0).sample(a, [np.array([0, 5])])
    model = GraphSAGE(3, 4, 2, layers=2).place(np.float64)
    x = np.zeros((bulk.forward_blocks[0].src_ids.size, 3))
    with pytest.raises(ValueError, match="include_dst"):
        _forward(model, bulk.forward_blocks, x)


def test_input_validation():
    _, bulk = _bulk("sage-unique")
    model = GraphSAGE(5, 4, 3, layers=3).place(np.float64)
    from spgnn.errors import DimensionMismatch

    with pytest.raises(DimensionMismatch):
        _forward(model, bulk.forward_blocks[:2], np.zeros((3, 5)))
    with pytest.raises(DimensionMismatch):
        _forward(model, bulk.forward_blocks, np.zeros((bulk.forward_blocks[0].src_ids.size, 4)))
    with pytest.raises(ValueError):
        GraphSAGE(5, 4, 3, layers=0)
    with pytest.raises(ValueError):
        GraphSAGE(5, 4, 3, dropout=1.0)
    with pytest.raises(ValueError):
        SAGEConv(0, 3)
    with pytest.raises(ValueError):
        softmax_cross_entropy_sum(np.zeros((2, 3)), np.array([0, 3]))


def test_softmax_cross_entropy_sum():
    z = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    y = np.array([1, 0])
    loss, d, ok = softmax_cross_entropy_sum(z, y)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    assert np.isclose(loss, -np.log(p[0, 1]) - np.log(p[1, 0]))
    np.testing.assert_allclose(d, p - np.eye(3)[y])
    assert ok == 1


def test_state_dict_roundtrip_and_param_groups():
    m = GraphSAGE(5, 4, 3, layers=2, seed=1).place(np.float32)
    st = m.state_dict()
    assert set(st) == {"0.w_self", "0.w_neigh", "0.bias", "1.w_self", "1.w_neigh", "1.bias"}
    assert all(v.dtype == np.float32 for v in st.values())
    m2 = GraphSAGE(5, 4, 3, layers=2, seed=2).place(np.float32)
    m2.load_state_dict(st)
    assert all(np.array_equal(a, m2.state_dict()[k]) for k, a in st.items())
    groups = m.param_groups(5e-4)
    assert groups[0]["weight_decay"] == 5e-4 and len(groups[0]["params"]) == 4
    assert groups[1]["weight_decay"] == 0.0 and len(groups[1]["params"]) == 2


def _sage_args(**kw):
    import argparse

    from spgnn.cli import train as cli_train

    base = dict(graph="sbm:400:4:0", name=None, sampler="sage", batch_size=64, fanout="5,5",
                bulk=4, hidden=16, lr=0.01, weight_decay=5e-4, dropout=0.5, epochs=20, seed=0,
                partition_mode="replicated", json=False, split="0.6:0.2")
    base.update(kw)
    parser = argparse.ArgumentParser()
    cli_train.add_parser(parser.add_subparsers())
    argv = ["train", "--graph", base.pop("graph"), "--model", "sage", "--no-progress"]
    for k, v in base.items():
        if v is None or v is False:
            continue
        argv += [f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])
    return cli_train.config_from_args(parser.parse_args(argv))


def test_projected_features_are_standardised_not_renormalised():
    """``feature_dim``: projected columns have mean 0 and variance 1, and ``train`` hands
    them to the model as they are (row-normalising mixed-sign rows would divide by sums near 0:
    that made musae_facebook training collapse to one class)."""
    x = _sage_args(feature_dim=8).load_graph().features
    assert x.shape[1] == 8
    np.testing.assert_allclose(x.mean(axis=0), 0, atol=1e-5)     # stored as float32
    np.testing.assert_allclose(x.std(axis=0), 1, atol=1e-5)


def test_train_sage_does_not_renormalise_projected_features(monkeypatch):
    """The standardised projection reaches the model as it is; raw features are row-normalised."""
    from spgnn import run_loopback
    from spgnn.cli import train as cli_train
    from spgnn.gnn import minibatch as mb

    seen = []
    original = mb.MinibatchGraph.from_graph.__func__

    def recording(cls, graph, comm, **kw):
        seen.append(kw.get("normalize_features", True))
        return original(cls, graph, comm, **kw)

    monkeypatch.setattr(mb.MinibatchGraph, "from_graph", classmethod(recording))
    for dim, expected in ((8, False), (None, True)):
        rep = run_loopback(1, lambda comm: cli_train.train(comm, _sage_args(feature_dim=dim,
                                                                            epochs=2)),
                           timeout=120)[0]
        assert seen[-1] is expected
        assert dim is None or rep["features"] == dim
