"""Cost as the graph grows: setup, epoch and peak memory of ``train`` at one scale per run.

    python -m spgnn bench scale --graph rmat:20:16 --ranks 2 --repeat 3
    python -m spgnn bench scale --graph rmat:18:16 --graph rmat:20:16 --ranks 2 --algo 1d-aware
    python -m spgnn bench scale --graph DIR --ranks 4 --hidden 128 --epochs 3 --no-synthetic
    python -m spgnn bench scale --graph sbm:20000:8 --pyg            # PyG's GCNConv beside it

Each repetition is one ``mpiexec -n RANKS python -m spgnn train ... --json``
(a fresh job: setup is what a user waits for), and the record per graph is
the median, the fastest and the slowest of ``setup_seconds``, of each entry
of ``setup_seconds_by_stage``, of ``seconds_per_epoch`` and of the largest
rank's peak RSS (``peak_rss_bytes`` of the report, else the launcher's
``/usr/bin/time -f %M``, which is the largest process of the job), with
the command that produced it.  ``--pyg`` also runs PyTorch Geometric's
2-layer ``GCNConv`` on the same graph in one process (the ``gcn_pyg``
suite's model; ``--pyg-mode sparse`` feeds it a ``torch.sparse_csr``
adjacency), reporting its epoch time and peak RSS, or that it ran out of
memory.  Records are appended to ``--out`` (a JSON-lines file).

Timings with more ranks than cores are meaningless (this machine has 2);
peak memory is not.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

from spgnn.bench import machine

from ._common import ROOT

#: Synthetic data for graphs that have none (generator specs such as rmat).
SYNTHETIC = ("--features", "random:32", "--labels", "random:4")


def _summary(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _mpiexec():
    """The launcher beside this Python (the mpich wheel's, in a virtual environment), else PATH's."""
    return (shutil.which("mpiexec", path=os.path.dirname(sys.executable))
            or shutil.which("mpiexec") or "mpiexec")


def _train_command(args, graph):
    cmd = [_mpiexec(), "-n", str(args.ranks), sys.executable, "-m", "spgnn", "train",
           "--graph", graph, "--epochs", str(args.epochs), "--hidden", str(args.hidden),
           "--json", "--no-progress"]
    if args.algo:
        cmd += ["--algo", args.algo]
    if args.synthetic and (graph.startswith("rmat:")):
        cmd += list(SYNTHETIC)
    return cmd + list(args.extra)


def _run_timed(cmd, timeout):
    """``(stdout, stderr, max RSS bytes of the job's largest process or None, rc)``."""
    timer = shutil.which("time") or ("/usr/bin/time" if shutil.which("/usr/bin/time") else None)
    full = [timer, "-f", "MAXRSS_KB %M"] + cmd if timer else cmd
    p = subprocess.run(full, capture_output=True, text=True, timeout=timeout)
    m = re.search(r"MAXRSS_KB (\d+)", p.stderr)
    err = "\n".join(line for line in p.stderr.splitlines() if not line.startswith("MAXRSS_KB"))
    return p.stdout, err, (int(m.group(1)) * 1024 if m else None), p.returncode


def measure_train(args, graph):
    """The record of ``args.repeat`` train jobs on ``graph``."""
    cmd = _train_command(args, graph)
    runs = []
    for rep in range(args.repeat):
        out, err, rss, rc = _run_timed(cmd, args.timeout)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if rc != 0 or not lines:
            tail = (err.strip().splitlines() or ["(no output)"])[-1]
            print(f"scale: {graph}: run {rep + 1} failed (rc {rc}): {tail}", file=sys.stderr)
            runs.append({"rc": rc, "error": tail})
            continue
        r = json.loads(lines[-1])
        peak = r.get("peak_rss_bytes")
        runs.append({"rc": 0, "setup_seconds": r["setup_seconds"],
                     "setup_seconds_by_stage": r.get("setup_seconds_by_stage"),
                     "seconds_per_epoch": r["seconds_per_epoch"],
                     "epoch_seconds_by_phase": r.get("epoch_seconds_by_phase"),
                     "peak_rss_bytes_max": peak["max"] if peak else rss,
                     "peak_rss_bytes": peak, "launcher_max_rss_bytes": rss,
                     "algorithm": r["algorithm"], "n": r["n"], "final_loss": r["final_loss"],
                     "test_acc": r["test_acc"]})
        print(f"scale: {graph} run {rep + 1}: setup {r['setup_seconds']:.1f} s, epoch "
              f"{r['seconds_per_epoch'] or float('nan'):.3f} s, peak "
              f"{(runs[-1]['peak_rss_bytes_max'] or 0) / 2**30:.2f} GiB", file=sys.stderr,
              flush=True)
    ok = [r for r in runs if r["rc"] == 0]
    stages = sorted({k for r in ok for k in (r["setup_seconds_by_stage"] or {})})
    return {"graph": graph, "ranks": args.ranks, "command": " ".join(cmd), "runs": runs,
            "setup_seconds": _summary([r["setup_seconds"] for r in ok]),
            "setup_seconds_by_stage": {s: _summary([(r["setup_seconds_by_stage"] or {}).get(s)
                                                    for r in ok]) for s in stages},
            "seconds_per_epoch": _summary([r["seconds_per_epoch"] for r in ok]),
            "peak_rss_bytes_max": _summary([r["peak_rss_bytes_max"] for r in ok])}


_PYG_CHILD = r"""
import json, resource, sys, time
import numpy as np
from spgnn._benchmarks.gcn_pyg import load_case, pyg_epoch_seconds
graph, hidden, threads, mode, features, labels = sys.argv[1:7]
t0 = time.perf_counter()
case = load_case(graph, features=features or None, labels=labels or None)
t_load = time.perf_counter() - t0
r = pyg_epoch_seconds(case.adj, case.features, case.labels, case.train_mask, int(hidden),
                      int(threads), 3, 1, adjacency=mode)
print(json.dumps({"epoch_seconds": r["median"], "min": r["min"], "load_seconds": t_load,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  **case.describe()}))
"""


def measure_pyg(args, graph):
    """PyG's GCNConv epoch on ``graph`` in one process: its time and peak RSS, or why not."""
    synth = graph.startswith("rmat:")
    cmd = [sys.executable, "-c", _PYG_CHILD, graph, str(args.hidden), str(args.threads),
           args.pyg_mode, "random:32" if synth else "", "random:4" if synth else ""]
    t0 = time.perf_counter()
    try:
        out, err, rss, rc = _run_timed(cmd, args.timeout)
    except subprocess.TimeoutExpired:
        return {"graph": graph, "impl": f"pyg-{args.pyg_mode}", "error": "timed out"}
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if rc != 0 or not lines:
        killed = rc in (-9, 137) or "MemoryError" in err or "out of memory" in err.lower()
        return {"graph": graph, "impl": f"pyg-{args.pyg_mode}", "rc": rc,
                "error": "out of memory" if killed else (err.strip().splitlines() or [""])[-1],
                "peak_rss_bytes": rss, "wall_seconds": time.perf_counter() - t0}
    return {"graph": graph, "impl": f"pyg-{args.pyg_mode}", **json.loads(lines[-1]),
            "launcher_max_rss_bytes": rss}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", action="append", required=True,
                    help="a generator spec, dataset, file or shard directory (repeatable)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--algo", default=None, help="train's --algo (default: train's default)")
    ap.add_argument("--no-synthetic", dest="synthetic", action="store_false",
                    help="do not add --features random:32 --labels random:4 to rmat specs")
    ap.add_argument("--pyg", action="store_true", help="also run PyG's GCNConv, one process")
    ap.add_argument("--pyg-mode", choices=("edge_index", "sparse"), default="sparse")
    ap.add_argument("--threads", type=int, default=2, help="torch threads of the PyG run")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "scale.jsonl"),
                    help="JSON-lines file the records are appended to ('-': none)")
    ap.add_argument("extra", nargs=argparse.REMAINDER,
                    help="after --: more train options (e.g. -- --model gcn --layers 2)")
    args = ap.parse_args(argv)
    args.extra = [a for a in args.extra if a != "--"]
    for graph in args.graph:
        rec = {"suite": "scale", "date": time.strftime("%Y-%m-%d"), "machine": machine(),
               **measure_train(args, graph)}
        if args.pyg:
            rec["pyg"] = measure_pyg(args, graph)
        line = json.dumps(rec)
        print(line, flush=True)
        if args.out != "-":
            with open(args.out, "a") as fh:
                fh.write(line + "\n")


if __name__ == "__main__":
    main()
