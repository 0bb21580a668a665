"""``train --model sage --hec on|off``: partitioned minibatch training with the HEC (issue 22).

The options, their checks and the ``--json`` fields of DistGNN-MB's mode
(:mod:`spgnn.gnn.partitioned`, :mod:`spgnn.gnn.hec`; ``docs/hec.md``), kept
here so that :mod:`spgnn.cli.train` only calls four hooks:
:func:`add_arguments`, :func:`check`, :func:`build` and :func:`report`.
"""

import sys

import numpy as np

from ..gnn.hec import MISS_POLICIES, HECConfig, HECRunner
from ..gnn.optim import Adam
from ..gnn.partitioned import PARTITION_METHODS, HaloGraph, PartitionedTrainer
from ..sampling import GraphSAGESampler

__all__ = ["add_arguments", "check", "enabled", "build", "report", "CONFIG_KEYS"]

#: Options a resumed run must match.
CONFIG_KEYS = ("hec", "hec_capacity", "hec_life", "hec_push_cap", "hec_delay", "miss_policy",
               "hec_prefill", "hec_levels", "hec_reset")


def add_arguments(p):
    g = p.add_argument_group("partitioned minibatch training with a historical embedding cache "
                             "(--model sage; docs/hec.md)")
    g.add_argument("--hec", default=None, choices=("on", "off"),
                   help="partitioned training (needs --partition metis|random|balanced): 'on' "
                        "caches halo embeddings pushed asynchronously, 'off' fetches halo "
                        "features exactly every iteration")
    g.add_argument("--hec-capacity", type=int, default=1_000_000, metavar="CS",
                   help="cache rows per level per rank (default 1000000)")
    g.add_argument("--hec-life", type=int, default=2, metavar="LS",
                   help="life span in iterations (default 2)")
    g.add_argument("--hec-push-cap", type=int, default=2000, metavar="NC",
                   help="rows pushed per peer per level per iteration (default 2000; on small "
                        "graphs a smaller cap sends fewer bytes, docs/hec.md)")
    g.add_argument("--hec-delay", type=int, default=1, metavar="D",
                   help="iterations between a push and its use (default 1)")
    g.add_argument("--miss-policy", default="drop", choices=MISS_POLICIES)
    g.add_argument("--hec-prefill", action="store_true",
                   help="fill the level-0 cache with every halo's features each epoch")
    g.add_argument("--hec-levels", type=int, default=None, metavar="L",
                   help="cache levels 0..L-1 only (default: all)")
    g.add_argument("--hec-reset", default="epoch", choices=("epoch", "never"),
                   help="empty the caches at each epoch start (default) or never")


def enabled(args):
    return getattr(args, "hec", None) is not None


def config(args):
    return HECConfig(cs=args.hec_capacity, ls=args.hec_life, nc=args.hec_push_cap,
                     d=args.hec_delay, miss_policy=args.miss_policy, levels=args.hec_levels,
                     reset=args.hec_reset, prefill=args.hec_prefill)


def check(args, p):
    """Raise ValueError for a bad combination. Local (every rank judges alike)."""
    if not enabled(args):
        return
    if args.model != "sage" or args.sampler != "sage":
        raise ValueError("train: --hec applies to --model sage --sampler sage")
    if args.partition not in PARTITION_METHODS:
        raise ValueError(f"train: --hec {args.hec} trains on a partitioned graph: give "
                         f"--partition {'|'.join(PARTITION_METHODS)} (a replicated graph has no "
                         f"halo vertices), not --partition {args.partition}")
    if args.partition_mode != "replicated":
        raise ValueError("train: --hec and --partition-mode partitioned exclude each other "
                         "(--hec partitions the graph itself)")
    if getattr(args, "bulk_given", args.bulk != 16):
        # refused, not ignored: the partitioned trainer samples one local minibatch per rank
        # per step (pushes and loads are per iteration); bulk sampling belongs to the
        # replicated sampler
        raise ValueError(f"train: --bulk {args.bulk} does not apply to --hec (it samples one "
                         f"local minibatch per rank per step); leave --bulk out")
    if args.hec == "on":
        config(args).validate(p)


def build(comm, args, graph, spec, fanout, dtype, options):
    """The :class:`PartitionedTrainer` of the command line. Collective."""
    hg = HaloGraph.build(graph, comm, method=args.partition, seed=args.seed, dtype=dtype,
                         backend=args.backend)
    sampler = GraphSAGESampler(fanout, frontier=args.frontier, include_dst=True, seed=args.seed)
    model = spec.build(hg.mg.num_features, hg.mg.num_classes, options)
    opt = Adam(model.param_groups(args.weight_decay), lr=args.lr)
    runner = HECRunner(config(args)) if args.hec == "on" else None
    tr = PartitionedTrainer(model, hg, sampler, opt, batch_size=args.batch_size, seed=args.seed,
                            hec=runner, dtype=dtype)
    if tr.iterations == 1 and comm.rank == 0:
        print(f"train: warning: --batch-size {args.batch_size} gives one iteration per epoch "
              f"(the largest rank owns {tr.iterations * args.batch_size} or fewer training "
              f"vertices): the cache is never read with --hec-delay >= 1; use a smaller "
              f"--batch-size", file=sys.stderr, flush=True)
    return tr, f"sage-partitioned-hec-{args.hec}"


def report(comm, trainer, last):
    """The ``--json`` fields of this mode from the last epoch's record. Collective."""
    labels = sorted(set().union(*comm.allgather_obj(sorted(last.get("bytes_by_label", {})),
                                                    label="train:report")))
    mine = np.array([last.get("bytes_by_label", {}).get(k, 0) for k in labels], dtype=np.int64)
    tot = comm.allreduce(mine, label="train:report") if labels else mine
    out = {"hec": "on" if trainer.hec else "off",
           "iterations_per_epoch": trainer.iterations,
           "bytes_per_epoch_by_label": {k: int(v) for k, v in zip(labels, tot)}}
    if trainer.hec is not None:
        rec = last.get("hec", {})
        lv = sorted(rec)
        arr = np.array([[rec[k]["hits"], rec[k]["requests"], rec[k]["pushed"]] for k in lv],
                       dtype=np.int64).reshape(-1)
        s = comm.allreduce(arr, label="train:report").reshape(-1, 3) if lv else arr
        out["hec_hits"] = {k: int(s[i, 0]) for i, k in enumerate(lv)}
        out["hec_requests"] = {k: int(s[i, 1]) for i, k in enumerate(lv)}
        out["hec_pushed"] = {k: int(s[i, 2]) for i, k in enumerate(lv)}
        out["hit_rate_per_level"] = {k: (float(s[i, 0] / s[i, 1]) if s[i, 1] else None)
                                     for i, k in enumerate(lv)}
        out["hec_config"] = trainer.hec.config_record()
        out["hec_ring_rows"] = trainer.hec.capacity
    return out
