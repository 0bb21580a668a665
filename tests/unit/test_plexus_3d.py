"""Plexus's double permutation and blocked aggregation in 3D training (issue 26), on loopback ranks.

* ``permute="double"`` trains with ``A1 = P_r Â P_cᵀ`` on even hops and
  ``A2 = P_c Â P_rᵀ`` on odd ones: the losses, accuracies and predictions
  equal the unpermuted run's (dropout masks are keyed by original ids, so
  even with dropout), for both output parities (2 and 3 layers) and both
  multiplication orders.
* ``agg_blocks=K`` multiplies and all-reduces in K row chunks: every
  rank's ledger bytes per label are the unblocked run's, and the losses are
  bit-identical (loopback sums in rank order).
"""

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn import run_loopback
from spgnn.core.spmm_3d import row_chunks
from spgnn.errors import LayoutMismatch
from spgnn.gnn import GCN, Adam, DistGraph, Plexus3D, Trainer, placement_for
from spgnn.io import Graph, sbm
from spgnn.local.csr import LocalCSR
from spgnn.backends import get_backend


def _graph(n=40, f=6, c=3, seed=0):
    adj, x, y = sbm(n, c, avg_degree=4, num_features=f, seed=seed)
    return Graph(adj=adj, features=x, labels=y).random_split(0.5, 0.2, seed=seed)


def _train(graph, p, grid, *, layers=2, dropout=0.0, order="auto", epochs=2, **kw):
    def body(comm):
        dg = DistGraph.from_graph(graph if comm.rank == 0 else None, comm,
                                  Plexus3D(grid=grid, **kw), dtype=np.float64)
        model = GCN(dg.num_features, 5, dg.num_classes, layers=layers, dropout=dropout, seed=3,
                    order=order)
        tr = Trainer(model, dg, Adam(model.param_groups(5e-4), lr=0.05))
        epochs_out = [tr.train_epoch() for _ in range(epochs)]
        ctx = dg.context(training=False)
        pred = ctx.predict(model.forward(ctx, dg.features))
        return ([e["loss"] for e in epochs_out], [e["bytes_by_label"] for e in epochs_out],
                tr.evaluate(), pred)

    return run_loopback(p, body, timeout=120)


@pytest.mark.parametrize("layers,dropout,order,grid", [
    (2, 0.0, "auto", (2, 1, 2)),
    (3, 0.4, "auto", (1, 2, 2)),
    (3, 0.0, "aggregate-first", (2, 2, 1)),
])
def test_double_permutation_trains_like_the_unpermuted_run(layers, dropout, order, grid):
    g = _graph()
    plain = _train(g, 4, grid, layers=layers, dropout=dropout, order=order)
    double = _train(g, 4, grid, layers=layers, dropout=dropout, order=order, permute="double")
    for a, b in zip(plain, double):
        np.testing.assert_allclose(b[0], a[0], rtol=1e-12)                   # losses
        assert b[2] == pytest.approx(a[2], rel=1e-12)                         # evaluation
        np.testing.assert_array_equal(b[3], a[3])                             # predictions


def test_double_permutation_balances_the_blocks_it_multiplies():
    """The two stored variants are P_r Â P_cᵀ and P_c Â P_rᵀ of the same Â."""
    g = _graph(n=30)

    def body(comm):
        dg = DistGraph.from_graph(g, comm, Plexus3D(grid=(1, 1, 1), permute="double"),
                                  dtype=np.float64, seed=5)
        a1 = dg._A_by_variant[0].to_global()
        a2 = dg._A_by_variant[1].to_global()
        return sp.csr_array(a1), sp.csr_array(a2), dg.permutation("c"), dg.permutation("r")

    a1, a2, pc, pr = run_loopback(1, body)[0]
    from spgnn.io.preprocess import normalized_adjacency

    ahat = sp.csr_array(normalized_adjacency(g.adj, np.float64))
    np.testing.assert_allclose(a1.toarray(), ahat[pr][:, pc].toarray())
    np.testing.assert_allclose(a2.toarray(), ahat[pc][:, pr].toarray())
    assert not np.array_equal(pc, pr)


def test_double_permutation_refuses_hops_out_of_order():
    g = _graph(n=20)

    def body(comm):
        dg = DistGraph.from_graph(g, comm, Plexus3D(grid=(1, 1, 1), permute="double"),
                                  dtype=np.float64)
        ctx = dg.context()
        h = ctx.propagate(dg.features, 0)          # now in P_r order
        with pytest.raises(LayoutMismatch, match="hop 0 multiplies rows in P_c order"):
            ctx.propagate(ctx._unshard(h), 0)
        return True

    assert run_loopback(1, body) == [True]


@pytest.mark.parametrize("kw", [dict(permute="double"), dict(agg_blocks=2)])
def test_plexus_options_are_3d_only(kw):
    def body(comm):
        with pytest.raises(ValueError, match="unknown permute"):
            DistGraph.from_graph(_graph(n=12), comm, placement_for("3d", permute="single"))
        with pytest.raises(ValueError, match="agg_blocks must be >= 1"):
            DistGraph.from_graph(_graph(n=12), comm, placement_for("3d", agg_blocks=0))
        return True

    def body_kw(comm):
        with pytest.raises(ValueError, match="apply to algorithm '3d' only"):
            DistGraph.from_graph(_graph(n=12), comm, placement_for("1d", **kw))
        return True

    assert run_loopback(1, body_kw) == [True]
    assert run_loopback(1, body) == [True]


@pytest.mark.parametrize("blocks", [2, 3, 7, 50])
def test_blocked_aggregation_same_bytes_and_bits(blocks):
    """K chunks: the same ledger bytes per label on every rank, bit-identical losses."""
    g = _graph(n=36)
    plain = _train(g, 4, (2, 2, 1), layers=3, epochs=2)
    blocked = _train(g, 4, (2, 2, 1), layers=3, epochs=2, agg_blocks=blocks)
    for a, b in zip(plain, blocked):
        assert b[0] == a[0]                  # bit-identical losses
        assert b[1] == a[1]                  # every rank, every label, every epoch
        np.testing.assert_array_equal(b[3], a[3])
    # both options together, against the plain run
    both = _train(g, 4, (2, 2, 1), layers=3, epochs=2, agg_blocks=blocks, permute="double")
    for a, b in zip(plain, both):
        np.testing.assert_allclose(b[0], a[0], rtol=1e-12)
        assert b[1] == a[1]


def test_row_chunks_cover_the_block():
    m = sp.random_array((11, 7), density=0.3, random_state=1, format="csr")
    be = get_backend("numpy")
    local = LocalCSR.from_scipy(m)
    for k, align in ((1, 1), (3, 1), (11, 1), (20, 1), (3, 2), (4, 4)):
        chunks = row_chunks(local, k, be, align)
        assert len(chunks) == k
        assert all(r0 % align == 0 for r0, _, _ in chunks)
        assert sum(r1 - r0 for r0, r1, _ in chunks) == 11
        stacked = sp.vstack([c.to_scipy() for _, _, c in chunks])
        np.testing.assert_array_equal(stacked.toarray(), m.toarray())


@pytest.mark.parametrize("permute", ["none", "double"])
def test_planned_nnz_per_rank_equals_the_trained_shards(permute):
    """nnz_per_rank_3d (the planner) against every rank's real shard, layer by layer."""
    from spgnn.partition import double_permutation
    from spgnn.plan.events import nnz_per_rank_3d
    from spgnn.io.preprocess import normalized_adjacency

    g = _graph(n=37)
    grid = (2, 1, 3)

    def body(comm):
        dg = DistGraph.from_graph(g if comm.rank == 0 else None, comm,
                                  Plexus3D(grid=grid, permute=permute), dtype=np.float64, seed=4)
        model = GCN(dg.num_features, 5, dg.num_classes, layers=4, dropout=0.0, seed=3,
                    order="aggregate-first")
        Trainer(model, dg, Adam(model.param_groups(5e-4), lr=0.05)).train_epoch()
        pos = tuple(dg.grid.coords_of(comm.rank))
        # the shards each hop multiplied by, in hop order (cache keys carry the variant)
        shards = {k[1:]: m.local.nnz for k, m in dg._adj_cache.items() if k[0] == "A"}
        return pos, shards

    got = run_loopback(6, body, timeout=120)
    ahat = normalized_adjacency(g.adj, np.float64)
    perm = double_permutation(ahat, 4) if permute == "double" else None
    want = nnz_per_rank_3d(ahat, grid, 4, permutation=perm)
    from spgnn.grid import roles_for_layer

    for pos, shards in got:
        k = np.ravel_multi_index(pos, grid)
        for layer in range(4):
            o, _, d = roles_for_layer(layer)
            v = layer % 2 if permute == "double" else 0
            assert shards[(d, o, v)] == want[layer, k]


@pytest.mark.parametrize("grid,f,hidden,layers,bias,order,blocks,permute", [
    ((2, 2, 2), 8, 8, 3, True, "auto", 1, "none"),            # sharded weights, biases
    ((2, 1, 4), 7, 5, 3, False, "auto", 7, "none"),           # transform-first, replicated W;
                                                              # 9-10 rows in 7 chunks of 2: empty ones
    ((1, 2, 4), 16, 8, 4, False, "transform-first", 1, "none"),
    ((2, 2, 2), 6, 12, 2, False, "aggregate-first", 3, "double"),
])
def test_planned_3d_epoch_equals_the_ledger(grid, f, hidden, layers, bias, order, blocks,
                                            permute):
    """plan_gcn_3d: every rank's events (op, label, axis, bytes, messages), in order, at P = 8.

    With blocked aggregation (``agg_blocks``: one all-reduce per row chunk, messages up to K
    times) and the double permutation (which moves no byte: 3D's all-reduces are dense).
    """
    from spgnn.plan.events import plan_gcn_3d

    n = 37
    adj, x, y = sbm(n, 3, avg_degree=4, num_features=f, seed=0)
    g = Graph(adj=adj, features=x, labels=y).random_split(0.5, 0.2, seed=0)

    def body(comm):
        dg = DistGraph.from_graph(g if comm.rank == 0 else None, comm,
                                  Plexus3D(grid=grid, agg_blocks=blocks, permute=permute),
                                  dtype=np.float32)
        model = GCN(dg.num_features, hidden, dg.num_classes, layers=layers, dropout=0.5,
                    seed=1, bias=bias, order=order)
        tr = Trainer(model, dg, Adam(model.param_groups(5e-4), lr=0.05))
        tr.train_epoch()                                   # setup (redistributions) first
        with comm.ledger.scope("epoch") as st:
            tr.train_epoch()
        return [(e.op, e.label, tuple(e.axis), e.bytes_sent, e.bytes_recv, e.messages)
                for e in st.events if not e.label.startswith("gnn-loss") and e.label != "epoch"]

    got = run_loopback(8, body, timeout=120)
    dims = [f] + [hidden] * (layers - 1) + [3]
    plan = plan_gcn_3d(n, dims, grid, bias=bias, order=order, agg_blocks=blocks)
    if blocks > 1:          # the chunked all-reduces are there, and some chunk is empty
        unblocked = plan_gcn_3d(n, dims, grid, bias=bias, order=order)
        assert len(plan) > len(unblocked)
    for rank, events in enumerate(got):
        want = [(e.op, e.label, e.axis, int(e.sent[rank]), int(e.recv[rank]),
                 int(e.messages[rank])) for _, _, e in plan]
        assert events == want, f"rank {rank}"
