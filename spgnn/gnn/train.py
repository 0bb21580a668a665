"""``Trainer``: full-batch training epochs, evaluation, and exact resumption."""

import numpy as np

__all__ = ["Trainer"]


def fit_epochs(trainer, epochs, callback=None, evaluate=True):
    """The ``fit`` loop shared by :class:`Trainer` and the minibatch trainer. Collective.

    ``epochs`` calls of ``trainer.train_epoch()``; with ``evaluate`` each
    record is merged with ``trainer.evaluate()`` (its ``train_acc`` becoming
    ``eval_train_acc``, so the training-mode one stays); ``callback(trainer,
    record)`` returning True stops early.  Returns the list of records.
    """
    history = []
    for _ in range(int(epochs)):
        rec = trainer.train_epoch()
        if evaluate:
            rec.update({f"eval_{k}" if k == "train_acc" else k: v
                        for k, v in trainer.evaluate().items()})
        history.append(rec)
        if callback is not None and callback(trainer, rec):
            break
    return history


class Trainer:
    """Full-batch training of ``model`` on ``dist_graph`` with ``optimizer``.

    Construction is collective: it runs one evaluation-mode forward pass so
    that every parameter is placed (its layout chosen and its local block
    kept), Â shards and exchange plans are built, and the node data for the
    output layout are distributed; none of that is counted in epoch bytes.

    Parameters
    ----------
    model : Layer (usually :class:`~spgnn.gnn.models.Sequential` / ``GCN``)
    dist_graph : DistGraph
    optimizer : Optimizer
        Over ``model``'s parameters.
    seed : int, optional
        Dropout seed (default: ``model.seed`` or 0).

    Attributes
    ----------
    epoch : int
        Epochs trained so far (the next epoch's dropout key).
    """

    def __init__(self, model, dist_graph, optimizer, *, seed=None):
        self.model, self.graph, self.optimizer = model, dist_graph, optimizer
        self.seed = int(getattr(model, "seed", 0) if seed is None else seed)
        self.epoch = 0
        ctx = dist_graph.context(training=False, epoch=0, seed=self.seed)
        logits = model.forward(ctx, dist_graph.features)
        ctx.scores(logits)
        self._check_params()

    def _check_params(self):
        names = [n for n, _ in self.model.named_parameters()]
        if len(set(names)) != len(names):
            raise ValueError(f"Trainer: parameter names must be unique, but got {names}")
        mine = {id(p) for p in self.model.parameters()}
        if any(id(p) not in mine for p in self.optimizer.params):
            raise ValueError("Trainer: the optimizer holds parameters that are not the model's")

    def train_epoch(self):
        """One epoch: forward, masked loss, backward, optimizer step. Collective.

        Returns
        -------
        dict
            ``loss`` (mean cross-entropy over the global training nodes, before
            the step), ``train_acc``, ``bytes`` (bytes this rank sent during
            the epoch, from the ledger), ``epoch`` (its index).
        """
        g = self.graph
        ctx = g.context(training=True, epoch=self.epoch, seed=self.seed)
        with g.comm.track("gnn-epoch") as stats:
            logits = self.model.forward(ctx, g.features)
            loss, dlogits, acc = ctx.loss(logits, "train")
            self.optimizer.zero_grad()
            self.model.backward(ctx, dlogits)
            self.optimizer.step()
        out = dict(epoch=self.epoch, loss=loss, train_acc=acc,
                   bytes=int(stats.total("bytes_sent")))
        self.epoch += 1
        return out

    def evaluate(self):
        """Evaluation-mode forward (no dropout). Collective.

        Returns
        -------
        dict
            ``train_acc``, ``val_acc``, ``test_acc``, ``val_loss``,
            ``train_loss``, ``test_loss``.
        """
        g = self.graph
        ctx = g.context(training=False, epoch=self.epoch, seed=self.seed)
        s = ctx.scores(self.model.forward(ctx, g.features))
        return dict(train_acc=s["train"][1], val_acc=s["val"][1], test_acc=s["test"][1],
                    train_loss=s["train"][0], val_loss=s["val"][0], test_loss=s["test"][0])

    def predict(self):
        """Predicted class per node in the input graph's order, on every rank. Collective."""
        g = self.graph
        ctx = g.context(training=False, epoch=self.epoch, seed=self.seed)
        return ctx.predict(self.model.forward(ctx, g.features))

    def fit(self, epochs, callback=None, evaluate=True):
        """Train ``epochs`` epochs. Collective.

        ``callback(trainer, record)`` runs after each epoch with the merged
        :meth:`train_epoch` (and, when ``evaluate``, :meth:`evaluate`)
        record; returning ``True`` stops early.  Returns the list of records.
        """
        return fit_epochs(self, epochs, callback, evaluate)

    def state_dict(self):
        """Everything a bit-identical resume needs, for this rank. Local.

        Model blocks, optimizer state and step count, the epoch counter and
        the dropout seed (dropout masks are counter-based: no RNG state), plus
        a description of the placement that :meth:`load_state_dict` checks.
        """
        return {"epoch": self.epoch, "seed": self.seed,
                "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "placement": self._placement()}

    def _placement(self):
        g = self.graph
        return {"algorithm": g.algorithm, "grid": (tuple(g.grid.shape), tuple(g.grid.axis_names)),
                "rank": g.comm.rank, "size": g.comm.size, "n": g.num_nodes,
                "dtype": np.dtype(g.dtype).str}

    def load_state_dict(self, state):
        """Restore :meth:`state_dict` saved by the same rank of the same placement. Local.

        Raises
        ------
        ValueError
            The state was saved for another algorithm, grid, rank or graph size.
        """
        want = self._placement()
        if state.get("placement") != want:
            raise ValueError(f"Trainer.load_state_dict: state saved for {state.get('placement')}, "
                             f"this trainer is {want}")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.epoch = int(state["epoch"])
        self.seed = int(state["seed"])
