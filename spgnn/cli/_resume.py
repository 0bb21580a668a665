"""A training run's checkpoints: the directory lock, the data fingerprint, the saved state and the resume.

Used by ``python -m spgnn train``.  A checkpoint holds everything a
bit-identical resume needs (parameters, optimizer state, epoch counter,
seed: dropout masks, permutations and samples are keyed by ``(seed,
epoch)``), the model-selection state and the per-epoch history; a resume
must come from the same configuration (:meth:`TrainConfig.record
<spgnn.gnn.config.TrainConfig.record>`) and the same data
(:func:`graph_fingerprint`).
"""

import zlib

import numpy as np
import scipy.sparse as sp

from ..checkpoint import DirectoryLock, load_training_state
from ..errors import CheckpointError, NonFiniteError
from ..gnn.config import EXCHANGE_RECORD_DEFAULTS
from ..io import read_manifest

__all__ = ["data_fingerprint", "graph_fingerprint", "lock", "resume", "checkpoint_state"]


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
    """Restore the newest usable checkpoint; ``(history, resumed_from)``. Collective."""
    spec = config.spec
    state = load_training_state(comm, config.resume, spec.checkpoint_format, record,
                                f"--model {spec.name} training",
                                defaults=None if config.minibatch else EXCHANGE_RECORD_DEFAULTS)
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
    if selection is not None and state.get("selection"):
        selection.best = dict(state["selection"]["best"])
        selection.best_state = state["selection"]["best_state"]
    return state.get("history", []), trainer.epoch


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
