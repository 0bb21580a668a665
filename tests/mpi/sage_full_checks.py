"""``--model sage-full`` (paper 004's GraphSAGE-mean + LayerNorm) checks, loopback and mpiexec.

``train_sage_full(comm, ...)`` trains :class:`~spgnn.gnn.FullBatchSAGE` on
a small SBM graph (float64, rank 0 holds it) with the given exchange
options; ``expected_epoch_bytes(...)`` is the ledger of one training epoch
from the wire-format formulas and an independent message count
(:func:`~spgnn.core.hybrid.predict_messages` on the global ``D⁻¹A`` and
``(D⁻¹A)ᵀ``): forward exchanges carry every convolution's *input* width,
backward exchanges every convolution's but the first (whose input, the
features, needs no gradient); uncoded rows are ``8·n·F`` bytes (float64), int-``b``
codes ``ceil(n_p·F·b/8)`` per peer (feature-axis packing) plus ``4·n_p`` bf16 parameter bytes.

Run under MPI: ``mpiexec -n P python -m mpi4py tests/mpi/sage_full_checks.py``:
with ``--quantize none`` the per-epoch losses of post, pre and hybrid
(1d-aware), plain 1d and 15d-aware agree (float64, dropout on: masks are
counter-based), the bytes of every label are exact (also for hybrid int2),
and rank 0 prints ``LOSSES <json>`` for the caller to compare across rank
counts.
"""

import argparse
import json

import numpy as np
import scipy.sparse as sp

from spgnn.core.hybrid import predict_messages
from spgnn.gnn import Adam, DistGraph, Exchange, FullBatchSAGE, Row1D, Trainer, placement_for
from spgnn.gnn.label_prop import LabelPropagation
from spgnn.gnn.sources import FullGraph
from spgnn.io import Graph, sbm
from spgnn.testing.asserts import assert_dist_allclose, collective_assert

HIDDEN, LAYERS, LR, SEED = 6, 3, 0.05, 1


def sage_full_graph(n=60, f=7, c=3, seed=2):
    adj, x, y = sbm(n, c, avg_degree=5, num_features=f, seed=seed)
    return Graph(adj=adj, features=x, labels=y).random_split(0.5, 0.2, seed=seed)


def train_sage_full(comm, graph, aggregation="post", quantize="none", label_prop=0.0, epochs=3,
                    dropout=0.5, algorithm="1d-aware", replication=1):
    """``(records, trainer)`` of ``epochs`` training epochs. Collective."""
    if algorithm == "1d-aware":
        placement = Row1D(exchange=Exchange(aggregation, quantize, "stochastic", seed=3))
    else:
        placement = placement_for(algorithm, c=replication if algorithm.startswith("15d") else None)
    dg = DistGraph.from_graph(graph if comm.rank == 0 else None, comm, placement,
                              dtype=np.float64, backend="numba", adjacency="mean",
                              normalize_features=False)
    src = FullGraph(dg, LabelPropagation(dg, label_prop, seed=1) if label_prop else None)
    model = FullBatchSAGE(src.num_features, HIDDEN, dg.num_classes, layers=LAYERS,
                          dropout=dropout, seed=SEED)
    opt = Adam(model.param_groups(5e-4), lr=LR)
    tr = Trainer(model, src, opt)
    return [tr.train_epoch() for _ in range(epochs)], tr


def mean_pattern(adj):
    """``D⁻¹A`` of the symmetrised graph without self-loops (rows: destinations), independently."""
    a = sp.csr_array(adj, dtype=np.float64)
    s = ((a + a.T) != 0).astype(np.float64).tolil()
    s.setdiag(0)
    s = sp.csr_array(s)
    s.eliminate_zeros()
    deg = np.maximum(np.asarray(s.sum(axis=1)).ravel(), 1)
    return sp.csr_array(sp.diags_array(1.0 / deg) @ s)


def expected_epoch_bytes(graph, p, aggregation, quantize, num_features):
    """Ledger label -> bytes all ranks send in one training epoch of :func:`train_sage_full`.

    Exchanges and the gradient all-reduces (``P > 1``); the loss all-reduce
    is left out (the model does not change it).
    """
    n = graph.num_nodes
    offsets = np.array([(n * r) // p for r in range(p + 1)])
    a = mean_pattern(graph.adj)
    fwd = predict_messages(a, offsets, aggregation)          # [r, s]: s sends to r
    bwd = predict_messages(sp.csr_array(a.T), offsets, aggregation)
    dims = [num_features] + [HIDDEN] * (LAYERS - 1) + [graph.num_classes]
    widths = [(fwd, dims[k]) for k in range(LAYERS)] + [(bwd, dims[k]) for k in range(1, LAYERS)]
    out = {}

    def add(label, value):
        if value:
            out[label] = out.get(label, 0) + int(value)

    if quantize == "none":
        label = "spmm-1d-aware:exchange" if aggregation == "post" else \
            f"spmm-1d-{aggregation}:exchange"
        for msgs, f in widths:
            add(label, 8 * int(msgs.sum()) * f)              # float64 rows
    else:
        bits = {"int8": 8, "int4": 4, "int2": 2}[quantize]
        per = 8 // bits
        for msgs, f in widths:
            add(f"spmm-1d-{aggregation}:exchange:data", int((-(-(msgs * f) // per)).sum()))
            add(f"spmm-1d-{aggregation}:exchange:params", 4 * int(msgs.sum()))
    if p > 1:
        w = sum(dims[k] * dims[k + 1] * 2 for k in range(LAYERS))
        b = sum(dims[1:]) + 2 * HIDDEN * (LAYERS - 1)          # conv biases, LayerNorm γ and β
        # the ledger's ring model: 2·(P-1)·n elements per all-reduce over all ranks
        out["gnn:grad-allreduce-dW"] = 2 * (p - 1) * 8 * w     # float64
        out["gnn:grad-allreduce-db"] = 2 * (p - 1) * 8 * b
    return out


def check_epoch_bytes(comm, graph, aggregation, quantize, label_prop=0.0):
    """The summed ``bytes_by_label`` of a training epoch equals :func:`expected_epoch_bytes`."""
    recs, tr = train_sage_full(comm, graph, aggregation, quantize, label_prop, epochs=2)
    got = {}
    for part in comm.allgather_obj(recs[-1]["bytes_by_label"], label="test:bytes"):
        for k, v in part.items():
            got[k] = got.get(k, 0) + v
    got.pop("gnn-loss:total", None)
    got = {k: v for k, v in got.items() if v}         # one rank: labels of empty exchanges
    want = expected_epoch_bytes(graph, comm.size, aggregation, quantize, tr.source.num_features)
    collective_assert(comm, got == want, f"bytes by label {got} != {want}")
    return got


def main():
    from spgnn import Communicator

    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    comm = Communicator.world()
    p = comm.size
    graph = sage_full_graph()
    losses = {}
    for agg in ("post", "pre", "hybrid"):
        recs, _ = train_sage_full(comm, graph, agg, epochs=args.epochs)
        losses[agg] = [r["loss"] for r in recs]
    losses["1d"] = [r["loss"] for r in train_sage_full(comm, graph, algorithm="1d",
                                                       epochs=args.epochs)[0]]
    if p % 2 == 0:
        recs, _ = train_sage_full(comm, graph, algorithm="15d-aware", replication=2,
                                  epochs=args.epochs)
        losses["15d-aware c=2"] = [r["loss"] for r in recs]
    for name, got in losses.items():
        assert_dist_allclose(comm, np.array(got), np.array(losses["post"]), rtol=1e-9,
                             atol=1e-12, what=f"sage-full losses {name} vs post")
    for agg, q in (("post", "none"), ("hybrid", "none"), ("pre", "none"), ("hybrid", "int2"),
                   ("post", "int4")):
        check_epoch_bytes(comm, graph, agg, q)
    if comm.rank == 0:
        print("LOSSES " + json.dumps(losses["post"]), flush=True)
        print(f"OK sage_full_checks {p} ranks", flush=True)


if __name__ == "__main__":
    main()
