"""Partitioned minibatch training and HEC checks shared by loopback tests and mpiexec runs.

Run: ``mpiexec -n P python -m mpi4py tests/mpi/hec_checks.py``.

* :func:`check_partitioned` -- the ``Halo`` source without the cache
  (``--hec off``) on ``P`` ranks ends every epoch with parameters
  bit-identical on every rank and equal (to summation order) to
  :func:`reference_partitioned`: one process that replays every rank's local
  minibatches (halo vertices as leaves, exact halo features), sums their
  gradients per iteration and divides by the number of loss terms.  The
  partition is random with a fixed seed, so uneven minibatch counts occur
  (empty steps).
* :func:`check_hec_exact_equals_off` -- the HEC with cs, ls, nc unbounded,
  d = 0, only level 0 cached and prefilled trains bit for bit like
  ``--hec off``, with every level-0 halo request a hit.
* :func:`check_hec_protocol` -- ledger push bytes per level equal
  pushed rows x (f x itemsize + 8) exactly; every pushed row is received
  once (global sums); 0 <= hits <= requests; staleness within d..d+ls; at
  most nc rows per peer per push; M - d pushes per level per epoch;
  replicas identical; for each miss policy.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from spgnn import Communicator  # noqa: E402
from spgnn.gnn import BlockContext  # noqa: E402
from spgnn.gnn.optim import Adam  # noqa: E402
from spgnn.gnn.partitioned import HaloGraph, local_batches  # noqa: E402
from spgnn.gnn.sources import Halo  # noqa: E402
from spgnn.gnn.train import Trainer  # noqa: E402
from spgnn.partition import local_view, partition_graph, permute_graph  # noqa: E402
from spgnn.io.preprocess import neighbour_pattern, row_normalize_features  # noqa: E402
from spgnn.sampling import LocalGraph  # noqa: E402
from spgnn.testing.asserts import assert_dist_equal, collective_assert  # noqa: E402
from sage_checks import make_model, make_sampler, sbm_graph  # noqa: E402

#: 11 training-vertex minibatches of 8 over the ranks, uneven under a random partition.
CFG = dict(hidden=5, fanouts=(4, 3), batch_size=8, epochs=2, lr=0.02, weight_decay=5e-4,
           dropout=0.3, seed=3, sampler="sage", partition="random")


def small_graph():
    g = sbm_graph()
    return g


def reference_partitioned(graph, p, cfg, dtype=np.float64):
    """One process replaying the P ranks' partitioned iterations; state per epoch. Local."""
    perm, off, _ = partition_graph(graph.adj, cfg["partition"], p, cfg["seed"],
                                   train_mask=graph.train_mask)
    g = permute_graph(graph, perm)
    a = neighbour_pattern(g.adj)
    x = row_normalize_features(g.features, np.float64).astype(dtype)
    views = [LocalGraph(local_view(a, off[r], off[r + 1])) for r in range(p)]
    train = np.flatnonzero(g.train_mask)
    mine = [train[(train >= off[r]) & (train < off[r + 1])] for r in range(p)]
    sampler = make_sampler(cfg)
    model = make_model(g.num_features, g.num_classes, cfg).place(dtype)
    opt = Adam(model.param_groups(cfg["weight_decay"]), lr=cfg["lr"])
    b = cfg["batch_size"]
    iters = max(-(-m.size // b) for m in mine)
    out = []
    for epoch in range(cfg["epochs"]):
        batches = [local_batches(mine[r], b, cfg["seed"], epoch, r) for r in range(p)]
        for k in range(iters):
            model.zero_grad()
            count = 0
            for r in range(p):
                if k >= len(batches[r]):
                    continue
                mb_id = k * p + r
                bulk = sampler.sample(views[r], [batches[r][k]], [mb_id], epoch=epoch)
                blocks = bulk.forward_blocks
                y = g.labels[bulk.blocks[0].dst_ids]
                ctx = BlockContext(blocks, labels=y, dtype=dtype, training=True, epoch=epoch,
                                   seed=cfg["seed"], minibatch=mb_id)
                logits = model.forward(ctx, ctx.input(x[blocks[0].src_ids]))
                _, d, _ = ctx.loss(logits)
                model.backward(ctx, d)
                count += y.size
            if count:
                for q in model.parameters():
                    q.grad[...] = q.grad / q.grad.dtype.type(count)
            opt.step()
        out.append(model.state_dict())
    return out


def train_partitioned(comm, graph, cfg, dtype=np.float64, hec=None):
    """Train on ``comm``; (states per epoch, records). Collective."""
    hg = HaloGraph.build(graph if comm.rank == 0 else None, comm, method=cfg["partition"],
                         seed=cfg["seed"], dtype=dtype)
    model = make_model(hg.mg.num_features, hg.mg.num_classes, cfg)
    opt = Adam(model.param_groups(cfg["weight_decay"]), lr=cfg["lr"])
    tr = Trainer(model, Halo(hg, make_sampler(cfg), batch_size=cfg["batch_size"], hec=hec), opt,
                 seed=cfg["seed"])
    states, recs = [], []
    for _ in range(cfg["epochs"]):
        recs.append(tr.train_epoch())
        states.append(model.state_dict())
    return states, recs, tr


def check_partitioned(comm, graph, cfg, ref):
    """Replicas identical and equal to the single-process reference. Collective."""
    states, recs, tr = train_partitioned(comm, graph, cfg)
    for e, (st, want) in enumerate(zip(states, ref)):
        for name, v in st.items():
            assert_dist_equal(comm, v, comm.bcast_obj(v, root=0), f"epoch {e} {name} replicas")
            ok = np.allclose(v, want[name], rtol=1e-9, atol=1e-11)
            collective_assert(comm, ok, f"epoch {e} {name}: max diff "
                                        f"{np.abs(v - want[name]).max()}")
    lab = recs[-1]["bytes_by_label"]
    collective_assert(comm, any("grad" in k for k in lab) or comm.size == 1,
                      f"labels {sorted(lab)}")
    collective_assert(comm, all(r["steps"] == tr.steps_per_epoch for r in recs), "steps")




# ------------------------------------------------------------------ the cache
HEC_CFG = dict(CFG, partition="metis", batch_size=6, epochs=2)


def hec_cfg(graph, p, iterations=4):
    """HEC_CFG with about ``iterations`` minibatches per rank per epoch on ``p`` ranks.

    Enough for every schedule the checks use (d = 2 still pushes and loads),
    and a fixed amount of work per rank instead of 25 iterations at one rank.
    """
    ntr = int(np.asarray(graph.train_mask).sum())
    return dict(HEC_CFG, batch_size=max(2, -(-ntr // (iterations * p))))


def check_hec_exact_equals_off(comm, graph, cfg=None):
    """cs, ls, nc unbounded, d = 0, level 0 only, prefilled: bit-identical to --hec off. Collective."""
    from spgnn.gnn.hec import HECConfig, HECRunner
    cfg = cfg or hec_cfg(graph, comm.size)
    off, _, _ = train_partitioned(comm, graph, cfg)
    on, recs, _ = train_partitioned(comm, graph, cfg, hec=HECRunner(
        HECConfig(cs=None, ls=None, nc=None, d=0, levels=1, prefill=True)))
    for e, (a, b) in enumerate(zip(off, on)):
        for name in a:
            collective_assert(comm, np.array_equal(a[name], b[name]),
                              f"epoch {e} {name}: HEC exact differs from --hec off")
    st = recs[-1]["hec"]["L0"]
    collective_assert(comm, st["hits"] == st["requests"], f"prefilled level 0 missed: {st}")


def check_hec_protocol(comm, graph, cfg=None, d=1, nc=3, ls=1, policy="drop"):
    """Push bytes, exactly-once delivery, hit counts, cap and schedule. Collective."""
    from spgnn.gnn.hec import HECConfig, HECRunner
    cfg = cfg or hec_cfg(graph, comm.size)
    runner = HECRunner(HECConfig(cs=1000, ls=ls, nc=nc, d=d, miss_policy=policy))
    with comm.track("whole") as st:
        states, recs, tr = train_partitioned(comm, graph, dict(cfg, epochs=1), hec=runner)
    rec = recs[-1]["hec"]
    item = np.dtype(np.float64).itemsize
    for lvl, dim in enumerate(runner.dims):
        s = rec[f"L{lvl}"]
        sent = sum(ev.bytes_sent for ev in st.events
                   if ev.label.endswith((f"hec:push:L{lvl}:ids", f"hec:push:L{lvl}:rows")))
        # bytes to myself are not counted by the ledger; pushes never go to oneself
        collective_assert(comm, sent == s["pushed"] * (dim * item + 8),
                          f"L{lvl}: ledger push bytes {sent} != {s['pushed']} x ({dim} x {item} + 8)")
        tot = comm.allreduce(np.array([s["pushed"], s["received"]], dtype=np.int64),
                             label="check")
        collective_assert(comm, tot[0] == tot[1], f"L{lvl}: pushed {tot[0]} received {tot[1]}")
        collective_assert(comm, 0 <= s["hits"] <= s["requests"], f"L{lvl}: {s}")
        ok = lvl == 0 or s["stale_min"] is None or d <= s["stale_min"] <= s["stale_max"] <= d + ls
        collective_assert(comm, ok, f"L{lvl} staleness outside d..d+ls: {s}")
    # the cap: at most nc per peer per level per iteration
    calls = [ev for ev in st.events if ev.label.endswith(":ids") and ":push:" in ev.label]
    collective_assert(comm, all(ev.bytes_sent <= 8 * nc * (comm.size - 1) for ev in calls),
                      "push cap exceeded")
    # the schedule: M - d pushes per level
    m = tr.steps_per_epoch
    per_level = len(calls) // max(len(runner.dims), 1)
    collective_assert(comm, per_level == max(m - d, 0), f"{per_level} pushes, M={m}, d={d}")
    collective_assert(comm, m > d, f"M={m} <= d={d}: nothing pushed, the check is vacuous")
    for name, v in states[-1].items():
        assert_dist_equal(comm, v, comm.bcast_obj(v, root=0), f"{name} replicas")
        collective_assert(comm, np.isfinite(v).all(), f"{name} not finite")


def main():
    comm = Communicator.world()
    g = small_graph()
    ref = reference_partitioned(g, comm.size, CFG) if comm.rank == 0 else None
    ref = comm.bcast_obj(ref, root=0)
    check_partitioned(comm, g, CFG, ref)
    check_hec_exact_equals_off(comm, g)
    for d, nc, ls, policy in ((1, 3, 1, "drop"), (0, 2, 0, "keep-local"), (2, 50, 3, "zero")):
        check_hec_protocol(comm, g, None, d, nc, ls, policy)
    if comm.rank == 0:
        print(f"OK hec_checks {comm.size} ranks", flush=True)


if __name__ == "__main__":
    main()
