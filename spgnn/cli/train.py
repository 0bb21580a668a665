"""``mpiexec -n P python -m spgnn train``: GNN training on a real or generated graph.

A thin driver: parse -> :class:`~spgnn.gnn.config.TrainConfig` -> build ->
fit -> report.  The flags are generated from the config's fields (their
help, choices and groups) and the models' own options
(:class:`~spgnn.gnn.registry.ModelOption`); every default and check lives in
the config, so Python users get the same run with
``TrainConfig(...).build(comm, graph)``.

1. rank 0 loads the graph (:meth:`TrainConfig.load_graph`: a dataset name,
   a file, a folder or a generator spec; synthetic features or labels, a
   split, a projection when asked); a bad path raises on every rank;
2. :meth:`TrainConfig.build` distributes it for the model's training and
   returns the trainer (``--algo auto``: the time model's choice, logged);
3. ``--resume DIR`` restores the newest intact checkpoint (it must come from
   the same configuration and data: :meth:`TrainConfig.record` and the
   graph's fingerprint; a resume with other values is refused, naming them;
   the rank count, ``--grid`` and ``--replication`` may change);
4. :meth:`Trainer.fit <spgnn.gnn.Trainer.fit>` runs the epochs with hooks
   (metrics, evaluation with model selection, a tqdm bar on rank 0,
   checkpoints every ``--every`` epochs);
5. a final evaluation, ``--save-weights FILE``, and the report: aligned
   ``key value`` lines, or one JSON object with ``--json``.

Errors in the arguments are reported on every rank before any
communication (``Communicator.agree``).
"""

import dataclasses
import sys
import time

import numpy as np

from . import _resume, print_result
from ._backend_options import add_backend_options, resolve_backend
from ._graph_options import add_graph_options
from .spmm import replication_arg
from ..bench import StageClock, peak_rss_bytes
from ..checkpoint import write_npz_atomic
from ..comm import Communicator
from ..errors import NonFiniteError
from ..gnn import Checkpoint, Metrics, ProgressBar
from ..gnn.config import TrainConfig
from ..gnn.registry import MODELS
from ..gnn.sparse import SparseBackedMatrix
from ..io import load_on_root
from ..io.synthetic import FEATURE_SPECS, LABEL_SPECS
from ..plan.choose import describe

#: argparse ``type`` of the fields whose text is not what the field holds.
_TYPES = {"replication": replication_arg}


def add_parser(sub):
    p = sub.add_parser("train", help="train a GNN on a graph and report accuracy, time and "
                                     "bytes per epoch")
    groups = {None: p}
    for f in dataclasses.fields(TrainConfig):
        meta = dict(f.metadata)
        if "help" not in meta:
            continue                     # shared option groups, added below
        group = meta.pop("group")
        if group not in groups:
            groups[group] = p.add_argument_group(group)
        kw = {k: v for k, v in meta.items()}
        if f.name in _TYPES:
            kw["type"] = _TYPES[f.name]
        groups[group].add_argument("--" + f.name.replace("_", "-"), default=f.default, **kw)
        if f.name == "name":
            add_graph_options(p)
    for spec in MODELS.values():
        for o in spec.options:
            p.add_argument(o.flag, type=o.kind, default=None, help=f"--model {spec.name}: {o.help}")
    add_backend_options(p)
    p.add_argument("--features", default=None, metavar="SPEC",
                   help="replace (or provide) the node features: " + " | ".join(FEATURE_SPECS)
                        + " (seeded; docs/data.md)")
    p.add_argument("--labels", default=None, metavar="SPEC",
                   help="replace (or provide) the labels: " + " | ".join(LABEL_SPECS)
                        + " (random: seeded, chance accuracy; quantiles: the graph's own "
                        "target in C equal-frequency classes, docs/data.md)")
    p.add_argument("--json", action="store_true", help="print one JSON object at the end")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(command="train")
    return p


def config_from_args(args):
    """The :class:`TrainConfig` of a parsed command line (every check that needs no ranks). Local."""
    return TrainConfig.from_options(vars(args))


# ------------------------------------------------------------------ the run
def train(comm, config, *, progress=False):
    """Run ``config``'s training on ``comm``; the report dict on every rank. Collective.

    Keys: ``test_acc``, ``val_acc``, ``train_acc`` (evaluation mode, the
    reported model), ``test_loss``, ``val_loss``, ``final_loss``,
    ``loss_history`` (this run's epochs), ``epochs`` (resumed ones included),
    ``epochs_this_run``, ``resumed_from``, ``resumed_ranks`` and ``rebuilt``
    (:func:`spgnn.cli._resume.resume`), ``seconds_per_epoch`` (mean after
    the first epoch, slowest rank), ``first_epoch_seconds``,
    ``setup_seconds``, ``setup_seconds_by_stage`` (max over ranks),
    ``peak_rss_bytes`` (:func:`spgnn.bench.peak_rss_bytes`: per rank and the
    max), ``predicted_peak_bytes`` (``--model sage``: the memory model's,
    same shape), ``epoch_seconds_history`` (this run's epochs, the slowest rank's
    seconds each), ``bytes_per_epoch`` (all ranks, last epoch),
    ``bytes_per_epoch_constant``, ``bytes_per_epoch_max_rank``,
    ``bytes_per_epoch_by_label``, ``epoch_seconds_by_phase``
    (:meth:`Metrics.phase_report <spgnn.gnn.hooks.Metrics.phase_report>`),
    ``algorithm``, ``model``, ``ranks``,
    ``graph``, ``seed``, ``n``, ``features``, ``classes``, and the mode's
    own (:func:`_mode_report`).
    """
    if config.collective_timeout is not None:       # before the grids split from comm
        comm.collective_timeout = config.collective_timeout
    try:
        config.check_ranks(comm.size)
        err = None
    except (ValueError, TypeError, NonFiniteError) as exc:
        err = exc
    # every rank judges alike: agreeing makes the error one clean message from rank 0
    comm.agree(err)
    resolve_backend(comm, config)        # the same error on every rank when unusable
    t_setup = time.perf_counter()
    ckpt_dir = config.checkpoint or config.resume
    lock = _resume.lock(comm, ckpt_dir) if ckpt_dir else None      # before the long set-up
    try:
        return _setup_and_run(comm, config, ckpt_dir, t_setup, progress)
    finally:
        if lock is not None:
            lock.release()


def _setup_and_run(comm, config, ckpt_dir, t_setup, progress):
    clock = StageClock()
    # a bad path raises on every rank; shards are read by every rank in build(), a
    # generated graph (full-graph, explicit --algo) is drawn by every rank in build()
    local = config.sharded or config.generated
    with clock.stage("read"):
        graph = None if local else load_on_root(comm, config.load_graph)
    # the data a resume must match, not only the --graph string
    name, data = _on_root(comm, lambda: _data_of(config, graph))
    record = dict(config.record(comm.size), data=data)
    bar = _GenerateBar() if progress and comm.rank == 0 else None
    with clock.stage("build"):
        built = config.build(comm, graph, clock=clock, progress=bar)
    if bar is not None:
        bar.close()
    del graph
    if built.auto and comm.rank == 0:
        cfg = built.config
        print(f"--algo auto chose {built.auto[0]['algorithm']}"
              f"{' --grid ' + cfg.grid if cfg.algo == '3d' and cfg.grid else ''}"
              f"{' --replication %d' % cfg.replication if cfg.algo.startswith('15d') else ''}:"
              f"\n{describe(built.auto)}", file=sys.stderr, flush=True)
    trainer, selection = built.trainer, built.selection
    if config.hec is not None and trainer.steps_per_epoch == 1 and comm.rank == 0:
        print(f"train: warning: --batch-size {config.batch_size} gives one iteration per epoch "
              f"(the largest rank owns {config.batch_size} or fewer training vertices): the "
              f"cache is never read with --hec-delay >= 1; use a smaller --batch-size",
              file=sys.stderr, flush=True)
    history, resumed = ([], _resume.NOT_RESUMED) if not config.resume else \
        _resume.resume(comm, config, record, trainer, selection)
    metrics = Metrics(history)
    trainer.time_waits = config.phases          # epoch_seconds_by_phase's wait (--phases)
    hooks = [metrics] + built.hooks
    if progress:
        hooks.append(ProgressBar(config.epochs, f"{name} {built.algorithm} P={comm.size}"))
    if ckpt_dir:
        hooks.append(Checkpoint(ckpt_dir, config.every,
                                _resume.checkpoint_state(config.spec, record, metrics, selection)))
    setup_seconds = time.perf_counter() - t_setup
    by_stage = clock.by_stage(comm)
    inner = sum(v for k, v in by_stage.items() if k not in ("read", "build"))
    # "build" less its timed inner stages: auto-configuration, plan and placement
    by_stage["build"] = max(0.0, by_stage.get("build", 0.0) - inner)
    trainer.fit(max(0, config.epochs - trainer.epoch), evaluate=False, hooks=hooks)
    last_ev = trainer.evaluate()
    restored = selection is not None and selection.restore_best(trainer)
    ev = trainer.evaluate() if restored else last_ev
    if config.save_weights:
        _save_weights(comm, config.save_weights, trainer.model)
    t = np.asarray(metrics.seconds, dtype=np.float64)        # the first epoch loads kernels
    steady = t[1:] if t.size > 1 else t
    red = comm.allreduce(np.array([steady.sum(), t[:1].sum()]), op="max", label="train:report")
    # the slowest rank's seconds of every epoch (time-to-accuracy with the evaluations below)
    epoch_seconds = comm.allreduce(t, op="max", label="train:report").tolist() if t.size else []
    per_rank = comm.allgather_obj(metrics.bytes[-1] if metrics.bytes else 0, label="train:report")
    bytes_epoch = [h[2] for h in metrics.history]
    eg = trainer.eval_graph
    out = {"graph": name, "ranks": comm.size, "algorithm": built.algorithm,
           "model": config.model, **({"auto": built.auto} if built.auto else {}),
           "seed": config.seed, "n": eg.num_nodes, "features": eg.num_features,
           "classes": eg.num_classes, "epochs": trainer.epoch,
           "epochs_this_run": len(metrics.seconds), **resumed,
           "test_acc": ev["test_acc"], "val_acc": ev["val_acc"], "train_acc": ev["train_acc"],
           "test_loss": ev["test_loss"], "val_loss": ev["val_loss"],
           "final_loss": metrics.history[-1][0] if metrics.history else None,
           "loss_history": metrics.losses,
           "seconds_per_epoch": float(red[0] / steady.size) if steady.size else None,
           "epoch_seconds_history": epoch_seconds,
           "first_epoch_seconds": float(red[1]) if t.size else None,
           "setup_seconds": setup_seconds, "setup_seconds_by_stage": by_stage,
           "peak_rss_bytes": peak_rss_bytes(comm),
           # sage: the memory model's prediction beside it (spgnn.plan.memory_minibatch)
           **({"predicted_peak_bytes": {"per_rank": built.memory["per_rank"],
                                        "max": built.memory["peak"]}} if built.memory else {}),
           "bytes_per_epoch": int(bytes_epoch[-1]) if bytes_epoch else 0,
           "bytes_per_epoch_constant": len(set(bytes_epoch)) <= 1,
           "bytes_per_epoch_max_rank": max(per_rank),
           "bytes_per_epoch_by_label": _bytes_by_label(comm, metrics.last),
           "epoch_seconds_by_phase": metrics.phase_report(comm)}
    if config.backend == "cupy":        # node data on the device; how its buffers moved
        out.update(backend="cupy", gpu_comm=comm.gpu_comm)
    out.update(_mode_report(comm, built, metrics.last, selection, restored, last_ev))
    return out


def _data_of(config, graph):
    """``(name, fingerprint)`` of the run's data (rank 0). Local.

    A generated graph is a function of its spec and the data specs: those are
    its fingerprint (a whole-graph run of the same spec has another one).
    """
    if config.sharded:
        return config.data_name(), _resume.data_fingerprint(config, graph)
    if graph is None:
        return config.graph, {"generator": config.graph, "features": config.features,
                              "labels": config.labels,
                              "split": list(config.generated_split())}
    return graph.name, _resume.data_fingerprint(config, graph)


class _GenerateBar:
    """A tqdm bar (rank 0, stderr) over the drawing rounds of a generated graph."""

    def __init__(self):
        self.bar = None

    def __call__(self, done, total):
        if self.bar is None:
            if total < 4:
                return
            from tqdm import tqdm
            self.bar = tqdm(total=total, unit="round", desc="generate", file=sys.stderr,
                            dynamic_ncols=True)
        self.bar.update(done - self.bar.n)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _on_root(comm, compute):
    """``compute()`` on rank 0, broadcast; its error raised on every rank. Collective."""
    out, err = None, None
    if comm.rank == 0:
        try:
            out = compute()
        except (ValueError, OSError) as exc:
            err = exc
    comm.agree(err)
    return comm.bcast_obj(out, root=0, label="train:meta")


def _mode_report(comm, built, last, selection, restored, last_ev):
    """The report keys of the model's training mode. Collective (minibatch: all-reduces)."""
    cfg, trainer = built.config, built.trainer
    if not cfg.minibatch:
        out = {k: getattr(cfg, k) for k in ("aggregation", "quantize", "rounding", "label_prop")}
        if cfg.algo == "3d":
            out.update(permute=cfg.permute, agg_blocks=cfg.agg_blocks)
        if cfg.algo.startswith("15d"):
            out["replication"] = cfg.replication
        out.update(partition=cfg.partition, hidden=cfg.hidden, layers=cfg.layers,
                   dtype=cfg.dtype,
                   sparse_features=isinstance(trainer.graph.features, SparseBackedMatrix))
        return out
    last = last or {"fetch_bytes": 0}
    fetch = int(comm.allreduce(np.array([last.get("fetch_bytes", 0)], dtype=np.int64),
                               label="train:report")[0])
    best = selection.best if selection is not None else \
        {"best_val_acc": None, "test_acc_at_best_val": None, "best_epoch": None}
    out = {"sampler": cfg.sampler, "fanout": list(cfg.fanout), "batch_size": cfg.batch_size,
           "bulk": cfg.bulk, "partition_mode": cfg.partition_mode,
           "replication": trainer.source.mg.replication, "hidden": cfg.hidden,
           "steps_per_epoch": trainer.steps_per_epoch, "fetch_bytes_per_epoch": fetch,
           "model_selection": "best-val" if restored else "last",
           "last_epoch_test_acc": last_ev["test_acc"], "last_epoch_val_acc": last_ev["val_acc"],
           "eval_history": [] if selection is None else selection.curve,
           **best}
    if cfg.hec is not None:
        out.update(_hec_report(comm, trainer, last))
    return out


def _hec_report(comm, trainer, last):
    """``--hec``'s fields from the last epoch's record. Collective."""
    labels = sorted(set().union(*comm.allgather_obj(sorted(last.get("bytes_by_label", {})),
                                                    label="train:report")))
    mine = np.array([last.get("bytes_by_label", {}).get(k, 0) for k in labels], dtype=np.int64)
    tot = comm.allreduce(mine, label="train:report") if labels else mine
    hec = trainer.source.hec
    mode = "on" if hec else ("none" if getattr(trainer.source, "drop_halos", False) else "off")
    out = {"hec": mode, "iterations_per_epoch": trainer.steps_per_epoch,
           "bytes_per_epoch_by_label": {k: int(v) for k, v in zip(labels, tot)}}
    ng = comm.allreduce(np.array([last.get("nongrad_bytes_total", 0)], dtype=np.int64),
                        label="train:report")
    out["nongrad_bytes_per_epoch_mean"] = float(ng[0]) / max(1, last.get("epochs_total", 1))
    if hec is not None:
        rec = last.get("hec", {})
        lv = sorted(rec)
        fields = ("hits", "requests", "pushed", "stored", "read", "wasted", "live")
        arr = np.array([[rec[k][f] for f in fields] for k in lv], dtype=np.int64).reshape(-1)
        s = comm.allreduce(arr, label="train:report").reshape(-1, len(fields)) if lv else arr
        for i, key in enumerate("hec_" + f for f in fields):
            out[key] = {k: int(s[j, i]) for j, k in enumerate(lv)}
        out["hit_rate_per_level"] = {k: (float(s[j, 0] / s[j, 1]) if s[j, 1] else None)
                                     for j, k in enumerate(lv)}
        out["hec_config"] = hec.config_record()
        out["hec_ring_rows"] = hec.capacity
    return out


def _save_weights(comm, path, model):
    """Assemble every parameter (collective) and write them from rank 0."""
    arrays = {name: p.to_global() for name, p in model.named_parameters()}
    err = None
    if comm.rank == 0:
        try:
            write_npz_atomic(path, arrays)
        except OSError as exc:                   # a full disk: the message names the file
            err = exc
    comm.agree(err)


def _bytes_by_label(comm, last):
    """Ledger label -> bytes all ranks sent in the last epoch. Collective."""
    mine = (last or {}).get("bytes_by_label", {})
    out = {}
    for part in comm.allgather_obj(mine, label="train:report"):
        for k, v in part.items():
            out[k] = out.get(k, 0) + int(v)
    return dict(sorted(out.items()))


def run(args):
    comm = Communicator.world()
    config, err = None, None
    try:
        config = config_from_args(args)
    except (ValueError, TypeError, NonFiniteError) as exc:
        err = exc
    comm.agree(err)                     # every rank judges alike: one line from rank 0
    print_result(comm, train(comm, config, progress=not args.no_progress), args.json)
    return 0
