"""``Trainer``: the one training loop (``fit`` with hooks) over a batch source, evaluation, exact resumption.

:class:`Trainer` runs ONE :meth:`Trainer.train_epoch` over any batch source
(:mod:`spgnn.gnn.sources`): the whole graph (:class:`FullGraph`, one step per
epoch, optionally with a per-epoch feature ``transform`` such as label
propagation), sampled minibatches (:class:`Sampled`) or partitioned ones with
halo inputs and the optional embedding cache (:class:`Halo`).  For every
batch: forward, loss, backward, the source's reduction, one finite check,
one optimizer step; one record per epoch.  Around it:

* :meth:`Trainer.fit` -- epochs, optional evaluation, hooks
  (:mod:`spgnn.gnn.hooks`: evaluation with model selection, progress bar,
  metrics, checkpoints) and a callback; a stop asked for on any rank stops
  every rank (one small all-reduce), so a rank-local decision cannot hang
  the job;
* :meth:`Trainer.evaluate` / :meth:`Trainer.predict` -- an evaluation-mode
  forward pass of the model on the source's whole graph
  (:class:`GraphContext`);
* one state format (:meth:`Trainer.state_dict`): ``epoch``, ``seed``, the
  model's and the optimizer's states, and a ``placement`` record (the
  source's) that a restore must match.  Dropout masks, minibatch
  permutations and samples are keyed by ``(seed, epoch, ...)``: that pair is
  the whole random state.
"""

import time

import numpy as np

from ..backends import get_backend
from ..comm.stats import CommStats, blocked_seconds
from ..core.dist_dense import DistDenseMatrix
from ..errors import DimensionMismatch, NonFiniteError
from .sources import FullGraph, Source

__all__ = ["Trainer", "non_finite_error", "epoch_phases"]


def epoch_phases(seconds, events, clocks0, clocks1, waits_timed):
    """Where one epoch's ``seconds`` went on this rank. Local.

    ``comm``: ``{label: seconds}``, the time inside the communicator calls
    of the epoch's steps (``events``; the same labels as the bytes), the
    timed barriers excluded (a non-blocking call counts its start and its
    wait, not the computation overlapped in between); ``wait``: the timed
    barriers before the epoch's collectives (``clocks1 - clocks0``; None
    when ``waits_timed`` is off: the waiting is then inside ``comm``);
    ``quantize``: the exchange codec (encode and decode); ``compute``: the
    rest of ``seconds`` -- local kernels, sampling, the optimizer, Python,
    and the per-step finite check's one-flag all-reduce.  The four sum to
    ``seconds``.
    """
    comm = {}
    for ev in events:
        comm[ev.label] = comm.get(ev.label, 0.0) + blocked_seconds(ev)
    wait = clocks1.get("wait", 0.0) - clocks0.get("wait", 0.0)
    quantize = clocks1.get("quantize", 0.0) - clocks0.get("quantize", 0.0)
    compute = seconds - sum(comm.values()) - wait - quantize
    return {"compute": compute, "comm": dict(sorted(comm.items())), "quantize": quantize,
            "wait": wait if waits_timed else None}


def non_finite_error(model, loss, epoch):
    """A :class:`~spgnn.errors.NonFiniteError` when ``loss`` or a gradient is not finite, else None.

    Local.  Checked before every optimizer step, so the parameters stay
    finite (a checkpoint written before stays valid): a NaN or infinity in the
    inputs reaches the gradients even where ReLU hides it from the loss
    (``max(NaN, 0)`` is 0), which would otherwise train on silently at
    chance accuracy.
    """
    if not np.isfinite(loss):
        return NonFiniteError(f"train: epoch {epoch}: the training loss is {loss}; check the "
                              f"inputs (features, edge weights) and --lr / --weight-decay")
    for name, p in model.named_parameters():
        for what, v in (("gradient", p.grad), ("value", p.value)):
            # a NaN weight can hide completely: ReLU makes its output 0, and
            # the loss and every gradient stay finite
            if v is not None and not np.isfinite(v).all():
                return NonFiniteError(f"train: epoch {epoch}: the {what} of {name!r} is not "
                                      f"finite; check the inputs (features, edge weights) and "
                                      f"--lr / --weight-decay")
    return None


class Trainer:
    """Training of ``model`` on the batches of ``source`` with ``optimizer``.

    Construction is collective: it runs one evaluation-mode forward pass so
    that every parameter is placed (its layout chosen and its local block
    kept), the aggregation matrices and exchange plans are built, and the
    node data for the output layout are distributed; then the source's set-up
    that needs the placed model (:meth:`Source.bind`).  None of that is
    counted in epoch bytes.

    Parameters
    ----------
    model : Layer (usually :class:`~spgnn.gnn.models.Sequential` / ``GCN``)
    source : FullGraph, Sampled or Halo (:mod:`spgnn.gnn.sources`)
        A :class:`~spgnn.gnn.data.DistGraph` given directly means
        ``FullGraph(dist_graph)``.
    optimizer : Optimizer
        Over ``model``'s parameters.
    seed : int, optional
        Dropout and minibatch seed (default: ``model.seed`` or 0).

    Attributes
    ----------
    epoch : int
        Epochs trained so far (the next epoch's dropout key).
    time_waits : bool
        Measure the waiting in each epoch (default False): every collective
        of :meth:`train_epoch` runs a timed barrier first
        (``time_waits`` of :class:`spgnn.comm.stats.Ledger`), so the record's
        ``seconds_by_phase`` has ``wait`` and its communication times hold
        the calls alone.  Costs one barrier per collective.
    source : the batch source
    graph : the source's graph (DistGraph, MinibatchGraph or HaloGraph)
    """

    def __init__(self, model, source, optimizer, *, seed=None):
        if not isinstance(source, Source):
            source = FullGraph(source)
        self.model, self.source, self.optimizer = model, source, optimizer
        self.graph = source.graph
        self.comm = source.comm
        self.seed = int(getattr(model, "seed", 0) if seed is None else seed)
        self.epoch = 0
        self.time_waits = False
        self._check_params()
        self._place()
        source.bind(model)

    # ------------------------------------------------------------------ set-up
    @property
    def eval_graph(self):
        """The :class:`~spgnn.gnn.data.DistGraph` that evaluation runs on."""
        return self.source.eval_graph

    @property
    def steps_per_epoch(self) -> int:
        """Optimizer steps per epoch (the same every epoch)."""
        return int(self.source.steps_per_epoch)

    def _place(self):
        """One evaluation-mode pass: places parameters, builds caches. Collective."""
        self.source.place(self.model)
        g = self.eval_graph
        ctx = g.context(training=False, epoch=0, seed=self.seed)
        ctx.scores(self.model.forward(ctx, self.source.eval_features))

    def _check_params(self):
        names = [n for n, _ in self.model.named_parameters()]
        if len(set(names)) != len(names):
            raise ValueError(f"{type(self).__name__}: parameter names must be unique, but got "
                             f"{names}")
        mine = {id(p) for p in self.model.parameters()}
        if any(id(p) not in mine for p in self.optimizer.params):
            raise ValueError(f"{type(self).__name__}: the optimizer holds parameters that are "
                             f"not the model's")

    # ---------------------------------------------------------------- training
    def train_epoch(self):
        """One epoch: for each of the source's batches, one optimizer step. Collective.

        Each step: forward, loss, backward, the source's reduction (the
        minibatch sources' one gradient all-reduce), one finite check (agreed
        unless the source's values are replicated) and the optimizer step.

        Returns
        -------
        dict
            ``epoch`` (its index), ``loss`` (mean training cross-entropy
            before each step: over the global training nodes, or over the
            epoch's batch vertices), ``train_acc``, ``bytes`` (bytes this rank
            sent during the epoch's steps, from the ledger), ``seconds``,
            ``bytes_by_label`` (the same per ledger label),
            ``seconds_by_phase`` (:func:`epoch_phases`), then the source's
            fields (minibatches: ``steps``, ``fetch_bytes``; the cache:
            ``hec``).
        """
        ledger = self.comm.ledger
        clocks0 = dict(ledger.clocks)
        before, ledger.time_waits = ledger.time_waits, bool(self.time_waits)
        try:
            rec = self._train_epoch()
        finally:
            ledger.time_waits = before
        rec["seconds_by_phase"] = epoch_phases(rec["seconds"], rec.pop("_events"),
                                               clocks0, ledger.clocks, self.time_waits)
        return rec

    def _train_epoch(self):
        src, epoch = self.source, self.epoch
        t0 = time.perf_counter()
        src.start_epoch(epoch, self.seed)
        batches = iter(src.batches(epoch, self.seed))
        events, steps = CommStats(), 0
        loss_sum = correct = count = 0.0
        while True:
            # one ledger scope per step, so that the finite check's agreement
            # (full graph: a tiny all-reduce) stays out of the epoch's bytes
            with self.comm.track(src.label) as stats:
                batch = next(batches, None)
                if batch is not None:
                    tot = src.reduce(self.model, self._backward(batch))
            events.events.extend(stats.events)
            if batch is None:
                break
            self._check_finite(float(tot[0]), epoch)
            self.optimizer.step()
            loss_sum += float(tot[0])
            correct += float(tot[1])
            count += float(tot[2])
            steps += 1
        self.epoch += 1
        rec = dict(epoch=epoch, loss=loss_sum / max(count, 1.0),
                   train_acc=correct / max(count, 1.0), bytes=int(events.total("bytes_sent")),
                   seconds=time.perf_counter() - t0,
                   bytes_by_label={k: int(v["bytes_sent"]) for k, v in events.by_label().items()})
        rec.update(src.record(events, steps))
        rec["_events"] = events
        return rec

    def _backward(self, batch):
        """Forward, loss and backward of one batch: ``(loss, correct, count)``. Collective as the context."""
        self.model.zero_grad()
        out = np.zeros(3)
        if batch.ctx is not None:                  # else an empty step: zero gradients
            logits = self.model.forward(batch.ctx, batch.x)
            loss, d, correct = batch.loss(logits)
            self.model.backward(batch.ctx, d)
            out[:] = loss, correct, batch.count
        return out

    def _check_finite(self, loss, epoch):
        """Raise on every rank before a step with a non-finite loss, gradient or value."""
        bad = non_finite_error(self.model, loss, epoch)
        if self.source.replicated:
            # parameters and all-reduced sums are identical on every rank:
            # every rank raises here, no agreement needed
            if bad is not None:
                self.comm.raise_together(bad)
        else:
            # one tiny all-reduce: sharded gradients differ per rank, so a rank
            # alone may see the first NaN
            self.comm.agree(bad)

    def evaluate(self):
        """Evaluation-mode forward (no dropout) over the whole graph. Collective.

        Returns
        -------
        dict
            ``train_acc``, ``val_acc``, ``test_acc``, ``train_loss``,
            ``val_loss``, ``test_loss``.
        """
        g = self.eval_graph
        ctx = g.context(training=False, epoch=self.epoch, seed=self.seed)
        s = ctx.scores(self.model.forward(ctx, self.source.eval_features))
        return dict(train_acc=s["train"][1], val_acc=s["val"][1], test_acc=s["test"][1],
                    train_loss=s["train"][0], val_loss=s["val"][0], test_loss=s["test"][0])

    def predict(self):
        """Predicted class per node in the input graph's order, on every rank. Collective."""
        g = self.eval_graph
        ctx = g.context(training=False, epoch=self.epoch, seed=self.seed)
        return ctx.predict(self.model.forward(ctx, self.source.eval_features))

    def fit(self, epochs, callback=None, evaluate=True, hooks=()):
        """Train ``epochs`` more epochs. Collective.

        Parameters
        ----------
        epochs : int
        callback : callable ``(trainer, record) -> bool``, optional
            Runs after each epoch (after the hooks); returning True stops.
        evaluate : bool
            Merge :meth:`evaluate` into each epoch's record (its
            ``train_acc`` becoming ``eval_train_acc``, so the training-mode
            one stays).
        hooks : sequence of :class:`~spgnn.gnn.hooks.Hook`
            ``on_fit_start``, ``on_epoch_end`` (in order; True stops) and
            ``on_fit_end`` run on every rank.

        A stop asked for by a hook or the callback on *any* rank stops every
        rank after the same epoch (one all-reduce of a flag per epoch, only
        when there is a hook or a callback).  Returns the list of records.
        An exception that leaves ``fit`` on one rank alone breaks the
        communicator (:meth:`~spgnn.comm.Communicator.section`): this rank's
        next collective raises :class:`~spgnn.errors.CommunicatorBroken`.
        """
        hooks = list(hooks)
        history = []
        # an error leaving fit on one rank alone (a callback's, say) breaks the
        # communicator: a caller that catches it gets a clear error from the next
        # collective instead of entering one its peers never join
        with self.comm.section("Trainer.fit"):
            for h in hooks:
                h.on_fit_start(self)
            for _ in range(int(epochs)):
                rec = self.train_epoch()
                if evaluate:
                    rec.update({f"eval_{k}" if k == "train_acc" else k: v
                                for k, v in self.evaluate().items()})
                history.append(rec)
                stop = False
                for h in hooks:
                    stop = bool(h.on_epoch_end(self, rec)) or stop
                if callback is not None:
                    stop = bool(callback(self, rec)) or stop
                if (hooks or callback is not None) and self._agree(stop):
                    break
            for h in hooks:
                h.on_fit_end(self)
        return history

    def _agree(self, flag):
        """True on every rank when ``flag`` is true on any. Collective (one tiny all-reduce)."""
        if self.comm.size == 1:
            return bool(flag)
        got = self.comm.allreduce(np.array([1 if flag else 0], dtype=np.int64), op="max",
                                  label="fit:stop")
        return bool(got[0])

    # --------------------------------------------------------------- resumption
    def state_dict(self):
        """Everything a bit-identical resume needs, for this rank. Local.

        Model blocks, optimizer state and step count, the epoch counter and
        the dropout seed (dropout masks are counter-based: no RNG state), plus
        the ``placement`` that :meth:`load_state_dict` checks.
        """
        return {"epoch": self.epoch, "seed": self.seed,
                "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "placement": self._placement()}

    def _placement(self):
        return self.source.placement()

    def load_state_dict(self, state):
        """Restore :meth:`state_dict` saved with the same placement. Local.

        Raises
        ------
        ValueError
            The state was saved for another placement (algorithm, grid, rank,
            graph size; for minibatch training: ranks, mode, batch size, bulk,
            sampler).
        NonFiniteError
            A parameter holds NaN or infinity.
        """
        want = self._placement()
        if state.get("placement") != want:
            raise ValueError(f"{type(self).__name__}.load_state_dict: state saved for "
                             f"{state.get('placement')}, this trainer is {want}")
        for name, v in state["model"].items():
            if not np.isfinite(v).all():
                raise NonFiniteError(f"{type(self).__name__}.load_state_dict: parameter "
                                     f"{name!r} holds non-finite values")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.epoch = int(state["epoch"])
        self.seed = int(state["seed"])

    def gather_state(self):
        """What a checkpoint of the whole job holds: ``{"global": state}``, the same on every rank.

        ``state`` is :meth:`state_dict` in a form that does not depend on the
        rank count: every parameter and every optimizer-state array as the
        whole matrix, and the ``placement`` without what describes the ranks
        (:func:`rank_free_placement`).  Parameters replicated on every rank
        (minibatch training, 1d, 1.5D) are their own global form (local);
        blocks of a 3D grid, sharded or not, are assembled (collective: one
        redistribution per array over its grid, label ``train:checkpoint``).
        :meth:`restore_state` takes it back at any rank count.
        """
        if self.source.replicated:
            state = self.state_dict()
        else:
            with self.comm.track("train:checkpoint"):
                state = self._global_state_dict()
        state["placement"] = rank_free_placement(state["placement"])
        return {"global": state}

    def _global_state_dict(self):
        """:meth:`state_dict` with every block assembled into its global matrix. Collective."""
        model = {name: p.to_global() for name, p in self.model.named_parameters()}
        opt = self.optimizer.state_dict()
        opt["state"] = [{k: _assemble(p, v) for k, v in sorted(st.items())}
                        for p, st in zip(self.optimizer.params, opt["state"])]
        return {"epoch": self.epoch, "seed": self.seed, "model": model, "optimizer": opt,
                "placement": self._placement()}

    def restore_state(self, gathered):
        """Restore :meth:`gather_state`'s result, at any rank count. Local.

        ``{"global": state}`` (and ``{"replicated": state}`` of earlier
        checkpoints, whose parameters are global anyway): this rank keeps its
        block of every matrix (:meth:`load_global_state`).  ``{"ranks":
        [...]}``, the per-rank blocks an earlier spgnn wrote for full-graph
        models, only restores on the rank count that wrote it (ValueError
        otherwise, naming both counts).
        """
        if "global" in gathered:
            self.load_global_state(gathered["global"])
        elif "replicated" in gathered:
            self.load_global_state(gathered["replicated"])
        else:
            ranks = gathered["ranks"]
            if len(ranks) != self.comm.size:
                raise ValueError(f"{type(self).__name__}.restore_state: the checkpoint holds the "
                                 f"per-rank blocks of {len(ranks)} ranks (written by an spgnn "
                                 f"before rank-count-independent checkpoints); resume it on "
                                 f"{len(ranks)} ranks, not {self.comm.size}")
            self.load_state_dict(ranks[self.comm.rank])

    def load_global_state(self, state):
        """Restore a global-form state (:meth:`gather_state`): each rank slices its blocks. Local.

        Raises
        ------
        ValueError
            The state was saved for another rank-free placement (graph size,
            dtype; minibatch mode, batch size, sampler, cache) or another
            optimizer.
        DimensionMismatch
            A parameter's global shape differs (other layer widths).
        NonFiniteError
            A parameter holds NaN or infinity.
        """
        want = rank_free_placement(self._placement())
        got = rank_free_placement(state.get("placement") or {})
        if got != want:
            raise ValueError(f"{type(self).__name__}.load_global_state: state saved for {got}, "
                             f"this trainer is {want}")
        named = dict(self.model.named_parameters())
        if set(named) != set(state["model"]):
            raise ValueError(f"{type(self).__name__}.load_global_state: parameters "
                             f"{sorted(named)} do not match {sorted(state['model'])}")
        for name, p in named.items():
            v = np.asarray(state["model"][name])
            if v.shape != p.shape:
                raise DimensionMismatch(f"{type(self).__name__}.load_global_state: parameter "
                                        f"{name!r} is {v.shape} in the state, {p.shape} here")
            if not np.isfinite(v).all():
                raise NonFiniteError(f"{type(self).__name__}.load_global_state: parameter "
                                     f"{name!r} holds non-finite values")
        self.model.load_state_dict({name: _block(p, state["model"][name])
                                    for name, p in named.items()})
        opt = dict(state["optimizer"])
        if len(opt.get("state", ())) != len(self.optimizer.params):
            raise ValueError(f"{type(self).__name__}.load_global_state: the optimizer state "
                             f"holds {len(opt.get('state', ()))} parameters, this optimizer "
                             f"{len(self.optimizer.params)}")
        opt["state"] = [{k: _block(p, v) for k, v in st.items()}
                        for p, st in zip(self.optimizer.params, opt["state"])]
        self.optimizer.load_state_dict(opt)
        self.epoch = int(state["epoch"])
        self.seed = int(state["seed"])


#: Placement keys that describe the ranks, not the model: a global-form state
#: restores across them (the rank, the rank count, the grid, the replication,
#: the partition's offsets, the algorithm --algo auto picks for the rank count).
RANK_KEYS = ("rank", "size", "ranks", "grid", "replication", "offsets", "algorithm")


def rank_free_placement(placement):
    """``placement`` without :data:`RANK_KEYS`. Pure."""
    return {k: v for k, v in placement.items() if k not in RANK_KEYS}


def _assemble(p, block):
    """The global matrix of ``block``, laid out as parameter ``p``. Collective over ``p.grid``."""
    be = get_backend(None)
    return DistDenseMatrix(be.from_host(np.ascontiguousarray(block)), p.shape, p.grid,
                           p.layout).to_global()


def _block(p, value):
    """This rank's block of the global ``value`` of parameter ``p`` (a copy). Local."""
    value = np.asarray(value)
    if value.shape != p.shape:
        raise DimensionMismatch(f"restore: a state array of parameter {p.name!r} is "
                                f"{value.shape}, the parameter {p.shape}")
    (r0, r1), (c0, c1) = p.layout.bounds(p.grid, p.shape)
    return np.array(value[r0:r1, c0:c1], copy=True)
