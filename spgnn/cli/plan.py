"""``python -m spgnn plan``: exact bytes and an α–β time for SpMM algorithms at any rank count.

Nothing is launched at those sizes: the planner (:mod:`spgnn.plan.events`)
replays each algorithm's communication on the partitioned graph.  Plans for
configurations that fit in 8 ranks are tested equal to real ledgers.
"""

import json
import os
import subprocess
import sys

import numpy as np

from spgnn.core.codec import QUANTIZE_CHOICES
from spgnn.core.spmm import DISTRIBUTED_ALGORITHMS
from spgnn.gnn.placement import PERMUTES
from spgnn.grid import parse_grid
from spgnn.partition import PARTITIONERS, partition_graph, permute, write_partition_file

from . import json_safe
from ._graph_options import add_graph_options, graph_options

#: Distributed SpGEMM ``A·A`` algorithms (spgnn.core.mxm) the command also plans.
MXM_ALGOS = ("mxm-1d", "mxm-summa")


def add_parser(sub):
    p = sub.add_parser("plan", help="plan SpMM communication for many rank counts without running them")
    p.add_argument("--graph", required=True, help="dataset name (cora), graph file or generator "
                                                  "spec (rmat:16:16)")
    add_graph_options(p)
    p.add_argument("--ranks", default="8,64,256,1024", help="comma-separated rank counts")
    p.add_argument("--feat", type=int, default=128, help="columns of X (default 128)")
    p.add_argument("--algos", default=",".join(DISTRIBUTED_ALGORITHMS),
                   help="comma-separated algorithms: SpMM ones, and mxm-1d, mxm-summa "
                        "(SpGEMM A·A; summa only at square rank counts)")
    p.add_argument("--partition", default="metis", choices=tuple(PARTITIONERS),
                   help="row order and blocks (spgnn.partition.PARTITIONERS; default metis)")
    p.add_argument("--replication", type=int, default=2, help="c for 15d algorithms (default 2)")
    p.add_argument("--grid", help="XxYxZ for 3d (default: Plexus's model's best grid per P)")
    p.add_argument("--itemsize", type=int, default=4, help="bytes per element of X (default 4)")
    p.add_argument("--alpha", type=float, help="latency in seconds (default: measured)")
    p.add_argument("--beta", type=float, help="seconds per byte (default: measured)")
    p.add_argument("--save-partition", metavar="FILE",
                   help="write the partition used (one part id per vertex); with several part "
                        "counts, FILE gets a .<parts> suffix per count")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--aggregation", default="",
                   help="for 1d-aware, also the message rows and fp32 bytes of these cut-edge "
                        "aggregations, e.g. post,pre,hybrid (docs/communication.md)")
    p.add_argument("--quantize", default="none", choices=QUANTIZE_CHOICES,
                   help="with --aggregation: also the bytes of the same exchanges as codes "
                        "(feature-axis packing, bf16 parameters: data and parameters); with "
                        "--memory: the 1d-aware peaks include the codec buffers")
    p.add_argument("--time", action="store_true",
                   help="predict a GCN epoch's time for every configuration (1d, 1d-aware, "
                        "15d/15d-aware x c, 3d x grid) per rank count, ranked, with the "
                        "performance model (spgnn.plan.model)")
    p.add_argument("--dims", default=None,
                   help="with --time: layer widths D0,D1,...,DL (default FEAT,FEAT,FEAT)")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="with --time: calibration file (default $SPGNN_CALIBRATION or "
                        "~/.cache/spgnn/calibration.json, else built-in defaults)")
    p.add_argument("--memory", action="store_true",
                   help="with --time: each configuration's predicted per-rank peak bytes "
                        "(spgnn.plan.memory) beside its time")
    p.add_argument("--op", default="train", choices=("train", "spmm"),
                   help="with --time: what is ranked and priced: a GCN training epoch (train, "
                        "the default) or one 'spgnn spmm' command of --feat columns (spmm: its "
                        "one-multiply ranking and, with --memory, the peak of that command, "
                        "spgnn.plan.memory_spmm; --partition as spmm's, which defaults to none)")
    p.add_argument("--top", type=int, default=5, help="with --time: configurations shown per P")
    p.add_argument("--permute", default="none", choices=PERMUTES,
                   help="with --time: price 3d with train's --permute double (the P_r, P_c "
                        "drawn from --seed)")
    p.add_argument("--agg-blocks", type=int, default=1, metavar="K",
                   help="with --time: price 3d with train's --agg-blocks K (K chunked "
                        "all-reduces per aggregation)")
    add_node_arguments(p)
    s = p.add_argument_group("--memory --model sage: the per-rank peak of partitioned minibatch "
                             "training (spgnn.plan.memory_minibatch; the train options of the "
                             "same names)")
    s.add_argument("--model", default=None, choices=("sage",),
                   help="with --memory: price train --model sage --hec ... instead of GCN "
                        "configurations (no --time needed)")
    s.add_argument("--hec", default=None, choices=("off", "on", "none"),
                   help="as train's (default: none given, replicated sampling)")
    s.add_argument("--bulk", type=int, default=None, help="without --hec: as train's (16)")
    s.add_argument("--partition-mode", default=None, choices=("replicated", "partitioned"),
                   help="without --hec: as train's (default replicated; shards: partitioned, "
                        "the sampler's graph in P/c block rows, c = --replication)")
    s.add_argument("--fanout", default="15,10,5")
    s.add_argument("--batch-size", type=int, default=512)
    s.add_argument("--hidden", type=int, default=None, help="default: sage's (64)")
    s.add_argument("--hec-capacity", type=int, default=None)
    s.add_argument("--hec-levels", type=int, default=None)
    s.add_argument("--features", default=None, metavar="SPEC",
                   help="replace (or provide) the node features, as train's")
    s.add_argument("--labels", default=None, metavar="SPEC", help="as train's")
    s.add_argument("--split", default=None, help="as train's")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(command="plan")
    return p


def add_node_arguments(p):
    """``--ranks-per-node`` and ``--inter`` (shared with ``calibrate --model``)."""
    p.add_argument("--ranks-per-node", type=int, default=None, metavar="N",
                   help="consecutive ranks per node: collectives whose group spans nodes use "
                        "the inter-node alpha-beta, with the contention of the groups sharing "
                        "a node (default: the calibration file's, else one node)")
    p.add_argument("--inter", default=None, metavar="ALPHA,BETA",
                   help="inter-node latency (s) and seconds per byte for every collective "
                        "kind (default: the calibration file's comm_inter)")


def apply_node_arguments(cal, args, what):
    """The calibration with ``--ranks-per-node`` / ``--inter`` applied. Local; ValueError if bad."""
    inter = None
    if args.inter is not None:
        try:
            a, b = (float(v) for v in args.inter.split(","))
        except ValueError:
            raise ValueError(f"{what}: --inter must be ALPHA,BETA, but got {args.inter!r}") \
                from None
        inter = {"default": (a, b)}
    rpn = args.ranks_per_node if args.ranks_per_node is not None else cal.ranks_per_node
    if rpn is not None and rpn < 1:
        raise ValueError(f"{what}: --ranks-per-node must be >= 1, but got {rpn}")
    if inter is None and rpn is not None and cal.comm_inter is None:
        raise ValueError(f"{what}: --ranks-per-node needs the inter-node alpha-beta: --inter "
                         f"ALPHA,BETA (the calibration has no comm_inter)")
    if inter is None and rpn == cal.ranks_per_node:
        return cal
    return cal.with_nodes(rpn, inter if inter is not None else cal.comm_inter)


def _alpha_beta(args):
    """User values, else a 2-rank ping-pong (here or through mpiexec), else documented defaults."""
    from spgnn.plan.calibrate import DEFAULT_ALPHA, DEFAULT_BETA

    if args.alpha is not None and args.beta is not None:
        return args.alpha, args.beta, "given"
    from spgnn.comm.launch import find_mpiexec

    mpiexec = find_mpiexec()
    if mpiexec is not None and "PMI_RANK" not in os.environ and "PMI_SIZE" not in os.environ:
        try:
            out = subprocess.run([mpiexec, "-n", "2", sys.executable, "-m", "spgnn", "calibrate",
                                  "--json"], capture_output=True, text=True, timeout=60,
                                 stdin=subprocess.DEVNULL)
            got = json.loads(out.stdout.strip().splitlines()[-1])
            alpha = args.alpha if args.alpha is not None else got["alpha"]
            beta = args.beta if args.beta is not None else got["beta"]
            return alpha, beta, "measured (2-rank ping-pong)"
        except (subprocess.SubprocessError, ValueError, IndexError, KeyError, OSError):
            pass
    return (args.alpha if args.alpha is not None else DEFAULT_ALPHA,
            args.beta if args.beta is not None else DEFAULT_BETA, "defaults")


def _parse_list(text, what, cast=str):
    try:
        items = [cast(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"plan: --{what} must be a comma-separated list, but got {text!r}") from None
    if not items:
        raise ValueError(f"plan: --{what} is empty")
    return items


#: Largest rank count a plan is made for: the planner's work and memory grow with P.
MAX_PLAN_RANKS = 1 << 20


def _check_plan_args(args):
    """Raise ValueError for options no plan can use (before the graph is read). Local."""
    if not 1 <= args.itemsize <= 16:
        raise ValueError(f"plan: --itemsize must lie in [1, 16] bytes, but got {args.itemsize}")
    if args.feat < 1 or args.replication < 1:
        raise ValueError(f"plan: --feat and --replication must be >= 1, but got {args.feat} and "
                         f"{args.replication}")
    for name in ("alpha", "beta"):
        v = getattr(args, name)
        if v is not None and not (np.isfinite(v) and v >= 0):
            raise ValueError(f"plan: --{name} must be a finite number >= 0, but got {v}")
    if args.top < 1:
        raise ValueError(f"plan: --top must be >= 1, but got {args.top}")
    ranks = _parse_list(args.ranks, "ranks", int)
    if ranks and max(ranks) > MAX_PLAN_RANKS:
        raise ValueError(f"plan: --ranks must be at most {MAX_PLAN_RANKS}, but got {max(ranks)}")


def plan_all(args):
    """Every (ranks, algorithm) plan as dicts, plus the partitions used. Local."""
    from spgnn.io import load_adjacency
    from spgnn.plan.events import best_grid_3d, plan_mxm, plan_spmm


    _check_plan_args(args)
    ranks_list = _parse_list(args.ranks, "ranks", int)
    algos = _parse_list(args.algos, "algos")
    bad = [a for a in algos if a not in DISTRIBUTED_ALGORITHMS + MXM_ALGOS]
    if bad or min(ranks_list) < 1:
        raise ValueError(f"plan: algorithms must be among {DISTRIBUTED_ALGORITHMS + MXM_ALGOS} and ranks "
                         f"positive, but got algos={algos}, ranks={ranks_list}")
    adj, name = load_adjacency(args.graph, **graph_options(args))
    n = adj.shape[0]
    alpha, beta, source = _alpha_beta(args)
    partitions = {}

    def ordered(blocks):
        if blocks not in partitions:
            perm, offsets, stats = partition_graph(adj, args.partition, blocks, seed=args.seed)
            partitions[blocks] = (perm, offsets, permute(adj, perm))
        return partitions[blocks]

    rows = []
    for p in ranks_list:
        for algo in algos:
            extra, blocks = {}, p
            if algo in MXM_ALGOS:                  # SpGEMM A·A (float64 values)
                kind = algo[len("mxm-"):]
                if kind == "summa" and int(round(p ** 0.5)) ** 2 != p:
                    continue                       # SUMMA needs a square grid
                _, offsets, a = ordered(p) if kind == "1d" else (None, None, adj)
                plan = plan_mxm(a, a, kind, p, offsets=offsets, b_offsets=offsets)
                row = plan.to_dict(alpha, beta)
                row["setup_bytes_total"] = plan.bytes_total("setup")
                rows.append(row)
                continue
            if algo in ("15d", "15d-aware"):
                if p % args.replication:
                    continue                       # c must divide P
                blocks = p // args.replication
                extra["replication"] = args.replication
            if algo == "3d":
                grid = (parse_grid(args.grid, p, what="plan: --grid") if args.grid
                        else best_grid_3d(n, p, [args.feat] * 3))
                extra["grid"] = grid
                a, offsets = adj, None             # 3D volumes do not depend on the pattern
            else:
                _, offsets, a = ordered(blocks)
            plan = plan_spmm(a, algo, p, args.feat, offsets=offsets, itemsize=args.itemsize, **extra)
            row = plan.to_dict(alpha, beta)
            if "grid" in extra:
                row["grid"] = "x".join(map(str, extra["grid"]))
            if "replication" in extra:
                row["replication"] = extra["replication"]
            if algo == "1d-aware" and args.aggregation:
                row["aggregation"] = _aggregation_rows(a, offsets, args)
            rows.append(row)
    meta = {"graph": name, "n": n, "nnz": int(adj.nnz), "feat": args.feat,
            "partition": args.partition, "alpha": alpha, "beta": beta, "alpha_beta": source}
    if args.time:
        meta["time"], meta["timed"] = time_all(args, adj, ordered)
    return meta, rows, partitions


def _aggregation_rows(a, offsets, args):
    """``{mode: {"rows", "bytes"}}`` of one forward exchange (paper 004). Local."""
    from spgnn.core.hybrid import predict_bytes, predict_messages

    out = {}
    for mode in _parse_list(args.aggregation, "aggregation"):
        rows = int(predict_messages(a, offsets, mode).sum())
        out[mode] = {"rows": rows, "bytes": rows * args.feat * args.itemsize}
        if getattr(args, "quantize", "none") != "none":
            data, params = predict_bytes(a, offsets, mode, args.feat, args.quantize)
            out[mode][args.quantize] = {"data": data, "params": params}
    return out


def _priced(args, ranked, ahat, dims, offsets_for=None):
    """``ranked`` as dicts; with ``--memory`` each carries ``memory_peak_bytes``, priced on the
    row blocks it was ranked on (:func:`spgnn.plan.memory.within_limit`); ``--quantize``
    prices the 1d-aware candidates' codec buffers. Pure."""
    ranking = [r.to_dict() for r in ranked]
    if getattr(args, "memory", False) and getattr(args, "op", "train") == "spmm":
        from spgnn.plan.memory_spmm import spmm_within_limit

        source = "shards" if _is_shards(args.graph) else "memory"
        for d, (_, peak) in zip(ranking, spmm_within_limit(ranked, float("inf"), a=ahat,
                                                           feat=args.feat, source=source,
                                                           offsets_for=offsets_for)):
            d["memory_peak_bytes"] = peak
        return ranking
    if getattr(args, "memory", False):
        from spgnn.plan.memory import within_limit

        for d, (_, peak) in zip(ranking, within_limit(ranked, float("inf"), a=ahat, dims=dims,
                                                      offsets_for=offsets_for,
                                                      quantize=getattr(args, "quantize",
                                                                       "none"))):
            d["memory_peak_bytes"] = peak
    return ranking


def time_all(args, adj, ordered):
    """Per rank count, every configuration's predicted epoch, fastest first. Local."""
    from spgnn.partition import double_permutation
    from spgnn.plan.model import load_calibration, rank_configs

    from ..plan.choose import aggregation_pattern

    dims = _parse_list(args.dims, "dims", int) if args.dims else [args.feat] * 3
    if len(dims) < 2 or min(dims) < 1:
        raise ValueError(f"plan: --dims needs two or more positive widths, but got {dims}")
    if args.agg_blocks < 1:
        raise ValueError(f"plan: --agg-blocks must be >= 1, but got {args.agg_blocks}")
    cal = apply_node_arguments(load_calibration(args.calibration), args, "plan")
    # the GCN multiplies by Â (symmetrised, self-loops), in the partition's order
    ahat = aggregation_pattern(adj) if args.op == "train" else adj    # spmm: A as loaded

    def offsets_for(blocks):
        perm, offsets, _ = ordered(blocks)
        return permute(ahat, perm), offsets

    out = []
    for p in _parse_list(args.ranks, "ranks", int):
        if args.op == "spmm":           # one multiply of --feat columns, as spgnn spmm ranks it
            from spgnn.plan.model import rank_spmm_configs

            ranked = rank_spmm_configs(ahat, p, args.feat, cal, offsets_for=offsets_for,
                                       itemsize=args.itemsize)
            out.append({"ranks": p, "ranking": _priced(args, ranked, ahat, dims, offsets_for)})
            continue
        ranked = rank_configs(ahat, p, dims, cal, offsets_for=offsets_for, itemsize=args.itemsize,
                              agg_blocks=args.agg_blocks,
                              permutation_for=(lambda m: double_permutation(m, args.seed))
                              if args.permute == "double" else None)
        out.append({"ranks": p, "ranking": _priced(args, ranked, ahat, dims, offsets_for)})
    meta = {"dims": dims, "calibration": cal.meta.get("source", args.calibration or "file"),
            "permute": args.permute, "agg_blocks": args.agg_blocks, "op": args.op,
            "feat": args.feat,
            "calibrated": {"compute": "compute" in cal.meta, "comm": "comm" in cal.meta},
            "ranks_per_node": cal.ranks_per_node,
            "comm_inter": None if cal.comm_inter is None else
            {k: list(v) for k, v in cal.comm_inter.items()}}
    return meta, out


def _time_table(meta, timed, top):
    nodes = (f"; {meta['ranks_per_node']} ranks per node, inter-node alpha-beta "
             f"{meta['comm_inter']['default']}" if meta.get("ranks_per_node") else "; one node")
    what = (f"one SpMM of {meta['feat']} columns" if meta.get("op") == "spmm" else
            f"GCN epoch, widths {meta['dims']}")
    lines = [f"predicted {what} (calibration: compute "
             f"{'measured' if meta['calibrated']['compute'] else 'defaults'}, communication "
             f"{'measured' if meta['calibrated']['comm'] else 'defaults'}{nodes}"
             + "".join(f"; 3d with --{k.replace('_', '-')} {meta[k]}"
                       for k, off in (("permute", "none"), ("agg_blocks", 1))
                       if meta.get(k, off) != off) + ")",
             f"{'ranks':>6} {'rank':>4} {'configuration':<20} "
             f"{'spmm s' if meta.get('op') == 'spmm' else 'epoch s':>11} {'compute s':>11} "
             f"{'comm s':>11} {'max bytes/rank':>15}"
             + (f" {'peak bytes/rank':>16}" if timed and timed[0]["ranking"]
                and "memory_peak_bytes" in timed[0]["ranking"][0] else "")]
    for entry in timed:
        for k, r in enumerate(entry["ranking"][:top]):
            name = r["algorithm"] + (f" {r['grid']}" if r["grid"] else
                                     f" c={r['replication']}" if r["algorithm"].startswith("15d")
                                     else "")
            lines.append(f"{entry['ranks']:>6} {k + 1:>4} {name:<20} {r['seconds']:>11.3e} "
                         f"{r['compute_seconds']:>11.3e} {r['comm_seconds']:>11.3e} "
                         f"{r['comm_bytes_max_rank']:>15,d}"
                         + (f" {r['memory_peak_bytes']:>16,d}" if "memory_peak_bytes" in r
                            else ""))
        best = entry["ranking"][0]
        lines.append(f"{'':>6} chosen: {best['algorithm']}"
                     + (f" --grid {best['grid']}" if best["grid"] else "")
                     + (f" --replication {best['replication']}"
                        if best["algorithm"].startswith("15d") else ""))
    return "\n".join(lines)


def _save_partitions(path, partitions, n):
    written = []
    for blocks, (perm, offsets, _) in sorted(partitions.items()):
        parts = np.zeros(n, dtype=np.int64)
        if perm is None:
            perm = np.arange(n)
        parts[perm] = np.repeat(np.arange(blocks), np.diff(offsets))
        target = path if len(partitions) == 1 else f"{path}.{blocks}"
        write_partition_file(target, parts)
        written.append(target)
    return written


def _table(meta, rows):
    lines = [f"graph {meta['graph']}: n={meta['n']}, nnz={meta['nnz']}, f={meta['feat']}, "
             f"partition {meta['partition']}; alpha={meta['alpha'] * 1e6:.2f} us, "
             f"beta={meta['beta'] * 1e9:.4f} ns/B ({meta['alpha_beta']})",
             f"{'ranks':>6} {'algorithm':<10} {'grid/c':>8} {'bytes total':>15} {'max/rank':>13} "
             f"{'setup bytes':>13} {'est. seconds':>13}"]
    for r in rows:
        shape = r.get("grid") or (f"c={r['replication']}" if "replication" in r else "")
        lines.append(f"{r['ranks']:>6} {r['algorithm']:<10} {shape:>8} {r['bytes_total']:>15,d} "
                     f"{r['bytes_max_rank']:>13,d} {r['setup_bytes_total']:>13,d} "
                     f"{r['seconds_estimate']:>13.3e}")
        for mode, v in r.get("aggregation", {}).items():
            coded = "".join(f" {k}: data={c['data']:,d} params={c['params']:,d}"
                            for k, c in v.items() if isinstance(c, dict))
            lines.append(f"{'':>6}   {mode + ' aggregation':<18} rows={v['rows']:,d} "
                         f"bytes={v['bytes']:,d}{coded}")
        for c in r["collectives"]:
            if c["phase"] == "spmm":
                calls = f" x{c['calls']}" if c["calls"] > 1 else ""
                lines.append(f"{'':>6}   {c['op'] + calls:<14} axis={','.join(c['axis']):<6} "
                             f"total={c['bytes_total']:,d} max/rank={c['bytes_max_rank']:,d} "
                             f"max msgs={c['messages_max_rank']}")
    return "\n".join(lines)


def _shard_plans(args):
    """``plan --graph DIR``: the plans and ranking from the shards' rows. Collective (every
    rank of the job reads its share of the rows; rank 0 returns ``(meta, rows)``, the others
    ``None``): no process holds the whole graph, the counts the planner and the model read
    are gathered (:mod:`spgnn.plan.from_rows`).  The row blocks are the shards' parts
    (``part_blocks``): a (ranks, configuration) whose block count neither divides nor is a
    multiple of the parts is left out."""
    import scipy.sparse as sp

    from spgnn import Communicator
    from spgnn.gnn.data import part_blocks
    from spgnn.layout import block_offsets
    from spgnn.plan.events import best_grid_3d, plan_spmm
    from spgnn.plan.from_rows import gather_counts, recorder
    from spgnn.plan.model import candidate_configs, load_calibration, rank_configs

    from . import _shards

    comm = Communicator.world()
    err = None
    try:
        _check_plan_args(args)
        ranks_list = _parse_list(args.ranks, "ranks", int)
        algos = _parse_list(args.algos, "algos")
        bad = [a for a in algos if a not in DISTRIBUTED_ALGORITHMS]
        if bad or min(ranks_list) < 1:
            raise ValueError(f"plan: --graph {args.graph} holds shards: algorithms must be among "
                             f"{DISTRIBUTED_ALGORITHMS} (mxm multiplies the whole matrix) and "
                             f"ranks positive, but got algos={algos}, ranks={ranks_list}")
        whole = [f for f, v in (("--aggregation", args.aggregation),
                                ("--save-partition", args.save_partition),
                                ("--permute double", args.permute == "double")) if v]
        if whole:
            raise ValueError(f"plan: --graph {args.graph} holds shards, partitioned when they "
                             f"were written: {', '.join(whole)} need the whole graph")
        dims = _parse_list(args.dims, "dims", int) if args.dims else [args.feat] * 3
        if args.time and (len(dims) < 2 or min(dims) < 1 or args.agg_blocks < 1):
            raise ValueError(f"plan: --dims needs two or more positive widths and --agg-blocks "
                             f">= 1, but got {dims} and {args.agg_blocks}")
        alpha, beta, source = _alpha_beta(args)
        cal = apply_node_arguments(load_calibration(args.calibration), args, "plan") \
            if args.time else None
    except ValueError as exc:
        err = exc
    comm.agree(err)
    man = _shards.read_manifest(comm, args.graph)
    n = man["n"]
    p, r = comm.size, comm.rank
    off = part_blocks(man["offsets"], p) or block_offsets(n, p)
    block = _shards.read_rows(comm, args.graph, man, off[r], off[r + 1])
    lo = off[r]
    adj = sp.csr_array(block.adj != 0, dtype=np.float32)
    del block
    nnz = int(comm.allreduce(np.array([adj.nnz], dtype=np.int64), label="auto:counts")[0])

    def row_blocks(blocks):
        return part_blocks(man["offsets"], blocks)

    def plans(a):
        out = []
        for q in ranks_list:
            for algo in algos:
                extra, blocks = {}, q
                if algo in ("15d", "15d-aware"):
                    if q % args.replication:
                        continue
                    blocks = q // args.replication
                    extra["replication"] = args.replication
                offsets = None
                if algo == "3d":
                    extra["grid"] = (parse_grid(args.grid, q, what="plan: --grid") if args.grid
                                     else best_grid_3d(n, q, [args.feat] * 3))
                else:
                    offsets = row_blocks(blocks)
                    if offsets is None:
                        continue
                out.append((algo, q, extra, plan_spmm(a, algo, q, args.feat, offsets=offsets,
                                                       itemsize=args.itemsize, **extra)))
        return out

    def timed(ahat):
        out = []
        for q in ranks_list:
            configs = [c for c in candidate_configs(q)
                       if c[0] == "3d" or row_blocks(q // c[1]) is not None]
            offsets_for = (lambda b: (ahat, row_blocks(b)))
            if args.op == "spmm":       # one multiply of A' as stored (no identity)
                from spgnn.plan.model import rank_spmm_configs

                ranked = rank_spmm_configs(ahat, q, args.feat, cal, configs=configs,
                                           offsets_for=offsets_for, itemsize=args.itemsize)
            else:
                ranked = rank_configs(ahat, q, dims, cal, configs=configs,
                                      itemsize=args.itemsize, offsets_for=offsets_for,
                                      agg_blocks=args.agg_blocks)
            out.append({"ranks": q, "ranking": _priced(args, ranked, ahat, dims, offsets_for)})
        return out

    rec, needs = recorder(n)
    plans(rec)
    counts = gather_counts(comm, adj, lo, n, needs)
    ahat_counts = None
    if args.time:
        rec, needs = recorder(n)
        timed(rec)
        ahat_counts = gather_counts(comm, adj, lo, n, needs,
                                    add_identity=args.op == "train")
    if r != 0:
        return None
    rows = []
    for algo, q, extra, plan in plans(counts):
        row = plan.to_dict(alpha, beta)
        if "grid" in extra:
            row["grid"] = "x".join(map(str, extra["grid"]))
        if "replication" in extra:
            row["replication"] = extra["replication"]
        rows.append(row)
    meta = {"graph": man.get("name") or str(args.graph), "n": n, "nnz": nnz, "feat": args.feat,
            "partition": man.get("partition", {}).get("method", "none"), "alpha": alpha,
            "beta": beta, "alpha_beta": source, "shards": len(man["offsets"]) - 1,
            "read_by": p}
    if args.time:
        meta["time"] = {"dims": dims, "calibration": cal.meta.get("source",
                                                                  args.calibration or "file"),
                        "permute": "none", "agg_blocks": args.agg_blocks,
                        "op": args.op, "feat": args.feat,
                        "calibrated": {"compute": "compute" in cal.meta,
                                       "comm": "comm" in cal.meta},
                        "ranks_per_node": cal.ranks_per_node,
                        "comm_inter": None if cal.comm_inter is None else
                        {k: list(v) for k, v in cal.comm_inter.items()}}
        meta["timed"] = timed(ahat_counts)
    return meta, rows


def _sage_config(args):
    """The :class:`~spgnn.gnn.config.TrainConfig` ``plan --memory --model sage`` prices. Local."""
    from spgnn.gnn.config import TrainConfig

    sharded = _is_shards(args.graph)
    kw = dict(graph=args.graph, model="sage", hec=args.hec, fanout=args.fanout,
              batch_size=args.batch_size, hidden=args.hidden, seed=args.seed, bulk=args.bulk,
              hec_capacity=args.hec_capacity if args.hec == "on" else None,
              hec_levels=args.hec_levels if args.hec == "on" else None)
    if args.hec is None:
        mode = getattr(args, "partition_mode", None) or ("partitioned" if sharded else None)
        if mode == "partitioned":
            kw.update(partition_mode=mode, replication=args.replication)
    if not sharded:
        kw.update(partition=args.partition if args.hec is not None else "none",
                  features=args.features, labels=args.labels,
                  split=args.split, name=getattr(args, "name", None), num_nodes=args.num_nodes,
                  relabel=args.relabel)
    return TrainConfig(**kw)


def _is_shards(path):
    from . import _shards
    return _shards.is_shard_dir(path)


def sage_memory(args):
    """``plan --memory --model sage``: the predicted per-rank peak at each of ``--ranks``. Local.

    Without ``--hec``: replicated sampling (the graph's own order, even
    evaluation blocks).  In memory the graph is loaded and partitioned as ``train --hec`` does
    (:meth:`HaloGraph.build <spgnn.gnn.partitioned.HaloGraph.build>`); from
    shards each part's rows are read in turn (the shards' parts are the
    partition), never the whole graph at once.
    """
    from spgnn.gnn.data import part_blocks
    from spgnn.gnn.minibatch import shard_pattern_rows
    from spgnn.io import shards as shard_io
    from spgnn.io.preprocess import neighbour_pattern
    from spgnn.layout import block_offsets
    from spgnn.partition import partition_graph, permute_graph
    from spgnn.plan.memory_minibatch import (counts_from_summaries, halo_counts,
                                             partitioned_view_counts, rank_summary,
                                             top_degrees_needed, top_degrees_of,
                                             with_partitioned_view)

    cfg = _sage_config(args)
    partitioned = cfg.hec is None and cfg.partition_mode == "partitioned"
    c = int(cfg.replication) if partitioned else 1
    out = []
    graph = None
    for p in _parse_list(args.ranks, "ranks", int):
        if p % c:
            raise ValueError(f"plan: --partition-mode partitioned at {p} ranks needs "
                             f"--replication c dividing it, but got c={c}")
        if cfg.sharded:
            man = shard_io.read_manifest(cfg.graph)
            off = part_blocks(man["offsets"], p)
            if off is None:
                raise ValueError(f"plan: --graph {args.graph} has {len(man['offsets']) - 1} "
                                 f"parts: --hec at {p} ranks needs a divisor or multiple")
            summaries, tops = [], []
            keep = top_degrees_needed(cfg.batch_size, cfg.fanout, man["n"])
            for r in range(p):
                block = shard_io.read_rows(cfg.graph, man, off[r], off[r + 1])
                rows = shard_pattern_rows(block)
                tops.append(top_degrees_of(np.diff(np.asarray(rows.indptr)), keep))
                summaries.append(rank_summary(r, off, rows.indices, rows.nnz,
                                              np.count_nonzero(block.train), off,
                                              rows.indices, rows.nnz))
                del block, rows
            counts = counts_from_summaries(summaries, man["n"], off, off, man["num_features"],
                                           man["num_classes"], sharded=True)
            if partitioned:             # block row i: ranks i*c .. i*c + c - 1's rows
                nnz = np.asarray(counts.view_nnz, dtype=np.int64).reshape(-1, c).sum(axis=1)
                counts = with_partitioned_view(counts, off[::c], nnz,
                                               top_degrees_of(np.concatenate(tops), keep))
            name = man.get("name") or str(cfg.graph)
        elif cfg.hec is None:           # replicated sampling: the graph's order, even blocks
            graph = cfg.load_graph() if graph is None else graph
            pattern = neighbour_pattern(graph.adj)
            counts = halo_counts(pattern, block_offsets(graph.num_nodes, p),
                                 graph.train_mask, graph.features.shape[1], graph.num_classes)
            if partitioned:             # the sampler's P/c even block rows
                counts = partitioned_view_counts(counts, pattern,
                                                 block_offsets(graph.num_nodes, p // c),
                                                 top_degrees_needed(cfg.batch_size,
                                                                    cfg.fanout,
                                                                    graph.num_nodes))
            name = graph.name
        else:
            graph = cfg.load_graph() if graph is None else graph
            perm, off, _ = partition_graph(graph.adj, cfg.partition, p, cfg.seed,
                                           train_mask=graph.train_mask)
            perm = np.arange(graph.num_nodes) if perm is None else np.asarray(perm)
            pg = permute_graph(graph, perm)
            counts = halo_counts(neighbour_pattern(pg.adj), off, pg.train_mask,
                                 graph.features.shape[1], graph.num_classes)
            name = graph.name
        pred = cfg.sage_peak(counts)
        out.append({"ranks": p, "graph": name, "n": counts.n, "hec": cfg.hec,
                    "partition_mode": "partitioned" if partitioned else None,
                    "replication": c if partitioned else None,
                    "fanout": list(cfg.fanout), "batch_size": cfg.batch_size,
                    "hidden": cfg.hidden, "sharded": counts.sharded,
                    "sampler_priced": counts.top_degrees is not None,
                    "memory_peak_bytes": pred["peak"], **pred})
    return out


def _sage_table(rows):
    lines = []
    for e in rows:
        mode = (f"--hec {e['hec']}" if e["hec"] else
                f"--partition-mode partitioned --replication {e['replication']}"
                if e.get("partition_mode") == "partitioned" else "(replicated sampling)")
        lines.append(f"predicted per-rank peak of train --model sage {mode} on "
                     f"{e['graph']} (n={e['n']:,d}, {'shards' if e['sharded'] else 'in memory'},"
                     f" --fanout {','.join(map(str, e['fanout']))} --batch-size "
                     f"{e['batch_size']} --hidden {e['hidden']}) at {e['ranks']} ranks: "
                     f"{e['peak']:,d} bytes ({e['peak'] / 2**20:,.0f} MiB)")
        lines.append(f"{'rank':>6} {'peak':>14} {'setup*':>14} {'held':>14} {'hec alloc':>14} "
                     f"{'hec rss~':>14} {'iteration<=':>14} {'evaluation':>14}")
        for r, peak in enumerate(e["per_rank"]):
            held = sum(v[r] for k, v in e["held"].items() if k != "hec")
            lines.append(f"{r:>6} {peak:>14,d} {e['setup'][r]:>14,d} {held:>14,d} "
                         f"{e['held']['hec'][r]:>14,d} {e['hec_resident'][r]:>14,d} "
                         f"{e['iteration'][r]:>14,d} {e['evaluation'][r]:>14,d}")
    lines.append("peak = baseline + max(setup*, held + max(iteration, evaluation)) + hec rss; "
                 "* fitted; <= an upper bound (sampled blocks at their largest); ~ an "
                 "estimate (docs/scale.md, 'Minibatch and HEC')")
    if any(e.get("partition_mode") == "partitioned" for e in rows):
        # the distributed sampler's per-hop rows are bounded from the pattern's largest
        # degrees (partitioned_sampling_bytes); RSS above the counted arrays is not priced
        lines.append("--partition-mode partitioned: the iteration includes the distributed "
                     "sampler's per-hop rows, bounded from the pattern's largest degrees "
                     "(numba backend); measured 0.59-0.71x the peak at c=2 and 1.09-1.21x it "
                     "at c=1 on plsbm:100000 at 4 ranks (docs/scale.md)")
    return "\n".join(lines)


def run(args):
    from . import _shards
    if getattr(args, "model", None) == "sage":
        if not args.memory:
            raise ValueError("plan: --model sage applies with --memory (the per-rank peak of "
                             "partitioned minibatch training)")
        if int(os.environ.get("PMI_RANK", "0")) != 0:
            return 0
        rows = sage_memory(args)
        if args.json:
            print(json.dumps(json_safe({"sage_memory": rows}), allow_nan=False), flush=True)
        else:
            print(_sage_table(rows))
        return 0
    if getattr(args, "memory", False) and not args.time:
        raise ValueError("plan: --memory applies with --time (it prices the ranked "
                         "configurations)")
    if _shards.is_shard_dir(args.graph):
        got = _shard_plans(args)            # every rank reads its share of the shards
        if got is None:
            return 0
        meta, rows = got
        partitions = {}
    else:
        rank = int(os.environ.get("PMI_RANK", "0"))
        if rank != 0:
            return 0        # under mpiexec only rank 0 plans (nothing is collective here)
        meta, rows, partitions = plan_all(args)
    saved = _save_partitions(args.save_partition, partitions, meta["n"]) if args.save_partition else []
    if args.json:
        print(json.dumps(json_safe({**meta, "plans": rows, "saved_partitions": saved}),
                         allow_nan=False), flush=True)
    else:
        print(_table(meta, rows))
        if args.time:
            print(_time_table(meta["time"], meta["timed"], args.top))
        for path in saved:
            print(f"partition written to {path}")
    return 0
