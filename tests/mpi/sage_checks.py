"""Minibatch GraphSAGE checks shared by loopback tests and real mpiexec runs.

Run: ``mpiexec -n P python -m mpi4py tests/mpi/sage_checks.py [--cora-epochs E]``.

* :func:`check_fetch` -- ``FeatureStore.fetch`` returns the right rows in
  request order, and its ledger bytes are exactly ``8·|distinct remote ids|``
  sent (ids) + ``8·(P-1)`` each way (the counts) and ``|distinct remote ids|
  · row_bytes`` received (rows).
* :func:`check_training` -- a few epochs on ``P`` ranks: parameters are
  bit-identical on every rank after every epoch (collective assert) and equal
  :func:`reference_params`, a single process that follows the same
  :func:`~spgnn.gnn.minibatch.step_schedule` and averages the same minibatch
  gradients (summed cross-entropy over the step's batch vertices / their
  number), up to summation order.
* :func:`check_cora` -- a short Cora run (shared data) with identical
  parameters on every rank.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from spgnn import Communicator  # noqa: E402
from spgnn.gnn import BlockContext, GraphSAGE  # noqa: E402
from spgnn.gnn.minibatch import FeatureStore, MinibatchGraph, step_schedule  # noqa: E402
from spgnn.gnn.sources import Sampled  # noqa: E402
from spgnn.gnn.train import Trainer  # noqa: E402
from spgnn.gnn.optim import Adam  # noqa: E402
from spgnn.io import load_graph  # noqa: E402
from spgnn.io.preprocess import neighbour_pattern, row_normalize_features  # noqa: E402
from spgnn.sampling import GraphSAGESampler, LADIESSampler  # noqa: E402
from spgnn.testing.asserts import assert_dist_allclose, assert_dist_equal, collective_assert  # noqa: E402

#: A small config: 9 minibatches of 16 vertices, bulks of 4 -> unequal shares.
CFG = dict(hidden=6, fanouts=(4, 3, 2), batch_size=16, bulk=4, epochs=2, lr=0.02,
           weight_decay=5e-4, dropout=0.3, seed=3, sampler="sage")


def sbm_graph():
    return load_graph("sbm:240:3:0")


def make_sampler(cfg):
    if cfg["sampler"] == "ladies":
        return LADIESSampler(tuple(3 * f for f in cfg["fanouts"]), seed=cfg["seed"] + 1)
    return GraphSAGESampler(cfg["fanouts"], frontier=cfg.get("frontier", "unique"),
                            include_dst=True, seed=cfg["seed"] + 1)


def make_model(nf, nc, cfg):
    return GraphSAGE(nf, cfg["hidden"], nc, layers=len(cfg["fanouts"]), dropout=cfg["dropout"],
                     seed=cfg["seed"])


# ------------------------------------------------------------------ fetch
def check_fetch(comm, n=37, f=5, seed=0):
    """Fetch correctness, de-duplication and ledger bytes. Collective."""
    x = np.random.default_rng(seed).normal(size=(n, f))
    store = FeatureStore.from_global(x if comm.rank == 0 else None, comm, root=0)
    assert_dist_equal(comm, store.local, x[store.offsets[comm.rank]:store.offsets[comm.rank + 1]],
                      "scattered block")
    rng = np.random.default_rng(100 + comm.rank)
    for size in (0, 1, 12, 60):
        ids = rng.integers(0, n, size=size)
        with comm.track("check-fetch") as st:
            got = store.fetch(ids, validate=False)
        assert_dist_equal(comm, got, x[ids], f"fetched rows (size {size})")
        uniq = np.unique(ids)
        remote = int(np.count_nonzero(store.owner(uniq) != comm.rank))
        p = comm.size
        ids_sent = st.total("bytes_sent", label="feature-fetch:ids")
        rows_recv = st.total("bytes_recv", label="feature-fetch:rows")
        ids_recv_counts = st.total("bytes_recv", label="feature-fetch:ids", op="alltoall")
        ok = (ids_sent == 8 * remote + 8 * (p - 1) and rows_recv == remote * f * 8
              and ids_recv_counts == 8 * (p - 1)
              and st.total("bytes_sent") + 0 == ids_sent + st.total("bytes_sent",
                                                                    label="feature-fetch:rows"))
        collective_assert(comm, ok, f"ledger: ids_sent={ids_sent} rows_recv={rows_recv} "
                                    f"remote={remote} p={p}")
        # what I send as rows is exactly what the others asked me for
        asked = st.total("bytes_recv", label="feature-fetch:ids", op="alltoallv") // 8
        rows_sent = st.total("bytes_sent", label="feature-fetch:rows")
        collective_assert(comm, rows_sent == asked * f * 8, "rows sent != ids asked")
    # validation raises on every rank together
    bad = np.array([n if comm.rank == comm.size - 1 else 0])
    try:
        store.fetch(bad)
        raised = False
    except Exception:        # InvalidSparseStructure on the bad rank, its class elsewhere
        raised = True
    collective_assert(comm, raised, "out-of-range id not reported")


# ------------------------------------------------------------------ training
def reference_params(graph, p, cfg, mode="replicated", c=1, dtype=np.float64):
    """One process, the P-rank schedule, the same minibatch gradients averaged per step. Local."""
    a = neighbour_pattern(graph.adj)
    x = row_normalize_features(graph.features, np.float64).astype(dtype)
    sampler = make_sampler(cfg)
    model = make_model(graph.num_features, graph.num_classes, cfg).place(dtype)
    opt = Adam(model.param_groups(cfg["weight_decay"]), lr=cfg["lr"])
    train = np.flatnonzero(graph.train_mask)
    b = cfg["batch_size"]
    nb = -(-train.size // b)
    sched = step_schedule(nb, cfg["bulk"], p, mode, c)
    out = []
    for epoch in range(cfg["epochs"]):
        perm = np.random.default_rng([cfg["seed"], epoch]).permutation(train)
        for row in sched:
            model.zero_grad()
            count = 0
            for mb in row[row >= 0]:
                bulk = sampler.sample(a, [perm[mb * b:(mb + 1) * b]], [mb], epoch=epoch)
                blocks = bulk.forward_blocks
                y = graph.labels[bulk.blocks[0].dst_ids]
                ctx = BlockContext(blocks, labels=y, dtype=dtype, training=True, epoch=epoch,
                                   seed=cfg["seed"], minibatch=int(mb))
                logits = model.forward(ctx, ctx.input(x[blocks[0].src_ids]))
                _, d, _ = ctx.loss(logits)
                model.backward(ctx, d)
                count += y.size
            for q in model.parameters():
                q.grad[...] = q.grad / q.grad.dtype.type(count)
            opt.step()
        out.append(model.state_dict())
    return out


def train_dist(comm, graph, cfg, mode="replicated", c=1, dtype=np.float64, root=0):
    """Train on ``comm``; the state after every epoch. Collective."""
    mg = MinibatchGraph.from_graph(graph if (root is None or comm.rank == root) else None, comm,
                                   mode=mode, replication=c, root=root, dtype=dtype)
    model = make_model(mg.num_features, mg.num_classes, cfg)
    opt = Adam(model.param_groups(cfg["weight_decay"]), lr=cfg["lr"])
    tr = Trainer(model, Sampled(mg, make_sampler(cfg), batch_size=cfg["batch_size"],
                                bulk=cfg["bulk"]), opt, seed=cfg["seed"])
    states, recs = [], []
    for _ in range(cfg["epochs"]):
        recs.append(tr.train_epoch())
        states.append(model.state_dict())
    return tr, states, recs


def check_same_on_every_rank(comm, state, what):
    """Every rank holds rank 0's parameters bit for bit. Collective."""
    ref = comm.bcast_obj(state if comm.rank == 0 else None, root=0, label="test:bcast")
    for name in sorted(state):
        assert_dist_equal(comm, state[name], ref[name], f"{what}: {name}")


def check_training(comm, graph, cfg, ref, mode="replicated", c=1, rtol=1e-10):
    """Replicas identical after every epoch; equal to the single-process reference. Collective."""
    _, states, recs = train_dist(comm, graph, cfg, mode, c)
    steps = step_schedule(-(-int(graph.train_mask.sum()) // cfg["batch_size"]), cfg["bulk"],
                          comm.size, mode, c).shape[0]
    collective_assert(comm, all(r["steps"] == steps for r in recs), "step count")
    for e, (st, rs) in enumerate(zip(states, ref)):
        check_same_on_every_rank(comm, st, f"epoch {e}")
        for name in sorted(st):
            assert_dist_allclose(comm, st[name], rs[name], rtol=rtol, atol=rtol,
                                 what=f"epoch {e} {name} vs single process")


def check_resume(comm, graph, cfg):
    """Stop after one epoch, restore into a fresh trainer: the same bits after the next. Collective."""
    cfg = dict(cfg, epochs=1)
    tr, _, _ = train_dist(comm, graph, cfg)
    saved = tr.state_dict()
    tr.train_epoch()
    want = tr.model.state_dict()
    tr2, _, _ = train_dist(comm, graph, dict(cfg, epochs=0))
    tr2.load_state_dict(saved)
    tr2.train_epoch()
    for name, v in tr2.model.state_dict().items():
        assert_dist_equal(comm, v, want[name], f"resumed {name}")


def check_cora(comm, epochs=3):
    """A short Cora run: identical parameters on every rank, accuracies in [0, 1]. Collective."""
    from spgnn.testing.data import find_shared_data

    base = find_shared_data()
    path = None if base is None else base / "planetoid"
    have = path is not None and path.is_dir()
    if not have:
        return None
    graph = load_graph(path, name="cora") if comm.rank == 0 else None
    cfg = dict(hidden=16, fanouts=(15, 10, 5), batch_size=512, bulk=16, epochs=epochs, lr=0.01,
               weight_decay=5e-4, dropout=0.5, seed=0, sampler="sage")
    tr, states, _ = train_dist(comm, graph, cfg, dtype=np.float32)
    check_same_on_every_rank(comm, states[-1], "cora")
    ev = tr.evaluate()
    collective_assert(comm, 0.0 <= ev["test_acc"] <= 1.0, f"accuracy {ev}")
    return ev


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cora-epochs", type=int, default=3)
    args = parser.parse_args()
    comm = Communicator.world()
    p = comm.size
    check_fetch(comm)
    graph = sbm_graph()
    for sampler in ("sage", "ladies"):
        cfg = dict(CFG, sampler=sampler)
        check_training(comm, graph, cfg, reference_params(graph, p, cfg))
    if p % 2 == 0:
        cfg = dict(CFG, epochs=1)
        check_training(comm, graph, cfg, reference_params(graph, p, cfg, "partitioned", 2),
                       mode="partitioned", c=2)
    check_resume(comm, graph, CFG)
    ev = check_cora(comm, args.cora_epochs)
    if comm.rank == 0:
        print(f"cora: {ev if ev is not None else 'skipped (no shared data)'}", flush=True)
        print(f"OK sage_checks {p} ranks", flush=True)


if __name__ == "__main__":
    main()
