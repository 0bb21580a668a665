"""Communication reduction of full-graph training (paper 004): bytes, accuracy, planner, codec speed.

    python -m spgnn bench comm_reduction accuracy --datasets citeseer --ranks 4 --seeds 3
    python -m spgnn bench comm_reduction accuracy --model sage-full --variants fp32+lp int2+lp
    python -m spgnn bench comm_reduction bytes --datasets citeseer facebook --ranks 4 8
    python -m spgnn bench comm_reduction planner --ranks 16 64 256
    python -m spgnn bench comm_reduction codec
    python -m spgnn bench comm_reduction plot          # docs/figures/comm_reduction.png

``accuracy`` and ``bytes`` run the training command itself
(``mpiexec -n P python -m spgnn train --graph ... --algo 1d-aware --partition metis
--aggregation A --quantize Q --label-prop R --json``), single-threaded ranks,
and read ``test_acc`` and ``bytes_per_epoch_by_label`` from its JSON.
``planner`` counts, without running anything distributed, the message rows
every ordered rank pair exchanges under post, pre and hybrid aggregation
(:func:`spgnn.core.hybrid.predict_messages`) for a METIS-free contiguous
split of the SNAP graphs.  ``codec`` times the int2/int4/int8 encode and
decode kernels on one thread against a numpy triad ``a = b + s·c`` of the
same bytes.  Results are appended as JSON lines to
``benchmarks/results/comm_reduction.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from spgnn.testing.data import find_shared_data
from spgnn.testing.mpi import SINGLE_THREAD_ENV, find_mpiexec

from ._common import ROOT

OUT = ROOT / "benchmarks" / "results" / "comm_reduction.jsonl"
DATASETS = {
    "citeseer": ["planetoid", "--name", "citeseer"],
    "facebook": ["musae_facebook", "--split", "0.6:0.2", "--split-seed", "0"],
}
SNAP = ["snap_email_enron/email-Enron.txt.gz", "snap_facebook_combined/facebook_combined.txt.gz",
        "snap_soc_slashdot0902/soc-Slashdot0902.txt.gz"]


def record(kind, **fields):
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with open(OUT, "a") as f:
        f.write(json.dumps(dict(kind=kind, **fields)) + "\n")
    print(json.dumps(dict(kind=kind, **fields)), flush=True)


def train(dataset, ranks, seed, epochs, extra, data_dir, model="gcn"):
    cmd = [sys.executable, "-m", "spgnn", "train", "--graph",
           str(Path(data_dir) / DATASETS[dataset][0]), *DATASETS[dataset][1:], "--model", model,
           "--algo", "1d-aware", "--partition", "metis", "--epochs", str(epochs), "--seed",
           str(seed), "--json", "--no-progress", *extra]
    if ranks > 1:
        cmd = [find_mpiexec(), "-n", str(ranks)] + cmd
    env = dict(os.environ, **SINGLE_THREAD_ENV)
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    out = proc.stdout
    res = json.loads(out[out.index("{"):])
    res["wall"] = time.time() - t0
    res["command"] = " ".join(cmd[cmd.index("-m") - 1:] if ranks == 1 else cmd)
    return res


VARIANTS = {
    "fp32": ["--aggregation", "hybrid"],
    "int2": ["--aggregation", "hybrid", "--quantize", "int2"],
    "fp32+lp": ["--aggregation", "hybrid", "--label-prop", "0.62"],
    "int2+lp": ["--aggregation", "hybrid", "--quantize", "int2", "--label-prop", "0.62"],
}


def cmd_accuracy(args, data_dir):
    for ds in args.datasets:
        for p in args.ranks:
            for name in args.variants:
                accs = []
                for seed in range(args.seeds):
                    r = train(ds, p, seed, args.epochs, VARIANTS[name] + args.extra, data_dir,
                              args.model)
                    accs.append(r["test_acc"])
                record("accuracy", dataset=ds, ranks=p, variant=name, epochs=args.epochs,
                       model=args.model,
                       seeds=args.seeds, test_acc=accs, mean=float(np.mean(accs)),
                       command=r["command"])


def cmd_bytes(args, data_dir):
    for ds in args.datasets:
        for p in args.ranks:
            for agg in ("post", "pre", "hybrid"):
                for q in ("none", "int2"):
                    r = train(ds, p, 0, 2, ["--aggregation", agg, "--quantize", q] + args.extra,
                              data_dir, args.model)
                    lab = r["bytes_per_epoch_by_label"]
                    exch = {k: v for k, v in lab.items() if "exchange" in k}
                    record("bytes", dataset=ds, ranks=p, aggregation=agg, quantize=q,
                           model=args.model,
                           features=r["features"], hidden=r["hidden"],
                           exchange_bytes=int(sum(exch.values())), by_label=lab, extra=args.extra,
                           total=r["bytes_per_epoch"], command=r["command"])


def cmd_planner(args, data_dir):
    from spgnn.core.hybrid import predict_messages
    from spgnn.io import load_graph

    for name in args.graphs:
        g = load_graph(str(Path(data_dir) / name))
        a = g.adj
        a = ((a + a.T) != 0).astype(np.float32).tocsr()
        n = a.shape[0]
        for p in args.ranks:
            offsets = np.linspace(0, n, p + 1).astype(np.int64)
            rows = {m: int(predict_messages(a, offsets, m).sum()) for m in ("post", "pre", "hybrid")}
            record("planner", graph=name, n=n, nnz=int(a.nnz), ranks=p, split="contiguous",
                   rows=rows, post_over_hybrid=rows["post"] / max(rows["hybrid"], 1))


def cmd_codec(args, data_dir):
    import numba

    from spgnn.backends import get_backend

    numba.set_num_threads(1)
    be = get_backend("numba")
    n, F = 100_000, 128
    x = np.random.default_rng(0).random((n, F), dtype=np.float32)
    keys = np.arange(n)
    b, c = x.copy(), x.copy()
    a = np.empty_like(x)

    def best(fn, reps=5):
        fn()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return min(ts)

    triad = best(lambda: np.add(b, c, out=a))       # reads 2, writes 1 array of n*F*4 bytes
    triad_bw = 3 * x.nbytes / triad
    for bits in (8, 4, 2):
        for rounding in ("nearest", "stochastic"):
            codes, params = be.quantize_rows(x, [n], bits, rounding, "bf16", 1, keys)
            te = best(lambda: be.quantize_rows(x, [n], bits, rounding, "bf16", 1, keys))
            td = best(lambda: be.dequantize_rows(codes, params, [n], bits, F))
            moved_e = x.nbytes + codes.nbytes + params.nbytes
            moved_d = x.nbytes + codes.nbytes + params.nbytes
            record("codec", bits=bits, rounding=rounding, rows=n, width=F,
                   encode_gbs=moved_e / te / 1e9, decode_gbs=moved_d / td / 1e9,
                   triad_gbs=triad_bw / 1e9, encode_frac=moved_e / te / triad_bw,
                   decode_frac=moved_d / td / triad_bw, threads=1)


def cmd_exchange(args, data_dir):
    """One aggregation ``A·X`` at widths F under mpiexec: ledger bytes per mode and codec."""
    from spgnn import Communicator, DistDenseMatrix, DistSparseMatrix, Layout, ProcessGrid, spmm
    from spgnn.core.codec import make_codec
    from spgnn.io import load_graph
    from spgnn.partition import partition_graph, permute

    comm = Communicator.world()
    p = comm.size
    for ds in args.datasets:
        g = load_graph(str(Path(data_dir) / DATASETS[ds][0]),
                       **({"name": DATASETS[ds][2]} if DATASETS[ds][1] == "--name" else {}))
        a = ((g.adj + g.adj.T) != 0).astype(np.float32).tocsr()
        perm, offsets, _ = partition_graph(a, "metis", p, seed=0)
        a = permute(a, perm)
        grid = ProcessGrid(comm, (p,), ("row",))
        lay = Layout("row", row_splits=tuple(int(o) for o in offsets))
        A = DistSparseMatrix.from_global(a, grid, lay)
        for F in (64, 128, 256):
            x = np.random.default_rng(0).standard_normal((a.shape[0], F)).astype(np.float32)
            X = DistDenseMatrix.from_global(x, grid, lay)
            res = {}
            for agg in ("post", "pre", "hybrid"):
                # int2: feature-axis packing (the default); int2-node: the authors' layout
                for q in ("none", "int2", "int2-node"):
                    codec = lambda: make_codec(q.split("-")[0],  # noqa: E731
                                               pack_axis="node" if q.endswith("node") else
                                               "feature")
                    spmm(A, X, algorithm="1d-aware", aggregation=agg, codec=codec())
                    with comm.track("bench") as st:
                        spmm(A, X, algorithm="1d-aware", aggregation=agg, codec=codec())
                    res[f"{agg}/{q}"] = int(comm.allreduce(
                        np.array([st.total("bytes_sent")], dtype=np.int64))[0])
            if comm.rank == 0:
                record("exchange", dataset=ds, ranks=p, width=F, partition="metis", bytes=res,
                       pack_axis="feature",
                       hybrid_int2_vs_fp32=res["hybrid/none"] / res["hybrid/int2"],
                       hybrid_int2_node_vs_fp32=res["hybrid/none"] / res["hybrid/int2-node"],
                       bound_16F=16 * F / (F + 16),
                       command=f"mpiexec -n {p} python -m spgnn bench comm_reduction "
                               f"exchange --datasets {ds}")


def cmd_plot(args, data_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in open(OUT)]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    # the latest exchange record per (dataset, ranks): older ones packed along the node axis
    ex = list({(r["dataset"], r["ranks"]): r for r in rows
               if r["kind"] == "exchange" and r["width"] == 128}.values())
    keys = ["post/none", "pre/none", "hybrid/none", "post/int2", "pre/int2", "hybrid/int2"]
    w = 0.8 / max(len(ex), 1)
    for k, r in enumerate(ex):
        vals = [r["bytes"][key] / r["bytes"]["post/none"] for key in keys]
        ax1.bar(np.arange(len(keys)) + k * w, vals, w, label=f"{r['dataset']} P={r['ranks']}")
    ax1.set_xticks(np.arange(len(keys)) + 0.4 - w / 2, keys, rotation=30, fontsize=8)
    ax1.set_yscale("log")
    ax1.set_ylabel("bytes of one A·X (F=128) / post fp32")
    ax1.set_title("measured (ledger), METIS")
    ax1.legend(fontsize=7)
    pl = [r for r in rows if r["kind"] == "planner"]
    for g in sorted({r["graph"] for r in pl}):
        rs = sorted((r for r in pl if r["graph"] == g), key=lambda r: r["ranks"])
        ax2.plot([r["ranks"] for r in rs], [r["post_over_hybrid"] for r in rs], "o-",
                 label=g.split("/")[0])
    ax2.axhline(1.5, color="gray", ls=":", label="paper ~1.5x")
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("ranks")
    ax2.set_ylabel("post rows / hybrid rows")
    ax2.set_title("planner (no run), contiguous split")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    path = ROOT / "docs" / "figures" / "comm_reduction.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("what", choices=("accuracy", "bytes", "exchange", "planner", "codec", "plot"))
    ap.add_argument("--datasets", nargs="+", default=["citeseer"])
    ap.add_argument("--graphs", nargs="+", default=SNAP)
    ap.add_argument("--ranks", nargs="+", type=int, default=[4])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--model", default="gcn", help="train --model (gcn, or sage-full: paper "
                                                   "004's GraphSAGE-mean + LayerNorm)")
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[])
    args = ap.parse_args(argv)
    data_dir = find_shared_data() if args.what not in ("codec", "plot") else None
    globals()[f"cmd_{args.what}"](args, data_dir)


if __name__ == "__main__":
    main()
