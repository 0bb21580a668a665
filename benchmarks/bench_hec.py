"""HEC vs --hec off: accuracy, halo bytes, hit rates, seconds (issue 22; docs/hec.md).

Each configuration is one ``mpiexec -n P python -m spgnn train --model sage
--partition metis --hec on|off ... --json`` run; the script collects the JSON
records into ``--out`` (JSON lines) and prints a markdown table.  Bytes are
the rank-summed bytes of the last epoch per ledger label: "halo" is
``halo-fetch:*`` for ``--hec off`` and ``hec:push:*`` for ``--hec on``.

    python benchmarks/bench_hec.py --graphs cora --ranks 4 --seeds 0 1 2 --epochs 30
    python benchmarks/bench_hec.py --graphs musae_facebook --ranks 8 --seeds 0 --epochs 2 \
        --push-caps 2000 64
    python benchmarks/bench_hec.py --graphs cora --ranks 4 --seeds 0 --sweep

Timings on a shared machine are ratios of runs taken back to back, not absolutes.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SPGNN_DATA", ROOT.parent / "shared" / "data"))
GRAPHS = {"cora": ["--graph", str(DATA / "planetoid"), "--name", "cora"],
          "citeseer": ["--graph", str(DATA / "planetoid"), "--name", "citeseer"],
          "musae_facebook": ["--graph", str(DATA / "musae_facebook")]}


def run(graph, ranks, seed, epochs, batch, extra):
    cmd = ["mpiexec", "-n", str(ranks), sys.executable, "-m", "spgnn", "train", *GRAPHS[graph],
           "--model", "sage", "--partition", "metis", "--seed", str(seed), "--epochs",
           str(epochs), "--batch-size", str(batch), "--fanout", "15,10,5", "--no-progress",
           "--json", *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    lab = rec["bytes_per_epoch_by_label"]
    rec["halo_bytes"] = sum(v for k, v in lab.items()
                            if k.startswith("halo-fetch") or k.startswith("hec:push"))
    rec["grad_bytes"] = sum(v for k, v in lab.items() if "grad" in k)
    rec["command"] = " ".join(cmd[:1] + cmd[1:3] + ["python"] + cmd[4:])
    rec["bench_graph"], rec["bench_extra"] = graph, extra
    return rec


def row(rec):
    hr = rec.get("hit_rate_per_level") or {}
    rates = " / ".join(f"{100 * v:.0f}" if v is not None else "-" for v in hr.values()) or "-"
    return (f"| {rec['bench_graph']} | {rec['ranks']} | {' '.join(rec['bench_extra'])} | "
            f"{rec['seed']} | {rec['test_acc']:.3f} | {rec['halo_bytes']:,} | "
            f"{rec['grad_bytes']:,} | {rates} | {rec['seconds_per_epoch']:.2f} |")


def plot(jsonl, path):
    """Halo bytes per epoch and test accuracy per configuration (mean over seeds)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    recs = [json.loads(line) for f in jsonl for line in open(f)]
    groups = {}
    for r in recs:
        key = f"{r['bench_graph']} P={r['ranks']}\n{' '.join(r['bench_extra'][1:]) or 'on'}" \
            if r["hec"] == "on" else f"{r['bench_graph']} P={r['ranks']}\n--hec off"
        groups.setdefault(key, []).append(r)
    keys = list(groups)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    a.bar(range(len(keys)), [sum(r["halo_bytes"] for r in groups[k]) / len(groups[k]) / 1e6
                             for k in keys])
    a.set_ylabel("halo bytes per epoch (MB, all ranks)")
    a.set_yscale("log")
    b.bar(range(len(keys)), [sum(r["test_acc"] for r in groups[k]) / len(groups[k]) for k in keys])
    b.set_ylabel("test accuracy (mean over seeds)")
    b.set_ylim(0.5, 0.9)
    for ax in (a, b):
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(keys, rotation=60, ha="right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", nargs="+", default=["cora"], choices=tuple(GRAPHS))
    ap.add_argument("--ranks", nargs="+", type=int, default=[4])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--push-caps", nargs="+", type=int, default=[2000, 64])
    ap.add_argument("--sweep", action="store_true",
                    help="also vary cs, ls, nc and d one at a time around the paper's values")
    ap.add_argument("--out", default="hec_bench.jsonl")
    ap.add_argument("--plot", nargs="+", metavar="JSONL", default=None,
                    help="only plot these result files into --figure, run nothing")
    ap.add_argument("--figure", default="hec.png")
    args = ap.parse_args(argv)
    if args.plot:
        plot(args.plot, args.figure)
        return
    configs = [["--hec", "off"]] + [["--hec", "on", "--hec-push-cap", str(nc)]
                                    for nc in args.push_caps]
    if args.sweep:
        configs += [["--hec", "on", "--hec-capacity", "256", "--hec-push-cap", "64"],
                    ["--hec", "on", "--hec-life", "0"], ["--hec", "on", "--hec-life", "8"],
                    ["--hec", "on", "--hec-push-cap", "16"], ["--hec", "on", "--hec-delay", "2"],
                    ["--hec", "on", "--hec-delay", "0"]]
    print("| graph | P | options | seed | test acc | halo bytes/epoch | grad bytes/epoch | "
          "hit rate L0/L1/L2 % | s/epoch |")
    print("|---|---|---|---|---|---|---|---|---|")
    with open(args.out, "a") as f:
        for g in args.graphs:
            for p in args.ranks:
                for extra in configs:
                    for s in args.seeds:
                        rec = run(g, p, s, args.epochs, args.batch_size, extra)
                        f.write(json.dumps(rec) + "\n")
                        f.flush()
                        print(row(rec), flush=True)


if __name__ == "__main__":
    main()
