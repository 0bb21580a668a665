"""HEC vs --hec off: accuracy, halo bytes, hit rates (issue 22; docs/hec.md).

Each configuration is one ``mpiexec -n P python -m spgnn train --model sage
--partition metis --hec on|off ... --json`` run; the records (each with its
command) are appended to ``--out`` as JSON lines.  Bytes are the rank-summed
bytes of the last epoch per ledger label: "halo" is ``halo-fetch:*`` for
``--hec off`` and ``hec:push:*`` for ``--hec on``; "grad" is the gradient
all-reduce.  Bytes and accuracies are exact and reproducible; seconds are
not meaningful on a shared machine.

Three jobs:

* **compare** (default): for every graph, rank count and seed, one
  ``--hec off`` run, then ``--hec on`` with each ``--push-caps`` value.
  ``rule`` is the cap :func:`push_cap_rule` derives from that seed's
  ``--hec off`` run (halo bytes at least 3x lower, by construction).
* **--sweep**: ``cs``, ``ls``, ``nc`` and ``d`` varied one at a time around a
  base point (``--base-cap``) on one graph and rank count.
* **--report / --plot-sweep**: rebuild the summary table / the sweep figure
  from JSON-lines files, running nothing.

    python -m spgnn bench hec --graphs cora citeseer --ranks 4 8 --seeds 0 1 2 \
        --epochs 30 --batch-size 8 --push-caps 2000 rule --out docs/results/hec/small.jsonl
    python -m spgnn bench hec --graphs musae_facebook --ranks 8 4 --seeds 0 1 2 \
        --epochs 3 --batch-size 512 --push-caps 2000 rule --out docs/results/hec/musae.jsonl
    python -m spgnn bench hec --sweep --graphs citeseer --split 0.6:0.2 --ranks 4 \
        --seeds 0 --epochs 5 --batch-size 64 --base-cap 32 \
        --out docs/results/hec/sweep_citeseer_split_p4.jsonl
    python -m spgnn bench hec --report docs/results/hec/small.jsonl docs/results/hec/musae.jsonl
    python -m spgnn bench hec --plot-sweep docs/results/hec/sweep_citeseer_split_p4.jsonl \
        --figure docs/figures/hec_sweep.png

Issue 39's three-way comparison (defaults only: fetch / cache / nothing):

    python -m spgnn bench hec --graphs musae_github sbm_weak --ranks 4 --seeds 0 1 2 \
        --epochs 10 --batch-size 512 --out docs/results/hec/three_way.jsonl
    python -m spgnn bench hec --report docs/results/hec/three_way.jsonl

Issue 39's wall clock (overlapped pushes: off / on / on waited at once / none, with the
seconds blocked per label and each run's CPU seconds; ``--on-env`` adds an ``on`` run under
another environment, e.g. ``PYTHONPATH=/path/to/an/older/checkout``):

    python -m spgnn bench hec --overlap --graphs musae_github --ranks 4 --seeds 0 1 2 \
        --epochs 10 --batch-size 512 --out docs/results/hec/overlap_github.jsonl
    python -m spgnn bench hec --report docs/results/hec/overlap_github.jsonl

Issue 39's wall clock at products scale (4 LDG shards of plsbm:2450000:47:60:100, each rank
reading its own; the runs record the load before / after, wall, CPU and setup seconds, the
phases and the peak RSS per rank; ``--report`` prints the wall-clock table):

    python -m spgnn bench hec --graphs products --ranks 4 --seeds 0 --epochs 4 --batch-size 512 \
        --fanout 10,5 --partition ldg --out docs/results/hec/wallclock_products.jsonl

A graph where METIS cuts the informative edges (``sbm_cross``; docs/results/hec/cross.md):

    python -m spgnn bench hec --graphs sbm_cross --ranks 4 --seeds 0 1 2 --epochs 20 \
        --batch-size 256 --out docs/results/hec/three_way_cross.jsonl

The commands and results are in docs/hec.md ("Results", "Overlapped pushes", "Wall clock at
products scale") and docs/results/hec/{cross,wallclock}.md.
"""

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ._common import ROOT

DATA = Path(os.environ.get("SPGNN_DATA", ROOT.parent / "shared" / "data"))
GRAPHS = {"cora": ["--graph", str(DATA / "planetoid"), "--name", "cora"],
          "citeseer": ["--graph", str(DATA / "planetoid"), "--name", "citeseer"],
          "musae_facebook": ["--graph", str(DATA / "musae_facebook")],
          # labels only (web vs ML developers): log-binned degree one-hot features
          "musae_github": ["--graph", str(DATA / "musae_github"), "--features", "degree"],
          # weak features (noise 3x the class signal): remote neighbours matter
          "sbm_weak": lambda: ["--graph", str(weak_sbm())],
          # never tuned on (issue 39; docs/results/hec/unseen.md): Geom-GCN's 5 classes, the
          # monthly traffic in equal-frequency bins
          "chameleon": ["--graph", str(DATA / "wikipedia_musae"), "--name", "chameleon",
                        "--labels", "quantiles:5"],
          "squirrel": ["--graph", str(DATA / "wikipedia_musae"), "--name", "squirrel",
                       "--labels", "quantiles:5"],
          # deezer HU: "does the user like Rap/Hip Hop" (spgnn.io.load_musae's default genre)
          "deezer_hu": ["--graph", str(DATA / "deezer_gemsec"), "--name", "HU",
                        "--features", "degree"],
          # communities METIS keeps whole, labels that only the edges between them carry:
          # the halo (the cut edges) is where the label signal is (issue 39, stop 46)
          "sbm_cross": lambda: ["--graph", str(cross_sbm())],
          # products scale (issue 39 "wall clock"): 4 LDG shards of plsbm:2450000:47:60:100
          # (2.45M vertices, 145.7M stored entries), written by
          # `python -m spgnn partition --graph plsbm:2450000:47:60:100 --parts 4 --method ldg
          # --out DIR` (157 s, 2.3 GB): not in the repository; SPGNN_PRODUCTS_SHARDS names DIR.
          # Each rank reads its own shard; run with --partition ldg (the shards' partition)
          "products": ["--graph", os.environ.get("SPGNN_PRODUCTS_SHARDS",
                                                 str(ROOT.parent / "prod" / "shards4"))]}
#: the weak-feature SBM of ``sbm_weak`` (written once under benchmarks/results/hec_data)
WEAK_SBM = dict(n=6000, num_classes=4, avg_degree=10.0, homophily=0.8, num_features=8,
                feature_noise=10.0, seed=0)


def weak_sbm():
    """The ``sbm_weak`` graph as an .npz (written once, a pure function of WEAK_SBM)."""
    from spgnn.io.generators import sbm
    from spgnn.io.graph import Graph
    from spgnn.io.npz import save_npz
    c = WEAK_SBM
    path = ROOT / "benchmarks" / "results" / "hec_data" / (
        "sbm_weak_" + "_".join(f"{k}{v}" for k, v in c.items()) + ".npz")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        adj, _, y = sbm(c["n"], c["num_classes"], avg_degree=c["avg_degree"],
                        homophily=c["homophily"], num_features=c["num_features"], seed=c["seed"])
        # non-negative features (train row-normalises them): a class's mean in [0, 1)
        # plus uniform noise in [0, feature_noise)
        rng = np.random.default_rng([c["seed"], 39])
        means = rng.random((c["num_classes"], c["num_features"]))
        x = (means[y] + c["feature_noise"] * rng.random((c["n"], c["num_features"])))
        x = x.astype(np.float32)
        save_npz(Graph(adj=adj, features=x, labels=y, name="sbm_weak"), path)
    return path


#: ``sbm_cross``: ``communities`` label-blind communities (a fraction ``intra`` of every vertex's
#: edges, endpoints uniform in its community) and edges between communities that are
#: class-homophilous (``homophily``); weak features as ``sbm_weak``
CROSS_SBM = dict(n=6000, num_classes=4, communities=16, avg_degree=10.0, intra=0.6,
                 homophily=0.9, num_features=8, feature_noise=5.0, seed=0)


def cross_sbm_arrays(cfg=None):
    """``(adjacency, features, labels, communities)`` of the ``sbm_cross`` graph. Pure.

    Every vertex draws a class and a community, independently and uniformly.
    Each of ``avg_degree * n / 2`` edges picks a uniform source; with
    probability ``intra`` its target is uniform in the source's community
    (blind to the class), else uniform over the vertices of the source's class
    with probability ``homophily`` (any community), or over all vertices.  A
    partitioner that minimises the cut keeps communities whole and cuts the
    edges between them, the only ones that carry the label: a rank that drops
    its halo (``--hec none``) keeps the label-blind edges and loses the
    informative ones.  Symmetric, 0/1 weights, no self-loops; features as
    ``sbm_weak`` (a class mean in [0, 1) plus uniform noise in
    [0, ``feature_noise``))."""
    import scipy.sparse as sp
    c = dict(CROSS_SBM, **(cfg or {}))
    n, C, K = c["n"], c["num_classes"], c["communities"]
    rng = np.random.default_rng([c["seed"], 46])
    y = rng.integers(0, C, n)
    comm = rng.integers(0, K, n)
    m = int(round(c["avg_degree"] * n / 2))
    src = rng.integers(0, n, m)
    u, v = rng.random(m), rng.random(m)

    def pick(groups, g, r):              # a uniform member of group g[i], with r[i] in [0, 1)
        order = np.argsort(groups, kind="stable")
        lo = np.searchsorted(groups[order], np.arange(groups.max() + 2))
        return order[lo[g] + (r * (lo[g + 1] - lo[g])).astype(np.int64)]
    dst = np.where(u < c["intra"], pick(comm, comm[src], v),
                   np.where(u < c["intra"] + (1 - c["intra"]) * c["homophily"],
                            pick(y, y[src], v), rng.integers(0, n, m)))
    keep = src != dst
    a = sp.coo_array((np.ones(int(keep.sum()), np.float32), (src[keep], dst[keep])),
                     shape=(n, n)).tocsr()
    a = sp.csr_array(((a + a.T) > 0).astype(np.float32))
    means = rng.random((C, c["num_features"]))
    x = (means[y] + c["feature_noise"] * rng.random((n, c["num_features"]))).astype(np.float32)
    return a, x, y.astype(np.int64), comm


def cross_sbm(cfg=None):
    """The ``sbm_cross`` graph (:func:`cross_sbm_arrays`) as an .npz under
    benchmarks/results/hec_data (written once, a pure function of ``cfg``)."""
    from spgnn.io.graph import Graph
    from spgnn.io.npz import save_npz
    c = dict(CROSS_SBM, **(cfg or {}))
    path = ROOT / "benchmarks" / "results" / "hec_data" / (
        "sbm_cross_" + "_".join(f"{k}{v}" for k, v in c.items()) + ".npz")
    if not path.exists():
        a, x, y, _ = cross_sbm_arrays(c)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_npz(Graph(adj=a, features=x, labels=y, name="sbm_cross"), path)
    return path


def graph_args(graph):
    a = GRAPHS[graph]
    return a() if callable(a) else a
#: DistGNN-MB's hit rates at levels 0 / 1 / 2 (64 sockets, OGBN-Papers100M; report 001 §0)
PAPER_HIT_RATES = (0.71, 0.47, 0.37)
ID_BYTES = 8


def run(graph, ranks, seed, epochs, batch, extra, fanout="15,10,5", split=None,
        partition="metis", env_extra=None):
    """One ``train --json`` under mpiexec; the record plus halo/grad byte sums, the command and
    ``cpu_seconds`` (user + sys of every rank, the whole run). ``env_extra``: more environment
    (e.g. ``SPGNN_HEC_OVERLAP=0``), recorded as ``bench_env``."""
    cmd = ["mpiexec", "-n", str(ranks), sys.executable, "-m", "spgnn", "train", *graph_args(graph),
           "--model", "sage", "--partition", partition, "--seed", str(seed), "--epochs",
           str(epochs), "--batch-size", str(batch), "--fanout", fanout, "--no-progress",
           "--json", *(["--split", split] if split else []), *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", **(env_extra or {}))
    load0, t0 = os.getloadavg(), time.time()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # ``python -m`` puts the working directory first on sys.path: run from PYTHONPATH's
    # first entry when one is given, so that it (an older checkout, say) is what is imported
    pp = (env_extra or {}).get("PYTHONPATH")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                          cwd=pp.split(os.pathsep)[0] if pp else None)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t1, load1 = time.time(), os.getloadavg()
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    lab = rec["bytes_per_epoch_by_label"]
    rec["halo_bytes"] = sum(v for k, v in lab.items()
                            if k.startswith("halo-fetch") or k.startswith("hec:push"))
    rec["grad_bytes"] = sum(v for k, v in lab.items() if "grad" in k)
    # everything the epoch sent but the gradients: fetches, pushes, wants, counts
    # (mean over the run's epochs: a cache's bytes differ between epochs)
    rec["nongrad_bytes"] = rec.get("nongrad_bytes_per_epoch_mean",
                                   sum(v for k, v in lab.items() if "grad" not in k))
    rec["command"] = " ".join(["mpiexec", "-n", str(ranks), "python"] + cmd[4:])
    rec["bench_graph"], rec["bench_extra"], rec["bench_split"] = graph, extra, split
    rec["cpu_seconds"] = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    # the machine's load (1, 5, 15 minute averages) before and after, the run's wall seconds
    # and its start (UTC): what the seconds of a shared machine can be read against
    rec["bench_load"] = {"before": list(load0), "after": list(load1)}
    rec["bench_wall_seconds"] = t1 - t0
    rec["bench_start_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0))
    if env_extra:
        rec["bench_env"] = dict(env_extra)
        rec["command"] = " ".join(f"{k}={v}" for k, v in env_extra.items()) + " " + rec["command"]
    return rec


def level_dims(rec):
    """Widths of the cached levels: the input features, then the hidden width per layer."""
    return [rec["features"]] + [rec["hidden"]] * (len(rec["fanout"]) - 1)


def push_cap_rule(off, factor=3, itemsize=4):
    """The push cap that sends at least ``factor`` x fewer halo bytes than ``off`` (a --hec off record).

    ``--hec off`` fetches ``h`` halo rows per rank per iteration (the level-0
    halo columns; its ``halo-fetch:ids`` bytes / 8 / (P·M)), each ``b_0 =
    f_0·itemsize + 8`` bytes.  ``--hec on`` pushes at most ``nc`` rows per peer
    per level per iteration, ``b_ℓ`` bytes each.  So

        nc = floor(h · b_0 / (factor · (P − 1) · Σ_ℓ b_ℓ))

    bounds the push bytes by ``1/factor`` of the fetch's row bytes whatever the
    degree-biased selection accepts (it usually accepts fewer).  The sampled
    blocks are the same with the cache on or off (the sampler is keyed by
    seed and minibatch, not by the parameters), so ``h`` is the same too.
    """
    P, M = off["ranks"], off["iterations_per_epoch"]
    h = off["bytes_per_epoch_by_label"].get("halo-fetch:ids", 0) / ID_BYTES / (P * M)
    b = [d * itemsize + ID_BYTES for d in level_dims(off)]
    return max(1, int(h * b[0] // (factor * max(P - 1, 1) * sum(b))))


def config_name(rec):
    """A configuration's name without the seed ("off", "none", "on", "on nc=2000", ...)."""
    if rec["hec"] in ("off", "none"):
        return rec["hec"]
    if not rec["bench_extra"][2:] and not rec.get("bench_name"):
        return "on"
    return rec.get("bench_name") or "on " + " ".join(rec["bench_extra"][2:])


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _points(diff):
    """An accuracy difference in points, signed ("+0.0", never "-0.0")."""
    text = f"{100 * diff:+.1f}"
    return "+0.0" if text == "-0.0" else text


def summary(recs):
    """Markdown: per graph, P and configuration the means over seeds, vs the off baseline."""
    groups = {}
    for r in recs:
        groups.setdefault((r["bench_graph"], r["ranks"], config_name(r)), []).append(r)
    lines = ["| graph | P | config | seeds | epochs | test acc (mean) | Δ vs off (points) | "
             "halo bytes/epoch (mean) | off / on bytes | hit rate L0 / L1 / L2 % "
             "(paper 71 / 47 / 37) | nc used | grad bytes/epoch |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (g, p, name), rs in groups.items():
        off = groups.get((g, p, "off"))
        acc = _mean([r["test_acc"] for r in rs])
        halo = _mean([r["halo_bytes"] for r in rs])
        if off and name != "off":
            d = _points(acc - _mean([r['test_acc'] for r in off]))
            ratio = f"{_mean([r['halo_bytes'] for r in off]) / max(halo, 1):.2f}x"
        else:
            d, ratio = "", "1x" if name == "off" else ""
        if name == "off":
            rates = "-"
        else:
            lv = sorted(rs[0]["hit_rate_per_level"])
            rates = " / ".join(f"{100 * _mean([r['hit_rate_per_level'][k] for r in rs]):.0f}"
                               for k in lv)
        ncs = sorted({r["hec_config"]["nc"] for r in rs if r["hec"] == "on"})
        lines.append(f"| {g} | {p} | {name} | {len(rs)} | {rs[0]['epochs']} | {acc:.3f} | {d} | "
                     f"{halo / 1e6:,.2f} MB | {ratio} | {rates} | "
                     f"{','.join(map(str, ncs)) or '-'} | {_mean([r['grad_bytes'] for r in rs]) / 1e6:,.2f} MB |")
    return "\n".join(lines)


def three_way(recs):
    """Markdown: per graph and P, ``--hec off`` / ``on`` / ``none`` (defaults only), means over
    seeds: accuracy, non-gradient bytes per epoch, hit rates, pushes wasted, the gap recovered."""
    groups = {}
    for r in recs:
        groups.setdefault((r["bench_graph"], r["ranks"]), {}).setdefault(
            config_name(r), []).append(r)
    lines = ["| graph | P | config | seeds | epochs | test acc (mean) | Δ vs off (points) | "
             "non-grad bytes/epoch | off / this | hit rate per level % | pushes read / wasted "
             "/ live % | gap to none recovered |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (g, p), cfgs in groups.items():
        off, none = cfgs.get("off"), cfgs.get("none")
        acc_off = _mean([r["test_acc"] for r in off]) if off else None
        acc_none = _mean([r["test_acc"] for r in none]) if none else None
        b_off = _mean([r["nongrad_bytes"] for r in off]) if off else None
        for name in ["off", "on", "none"] + sorted(set(cfgs) - {"off", "on", "none"}):
            rs = cfgs.get(name)
            if not rs:
                continue
            acc = _mean([r["test_acc"] for r in rs])
            b = _mean([r["nongrad_bytes"] for r in rs])
            d = "" if name == "off" or acc_off is None else _points(acc - acc_off)
            ratio = "" if b_off is None else (f"{b_off / b:.1f}x" if b else "all")
            rates = use = rec = "-"
            if rs[0]["hec"] == "on":
                lv = sorted(rs[0]["hit_rate_per_level"])
                rates = " / ".join(f"{100 * _mean([r['hit_rate_per_level'][k] or 0 for r in rs]):.0f}"
                                   for k in lv)
                if "hec_read" in rs[0]:
                    tot = {f: sum(sum(r[f"hec_{f}"].values()) for r in rs)
                           for f in ("stored", "read", "wasted", "live")}
                    use = " / ".join(f"{100 * tot[f] / max(tot['stored'], 1):.0f}"
                                     for f in ("read", "wasted", "live"))
                if acc_off is not None and acc_none is not None and acc_off - acc_none > 0:
                    rec = f"{100 * (acc - acc_none) / (acc_off - acc_none):.0f}% of " \
                          f"{100 * (acc_off - acc_none):.1f} pts"
            lines.append(f"| {g} | {p} | {name} | {len(rs)} | {rs[0]['epochs']} | {acc:.3f} | "
                         f"{d} | {b / 1e6:,.3f} MB | {ratio} | {rates} | {use} | {rec} |")
    return "\n".join(lines)


def seconds_to(rec, target):
    """Training seconds (the slowest rank's, evaluations excluded) until the first evaluation
    whose validation accuracy reaches ``target``; None when none does or the record predates
    ``eval_history``."""
    secs, curve = rec.get("epoch_seconds_history"), rec.get("eval_history")
    if not secs or not curve:
        return None
    for epoch, val, _ in curve:
        if val >= target:
            return float(sum(secs[:epoch]))
    return None


def time_to_accuracy(recs, slack=0.01):
    """Markdown: per graph, P and config, the mean epoch seconds and the seconds to reach the
    ``--hec off`` runs' mean best validation accuracy less ``slack`` (runs that never do count
    in the "reached" column only)."""
    groups = {}
    for r in recs:
        groups.setdefault((r["bench_graph"], r["ranks"]), {}).setdefault(
            config_name(r), []).append(r)
    lines = ["| graph | P | config | epoch s (mean) | target val acc | reached | s to target "
             "(mean of those reaching) |", "|---|---|---|---|---|---|---|"]
    for (g, p), cfgs in groups.items():
        off = cfgs.get("off") or []
        bests = [r.get("best_val_acc") for r in off if r.get("best_val_acc") is not None]
        if not bests:
            continue
        target = _mean(bests) - slack
        for name in ["off", "on", "none"] + sorted(set(cfgs) - {"off", "on", "none"}):
            rs = cfgs.get(name)
            if not rs:
                continue
            t = [seconds_to(r, target) for r in rs]
            hit = [v for v in t if v is not None]
            lines.append(f"| {g} | {p} | {name} | {_mean([r['seconds_per_epoch'] for r in rs]):.3f}"
                         f" | {target:.3f} | {len(hit)} of {len(rs)} | "
                         f"{f'{_mean(hit):.2f}' if hit else '-'} |")
    return "\n".join(lines)


def _phase_sum(rec, pred):
    """Seconds per epoch (mean over ranks and epochs after the first) in the labels ``pred``
    accepts, from ``epoch_seconds_by_phase`` (blocking calls: their time; non-blocking ones:
    the start plus the ``wait``)."""
    comm = (rec.get("epoch_seconds_by_phase") or {}).get("comm") or {}
    return sum(v for k, v in comm.items() if pred(k))


def _is_push(k):
    return k.startswith("hec:push:L") and not k.startswith("hec:push:L0:")


def _is_plan(k):
    return k in ("hec:want", "hec:plan:counts") or k.startswith("hec:push:L0:")


def overlap_table(recs):
    """Markdown: per graph, P and config, the mean over seeds of the epoch seconds, the CPU
    seconds of the whole run (every rank), and per epoch (per rank) the seconds blocked in the
    per-iteration pushes (``hec:push:L>=1:*``: counts + start + ``wait``), in the epoch's plan
    (wants, the count table, the level-0 rows), in the halo fetch and in the gradient all-reduce."""
    groups = {}
    for r in recs:
        groups.setdefault((r["bench_graph"], r["ranks"]), {}).setdefault(
            config_name(r), []).append(r)
    lines = ["| graph | P | config | runs | epoch s | CPU s (run, all ranks) | push wait s/epoch | "
             "plan s/epoch | fetch s/epoch | grad all-reduce s/epoch |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (g, p), cfgs in groups.items():
        for name in ["off", "on", "on no-overlap", "none"] + sorted(
                set(cfgs) - {"off", "on", "on no-overlap", "none"}):
            rs = cfgs.get(name)
            if not rs:
                continue
            m = lambda f: _mean([f(r) for r in rs])     # noqa: E731
            cpu = [r["cpu_seconds"] for r in rs if r.get("cpu_seconds") is not None]
            lines.append(
                f"| {g} | {p} | {name} | {len(rs)} | {m(lambda r: r['seconds_per_epoch']):.3f} | "
                f"{f'{_mean(cpu):.1f}' if cpu else '-'} | "
                f"{m(lambda r: _phase_sum(r, _is_push)):.4f} | "
                f"{m(lambda r: _phase_sum(r, _is_plan)):.4f} | "
                f"{m(lambda r: _phase_sum(r, lambda k: k.startswith('halo-fetch'))):.4f} | "
                f"{m(lambda r: _phase_sum(r, lambda k: 'grad' in k)):.4f} |")
    return "\n".join(lines)


def wallclock_table(recs):
    """Markdown: per graph, P and config, what the seconds of the runs were: the median epoch
    (the slowest rank's, over every run's epochs after its first, which compiles kernels),
    the mean compute and blocked-communication seconds per epoch and rank
    (``epoch_seconds_by_phase``), CPU seconds per run (user + sys, every rank), setup seconds,
    the peak RSS of the largest rank and the machine's 1-minute load average before / after
    each run (``bench_load``; means over runs)."""
    groups = {}
    for r in recs:
        groups.setdefault((r["bench_graph"], r["ranks"]), {}).setdefault(
            config_name(r), []).append(r)
    lines = ["| graph | P | config | runs | epochs/run | epoch s (median) | compute s | "
             "halo comm s (fetch / plan / push) | grad all-reduce s | CPU s/run | setup s | "
             "peak RSS/rank max | load before / after |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (g, p), cfgs in groups.items():
        for name in ["off", "on", "on no-overlap", "none"] + sorted(
                set(cfgs) - {"off", "on", "on no-overlap", "none"}):
            rs = cfgs.get(name)
            if not rs:
                continue
            m = lambda f: _mean([f(r) for r in rs])     # noqa: E731
            steady = [s for r in rs for s in (r.get("epoch_seconds_history") or [])[1:]]
            cpu = [r["cpu_seconds"] for r in rs if r.get("cpu_seconds") is not None]
            loads = [r["bench_load"] for r in rs if r.get("bench_load")]
            load = (f"{_mean([x['before'][0] for x in loads]):.1f} / "
                    f"{_mean([x['after'][0] for x in loads]):.1f}" if loads else "-")
            halo = (f"{m(lambda r: _phase_sum(r, lambda k: k.startswith('halo-fetch'))):.2f} / "
                    f"{m(lambda r: _phase_sum(r, _is_plan)):.2f} / "
                    f"{m(lambda r: _phase_sum(r, _is_push)):.2f}")
            lines.append(
                f"| {g} | {p} | {name} | {len(rs)} | {rs[0].get('epochs_this_run', rs[0]['epochs'])}"
                f" | {f'{float(np.median(steady)):.1f}' if steady else '-'} | "
                f"{m(lambda r: (r.get('epoch_seconds_by_phase') or {}).get('compute') or 0):.1f} | "
                f"{halo} | {m(lambda r: _phase_sum(r, lambda k: 'grad' in k)):.2f} | "
                f"{f'{_mean(cpu):.0f}' if cpu else '-'} | {m(lambda r: r.get('setup_seconds') or 0):.0f} | "
                f"{max(r['peak_rss_bytes']['max'] for r in rs) / 2**30:.2f} GiB | {load} |")
    return "\n".join(lines)


def overlap(args):
    """Per graph, rank count and seed: ``--hec off``, ``on`` (overlapped pushes), ``on`` with
    ``SPGNN_HEC_OVERLAP=0`` (each push waited at once), ``none``; plus ``on`` under each
    ``--on-env`` (e.g. ``PYTHONPATH=/path/to/an/older/checkout``, named ``--on-env-name``)."""
    out = open(args.out, "a")
    for g, p, s, off, job in _jobs(args):
        recs = [off, job(["--hec", "on"])]
        flat = run(g, p, s, args.epochs, args.batch_size, ["--hec", "on"], args.fanout,
                   args.split, args.partition, env_extra={"SPGNN_HEC_OVERLAP": "0"})
        flat["bench_name"] = "on no-overlap"
        recs += [flat, job(["--hec", "none"])]
        if args.on_env:
            other = run(g, p, s, args.epochs, args.batch_size, ["--hec", "on"], args.fanout,
                        args.split, args.partition,
                        env_extra=dict(kv.split("=", 1) for kv in args.on_env))
            other["bench_name"] = args.on_env_name
            recs.append(other)
        for rec in recs:
            out.write(json.dumps(rec) + "\n")
            out.flush()
            print(f"{g} P={p} seed={s} {config_name(rec)}: {rec['seconds_per_epoch']:.3f} s/epoch, "
                  f"push wait {_phase_sum(rec, _is_push):.4f} s/epoch, "
                  f"CPU {rec['cpu_seconds']:.1f} s", flush=True)


def _jobs(args):
    """Per graph, rank count and seed: ``(g, p, s, off, job)``, the ``--hec off`` record and
    ``job(extra)`` running the same training with other options."""
    for g in args.graphs:
        for p in args.ranks:
            for s in args.seeds:
                def job(extra, g=g, p=p, s=s):
                    return run(g, p, s, args.epochs, args.batch_size, extra, args.fanout,
                               args.split, args.partition)
                yield g, p, s, job(["--hec", "off"]), job


def compare(args):
    out = open(args.out, "a")
    for g, p, s, off, job in _jobs(args):
        recs = [off]
        for mode in args.modes:
            rec = job(["--hec", mode, *(args.hec_extra if mode == "on" else [])])
            if mode == "on" and args.hec_extra:
                rec["bench_name"] = "on " + " ".join(args.hec_extra)
            recs.append(rec)
        for cap in args.push_caps:
            nc = push_cap_rule(off) if cap == "rule" else int(cap)
            rec = job(["--hec", "on", "--hec-push-cap", str(nc), *args.hec_extra])
            rec["bench_name"] = f"on nc={cap}" + (" " + " ".join(args.hec_extra)
                                                  if args.hec_extra else "")
            recs.append(rec)
        for rec in recs:
            out.write(json.dumps(rec) + "\n")
            out.flush()
            print(f"{g} P={p} seed={s} {config_name(rec)}: acc {rec['test_acc']:.3f} "
                  f"halo {rec['halo_bytes']:,} B hit {rec.get('hit_rate_per_level')}",
                  flush=True)


#: the sweep: one parameter at a time around the base point (cs, ls, nc, d)
def sweep_points(nc, P):
    ring = nc * (P - 1)                 # the smallest cs the cap allows: ceil(cs/(P-1)) >= nc
    return ([("cs", v) for v in (ring, 4 * ring, 16 * ring, 1_000_000)]
            + [("ls", v) for v in (0, 1, 2, 4, 8)]
            + [("nc", v) for v in sorted({max(1, nc // 4), max(1, nc // 2), nc, 4 * nc, 2000})]
            + [("d", v) for v in (0, 1, 2, 4)])


def sweep(args):
    base = {"cs": 1_000_000, "ls": 2, "nc": args.base_cap, "d": 1}
    opt = {"cs": "--hec-capacity", "ls": "--hec-life", "nc": "--hec-push-cap", "d": "--hec-delay"}
    out = open(args.out, "a")
    for g, p, s, off, job in _jobs(args):
        off["sweep"] = None
        out.write(json.dumps(off) + "\n")
        for name, v in sweep_points(args.base_cap, p):
            cfg = dict(base, **{name: v})
            rec = job(["--hec", "on"] + [x for k in opt for x in (opt[k], str(cfg[k]))])
            rec["sweep"] = [name, v]
            out.write(json.dumps(rec) + "\n")
            out.flush()
            print(f"{g} P={p} seed={s} {name}={v}: acc {rec['test_acc']:.3f} halo "
                  f"{rec['halo_bytes']:,} B hit {rec['hit_rate_per_level']}", flush=True)


def sweep_table(recs):
    """Markdown: means over seeds per swept value, with the off baseline's accuracy and bytes."""
    off = [r for r in recs if r.get("sweep") is None]
    acc0, bytes0 = _mean([r["test_acc"] for r in off]), _mean([r["halo_bytes"] for r in off])
    lines = [f"`--hec off`: test acc {acc0:.3f}, halo bytes/epoch {bytes0 / 1e6:.3f} MB "
             f"({len(off)} seed{'s' if len(off) != 1 else ''})", "",
             "| parameter | value | test acc (mean) | Δ vs off (points) | halo bytes/epoch | "
             "off / on bytes | hit rate L0 / L1 / L2 % |", "|---|---|---|---|---|---|---|"]
    for name, vals in _sweep_groups(recs).items():
        for v, rs in vals.items():
            acc, hb = _mean([r["test_acc"] for r in rs]), _mean([r["halo_bytes"] for r in rs])
            lv = sorted(rs[0]["hit_rate_per_level"])
            rates = " / ".join(f"{100 * _mean([r['hit_rate_per_level'][k] for r in rs]):.0f}"
                               for k in lv)
            lines.append(f"| {name} | {v:,} | {acc:.3f} | {_points(acc - acc0)} | "
                         f"{hb / 1e6:.3f} MB | {bytes0 / max(hb, 1):.2f}x | {rates} |")
    return "\n".join(lines)


def _sweep_groups(recs):
    groups = {}
    for r in recs:
        if r.get("sweep") is not None:
            name, v = r["sweep"]
            groups.setdefault(name, {}).setdefault(v, []).append(r)
    return {k: dict(sorted(v.items())) for k, v in groups.items()}


def plot_sweep(recs, path):
    """One column per parameter: hit rate per level, halo bytes, test accuracy (means over seeds)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    off = [r for r in recs if r.get("sweep") is None]
    groups = _sweep_groups(recs)
    names = [n for n in ("cs", "ls", "nc", "d") if n in groups]
    fig, axes = plt.subplots(3, len(names), figsize=(3.2 * len(names), 7.5), squeeze=False)
    for j, name in enumerate(names):
        vals = list(groups[name])
        xs = list(range(len(vals)))
        rs = [groups[name][v] for v in vals]
        for k in sorted(rs[0][0]["hit_rate_per_level"]):
            axes[0, j].plot(xs, [100 * _mean([r["hit_rate_per_level"][k] for r in g]) for g in rs],
                            marker="o", label=k)
        axes[1, j].plot(xs, [_mean([r["halo_bytes"] for r in g]) / 1e6 for g in rs], marker="o",
                        label="--hec on")
        axes[2, j].plot(xs, [100 * _mean([r["test_acc"] for r in g]) for g in rs], marker="o",
                        label="--hec on")
        if off:
            axes[1, j].axhline(_mean([r["halo_bytes"] for r in off]) / 1e6, ls="--", c="k",
                               label="--hec off")
            axes[2, j].axhline(100 * _mean([r["test_acc"] for r in off]), ls="--", c="k",
                               label="--hec off")
        axes[0, j].set_ylim(0, 100)
        if off:                         # ±3 points: seed noise should look like noise
            a0 = 100 * _mean([r["test_acc"] for r in off])
            axes[2, j].set_ylim(a0 - 3, a0 + 3)
        for i in range(3):
            axes[i, j].set_xticks(xs)
            axes[i, j].set_xticklabels([f"{v:,}" if v < 10**6 else "1e6" for v in vals],
                                       fontsize=7)
        axes[2, j].set_xlabel(name)
    axes[0, 0].set_ylabel("hit rate (%)")
    axes[1, 0].set_ylabel("halo bytes / epoch (MB)")
    axes[2, 0].set_ylabel("test accuracy (%)")
    axes[0, 0].legend(fontsize=7)
    axes[1, 0].legend(fontsize=7)
    r0 = (off or recs)[0]
    nc = next((r["hec_config"]["nc"] for r in recs if r.get("sweep") and r["sweep"][0] != "nc"),
              "?")
    fig.suptitle(f"HEC sweep: {r0['bench_graph']} (split {r0.get('bench_split') or 'own'}), "
                 f"P={r0['ranks']}, batch {r0['batch_size']}, {len(off) or 1} seed(s), "
                 f"{r0['epochs']} epochs; base cs=1e6 ls=2 nc={nc} d=1; dashed: --hec off",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _load(files):
    return [json.loads(line) for f in files for line in open(f) if line.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", nargs="+", default=["cora"], choices=tuple(GRAPHS))
    ap.add_argument("--ranks", nargs="+", type=int, default=[4])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--fanout", default="15,10,5")
    ap.add_argument("--partition", default="metis", choices=("metis", "random", "balanced", "ldg"),
                    help="train's --partition (default metis; random cuts most edges, so the "
                         "halo matters most; ldg: the products shards' own partition)")
    ap.add_argument("--split", default=None, metavar="TRAIN:VAL",
                    help="train --split (a random split instead of the graph's own, e.g. 0.6:0.2)")
    ap.add_argument("--modes", nargs="*", default=["on", "none"], choices=("on", "none"),
                    help="besides --hec off, run these with defaults only (default: on none)")
    ap.add_argument("--push-caps", nargs="*", default=[],
                    help="more --hec on runs with these caps: integers or 'rule' "
                         "(push_cap_rule of the off run)")
    ap.add_argument("--hec-extra", default="",
                    help="more --hec on options in one string, e.g. "
                         "--hec-extra='--hec-reset never --hec-capacity 8192'")
    ap.add_argument("--sweep", action="store_true",
                    help="vary cs, ls, nc and d one at a time around (1e6, 2, --base-cap, 1)")
    ap.add_argument("--base-cap", type=int, default=8)
    ap.add_argument("--overlap", action="store_true",
                    help="off, on, on with SPGNN_HEC_OVERLAP=0 and none per graph / P / seed "
                         "(the wait times of overlapped pushes; --report prints them)")
    ap.add_argument("--on-env", nargs="*", default=None, metavar="KEY=VAL",
                    help="with --overlap: one more --hec on run under this environment")
    ap.add_argument("--on-env-name", default="on (other env)")
    ap.add_argument("--out", default="hec_bench.jsonl")
    ap.add_argument("--report", nargs="+", metavar="JSONL", default=None,
                    help="print the summary table of these result files, run nothing")
    ap.add_argument("--plot-sweep", nargs="+", metavar="JSONL", default=None,
                    help="write the sweep table (stdout) and figure (--figure), run nothing")
    ap.add_argument("--figure", default="hec_sweep.png")
    args = ap.parse_args(argv)
    args.hec_extra = shlex.split(args.hec_extra)
    if args.report:
        recs = _load(args.report)
        print(three_way(recs) if any(r["hec"] == "none" for r in recs) else summary(recs))
        if any(r.get("eval_history") for r in recs):
            print()
            print(time_to_accuracy(recs))
        if any("cpu_seconds" in r for r in recs):
            print()
            print(overlap_table(recs))
        if any("bench_load" in r for r in recs):
            print()
            print(wallclock_table(recs))
    elif args.plot_sweep:
        recs = _load(args.plot_sweep)
        plot_sweep(recs, args.figure)
        print(sweep_table(recs))
    elif args.sweep:
        sweep(args)
    elif args.overlap:
        overlap(args)
    else:
        compare(args)


if __name__ == "__main__":
    main()
