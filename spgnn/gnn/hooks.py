"""Hooks of :meth:`Trainer.fit <spgnn.gnn.train.Trainer.fit>`: metrics, evaluation, progress, checkpoints.

A hook's methods run on every rank, in the order the hooks are given:
``on_fit_start(trainer)``, ``on_epoch_end(trainer, record)`` after every
epoch (returning True asks to stop; the trainer agrees on it across ranks)
and ``on_fit_end(trainer)``.  A hook may add keys to the epoch's record for
the hooks after it.  Hooks that communicate say so; every rank runs them in
the same order, so their collectives match.
"""

import sys
import warnings

import numpy as np

from ..checkpoint import save_checkpoint_collective
from ..errors import SpgnnTrainingWarning

__all__ = ["Hook", "Metrics", "EvaluateEvery", "ProgressBar", "Checkpoint", "StalledLoss",
           "SELECTIONS"]

#: Which epoch's model :class:`EvaluateEvery` keeps: the best on validation, or the last.
SELECTIONS = ("best-val", "last")


class Hook:
    """Base class: every method does nothing."""

    def on_fit_start(self, trainer):
        pass

    def on_epoch_end(self, trainer, record):
        return False

    def on_fit_end(self, trainer):
        pass


class Metrics(Hook):
    """Per-epoch loss, training accuracy, seconds and bytes of all ranks. Collective.

    Adds ``bytes_all_ranks`` (bytes every rank sent in the epoch, one
    all-reduce labelled ``train:report``) to each record and keeps
    ``history``: one ``[loss, train_acc, bytes_all_ranks]`` per epoch,
    continued from ``history`` when resuming.  ``losses``, ``seconds``,
    ``bytes`` and ``phases`` hold this run's epochs (``bytes``: what this
    rank sent; ``phases``: this rank's ``seconds_by_phase``,
    :func:`spgnn.gnn.train.epoch_phases`); :meth:`phase_report` sums them up.
    """

    def __init__(self, history=()):
        self.history = [list(h) for h in history]
        self.losses, self.seconds, self.bytes, self.phases = [], [], [], []
        self.last = None

    def on_epoch_end(self, trainer, record):
        total = int(trainer.comm.allreduce(np.array([record["bytes"]], dtype=np.int64),
                                           label="train:report")[0])
        record["bytes_all_ranks"] = total
        self.history.append([float(record["loss"]), float(record["train_acc"]), total])
        self.losses.append(float(record["loss"]))
        self.seconds.append(float(record["seconds"]))
        self.bytes.append(int(record["bytes"]))
        self.phases.append(record.get("seconds_by_phase"))
        self.last = record
        return False

    def phase_report(self, comm):
        """Seconds per epoch by phase, as ``train --json`` reports them. Collective.

        The mean over this run's epochs -- the first left out when there are
        more, as for ``seconds_per_epoch`` (it compiles kernels) -- and then
        over the ranks of ``comm`` (one small ``allgather_obj``, label
        ``train:report``): ``epoch`` (the wall time), ``compute``, ``comm``
        (``{label: seconds}``; a rank without a label counts 0),
        ``quantize`` and ``wait`` (None unless measured), which sum to
        ``epoch``.  None when this run trained no epoch.
        """
        recs = [(t, ph) for t, ph in zip(self.seconds, self.phases) if ph is not None]
        recs = recs[1:] if len(recs) > 1 else recs
        mine = _mean_phases([dict(ph, epoch=t) for t, ph in recs])
        parts = [p for p in comm.allgather_obj(mine, label="train:report") if p is not None]
        return _mean_phases(parts)


def _mean_phases(phases):
    """The mean of ``seconds_by_phase`` dicts (with ``epoch``); None for none. Local."""
    if not phases:
        return None
    n = len(phases)
    labels = sorted(set().union(*(ph["comm"] for ph in phases)))
    waits = [ph["wait"] for ph in phases]
    return {"epoch": sum(ph["epoch"] for ph in phases) / n,
            "compute": sum(ph["compute"] for ph in phases) / n,
            "comm": {k: sum(ph["comm"].get(k, 0.0) for ph in phases) / n for k in labels},
            "quantize": sum(ph["quantize"] for ph in phases) / n,
            "wait": None if any(w is None for w in waits) else sum(waits) / n}


class EvaluateEvery(Hook):
    """Evaluate every ``every`` epochs; remember the best validation accuracy. Collective.

    After each evaluation (epochs whose count is a multiple of ``every``),
    ``best`` holds ``best_val_acc``, ``test_acc_at_best_val`` and
    ``best_epoch`` (the earliest epoch with the highest validation accuracy:
    the test set never decides).  With ``select="best-val"`` the parameters
    of that epoch are kept (``best_state``) and :meth:`restore_best` puts
    them back.  The accuracies are all-reduced, so every rank takes the same
    decision.
    """

    def __init__(self, every, select="last", best=None, best_state=None):
        if int(every) < 1:
            raise ValueError(f"EvaluateEvery: every must be >= 1, but got {every}")
        if select not in SELECTIONS:
            raise ValueError(f"EvaluateEvery: select must be one of {SELECTIONS}, but got "
                             f"{select!r}")
        self.every, self.select = int(every), select
        self.best = dict(best) if best else {"best_val_acc": None, "test_acc_at_best_val": None,
                                             "best_epoch": None}
        self.best_state = best_state
        #: ``[epoch, val_acc, test_acc]`` of this run's evaluations (time-to-accuracy)
        self.curve = []

    def on_epoch_end(self, trainer, record):
        if trainer.epoch % self.every:
            return False
        e = trainer.evaluate()
        self.curve.append([trainer.epoch, e["val_acc"], e["test_acc"]])
        if self.best["best_val_acc"] is None or e["val_acc"] > self.best["best_val_acc"]:
            self.best = {"best_val_acc": e["val_acc"], "test_acc_at_best_val": e["test_acc"],
                         "best_epoch": trainer.epoch}
            if self.select == "best-val":
                self.best_state = trainer.model.state_dict()
        return False

    def restore_best(self, trainer):
        """Load the best epoch's parameters; False when none were kept. Local."""
        if self.best_state is None:
            return False
        trainer.model.load_state_dict(self.best_state)
        return True


class ProgressBar(Hook):
    """A tqdm bar on rank 0 (stderr): loss, training accuracy, bytes of all ranks.

    ``total`` epochs, starting at the trainer's epoch; needs :class:`Metrics`
    before it for the bytes (``bytes_all_ranks``; otherwise this rank's).
    """

    def __init__(self, total, desc=""):
        self.total, self.desc = int(total), str(desc)
        self.bar = None

    def on_fit_start(self, trainer):
        if trainer.comm.rank != 0:
            return
        from tqdm import tqdm

        self.bar = tqdm(total=self.total, initial=min(trainer.epoch, self.total), unit="epoch",
                        file=sys.stderr, desc=self.desc, dynamic_ncols=True)

    def on_epoch_end(self, trainer, record):
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{record['loss']:.4f}", acc=f"{record['train_acc']:.3f}",
                                 bytes=f"{record.get('bytes_all_ranks', record['bytes']):,}",
                                 refresh=False)
            self.bar.update(1)
        return False

    def on_fit_end(self, trainer):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class Checkpoint(Hook):
    """Write the whole job's state every ``every`` epochs. Collective.

    ``make_state(trainer)`` returns the dict rank 0 writes (it may
    communicate: every rank calls it); :func:`spgnn.checkpoint.save_checkpoint_collective`
    writes it atomically (temporary file, fsync, rename: a crash mid-write
    leaves the previous checkpoint intact).
    """

    def __init__(self, directory, every, make_state):
        if int(every) < 1:
            raise ValueError(f"Checkpoint: every must be >= 1, but got {every}")
        self.directory, self.every, self.make_state = directory, int(every), make_state

    def on_epoch_end(self, trainer, record):
        if trainer.epoch % self.every == 0:
            state = self.make_state(trainer)
            save_checkpoint_collective(trainer.comm, self.directory,
                                       state if trainer.comm.rank == 0 else None,
                                       step=trainer.epoch)
        return False


class StalledLoss(Hook):
    """Warn once (rank 0, :class:`~spgnn.errors.SpgnnTrainingWarning`) when the training loss
    has not moved for ``patience`` epochs. Local.

    "Not moved": every one of the last ``patience`` epochs' losses within
    ``rtol`` (relative) of the first of them.  The loss is the same on every
    rank, so rank 0 alone speaks.  A run whose loss never moves is learning
    nothing: zero or constant inputs, dead activations, a learning rate far
    too small; it used to end with rc 0 at chance accuracy and no word.
    """

    def __init__(self, patience=10, rtol=1e-7):
        if int(patience) < 2:
            raise ValueError(f"StalledLoss: patience must be >= 2, but got {patience}")
        self.patience, self.rtol = int(patience), float(rtol)
        self.losses, self.warned = [], False

    def on_epoch_end(self, trainer, record):
        self.losses = (self.losses + [float(record["loss"])])[-self.patience:]
        first = self.losses[0]
        if (not self.warned and len(self.losses) == self.patience
                and all(abs(v - first) <= self.rtol * max(abs(first), 1e-30) for v in self.losses)):
            self.warned = True
            if trainer.comm.rank == 0:
                warnings.warn(f"train: the training loss has stayed at {first:.6g} for "
                              f"{self.patience} epochs (through epoch {trainer.epoch - 1}); "
                              f"check the inputs (features, edge weights, labels) and the "
                              f"learning rate", SpgnnTrainingWarning, stacklevel=2)
        return False
