"""A training run's checkpoints: the directory lock, the data fingerprint, the saved state and the resume.

Used by ``python -m spgnn train``.  A checkpoint holds everything a
bit-identical resume needs (parameters, optimizer state, epoch counter,
seed: dropout masks, permutations and samples are keyed by ``(seed,
epoch)``), the model-selection state and the per-epoch history; a resume
must come from the same configuration (:meth:`TrainConfig.record
<spgnn.gnn.config.TrainConfig.record>`) and the same data
(:func:`graph_fingerprint`), except for how the ranks are laid out
(:data:`LAYOUT_KEYS`): parameters and optimizer state are saved as whole
matrices (:meth:`Trainer.gather_state <spgnn.gnn.train.Trainer.gather_state>`),
so a run written on P ranks resumes on Q, rebuilding what is per rank by
nature (:func:`rebuilt_state`) and saying so.
"""

import sys
import zlib

import numpy as np
import scipy.sparse as sp

from ..checkpoint import DirectoryLock, load_training_state
from ..errors import CheckpointError, NonFiniteError
from ..gnn.config import EXCHANGE_RECORD_DEFAULTS
from ..io import read_manifest

__all__ = ["data_fingerprint", "graph_fingerprint", "lock", "resume", "checkpoint_state",
           "LAYOUT_KEYS", "NOT_RESUMED", "rebuilt_state"]

#: Configuration keys a resume may change: how the ranks are laid out, not the model.
LAYOUT_KEYS = ("ranks", "grid", "replication")
#: The report keys of a run that did not resume.
NOT_RESUMED = {"resumed_from": None, "resumed_ranks": None, "rebuilt": None}


def data_fingerprint(config, graph):
    """What a resume must match of the data: the shards' checksums, or the loaded graph's. Local."""
    if config.sharded:
        man = read_manifest(config.graph)
        return {"shards": [[e["file"], e["sha256"]] for e in man["files"]]}
    return graph_fingerprint(graph)


def graph_fingerprint(graph):
    """Sizes and CRC-32s of a loaded graph's arrays (what a resume must match). Local."""
    parts = {"adj": graph.adj}
    if graph.features is not None:
        parts["features"] = graph.features
    for key in ("labels", "train_mask", "val_mask", "test_mask"):
        if getattr(graph, key) is not None:
            parts[key] = getattr(graph, key)
    out = {}
    for key, a in parts.items():
        arrays = (a.indptr, a.indices, a.data) if sp.issparse(a) else (np.asarray(a),)
        out[key] = [list(np.shape(a)), [int(zlib.crc32(np.ascontiguousarray(x).view(np.uint8)
                                                       .reshape(-1))) for x in arrays]]
    return out


def lock(comm, directory):
    """Rank 0 locks the checkpoint directory for this run; an error on every rank if taken."""
    lock, err = None, None
    if comm.rank == 0:
        try:
            lock = DirectoryLock(directory).acquire()
        except (CheckpointError, OSError) as exc:
            err = exc
    comm.agree(err)
    return lock


def resume(comm, config, record, trainer, selection):
    """Restore the newest usable checkpoint; ``(history, report)``. Collective.

    ``report``: ``resumed_from`` (the checkpoint's epoch), ``resumed_ranks``
    (the rank count that wrote it) and ``rebuilt`` (what this run rebuilt
    instead of restoring, :func:`rebuilt_state`; empty when the ranks are
    laid out as they were).  A changed layout is said in one line on rank 0.
    """
    spec = config.spec
    state = load_training_state(comm, config.resume, spec.checkpoint_format, record,
                                f"--model {spec.name} training",
                                defaults=None if config.minibatch else EXCHANGE_RECORD_DEFAULTS,
                                may_differ=LAYOUT_KEYS)
    try:
        trainer.restore_state(state["trainer"])
        err = None
    except (ValueError, NonFiniteError) as exc:      # a rank may hold its own part
        err = exc
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        err = CheckpointError(f"train: the checkpoint in {config.resume} holds a malformed "
                              f"training state ({type(exc).__name__}: {exc})")
    comm.agree(err)
    if trainer.epoch > config.epochs:
        raise ValueError(f"train: the checkpoint in {config.resume} holds {trainer.epoch} "
                         f"epochs, more than --epochs {config.epochs}; ask for at least "
                         f"{trainer.epoch} (or start a new run in another directory)")
    replay = getattr(trainer.source, "replay_hec_plans", None)
    if replay is not None:                  # --hec-push-cap auto: its cross-epoch state
        replay(trainer.epoch, trainer.seed)
    if selection is not None and state.get("selection"):
        selection.best = dict(state["selection"]["best"])
        selection.best_state = state["selection"]["best_state"]
    saved = state["config"]
    changed = [k for k in LAYOUT_KEYS if k in saved and saved[k] != record[k]]
    rebuilt = rebuilt_state(config, trainer) if changed else []
    if changed and comm.rank == 0:
        layout = ", ".join(f"--{k} {saved[k] or 'default'} -> {record[k] or 'default'}"
                           for k in changed if k != "ranks")
        print(f"train: resumed from epoch {trainer.epoch} written on {saved.get('ranks')} ranks, "
              f"now on {record['ranks']}{f' ({layout})' if layout else ''}: parameters and "
              f"optimizer state restored; rebuilt: {', '.join(rebuilt)}",
              file=sys.stderr, flush=True)
    return state.get("history", []), {"resumed_from": trainer.epoch,
                                      "resumed_ranks": saved.get("ranks"), "rebuilt": rebuilt}


def rebuilt_state(config, trainer):
    """What a resume on another layout of the ranks rebuilds instead of restoring. Local.

    ``partition`` always (the graph's blocks, halos and exchange plans over
    the new ranks); minibatch training: ``minibatch streams`` (each rank's
    share of the batches and samples, keyed by ``(seed, epoch[, rank])``);
    ``--hec on``: ``hec caches`` (never saved; empty at a checkpoint with
    ``--hec-reset epoch``, except the auto plan's level-0 cache and budgets,
    which :meth:`~spgnn.gnn.sources.Halo.replay_hec_plans` rebuilds at any
    rank count).  Full-graph dropout masks and stochastic
    rounding are keyed by global ids and need nothing.
    """
    out = ["partition"]
    if trainer.source.replicated:
        out.append("minibatch streams")
    if getattr(trainer.source, "hec", None) is not None:
        out.append("hec caches")
    return out


def checkpoint_state(spec, record, metrics, selection):
    """``state(trainer)``: what the :class:`~spgnn.gnn.hooks.Checkpoint` hook writes. Local."""
    def state(tr):
        return {"format": spec.checkpoint_format, "config": record, "epoch": tr.epoch,
                "rng": {"kind": "counter-based, keyed by (seed, epoch)", "seed": tr.seed,
                        "epoch": tr.epoch},
                "trainer": tr.gather_state(), "history": metrics.history,
                "selection": None if selection is None else
                {"best": selection.best, "best_state": selection.best_state}}
    return state
