"""One GCN training epoch: spgnn against PyTorch Geometric, single process, on CPU.

    python -m spgnn bench gcn --threads 2
    python -m spgnn bench gcn --graphs cora --hidden 16 --repeat 20 --json --plot gcn.png
    python -m spgnn bench gcn --graph ego-facebook --features degree --labels random:4

For every graph (Cora with its Planetoid split, musae_facebook with a
stratified 60/20/20 split, an R-MAT graph of about 1M undirected edges) and
hidden size (16, 256) it times the same 2-layer GCN (the model of
:mod:`spgnn._benchmarks.gcn_pyg`: input dropout 0.5, ``GCNConv`` with bias, ReLU,
dropout 0.5, ``GCNConv`` with bias, cross-entropy on the train mask, Adam
lr 0.01 with weight decay 5e-4 on the first layer) as

* ``pyg-edge_index`` and ``pyg-sparse``: :func:`spgnn._benchmarks.gcn_pyg.pyg_epoch_seconds`
  (PyG's ``GCNConv`` fed an ``edge_index`` or a ``torch.sparse_csr``
  adjacency; "PyG best" is the faster);
* ``spgnn``: :func:`spgnn_epoch_seconds`, ``spgnn.gnn``'s ``GCN`` and
  ``Trainer.train_epoch`` on one rank (``1d-aware``, float32).

Timing rule (both sides, as :mod:`spgnn.bench`): ``warmup`` untimed epochs,
then the median of ``repeat`` timed epochs.  spgnn's first epoch, which loads
(or compiles) the Numba kernels, is timed apart and reported as
``compile_or_setup_seconds`` together with the graph setup, never in the
median.  Threads: ``--threads`` for torch (``torch.set_num_threads``), Numba
(``numba.set_num_threads``) and BLAS (the ``*_NUM_THREADS`` variables, set
before numpy is imported).  When torch or torch_geometric cannot be imported
the script still times spgnn and says that PyG is missing.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from spgnn.bench import machine

from ._common import Case as PlotCase, save_bar_figure, write_record
from ._common import thread_env as _thread_env
from .gcn_pyg import (DROPOUT, GRAPHS, HIDDEN, LR, WEIGHT_DECAY, _check_inputs, load_case,
                      pyg_epoch_seconds)


def thread_env(argv):
    """BLAS and OpenMP threads from ``--threads`` (numba's pool keeps its default size)."""
    env = _thread_env(argv)
    del env["NUMBA_NUM_THREADS"]
    return env


def _pyg_missing():
    """Why PyG cannot run here, or None.  Looks without importing torch (see :func:`main`)."""
    import importlib.util

    for mod in ("torch", "torch_geometric"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed"
    return None


def spgnn_epoch_seconds(adj, features, labels, train_mask, hidden, threads, repeat, warmup, *,
                        input_dropout=True) -> dict:
    """Seconds per training epoch of the same GCN on ``spgnn.gnn``, one process.

    Parameters
    ----------
    adj : scipy.sparse.csr_array (n, n)
        Symmetric adjacency without self-loops (``DistGraph`` adds ``I``).
    features : ndarray float32 (n, d)
        Raw features: ``DistGraph`` keeps them (``normalize_features=False``,
        as PyG's benchmark does not normalise either) and stores a CSR copy
        when they are sparse.
    labels, train_mask : ndarray (n,)
    hidden, threads, repeat, warmup : int
        As :func:`spgnn._benchmarks.gcn_pyg.pyg_epoch_seconds`.
    input_dropout : bool
        Dropout on the input features (the model's first layer).

    Returns
    -------
    dict
        ``median``, ``min`` (seconds per epoch after ``warmup`` epochs),
        ``times``, ``compile_or_setup_seconds`` (graph preparation, model
        placement and the first epoch, which loads or compiles the Numba
        kernels), ``first_epoch``, ``final_loss`` and ``sparse_features``.
    """
    import numba

    import spgnn
    from spgnn.gnn import GCN, Adam, DistGraph, Dropout, GCNConv, ReLU, Sequential, Trainer
    from spgnn.io import Graph

    _check_inputs(adj, features, labels, train_mask, hidden, threads, repeat, warmup)
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        comm = spgnn.Communicator.world()
        t0 = time.perf_counter()
        graph = Graph(adj=adj, features=features, labels=np.asarray(labels),
                      train_mask=np.asarray(train_mask), name="bench")
        dg = DistGraph.from_graph(graph, comm, "1d-aware", dtype=np.float32,
                                  normalize_features=False)
        c = int(np.max(labels)) + 1
        if input_dropout:
            model = GCN(dg.num_features, hidden, c, dropout=DROPOUT, seed=0, bias=True)
        else:   # dropout on the hidden layer only
            model = Sequential(GCNConv(dg.num_features, hidden, bias=True, seed=0, index=0),
                               ReLU(), Dropout(DROPOUT),
                               GCNConv(hidden, c, bias=True, seed=0, index=1))
            model.seed = 0
        first = model.parameters()[0]
        rest = [p for p in model.parameters() if p is not first]
        opt = Adam([{"params": [first], "weight_decay": WEIGHT_DECAY},
                    {"params": rest, "weight_decay": 0.0}], lr=LR)
        trainer = Trainer(model, dg, opt)
        t1 = time.perf_counter()
        trainer.train_epoch()
        first_epoch = time.perf_counter() - t1
        setup = time.perf_counter() - t0
        from spgnn.bench import time_collective

        times = []

        def epoch():
            t = time.perf_counter()
            trainer.train_epoch()
            times.append(time.perf_counter() - t)

        median, fastest = time_collective(comm, epoch, repeat=repeat, warmup=max(0, warmup - 1))
        loss = trainer.evaluate()["train_loss"]
    finally:
        numba.set_num_threads(before)
    return {"median": median, "min": fastest, "times": times[-repeat:],
            "first_epoch": first_epoch, "compile_or_setup_seconds": setup,
            "final_loss": loss, "sparse_features": type(dg.features).__name__ ==
            "SparseBackedMatrix"}


def _fmt(v):
    return "-" if v is None else f"{v * 1e3:.1f}"


def print_table(rows, threads):
    print(f"ms per training epoch (median), threads={threads}, one process, float32")
    print(f"{'graph':<14}{'n':>8}{'nnz':>10}{'hidden':>7}{'pyg-edge_index':>16}{'pyg-sparse':>12}"
          f"{'PyG best':>10}{'spgnn':>9}{'speed-up':>10}{'spgnn first':>13}")
    for r in rows:
        res = r["results"]
        pyg = [res[k]["median"] for k in ("pyg-edge_index", "pyg-sparse") if k in res]
        best = min(pyg) if pyg else None
        s = res["spgnn"]["median"]
        ratio = f"{best / s:.1f}x" if best else "no PyG"
        print(f"{r['graph']:<14}{r['n']:>8}{r['nnz']:>10}{r['hidden']:>7}"
              f"{_fmt(res.get('pyg-edge_index', {}).get('median')):>16}"
              f"{_fmt(res.get('pyg-sparse', {}).get('median')):>12}{_fmt(best):>10}"
              f"{_fmt(s):>9}{ratio:>10}{_fmt(res['spgnn']['first_epoch']):>13}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", default=",".join(GRAPHS), help=f"subset of {','.join(GRAPHS)}")
    ap.add_argument("--hidden", default=",".join(map(str, HIDDEN)))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rmat", default="17:8", help="R-MAT SCALE:EDGE_FACTOR")
    ap.add_argument("--graph", action="append", default=None, metavar="SPEC",
                    help="a graph to run (dataset name, file or generator spec; repeatable; "
                         "replaces the default --graphs)")
    ap.add_argument("--features", default=None, metavar="SPEC",
                    help="synthetic features (random:F, degree, onehot) for the graphs")
    ap.add_argument("--labels", default=None, metavar="SPEC",
                    help="synthetic labels (random:C) for the graphs")
    ap.add_argument("--no-pyg", action="store_true", help="time spgnn only")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--plot", default=None, metavar="FILE", help="write a bar chart")
    ap.add_argument("--out", default=None, help="also write the JSON record here")
    args = ap.parse_args(argv)
    if args.threads < 1:
        ap.error("--threads must be >= 1")
    missing = _pyg_missing()
    use_pyg = missing is None and not args.no_pyg
    if missing:
        print(f"PyG is missing ({missing}); timing spgnn only "
              f"(pip install torch==2.13.0 torch_geometric)", file=sys.stderr)
    import warnings

    warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")
    cases = []
    for name in (args.graph or args.graphs.split(",")):
        try:
            cases.append(load_case(name, args.rmat, features=args.features, labels=args.labels))
        except OSError as e:
            print(f"skipping {name}: {e}", file=sys.stderr)
    rows = [dict(case.describe(), hidden=int(h), threads=args.threads, results={}, case=case)
            for case in cases for h in args.hidden.split(",")]
    # spgnn first, for every row, then PyG: torch's OpenMP pool keeps spinning after
    # each call and would steal the cores from Numba's (also OpenMP) threads.
    impls = [("spgnn", spgnn_epoch_seconds)]
    if use_pyg:
        impls += [("pyg-edge_index", lambda *a, **k: pyg_epoch_seconds(
                      *a, adjacency="edge_index", **k)),
                  ("pyg-sparse", lambda *a, **k: pyg_epoch_seconds(*a, adjacency="sparse", **k))]
    for impl, fn in impls:
        for row in rows:
            case = row["case"]
            r = fn(case.adj, case.features, case.labels, case.train_mask, row["hidden"],
                   args.threads, args.repeat, args.warmup)
            row["results"][impl] = r
            print(f"  {case.name} hidden={row['hidden']} {impl}: {r['median'] * 1e3:.2f} ms "
                  f"(min {r['min'] * 1e3:.2f}, first {r['first_epoch'] * 1e3:.1f}, "
                  f"setup {r['compile_or_setup_seconds'] * 1e3:.0f}, "
                  f"loss {r['final_loss']:.3f})", file=sys.stderr, flush=True)
    for row in rows:
        del row["case"]
    record = {"machine": machine(), "threads": args.threads, "repeat": args.repeat,
              "warmup": args.warmup, "pyg": missing or ("skipped" if args.no_pyg else "available"),
              "rows": rows}
    write_record(record, args.out, args.json, lambda: print_table(rows, args.threads))
    if args.plot:
        save_bar_figure(plot_cases(record), args.plot,
                        title=f"one GCN training epoch, {args.threads} thread(s)")
        print(f"figure written to {args.plot}", file=sys.stderr)
    return record


def plot_cases(record):
    """The figure's cases: one per (graph, hidden), one bar per implementation."""
    return [PlotCase(f"{r['graph']} h={r['hidden']}",
                     {impl: (res["median"], min(res["times"] or [res["min"]]),
                             max(res["times"] or [res["median"]]))
                      for impl, res in r["results"].items()})
            for r in record["rows"]]


if __name__ == "__main__":
    main()
