"""GraphSAGE neighbour sampling: spgnn bulk sampling vs PyG ``NeighborLoader`` (CPU).

For ``snap_ego_twitter`` and ``snap_soc_slashdot0902`` (symmetrised,
self-loops dropped, CSR), fanouts ``15,10,5`` and batch size 1024, one
*pass* = every vertex once as a seed, in a fresh random order, cut into
``ceil(n / batch)`` seed batches (the last one short), exactly what
``NeighborLoader(..., shuffle=True)`` iterates in one epoch.  Measured in the
same process with the same thread count:

* ``spgnn-unique-b16`` / ``-b64``: ``GraphSAGESampler(fanouts,
  frontier="unique")`` -- PyG/DGL-style de-duplicated blocks -- sampling
  16 / 64 seed batches per ``sample`` call (bulk sampling);
* ``spgnn-tree-b16``: ``frontier="tree"`` (the paper's shapes, no
  de-duplication), for reference only;
* ``pyg``: ``NeighborLoader(Data(edge_index, num_nodes=n),
  num_neighbors=fanouts, batch_size=batch, shuffle=True)`` iterated over one
  epoch (``num_workers=0``; pyg-lib when installed, else torch-sparse).

**Sampled edges** = the number of (target, neighbour) pairs the sampler
returns for the batch, i.e. the edges of the sampled blocks / subgraph:
``BulkSample.num_edges`` (sum over hops of ``block.adj.nnz``) for spgnn and
``data.edge_index.size(1)`` for PyG (equal to ``sum(data.num_sampled_edges)``
when pyg-lib reports it; checked).  Both count one edge per neighbour draw,
at most ``fanout[t]`` per target row and hop.  The two samplers do NOT draw
the same edges per batch: PyG samples at hop ``t`` only the vertices first
reached at hop ``t-1``, whereas spgnn's unique blocks (like DGL's) sample
every row of the hop, including the targets of earlier hops, so spgnn
returns more edges per batch (both numbers are printed).  ``batches/s`` is
the per-pass rate independent of that choice, and ``x PyG (batches)`` is the
conservative speed-up (spgnn does more work per batch).

Timing: ``compile_s`` is the first spgnn ``sample`` call of the process on
one batch (numba compile, or loading the on-disk cache when the kernels were
compiled before); then one untimed warm-up pass per method (``first_s``),
then ``--repeat`` timed passes with the
methods interleaved (the order rotates each repetition); the median pass is
reported (and the min).  ``torch.set_num_threads(t)`` and
``numba.set_num_threads(t)`` with ``--threads t``.  Graph loading, the
``LocalGraph`` / ``Data`` construction and the loader's creation are not
timed.  The load average before and after is printed.

Usage::

    python -m spgnn bench sampling [--threads 2] [--repeat 5] [--graphs twitter,slashdot]
                                   [--graph NAME ...] [--bulks 16,64] [--batches N] [--json]
                                   [--plot FILE]

PyG's ``NeighborLoader`` needs ``pyg-lib`` or ``torch-sparse``
(benchmark-only; for torch 2.13: ``pip install --no-build-isolation
torch-scatter==2.1.2 torch-sparse==0.6.18``); without them the script says
so and reports spgnn alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time


import numpy as np
import scipy.sparse as sp

from spgnn.sampling import GraphSAGESampler, LocalGraph

from spgnn.io import load_graph

from ._common import Case, save_bar_figure
from ._common import thread_env as _thread_env

#: Short names of the default graphs; any dataset name, file or generator spec works too.
GRAPHS = {"twitter": "ego-twitter", "slashdot": "soc-slashdot0902"}


def thread_env(argv):
    """NUMBA_NUM_THREADS at least the core count (``numba.set_num_threads`` then picks
    ``--threads``), OpenMP and BLAS at ``--threads``."""
    return _thread_env(argv, numba_at_least_cores=True)


def load(name) -> sp.csr_array:
    """Symmetrised, loop-free, sorted CSR pattern (int64 indices) of a benchmark graph."""
    g = load_graph(GRAPHS.get(name, name)).symmetrize().without_self_loops()
    a = sp.csr_array(g.adj, dtype=np.float64)
    a.sum_duplicates()
    a.sort_indices()
    a.data[:] = 1.0
    return a


def seed_batches(n, batch, rng, num_batches=None):
    """One shuffled pass: ``ceil(n/batch)`` seed batches (the last short), or the first N."""
    perm = rng.permutation(n).astype(np.int64)
    out = [perm[i:i + batch] for i in range(0, n, batch)]
    return out if num_batches is None else out[:num_batches]


# --------------------------------------------------------------------------- #
# spgnn
# --------------------------------------------------------------------------- #

def spgnn_pass(sampler, g, batches, bulk, epoch):
    """Sample every batch, ``bulk`` per call; returns the sampled edge count."""
    edges = 0
    for lo in range(0, len(batches), bulk):
        part = batches[lo:lo + bulk]
        out = sampler.sample(g, part, minibatch_ids=np.arange(lo, lo + len(part)), epoch=epoch)
        edges += out.num_edges
    return edges


# --------------------------------------------------------------------------- #
# PyG
# --------------------------------------------------------------------------- #

def pyg_status():
    """``(ok, message)``: whether NeighborLoader has a sampling backend."""
    try:
        import torch                                 # noqa: F401
        import torch_geometric
        import torch_geometric.typing as tgt
    except ImportError as exc:
        return False, f"torch / torch_geometric not importable ({exc})"
    if getattr(tgt, "WITH_PYG_LIB", False):
        return True, f"torch_geometric {torch_geometric.__version__} with pyg-lib"
    if getattr(tgt, "WITH_TORCH_SPARSE", False):
        import torch_sparse
        return True, (f"torch_geometric {torch_geometric.__version__} with torch-sparse "
                      f"{torch_sparse.__version__} (no pyg-lib)")
    return False, ("NeighborLoader needs pyg-lib or torch-sparse, and neither is installed "
                   "(for torch 2.13: pip install --no-build-isolation torch-scatter==2.1.2 "
                   "torch-sparse==0.6.18)")


def make_loader(a, fanouts, batch, num_batches=None):
    import torch
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader

    coo = a.tocoo()
    # row v of A lists v's neighbours; PyG samples the sources j of edges j -> v
    edge_index = torch.from_numpy(np.vstack([coo.col, coo.row]).astype(np.int64))
    data = Data(edge_index=edge_index, num_nodes=a.shape[0])
    n = a.shape[0]
    input_nodes = None
    if num_batches is not None:
        # a fixed number of batches: that many seeds, shuffled each epoch
        input_nodes = torch.from_numpy(np.random.default_rng(0).permutation(n)[
            :min(n, num_batches * batch)].astype(np.int64))
    return NeighborLoader(data, num_neighbors=list(fanouts), batch_size=batch, shuffle=True,
                          input_nodes=input_nodes, num_workers=0)


def pyg_pass(loader):
    """Iterate one epoch; returns ``(edges, batches)``."""
    edges = nb = 0
    for d in loader:
        e = int(d.edge_index.size(1))
        ns = getattr(d, "num_sampled_edges", None)
        if ns is not None and int(sum(ns)) != e:
            raise AssertionError(f"PyG: sum(num_sampled_edges)={int(sum(ns))} != "
                                 f"edge_index.size(1)={e}")
        edges += e
        nb += 1
    return edges, nb


# --------------------------------------------------------------------------- #

def run_graph(name, args, log):
    a = load(name)
    n = a.shape[0]
    g = LocalGraph(a)
    fan = tuple(args.fanouts)
    methods = {}
    for bulk in args.bulks:
        methods[f"spgnn-unique-b{bulk}"] = ("spgnn", GraphSAGESampler(fan, frontier="unique"), bulk)
    if not args.no_tree:
        methods[f"spgnn-tree-b{args.bulks[0]}"] = ("spgnn", GraphSAGESampler(fan, frontier="tree"),
                                                   args.bulks[0])
    pyg_ok, pyg_msg = pyg_status() if not args.no_pyg else (False, "--no-pyg")
    loader = None
    if pyg_ok:
        try:
            loader = make_loader(a, fan, args.batch, args.batches)
        except Exception as exc:                     # noqa: BLE001 - report and go on
            pyg_ok, pyg_msg = False, f"NeighborLoader failed: {type(exc).__name__}: {exc}"
    if loader is not None:
        methods["pyg"] = ("pyg", loader, None)
    log(f"# {name}: n={n} nnz={a.nnz} (undirected edges {a.nnz // 2}); PyG: {pyg_msg}")

    nbatches = len(seed_batches(n, args.batch, np.random.default_rng(0), args.batches))
    # the process's first spgnn call on one batch: numba compile (or on-disk cache load)
    t0 = time.perf_counter()
    GraphSAGESampler(fan, frontier="unique").sample(g, [np.arange(min(n, args.batch))])
    compile_s = time.perf_counter() - t0
    first, times, edges = {}, {m: [] for m in methods}, {m: [] for m in methods}

    def one(m, rep):
        kind, obj, bulk = methods[m]
        t0 = time.perf_counter()
        if kind == "spgnn":
            batches = seed_batches(n, args.batch, np.random.default_rng(1000 + rep), args.batches)
            t0 = time.perf_counter()                 # the permutation is not sampling
            e = spgnn_pass(obj, g, batches, bulk, epoch=rep)
            nb = len(batches)
        else:
            e, nb = pyg_pass(obj)
        dt = time.perf_counter() - t0
        if nb != nbatches:
            raise AssertionError(f"{m}: {nb} batches, expected {nbatches}")
        return dt, e

    for m in methods:                                # warm-up (compile / first call)
        first[m], _ = one(m, 999)
    names = list(methods)
    for rep in range(args.repeat):
        order = names[rep % len(names):] + names[:rep % len(names)]
        for m in order:
            dt, e = one(m, rep)
            times[m].append(dt)
            edges[m].append(e)

    rows = []
    for m in names:
        med = statistics.median(times[m])
        e = statistics.median(edges[m])
        rows.append({"graph": name, "n": n, "nnz": int(a.nnz), "method": m,
                     "threads": args.threads, "batch": args.batch, "fanouts": list(fan),
                     "batches": nbatches, "repeat": args.repeat,
                     "compile_s": compile_s, "median_s": med, "min_s": min(times[m]),
                     "max_s": max(times[m]),
                     "first_s": first[m],
                     "edges_per_pass": int(e), "edges_per_batch": e / nbatches,
                     "medges_per_s": e / med / 1e6, "batches_per_s": nbatches / med})
    if "pyg" in methods:
        base = next(r for r in rows if r["method"] == "pyg")
        for r in rows:
            r["x_pyg_edges"] = r["medges_per_s"] / base["medges_per_s"]
            r["x_pyg_batches"] = r["batches_per_s"] / base["batches_per_s"]
    return rows, pyg_msg


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--graphs", default="twitter,slashdot",
                   help="comma list: twitter, slashdot, or any dataset name, file or spec")
    p.add_argument("--graph", action="append", default=None, metavar="SPEC",
                   help="a graph to run (repeatable; replaces --graphs)")
    p.add_argument("--plot", default=None, metavar="FILE", help="write a bar chart")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--fanouts", default="15,10,5")
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--bulks", default="16,64", help="spgnn minibatches per sample() call")
    p.add_argument("--batches", type=int, default=None,
                   help="a fixed number of seed batches per pass (default: a full pass)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--no-tree", action="store_true", help="skip the tree-mode reference")
    p.add_argument("--no-pyg", action="store_true")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    args = p.parse_args(argv)
    args.fanouts = [int(x) for x in args.fanouts.split(",")]
    args.bulks = [int(x) for x in args.bulks.split(",")]

    import numba
    numba.set_num_threads(args.threads)
    try:
        import torch
        torch.set_num_threads(args.threads)
        torch_v = torch.__version__
    except ImportError:
        torch_v = None

    def log(msg):
        print(msg, file=sys.stderr if args.json else sys.stdout, flush=True)

    load0 = os.getloadavg()
    all_rows, msgs = [], {}
    for name in (args.graph or args.graphs.split(",")):
        rows, msgs[name] = run_graph(name, args, log)
        all_rows += rows
    load1 = os.getloadavg()
    import spgnn
    meta = {"machine": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "python": platform.python_version(), "numpy": np.__version__,
            "numba": numba.__version__, "torch": torch_v, "spgnn": spgnn.__version__,
            "pyg": msgs, "threads": args.threads, "loadavg_before": load0,
            "loadavg_after": load1, "time_utc": time.strftime("%Y-%m-%d %H:%M:%S",
                                                              time.gmtime())}
    if args.plot:
        save_bar_figure(plot_cases(all_rows), args.plot,
                        title=f"one sampling pass (every vertex a seed once), "
                              f"{args.threads} thread(s)", reference=all_rows[0]["method"])
        log(f"figure written to {args.plot}")
    if args.json:
        print(json.dumps({"meta": meta}))
        for r in all_rows:
            print(json.dumps(r))
        return
    print(f"\n{json.dumps(meta)}\n")
    has = any("x_pyg_edges" in r for r in all_rows)
    head = ("| graph | method | pass s (median, min) | edges/batch | M edges/s | batches/s |"
            + (" × PyG (edges/s) | × PyG (batches/s) |" if has else "") + " first call s |")
    print(head)
    print("| --- | --- | ---: | ---: | ---: | ---: |" + (" ---: | ---: |" if has else "") + " ---: |")
    for r in all_rows:
        line = (f"| {r['graph']} | {r['method']} | {r['median_s']:.3f} ({r['min_s']:.3f}) | "
                f"{r['edges_per_batch']:,.0f} | {r['medges_per_s']:.2f} | "
                f"{r['batches_per_s']:.1f} |")
        if has:
            line += (f" {r['x_pyg_edges']:.2f} | {r['x_pyg_batches']:.2f} |"
                     if "x_pyg_edges" in r else " | |")
        print(line + f" {r['first_s']:.2f} |")


def plot_cases(rows):
    """The figure's cases: one per graph, one bar per method (seconds per pass)."""
    by_graph = {}
    for r in rows:
        by_graph.setdefault(r["graph"], {})[r["method"]] = (r["median_s"], r["min_s"],
                                                             r.get("max_s", r["median_s"]))
    return [Case(g, t) for g, t in by_graph.items()]


if __name__ == "__main__":
    main()
