"""GCN training checks shared by the loopback property tests and real mpiexec runs.

``check_gcn_losses(comm, case)`` trains a GCN on ``comm.size`` ranks with
dropout off and compares the loss after every epoch with the single-process
numpy reference (:mod:`spgnn.testing.gnn_reference`), then checks that every
replica of every parameter block is bit-identical and that the assembled
weights equal the reference's.  Collective; raises AssertionError on every
rank together.

Run under MPI: ``mpiexec -n P python -m mpi4py tests/mpi/gnn_checks.py
[--cora DIR]``: every algorithm that fits P on a small SBM graph, and a few
Cora epochs when ``--cora`` names the Planetoid folder.
"""

import argparse
import hashlib

import numpy as np

from spgnn.gnn import GCN, Adam, DistGraph, Plexus3D, Trainer, placement_for
from spgnn.io import Graph, sbm
from spgnn.testing.asserts import assert_dist_allclose, collective_assert
from spgnn.testing.gnn_reference import train_reference


def sbm_graph(n=48, f=7, c=3, seed=0):
    adj, x, y = sbm(n, c, avg_degree=4, num_features=f, seed=seed)
    return Graph(adj=adj, features=x, labels=y).random_split(0.5, 0.2, seed=seed)


def cases_for(p):
    """``(algorithm, grid)`` pairs that run on ``p`` ranks."""
    out = [("1d", None), ("1d-aware", None)]
    out += [("15d-aware", (p // c, c)) for c in (1, 2) if p % c == 0]
    shapes = {1: [(1, 1, 1)], 2: [(2, 1, 1), (1, 1, 2)], 3: [(1, 3, 1)],
              4: [(2, 2, 1), (1, 2, 2)], 8: [(2, 2, 2), (2, 1, 4)]}.get(p, [(p, 1, 1)])
    out += [("3d", s) for s in shapes]
    return out


def replicas_identical(comm, model):
    """Every rank holding the same block of a parameter holds the same bytes. Collective."""
    mine = []
    for name, p in model.named_parameters():
        (r0, r1), (c0, c1) = p.layout.bounds(p.grid, p.shape)
        mine.append((name, (r0, r1, c0, c1), hashlib.sha1(p.value.tobytes()).hexdigest()))
    everyone = comm.allgather_obj(mine, label="test:replicas")
    seen, ok = {}, True
    for rank_items in everyone:
        for name, box, digest in rank_items:
            ok &= seen.setdefault((name, box), digest) == digest
    collective_assert(comm, ok, "parameter replicas differ")


def check_gcn_losses(comm, case, reference=None):
    """Train ``case`` and compare per-epoch losses with the numpy reference. Collective."""
    graph = case["graph"]
    dims = [graph.num_features] + [case["hidden"]] * (case["layers"] - 1) + [graph.num_classes]
    if reference is None:
        reference = train_reference(graph.adj, graph.features, graph.labels, graph.train_mask,
                                    dims, epochs=case["epochs"], lr=case["lr"],
                                    weight_decay=5e-4, seed=case["seed"])
    ref_losses, ref_ws = reference
    kw = {}
    if case["algo"] == "15d-aware" and case["grid"] is not None:
        kw["c"] = case["grid"][1]
    elif case["algo"] == "3d":
        kw["grid"] = case["grid"]
        kw["shard_weights"] = case.get("shard_weights", True)
        kw["shard_input"] = case.get("shard_input", False)
        kw["permute"] = case.get("permute", "none")
        kw["agg_blocks"] = case.get("agg_blocks", 1)
    root_only = case.get("root_only", True)
    dg = DistGraph.from_graph(graph if (comm.rank == 0 or not root_only) else None, comm,
                              placement_for(case["algo"], **kw), dtype=case["dtype"])
    model = GCN(dg.num_features, case["hidden"], dg.num_classes, layers=case["layers"],
                dropout=0.0, seed=case["seed"], order=case.get("order", "auto"))
    tr = Trainer(model, dg, Adam(model.param_groups(5e-4), lr=case["lr"]))
    losses, ledgers = [], []
    for _ in range(case["epochs"]):
        out = tr.train_epoch()
        losses.append(out["loss"])
        ledgers.append(out["bytes_by_label"])
        replicas_identical(comm, model)
    case["ledgers"] = ledgers
    rtol = case.get("rtol", 1e-9 if case["dtype"] == np.float64 else 1e-4)
    assert_dist_allclose(comm, np.array(losses), np.array(ref_losses), rtol=rtol, atol=rtol,
                         what=f"losses {case['algo']} grid={case['grid']}")
    for conv, w in zip(model.convs, ref_ws):
        got = conv.weight.to_global()
        assert_dist_allclose(comm, got, w, rtol=100 * rtol, atol=100 * rtol, what="weights")
    return losses


def check_planned_3d_events(comm, graph, grid, dims, permute, blocks):
    """One epoch's ledger on every rank equals :func:`spgnn.plan.events.plan_gcn_3d`'s events for
    this rank (op, label, axis, bytes sent and received, messages, in order). Collective."""
    from spgnn.plan.events import plan_gcn_3d

    dg = DistGraph.from_graph(graph if comm.rank == 0 else None, comm,
                              Plexus3D(grid=grid, permute=permute, agg_blocks=blocks),
                              dtype=np.float64)
    model = GCN(dg.num_features, dims[1], dg.num_classes, layers=len(dims) - 1, dropout=0.0,
                seed=1)
    tr = Trainer(model, dg, Adam(model.param_groups(5e-4), lr=0.05))
    tr.train_epoch()                                       # setup (redistributions) first
    with comm.track("epoch") as st:
        tr.train_epoch()
    got = [(e.op, e.label, tuple(e.axis), e.bytes_sent, e.bytes_recv, e.messages)
           for e in st.events if not e.label.startswith("gnn-loss") and e.label != "epoch"]
    plan = plan_gcn_3d(graph.num_nodes, dims, grid, itemsize=8, agg_blocks=blocks)
    r = comm.rank
    want = [(e.op, e.label, e.axis, int(e.sent[r]), int(e.recv[r]), int(e.messages[r]))
            for _, _, e in plan]
    collective_assert(comm, got == want, f"planned 3d events differ from the ledger on grid "
                                         f"{grid} permute={permute} agg_blocks={blocks}")


def check_plexus(comm, graph, base, dims):
    """Double permutation and blocked aggregation on every 3d grid of P. Collective."""
    ref = train_reference(graph.adj, graph.features, graph.labels, graph.train_mask, dims,
                          epochs=base["epochs"], lr=base["lr"], weight_decay=5e-4,
                          seed=base["seed"])
    for algo, grid in cases_for(comm.size):
        if algo != "3d":
            continue
        plain = dict(base, algo=algo, grid=grid)
        plain_losses = check_gcn_losses(comm, plain, ref)
        for permute, blocks in (("double", 1), ("none", 3), ("double", 3)):
            case = dict(base, algo=algo, grid=grid, permute=permute, agg_blocks=blocks)
            losses = check_gcn_losses(comm, case, ref)
            assert_dist_allclose(comm, np.array(losses), np.array(plain_losses), rtol=1e-12,
                                 atol=1e-12, what=f"losses {permute} blocks={blocks} vs plain")
            collective_assert(comm, case["ledgers"] == plain["ledgers"],
                              f"ledger bytes {permute} blocks={blocks} differ from the "
                              f"unblocked run's")
            check_planned_3d_events(comm, graph, grid, dims, permute, blocks)
            if comm.rank == 0:
                print(f"ok plexus {grid} permute={permute} agg_blocks={blocks}", flush=True)


def main():
    from spgnn import Communicator

    parser = argparse.ArgumentParser()
    parser.add_argument("--cora", default="", help="Planetoid folder (empty: skip Cora)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--skip-sbm", action="store_true")
    parser.add_argument("--plexus", action="store_true",
                        help="3d with double permutation and blocked aggregation (issue 26): "
                             "losses equal the reference and the unpermuted run, ledger bytes "
                             "equal the unblocked run's")
    args = parser.parse_args()
    comm = Communicator.world()
    p = comm.size
    graph = sbm_graph()
    base = dict(graph=graph, hidden=6, layers=3, epochs=args.epochs, lr=0.05, seed=1,
                dtype=np.float64)
    dims = [graph.num_features, 6, 6, graph.num_classes]
    ref = None if args.skip_sbm else train_reference(
        graph.adj, graph.features, graph.labels, graph.train_mask, dims, epochs=args.epochs,
        lr=0.05, weight_decay=5e-4, seed=1)
    for algo, grid in ([] if args.skip_sbm else cases_for(p)):
        check_gcn_losses(comm, dict(base, algo=algo, grid=grid), ref)
        if comm.rank == 0:
            print(f"ok sbm {algo} {grid}", flush=True)
    if args.plexus:
        check_plexus(comm, graph, base, dims)
    if args.cora:
        from spgnn.io import load_planetoid

        cora = load_planetoid(args.cora, "cora") if comm.rank == 0 else None
        cora = comm.bcast_obj(cora, root=0)   # the reference runs on every rank
        case = dict(graph=cora, hidden=16, layers=2, epochs=2, lr=0.01, seed=0,
                    dtype=np.float32, rtol=2e-4)
        dims = [cora.num_features, 16, cora.num_classes]
        ref = train_reference(cora.adj, cora.features, cora.labels, cora.train_mask, dims,
                              epochs=2, lr=0.01, weight_decay=5e-4, seed=0)
        for algo, grid in [("1d-aware", None), cases_for(p)[-1]]:
            check_gcn_losses(comm, dict(case, algo=algo, grid=grid), ref)
            if comm.rank == 0:
                print(f"ok cora {algo} {grid}", flush=True)
    comm.barrier()
    if comm.rank == 0:
        print(f"OK gnn_checks {p} ranks", flush=True)


if __name__ == "__main__":
    main()
