"""Batch sources: where the one training loop's batches come from (PyG's loaders, one loop).

:class:`~spgnn.gnn.train.Trainer` runs one ``train_epoch`` over any source
(``docs/gnn.md``, "How to add a batch source"):

* :class:`FullGraph` -- the whole distributed graph, one batch (one optimizer
  step) per epoch; an optional ``transform`` gives the input of each epoch
  (:class:`~spgnn.gnn.label_prop.LabelPropagation`);
* :class:`Sampled` -- bulks of sampled minibatches of a
  :class:`~spgnn.gnn.minibatch.MinibatchGraph`, lockstep steps with one
  gradient all-reduce each (:mod:`spgnn.gnn.minibatch`);
* :class:`Halo` -- every rank samples its own part of a
  :class:`~spgnn.gnn.partitioned.HaloGraph` (:mod:`spgnn.gnn.partitioned`),
  optionally with the historical embedding cache
  (``hec=``\\ :class:`~spgnn.gnn.hec.HECRunner`, the source's context factory).

A source yields :class:`Batch` values: the context a model runs in, its input
and what supervises the loss.  What differs per source is said by a few
members (:class:`Source`): the ledger label of an epoch, whether the
parameters are replicated (then a non-finite check needs no agreement), the
reduction after each backward, the extra record fields and the resume record.
"""

import dataclasses

import numpy as np

from ..sampling import GraphSAGESampler, LADIESSampler, sample_partitioned, sample_replicated
from .context import BlockContext, Context
from .minibatch import MODES, MinibatchGraph, bulk_positions, step_schedule
from .hec import drop_halo_columns
from .partitioned import HaloGraph, local_batches


@dataclasses.dataclass
class _Dropped:
    """A sampled minibatch whose blocks lost their halo columns (``--hec none``)."""

    blocks: list             # the sample's own (labels: its last hop's destinations)
    forward_blocks: list     # without halo columns

__all__ = ["Batch", "Source", "FullGraph", "Sampled", "Halo", "allreduce_gradients"]


@dataclasses.dataclass
class Batch:
    """One step's work on this rank.

    ctx : Context or None
        The training-mode context; None for an *empty step* (this rank has no
        minibatch in it but takes part in every collective of the step).
    x : the model's input (a DistDenseMatrix, or a block's input rows)
    mask : bool array or None
        Full graph: the supervising nodes of this rank's rows (None: the
        training mask).  Minibatches supervise every output row.
    count : float
        Loss terms the step's loss stands for: a minibatch's rows (its loss is
        a sum), or 1 for a full-graph loss, which is already the global mean.
    """

    ctx: Context = None
    x: object = None
    mask: np.ndarray = None
    count: float = 0.0

    def loss(self, logits):
        """``(loss, dlogits, correct or accuracy)`` of this batch. As ``ctx.loss``."""
        if self.mask is None:
            return self.ctx.loss(logits)
        return self.ctx.loss(logits, mask=self.mask)


class Source:
    """What :class:`~spgnn.gnn.train.Trainer` asks of a batch source (the defaults: a full graph).

    Attributes
    ----------
    label : str
        The ledger scope of an epoch's steps (``bytes``, ``bytes_by_label``).
    replicated : bool
        Parameters, gradients and the reduced loss are identical on every
        rank after :meth:`reduce`: every rank takes the same non-finite
        decision without an agreement (``comm.raise_together``); otherwise
        the decision is agreed (``comm.agree``, one tiny all-reduce outside the
        epoch's bytes).
    graph, comm, eval_graph, eval_features, steps_per_epoch
    """

    label = "epoch"
    replicated = False

    def place(self, model):
        """Before the evaluation pass that places the parameters. Local."""

    def bind(self, model):
        """After the parameters are placed (what needs the model on every rank). Collective."""

    def start_epoch(self, epoch, seed):
        """Before an epoch, outside its bytes. Collective where a source says so."""

    def batches(self, epoch, seed):
        """The epoch's :class:`Batch` values, one per optimizer step. Collective (lazily)."""
        raise NotImplementedError

    def reduce(self, model, local):
        """Reduce the step's gradients and ``local`` = (loss, correct, count); the totals."""
        return local

    def record(self, stats, steps):
        """Extra fields of an epoch record (``stats``: the epoch's ledger events). Local."""
        return {}

    def placement(self):
        """What a restored state must match. Local."""
        raise NotImplementedError


# --------------------------------------------------------------------------- #
# The whole graph
# --------------------------------------------------------------------------- #

class FullGraph(Source):
    """The whole :class:`~spgnn.gnn.data.DistGraph`: one batch, one optimizer step per epoch.

    ``transform`` (optional) gives each epoch's input and supervision mask
    instead of ``dist_graph.features`` and its training mask: an object with
    ``num_features``, ``train_input(epoch) -> (features, mask)`` and
    ``eval_features`` (:class:`~spgnn.gnn.label_prop.LabelPropagation`).
    The graph is never changed.  Gradients of sharded parameters differ per
    rank, so the non-finite check is agreed.
    """

    label = "gnn-epoch"
    replicated = False
    steps_per_epoch = 1

    def __init__(self, dist_graph, transform=None):
        self.graph, self.transform = dist_graph, transform
        self.comm = dist_graph.comm

    @property
    def eval_graph(self):
        return self.graph

    @property
    def eval_features(self):
        """The input of evaluation (and of the placing pass)."""
        return self.graph.features if self.transform is None else self.transform.eval_features

    @property
    def num_features(self):
        """Input width: what the model is built with."""
        return self.graph.num_features if self.transform is None else self.transform.num_features

    def batches(self, epoch, seed):
        """One batch, built now (its context outside the epoch's bytes). Local."""
        ctx = self.graph.context(training=True, epoch=epoch, seed=seed)
        if self.transform is None:
            return (Batch(ctx, self.graph.features, None, 1.0),)
        x, mask = self.transform.train_input(epoch)
        return (Batch(ctx, x, mask, 1.0),)

    def placement(self):
        g = self.graph
        return {"algorithm": g.algorithm, "grid": (tuple(g.grid.shape), tuple(g.grid.axis_names)),
                "rank": g.comm.rank, "size": g.comm.size, "n": g.num_nodes,
                "dtype": np.dtype(g.dtype).str}


# --------------------------------------------------------------------------- #
# Sampled minibatches
# --------------------------------------------------------------------------- #

def allreduce_gradients(model, comm, extra, label):
    """Sum every gradient and the ``extra`` scalars over all ranks in ONE all-reduce. Collective.

    The gradients are then divided by the summed ``extra[2]`` (the global
    number of loss terms: gradient of the mean loss; nothing is divided when
    it is 0).  The all-reduce runs in the parameters' dtype (counts stay
    exact below 2²⁴ in float32), and every rank gets the same sums, so
    replicas stay identical.  Returns the summed ``extra``.
    """
    params = model.parameters()
    dtype = params[0].grad.dtype
    flat = np.concatenate([p.grad.reshape(-1) for p in params]
                          + [np.asarray(extra, dtype=dtype).reshape(-1)])
    tot = comm.allreduce(flat, op="plus", label=label)
    ex = tot[tot.size - len(extra):]
    scale = dtype.type(ex[2]) if float(ex[2]) > 0 else None
    at = 0
    for p in params:
        gsum = tot[at:at + p.grad.size].reshape(p.grad.shape)
        at += p.grad.size
        p.grad[...] = gsum / scale if scale is not None else gsum
    return ex


class _Minibatches(Source):
    """What sampled sources share: checks, replicated placement, one gradient all-reduce a step."""

    replicated = True
    #: Ledger label of the per-step gradient all-reduce.
    grad_label = None

    def __init__(self, mg, sampler, batch_size, bulk):
        name = type(self).__name__
        if int(batch_size) < 1 or int(bulk) < 1:
            raise ValueError(f"{name}: batch_size and bulk must be >= 1, but got "
                             f"{batch_size} and {bulk}")
        if not isinstance(sampler, (GraphSAGESampler, LADIESSampler)):
            raise TypeError(f"{name}: sampler must be a GraphSAGESampler or "
                            f"LADIESSampler, but got {type(sampler).__name__}")
        self.mg, self.sampler = mg, sampler
        self.comm = mg.comm
        self.batch_size, self.bulk = int(batch_size), int(bulk)
        self.mode = mg.mode
        self.dtype = np.dtype(mg.features.dtype)
        self.train_ids = mg.train_ids()      # from shards: this rank's only

    @property
    def eval_graph(self):
        """Full-neighbourhood inference on the whole graph (``mg.full``)."""
        return self.mg.full

    @property
    def eval_features(self):
        return self.mg.full.features

    @property
    def num_features(self):
        return self.mg.num_features

    def place(self, model):
        hops = self.sampler.hops
        if hops != model.hops:
            raise ValueError(f"{type(self).__name__}: the sampler has {hops} hops but the model "
                             f"{model.hops} graph layers")
        model.place(self.dtype, grid=self.mg.grid)

    def _context(self, mb, epoch, seed, mb_id, factory=BlockContext):
        """A minibatch's training context and its batch. Local."""
        g = self.mg
        y = g.labels[mb.blocks[0].dst_ids]
        return factory(mb.forward_blocks, labels=y, grid=g.grid, dtype=self.dtype,
                       backend=g.backend, training=True, epoch=epoch, seed=seed, minibatch=mb_id)

    def reduce(self, model, local):
        """The step's one gradient all-reduce (empty steps send zeros). Collective."""
        return allreduce_gradients(model, self.comm, local, self.grad_label)

    def placement(self):
        return {"ranks": self.comm.size, "mode": self.mode, "replication": self.mg.replication,
                "batch_size": self.batch_size, "bulk": self.bulk, "n": self.mg.n,
                "sampler": repr(self.sampler)}


class Sampled(_Minibatches):
    """Data-parallel minibatch training on sampled blocks (was ``MinibatchTrainer``).

    Parameters
    ----------
    minibatch_graph : MinibatchGraph
    sampler : GraphSAGESampler or LADIESSampler (one hop per graph layer)
    batch_size : int, training vertices per minibatch
    bulk : int, minibatches sampled per bulk call (``k``)

    Each epoch shuffles the training vertices with ``default_rng([seed,
    epoch])``, samples ``bulk`` minibatches per call, fetches the input rows of
    a rank's share of a bulk in one exchange, and takes the steps of
    :meth:`schedule` (``docs/sage_training.md``).  Parameters are replicated;
    evaluation runs on the whole graph.
    """

    label = "sage-epoch"
    grad_label = "sage:allreduce"

    def __init__(self, minibatch_graph, sampler, *, batch_size=512, bulk=16):
        if not isinstance(minibatch_graph, MinibatchGraph):
            raise TypeError(f"Sampled: the graph must be a MinibatchGraph, but got "
                            f"{type(minibatch_graph).__name__}")
        super().__init__(minibatch_graph, sampler, batch_size, bulk)
        self.graph = minibatch_graph

    @property
    def num_batches(self) -> int:
        return -(-self.train_ids.size // self.batch_size)

    def epoch_batches(self, epoch, seed):
        """The epoch's minibatches (list of int64 arrays; minibatch ``j`` has id ``j``). Pure."""
        perm = np.random.default_rng([int(seed), int(epoch)]).permutation(self.train_ids)
        b = self.batch_size
        return [perm[j * b:(j + 1) * b] for j in range(self.num_batches)]

    def schedule(self):
        """:func:`step_schedule` of this source (same every epoch). Pure."""
        return step_schedule(self.num_batches, self.bulk, self.comm.size, self.mode,
                             self.mg.replication)

    @property
    def steps_per_epoch(self) -> int:
        return int(self.schedule().shape[0])

    def _sample(self, batches, ids, epoch):
        if self.mode == "replicated":
            return sample_replicated(self.sampler, self.mg.sampling_graph, batches, self.comm,
                                     minibatch_ids=ids, epoch=epoch)
        return sample_partitioned(self.sampler, self.mg.sampling_graph, batches,
                                  minibatch_ids=ids, epoch=epoch)

    def batches(self, epoch, seed):
        """Bulk by bulk: sample, fetch my minibatches' inputs once, one batch per step. Collective."""
        g, comm = self.mg, self.comm
        batches = self.epoch_batches(epoch, seed)
        nb = len(batches)
        p, r, c = comm.size, comm.rank, g.replication
        for b0 in range(0, nb, self.bulk):
            k = min(self.bulk, nb - b0)
            ids = np.arange(b0, b0 + k, dtype=np.int64)
            bulk = self._sample(batches[b0:b0 + k], ids, epoch)
            lo, hi = bulk_positions(k, p, r, self.mode, c)
            n_steps = max(b - a for a, b in (bulk_positions(k, p, q, self.mode, c)
                                             for q in range(p)))
            # one fetch for all my minibatches of the bulk: ids repeated
            # across them travel once
            last = bulk.blocks[-1]
            x_in = g.features.fetch(last.src_ids, validate=False)
            for t in range(n_steps):
                if t >= hi - lo:
                    yield Batch()                 # an empty step
                    continue
                ctx = self._context(bulk.minibatch(t), epoch, seed, int(bulk.minibatch_ids[t]))
                x = x_in[int(last.col_ptr[t]):int(last.col_ptr[t + 1])]
                yield Batch(ctx, ctx.input(x), None, ctx.labels.size)

    def record(self, stats, steps):
        label = self.mg.features.label
        return dict(steps=steps,
                    fetch_bytes=int(sum(stats.total("bytes_recv", label=f"{label}:{x}")
                                        for x in ("ids", "rows"))))


# --------------------------------------------------------------------------- #
# Partitioned minibatches: local sampling, halo inputs
# --------------------------------------------------------------------------- #

class Halo(_Minibatches):
    """Partitioned minibatch training with local sampling (was ``PartitionedTrainer``).

    Parameters
    ----------
    halo_graph : HaloGraph
    sampler : GraphSAGESampler or LADIESSampler (one hop per graph layer)
    batch_size : int
    hec : optional :class:`~spgnn.gnn.hec.HECRunner` (None: ``--hec off``)
        The historical embedding cache: the source's context factory (its
        :class:`~spgnn.gnn.hec.HECBlockContext` runs the cache's collective
        push / receive when the model first touches a hop) and the supplier of
        halo inputs.  One runner per source (it holds this rank's caches).

    Every rank runs ``steps_per_epoch = max_r M_r`` lockstep iterations (its
    own minibatches, then empty steps; :mod:`spgnn.gnn.partitioned`).  The
    gradient all-reduce is labelled ``hec:grad-allreduce``, the halo feature
    fetch ``halo-fetch:ids`` / ``halo-fetch:rows``.
    """

    label = "hec-epoch"
    grad_label = "hec:grad-allreduce"

    def __init__(self, halo_graph, sampler, *, batch_size=512, hec=None, drop_halos=False):
        if not isinstance(halo_graph, HaloGraph):
            raise TypeError(f"Halo: the graph must be a HaloGraph, but got "
                            f"{type(halo_graph).__name__}")
        super().__init__(halo_graph.mg, sampler, batch_size, 1)
        if drop_halos and hec is not None:
            raise ValueError("Halo: drop_halos (--hec none) and a cache exclude each other")
        self.graph = self.halo = halo_graph
        self.hec = hec
        self.drop_halos = bool(drop_halos)
        self.context_factory = BlockContext if hec is None else hec.context
        hg = halo_graph
        self.local_train = self.train_ids[(self.train_ids >= hg.lo) & (self.train_ids < hg.hi)]
        self.local_batches_count = -(-self.local_train.size // self.batch_size)
        self.steps_per_epoch = None          # max over the ranks: bind()
        self._k = None

    def bind(self, model):
        """The lockstep iteration count (one all-reduce MAX), the cache's set-up. Collective."""
        m = self.comm.allreduce(np.array([self.local_batches_count], dtype=np.int64), op="max",
                                label="hec:setup")
        self.steps_per_epoch = int(m[0])
        if self.hec is not None:
            self.hec.attach(self, model)

    def epoch_batches(self, epoch, seed):
        """This rank's minibatches of ``epoch`` (:func:`local_batches`). Pure."""
        return local_batches(self.local_train, self.batch_size, seed, epoch, self.comm.rank)

    def minibatch_id(self, k, rank=None):
        """Global id of iteration ``k``'s minibatch of ``rank``: ``k·P + rank``. Pure."""
        return int(k) * self.comm.size + (self.comm.rank if rank is None else int(rank))

    def start_epoch(self, epoch, seed):
        """The cache's reset and prefill. Collective when prefilling (outside the epoch's bytes)."""
        if self.hec is not None:
            self.hec.start_epoch(epoch, self.steps_per_epoch, seed)

    def _sample(self, batches, k, epoch):
        """This rank's minibatch ``k`` of ``epoch`` (keyed by seed, epoch and minibatch). Local."""
        return self.sampler.sample(self.halo.view, [batches[k]], [self.minibatch_id(k)],
                                   epoch=epoch)

    def replay_hec_plans(self, epochs, seed):
        """A resume at epoch ``epochs`` under ``--hec-push-cap auto``: rebuild the plan's state. Collective.

        The auto plan keeps state across epochs (the level-0 cache, the
        cumulative byte budgets, the iteration clock) that depends only on
        the seed, the epochs' samples and the features, never on the model:
        replaying the plans of epochs ``0 .. epochs - 1`` (their wants and
        level-0 pushes, no training) rebuilds it exactly, so the resumed run
        continues bit for bit.  Labels ``hec:want``, ``hec:plan:counts``,
        ``hec:push:L0:*`` inside a ``hec:resume`` scope.  Does nothing (and
        returns False) unless the cache plans its pushes.
        """
        hec = self.hec
        if hec is None or not hec.planned:
            return False
        with self.comm.track("hec:resume"):
            for ep in range(int(epochs)):
                hec.start_epoch(ep, self.steps_per_epoch, seed)
                batches = self.epoch_batches(ep, seed)
                hec.plan([self._sample(batches, k, ep) for k in range(len(batches))])
                hec.global_iter += self.steps_per_epoch     # one end() per lockstep step
        return True

    def batches(self, epoch, seed):
        """``steps_per_epoch`` lockstep iterations: sample locally, fetch halo inputs. Collective."""
        hg, hec = self.halo, self.hec
        batches = self.epoch_batches(epoch, seed)

        def sample(k):
            return self._sample(batches, k, epoch)

        planned = None
        if hec is not None and hec.planned:
            # the plan needs the epoch's frontiers first (the sampler is keyed by
            # seed, epoch and minibatch: the same samples as sampling lazily)
            planned = [sample(k) for k in range(len(batches))]
            hec.plan(planned)                                      # collective
        for k in range(self.steps_per_epoch):
            self._k = k
            mine = k < len(batches)
            mb_id = self.minibatch_id(k)
            if mine:
                mb = planned[k] if planned is not None else sample(k)
                src = mb.forward_blocks[0].src_ids
            else:
                mb, src = None, np.zeros(0, dtype=np.int64)
            if self.drop_halos:
                x = hg.local_input(src)                            # halos 0, nothing sent
            elif hec is None:
                x = hg.features.fetch(src, validate=False)        # collective, exact
            else:
                x = hec.input_rows(src)                            # solids local, halos 0
            if not mine:
                if hec is not None:
                    hec.empty_iteration(k)                         # its collectives
                yield Batch()
                continue
            if self.drop_halos:
                mb = _Dropped(mb.blocks, drop_halo_columns(mb.forward_blocks, hg.is_halo))
            ctx = self._context(mb, epoch, seed, mb_id, self.context_factory)
            if hec is not None:
                hec.begin(k, ctx)
            yield Batch(ctx, ctx.input(x), None, ctx.labels.size)

    def reduce(self, model, local):
        """End the cache's iteration, then the step's gradient all-reduce. Collective."""
        if self.hec is not None:
            self.hec.end(self._k)
        return super().reduce(model, local)

    def record(self, stats, steps):
        out = dict(steps=self.steps_per_epoch,
                   fetch_bytes=int(sum(v["bytes_recv"] for k, v in stats.by_label().items()
                                       if "halo-fetch" in k)))
        # every epoch's non-gradient bytes (halo fetches, pushes, wants, counts) so far:
        # a cache's bytes differ between epochs, so its mean is over all of them
        self.nongrad_total = getattr(self, "nongrad_total", 0) + int(sum(
            v["bytes_sent"] for k, v in stats.by_label().items() if k != self.grad_label))
        self.epochs_total = getattr(self, "epochs_total", 0) + 1
        out.update(nongrad_bytes_total=self.nongrad_total, epochs_total=self.epochs_total)
        if self.hec is not None:
            out["hec"] = self.hec.epoch_record()
        return out

    def placement(self):
        out = super().placement()
        out.update(partitioned=True, offsets=[int(v) for v in self.halo.offsets],
                   hec=None if self.hec is None else self.hec.config_record())
        if self.drop_halos:
            out["drop_halos"] = True
        return out
