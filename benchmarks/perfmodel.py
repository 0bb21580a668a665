"""Validate the performance model (:mod:`spgnn.plan.model`) on held-out shapes and whole runs.

The fit and the held-out kernel check are :mod:`spgnn.plan.calibrate`'s
(``spgnn calibrate --model [--validate]``); this suite adds what takes
whole training epochs or many ranks:

* :func:`measure_epochs`: every 2-rank configuration's GCN epoch, measured
  and predicted;
* :func:`validate_compute_fresh` / :func:`validate_ranking`: the one-command
  validations that append to ``benchmarks/results/perfmodel.jsonl``;
* :func:`extrapolation_table`: the model's top configurations at 64-4096
  ranks (nothing launched).

Timings on a shared machine are noisy: every number is the median of
``reps`` runs after a warm-up.  Never used by unit tests.
"""

import os
import statistics
import time

import numpy as np

from spgnn.plan.calibrate import calibrate, measure_collectives, validate_compute
from spgnn.plan.model import Calibration, fit_comm, load_calibration, predict_epoch, rank_configs

from ._common import ROOT, THREAD_VARS


def thread_env(argv):
    """One BLAS/OpenMP/Numba thread per process unless the environment says otherwise (the
    committed calibration's setting; one rank per core)."""
    return {v: os.environ.get(v, "1") for v in THREAD_VARS}


# ------------------------------------------------------------------------- whole epochs
#: Configurations measured at 2 ranks (every one a 2-rank job can run).
EPOCH_CONFIGS = (("1d", 1, None), ("1d-aware", 1, None), ("15d", 2, None), ("15d-aware", 2, None),
                 ("3d", 1, (2, 1, 1)), ("3d", 1, (1, 2, 1)), ("3d", 1, (1, 1, 2)))


def _epoch_graph(spec, feat, classes, seed=0):
    """The topology of ``spec`` with dense random features and labels (dense first layer)."""
    from spgnn.io import Graph, load_graph

    g = load_graph(spec)
    rng = np.random.default_rng(seed)
    n = g.adj.shape[0]
    g = Graph(adj=g.adj, features=rng.standard_normal((n, feat)).astype(np.float32),
              labels=rng.integers(0, classes, n), name=g.name)
    return g.random_split(0.6, 0.2, seed=seed)


def measure_epochs(comm, spec, cal, *, feat=64, hidden=64, classes=8, epochs=7, configs=None,
                   backend=None):
    """Per configuration: measured and predicted epoch and communication seconds. Collective.

    Measured epoch: the median over ``epochs`` (after one warm-up) of the
    slowest rank's time; measured communication: the median over epochs of
    the slowest rank's ledger seconds (every collective of the epoch; a
    collective's seconds include waiting for the slower rank).  Returns the
    rows on rank 0.
    """
    from spgnn.gnn import GCN, Adam, DistGraph, Trainer, placement_for
    from spgnn.io.preprocess import normalized_adjacency as normalize_adjacency

    graph = _epoch_graph(spec, feat, classes)
    dims = [feat, hidden, classes]
    rows = []
    for algo, c, grid in configs or EPOCH_CONFIGS:
        kw = {"c": c} if algo.startswith("15d") else {"grid": grid}
        dg = DistGraph.from_graph(graph, comm, placement_for(algo, **kw), backend=backend,
                                  normalize_features=False)
        model = GCN(dg.num_features, hidden, dg.num_classes, layers=2, dropout=0.0)
        trainer = Trainer(model, dg, Adam(model.param_groups(0), lr=0.01))
        trainer.train_epoch()                                   # warm-up (plans, compile)
        total, comm_s = [], []
        for _ in range(epochs):
            comm.barrier()
            with comm.track("bench-epoch") as st:
                t0 = time.perf_counter()
                trainer.train_epoch()
                dt = time.perf_counter() - t0
            counted = sum(e.seconds for e in st.events)
            got = comm.allreduce(np.array([dt, counted]), op="max", label="bench:time")
            total.append(float(got[0]))
            comm_s.append(float(got[1]))
        if comm.rank == 0:
            pred = predict_epoch(normalize_adjacency(graph.adj), algo, comm.size, dims, cal,
                                 replication=c, grid=grid)
            comp, pcomm = pred.split()
            rows.append({"config": pred.label, "measured_s": statistics.median(total),
                         "predicted_s": pred.seconds, "measured_comm_s": statistics.median(comm_s),
                         "predicted_comm_s": pcomm, "predicted_compute_s": comp})
    return rows if comm.rank == 0 else None


def spearman(x, y):
    """Spearman's rank correlation of two sequences (no ties expected)."""
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1]) if len(x) > 1 else 1.0


def extrapolation_table(spec, cal, ranks=(64, 256, 1024, 4096), dims=(128, 128, 128, 32),
                        partition="metis", top=3):
    """Top configurations per P on ``spec`` (planner + model, nothing launched). Local."""
    from spgnn.io import load_adjacency
    from spgnn.partition import partition_graph, permute
    from spgnn.io.preprocess import normalized_adjacency as normalize_adjacency

    adj, name = load_adjacency(spec)
    a = normalize_adjacency(adj)
    cache = {}

    def offsets_for(blocks):
        if blocks not in cache:
            perm, offsets, _ = partition_graph(adj, partition, blocks, seed=0)
            cache[blocks] = (permute(a, perm), offsets)
        return cache[blocks]

    from spgnn.partition import double_permutation

    out = []
    for p in ranks:
        ranked = rank_configs(a, p, list(dims), cal, offsets_for=offsets_for)
        best3d = next(r for r in ranked if r.algorithm == "3d")
        other = next((r for r in ranked if r.algorithm != "3d"), None)
        # the best 3d grid once more with --permute double (seed 0): its nnz balance priced
        a3d = offsets_for(p)[0]
        double = predict_epoch(a3d, "3d", p, list(dims), cal, grid=best3d.grid,
                               permutation=double_permutation(a3d, 0))
        out.append({"graph": name, "ranks": p, "dims": list(dims), "partition": partition,
                    "top": [{**r.to_dict(), "label": r.label} for r in ranked[:top]],
                    "best_3d": {**best3d.to_dict(), "label": best3d.label},
                    "place_of_best_3d": ranked.index(best3d) + 1,
                    "best_3d_permute_double": {**double.to_dict(), "label": double.label},
                    "best_other": None if other is None else {**other.to_dict(),
                                                              "label": other.label},
                    "place_of_best_other": None if other is None else ranked.index(other) + 1})
    return out


#: Where ``validate-compute`` and ``validate-ranking`` append their records (one JSON per line).
RESULTS = str(ROOT / "benchmarks" / "results" / "perfmodel.jsonl")
#: The load average above which a record is marked not quiet (2 cores here).
QUIET_LOAD = 1.5


def _conditions():
    """Load average and thread settings, recorded with every validation (timings mean little
    without them)."""
    return {"loadavg": [round(v, 2) for v in os.getloadavg()],
            "threads": {k: os.environ.get(k) for k in THREAD_VARS}}


def validate_compute_fresh(previous, reps=7, log=None):
    """Fit the compute model on the fitting shapes, then test it on the held-out ones. Local.

    Both halves in one process, minutes apart, so the fit and the check see
    the same machine state.  Returns ``(calibration, record)``; the record
    holds the median relative errors, per-row predictions and, for SpMM,
    the median error per graph and per width (a structural miss shows as one
    graph or one width far off, noise as scatter).
    """
    before = _conditions()
    cal = calibrate(None, reps=reps, log=log, previous=previous)
    res = validate_compute(cal, reps=reps, log=log)
    by = {}
    for name, m, z, f, t, pred in res["spmm"]:
        err = abs(pred - t) / t
        by.setdefault(f"graph {name}", []).append(err)
        by.setdefault(f"width {f}", []).append(err)
    res["spmm_median_error_by"] = {k: statistics.median(v) for k, v in by.items()}
    res["spmm_coefficients"] = list(cal.spmm)
    res["conditions"] = {"before": before, "after": _conditions()}
    return cal, res


def validate_ranking(comm, cal, graphs, reps=7, repeats=3):
    """Every 2-rank configuration's epoch, measured and predicted, ``repeats`` times. Collective.

    Each repeat re-measures the collectives first (α–β of this moment) and
    then every configuration of :data:`EPOCH_CONFIGS` on every graph.  Per
    graph and repeat: Spearman's ρ, the model's and the measured best, and
    the *regret*: the measured epoch of the model's pick over the measured
    best (1.0: the model picked the fastest).  Returns the record on rank 0.
    """

    out = {"ranks": comm.size, "conditions": {"before": _conditions()}, "repeats": []}
    for _ in range(repeats):
        rows = measure_collectives(comm, reps=reps)
        fitted = Calibration(fit_comm(rows), cal.spmm, cal.gemm, cal.meta, cal.gemm_table)
        rep = {"comm_fit": fitted.comm, "graphs": {}}
        for g in graphs:
            got = measure_epochs(comm, g, fitted, epochs=reps)
            if comm.rank == 0:
                rep["graphs"][g] = _ranking_summary(got)
        out["repeats"].append(rep)
    out["conditions"]["after"] = _conditions()
    return out if comm.rank == 0 else None


def _ranking_summary(rows):
    m = [r["measured_s"] for r in rows]
    pr = [r["predicted_s"] for r in rows]
    errs = [abs(r["predicted_comm_s"] - r["measured_comm_s"]) / r["measured_comm_s"]
            for r in rows if r["measured_comm_s"] > 0]
    pick = int(np.argmin(pr))
    return {"rows": rows, "spearman_epoch": spearman(m, pr),
            "model_best": rows[pick]["config"], "measured_best": rows[int(np.argmin(m))]["config"],
            "regret": m[pick] / min(m),
            "comm_median_error": statistics.median(errs) if errs else None,
            "epoch_median_error": statistics.median(abs(a - b) / b for a, b in zip(pr, m))}


def _append(record, path):
    import json

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "a") as fh:
        fh.write(json.dumps(record, default=float) + "\n")


def _quiet_note(record):
    loads = [record["conditions"][k]["loadavg"][0] for k in ("before", "after")]
    return (f"load average {loads[0]:.2f} -> {loads[1]:.2f}"
            + ("" if max(loads) <= QUIET_LOAD else
               f"  ** NOT QUIET (> {QUIET_LOAD}): the timings carry other processes' load **"))


def _print_compute(res):
    print(f"validate-compute: held-out median relative error  SpMM {res['spmm_median_error']:.1%}"
          f"  GEMM {res['gemm_median_error']:.1%}  (target <= 25 %; {_quiet_note(res)})")
    for k, v in sorted(res["spmm_median_error_by"].items()):
        print(f"  SpMM {k:<28} {v:.1%}")


def _print_ranking(res):
    print(f"validate-ranking at P = {res['ranks']}: {_quiet_note(res)}")
    print(f"  {'repeat':>6} {'graph':<16} {'rho':>6} {'model best':<16} {'measured best':<16} "
          f"{'regret':>7} {'comm err':>9} {'epoch err':>9}")
    for k, rep in enumerate(res["repeats"]):
        for g, r in rep["graphs"].items():
            ce = "-" if r["comm_median_error"] is None else f"{r['comm_median_error']:.0%}"
            print(f"  {k + 1:>6} {g:<16} {r['spearman_epoch']:>+6.2f} {r['model_best']:<16} "
                  f"{r['measured_best']:<16} {r['regret']:>7.2f} {ce:>9} "
                  f"{r['epoch_median_error']:>9.0%}")


def table_markdown(rows):
    """The extrapolation table as docs/performance_model.md shows it."""
    def cell(r):
        return f"{r['label']} {r['seconds'] * 1e3:.2f} ms"

    out = ["| graph | P | 1st | 2nd | 3rd | best non-3d (place) | best 3d, --permute double |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        top = [cell(r) for r in row["top"]] + [""] * (3 - len(row["top"]))
        other = (f"{cell(row['best_other'])} ({row['place_of_best_other']})"
                 if row["best_other"] else "-")
        out.append(f"| {row['graph']} | {row['ranks']} | {' | '.join(top[:3])} | {other} | "
                   f"{cell(row['best_3d_permute_double'])} |")
    return "\n".join(out)


def main(argv=None):
    """``compute`` (one process), ``epochs`` (mpiexec -n 2), ``table``, and the one-command
    validations ``validate-compute`` (one process) and ``validate-ranking`` (mpiexec -n 2),
    which append to benchmarks/results/perfmodel.jsonl: JSON to --out."""
    import argparse
    import json


    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("mode", choices=("compute", "epochs", "table", "validate-compute",
                                    "validate-ranking"))
    p.add_argument("--calibration", default=None)
    p.add_argument("--graph", action="append", default=None)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--repeats", type=int, default=3,
                   help="validate-ranking: whole measurements, to show whether the ranking "
                        "reproduces")
    p.add_argument("--save-calibration", default=None, metavar="FILE",
                   help="validate-compute: write the calibration it fitted (communication "
                        "from --calibration)")
    p.add_argument("--results", default=RESULTS,
                   help="validate-*: the JSON-lines file to append to (default "
                        "benchmarks/results/perfmodel.jsonl)")
    p.add_argument("--ranks-per-node", type=int, default=None, metavar="N",
                   help="table: consecutive ranks per node, with --inter")
    p.add_argument("--inter", default="1e-4,1e-8", metavar="ALPHA,BETA",
                   help="table: inter-node alpha (s) and beta (s/B) with --ranks-per-node")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    cal = load_calibration(args.calibration)
    result = {"mode": args.mode, "calibration": args.calibration, "machine": None}
    from spgnn.bench import machine

    result["machine"] = machine()
    if args.mode == "validate-compute":
        import time

        t0 = time.perf_counter()
        fitted, res = validate_compute_fresh(cal, reps=args.reps)
        result.update(res, wall_seconds=time.perf_counter() - t0)
        if args.save_calibration:
            fitted.save(args.save_calibration)
        _append(result, args.results)
        _print_compute(result)
        return 0
    if args.mode == "validate-ranking":
        import time

        from spgnn import Communicator

        t0 = time.perf_counter()
        comm = Communicator.world()
        res = validate_ranking(comm, cal, args.graph or ["ca-astroph", "ego-facebook"],
                               reps=args.reps, repeats=args.repeats)
        if comm.rank == 0:
            result.update(res, wall_seconds=time.perf_counter() - t0)
            _append(result, args.results)
            _print_ranking(result)
        return 0
    if args.mode == "compute":
        result.update(validate_compute(cal, reps=args.reps))
    elif args.mode == "table":
        if args.ranks_per_node:
            alpha, beta = (float(v) for v in args.inter.split(","))
            cal = cal.with_nodes(args.ranks_per_node, {"default": (alpha, beta)})
            result["nodes"] = {"ranks_per_node": args.ranks_per_node, "inter": [alpha, beta]}
        result["table"] = [row for g in (args.graph or ["ca-astroph", "email-enron"])
                           for row in extrapolation_table(g, cal)]
        if args.out:            # the JSON goes to the file; the table to the screen
            with open(args.out, "w") as fh:
                fh.write(json.dumps(result, indent=1, default=float) + "\n")
            print(table_markdown(result["table"]))
            return 0
    else:
        from spgnn import Communicator


        comm = Communicator.world()
        result["ranks"] = comm.size
        result["graphs"] = {}
        # the collectives are measured in this job, just before the epochs: the load of a
        # shared machine moves beta 2-fold within minutes (docs/performance_model.md)
        rows = measure_collectives(comm, reps=args.reps)
        cal = Calibration(fit_comm(rows), cal.spmm, cal.gemm, cal.meta, cal.gemm_table)
        result["comm_fit"] = cal.comm
        for g in args.graph or ["ca-astroph"]:
            rows = measure_epochs(comm, g, cal, epochs=args.reps)
            if comm.rank == 0:
                result["graphs"][g] = _ranking_summary(rows)
        if comm.rank != 0:
            return 0
    text = json.dumps(result, indent=1, default=float)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    print(text)
    return 0
