"""One GAT training epoch: spgnn's ``GAT`` against PyTorch Geometric's ``GATConv``, side by side.

    python -m spgnn bench gat --threads 2 --repeat 20            # Cora
    python -m spgnn bench gat --graph cora --heads 8 --hidden 8 --json

Both implementations train the same model (Veličković et al.'s Cora GAT, as
PyG's ``examples/gat.py``) in one process, float32, on CPU, with the same
thread count (torch's and Numba's)::

    x = dropout(x, 0.6)
    h = elu(GATConv(in, hidden, heads, dropout=0.6)(x))      # heads concatenated
    h = dropout(h, 0.6)
    out = GATConv(heads·hidden, classes, heads=1, concat=False, dropout=0.6)(h)
    loss = cross_entropy(out[train], y[train]); Adam(lr=0.005, weight_decay=5e-4)

One epoch = zero_grad + forward + loss + backward + Adam step.  The two are
timed **interleaved** (one epoch of each, in turn), so a load change on a
shared machine hits both alike; the report gives each one's median and the
ratio PyG / spgnn of the medians.  spgnn runs on one rank
(:func:`~spgnn.comm.solo_communicator`, ``--algo 1d-aware``), so its epoch
includes the ledger bookkeeping of the distributed code path.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

__all__ = ["run", "main"]


def _spgnn_epoch(graph, hidden, heads, dropout, lr, wd, backend):
    from ..comm import solo_communicator
    from ..gnn import Adam, DistGraph, Trainer
    from ..gnn.gat import GAT

    g = DistGraph.from_graph(graph, solo_communicator(), "1d-aware", dtype=np.float32,
                             backend=backend)
    model = GAT(g.num_features, hidden, g.num_classes, heads=heads, dropout=dropout, seed=0)
    tr = Trainer(model, g, Adam(model.param_groups(wd), lr=lr))
    return lambda: tr.train_epoch()["loss"]


def _pyg_epoch(graph, hidden, heads, dropout, lr, wd):
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GATConv

    from ..io.preprocess import row_normalize_features

    adj = graph.adj.tocoo()
    ei = torch.from_numpy(np.stack([adj.col, adj.row]).astype(np.int64))   # source -> target
    feats = graph.features
    feats = feats.toarray() if hasattr(feats, "toarray") else feats
    x = torch.from_numpy(np.ascontiguousarray(row_normalize_features(feats, np.float32)))
    y = torch.from_numpy(graph.labels.astype(np.int64))
    mask = torch.from_numpy(graph.train_mask)

    class Net(torch.nn.Module):
        def __init__(self, d, c):
            super().__init__()
            self.conv1 = GATConv(d, hidden, heads=heads, dropout=dropout)
            self.conv2 = GATConv(hidden * heads, c, heads=1, concat=False, dropout=dropout)

        def forward(self, x, ei):
            x = F.dropout(x, p=dropout, training=self.training)
            x = F.elu(self.conv1(x, ei))
            x = F.dropout(x, p=dropout, training=self.training)
            return self.conv2(x, ei)

    model = Net(x.shape[1], int(y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=wd)
    model.train()

    def epoch():
        opt.zero_grad()
        out = model(x, ei)
        loss = F.cross_entropy(out[mask], y[mask])
        loss.backward()
        opt.step()
        return float(loss.detach())

    return epoch


def run(graph_name="cora", *, hidden=8, heads=8, dropout=0.6, lr=0.005, wd=5e-4, threads=2,
        repeat=20, warmup=3, backend="numba"):
    """Time both implementations interleaved; return a dict with medians and the ratio."""
    import numba
    import torch

    from ..io import load_graph

    graph = load_graph(graph_name).without_self_loops()
    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    fns = {"spgnn": _spgnn_epoch(graph, hidden, heads, dropout, lr, wd, backend),
           "pyg": _pyg_epoch(graph, hidden, heads, dropout, lr, wd)}
    times = {k: [] for k in fns}
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"graph": graph_name, "n": graph.num_nodes, "edges": int(graph.adj.nnz),
            "hidden": hidden, "heads": heads, "threads": threads, "repeat": repeat,
            "median_s": med, "min_s": {k: min(v) for k, v in times.items()},
            "ratio_pyg_over_spgnn": med["pyg"] / med["spgnn"],
            "torch": torch.__version__}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graph", default="cora")
    p.add_argument("--hidden", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--backend", default="numba")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    r = run(a.graph, hidden=a.hidden, heads=a.heads, threads=a.threads, repeat=a.repeat,
            warmup=a.warmup, backend=a.backend)
    if a.json:
        print(json.dumps(r))
    else:
        print(f"GAT epoch on {r['graph']} (n={r['n']}, {r['heads']} heads x {r['hidden']}, "
              f"{r['threads']} threads, median of {r['repeat']} interleaved epochs)")
        for k, v in r["median_s"].items():
            print(f"  {k:6s} {v * 1e3:8.2f} ms  (min {r['min_s'][k] * 1e3:.2f} ms)")
        print(f"  PyG / spgnn = {r['ratio_pyg_over_spgnn']:.2f}x")


if __name__ == "__main__":
    main()
