"""Minibatch GraphSAGE training on sampled blocks, over MPI.

The end-to-end pipeline of Tripathy, Yelick, Buluç (MLSys 2024;
``research/003_matrix_sampling.md`` §4), one bulk of ``k`` minibatches at a
time:

1. **Schedule.**  Each epoch shuffles the training vertices with
   ``default_rng([seed, epoch]).permutation`` (identical on every rank) and
   cuts them into ``ceil(n_train / batch_size)`` minibatches; minibatch ``j``
   has the global id ``j`` (with ``epoch`` it keys the sampler's RNG and the
   dropout masks).  Bulks are ``[0, k), [k, 2k), ...``; the last one may be
   short, and so may the epoch's last minibatch (report §9.17: nothing is
   dropped).
2. **Sampling.**  One bulk call per ``k`` minibatches:
   :func:`~spgnn.sampling.sample_replicated` (``mode="replicated"``: ``A``
   on every rank, no communication) or
   :func:`~spgnn.sampling.sample_partitioned` (``mode="partitioned"``: ``A``
   in block rows on ``grid_15d(c)``).  Each rank receives its share of the
   bulk (:func:`bulk_positions`).
3. **Feature fetching.**  The features are row-partitioned over the ranks
   (:class:`FeatureStore`).  A rank fetches the input rows of *all* its
   minibatches of the bulk in one sparsity-aware exchange: ids are
   de-duplicated, only rows other ranks own travel (one alltoallv of ids,
   one of rows), and rows come back in request order.
4. **Steps.**  A bulk gives each rank ``k_r`` minibatches; it takes
   ``max_r k_r`` optimizer steps.  In step ``t`` every rank trains its
   ``t``-th minibatch -- or an *empty step* that contributes zero gradient
   and zero loss terms when it has fewer -- and one allreduce
   (:meth:`GraphSAGE.allreduce_gradients <spgnn.gnn.sage.GraphSAGE.allreduce_gradients>`)
   sums the gradients of the *summed* cross-entropy and the number of loss
   terms; the gradients are divided by that number.  So step ``t`` descends
   the **mean cross-entropy over the union of the batch vertices of the
   minibatches in that step** (:func:`step_schedule` lists them), then Adam
   steps identically on every rank.

What is invariant
-----------------
* The minibatches (vertex sets), their sampled blocks and dropout masks are
  a function of ``(seed, sampler seed, epoch, minibatch id)`` only -- not of
  ``P``, ``c``, ``k`` or the rank that trains them.
* With ``P`` ranks, the optimizer steps are the rows of
  :func:`step_schedule` ``(num_batches, bulk, P)``; a single process that
  averages the summed-loss gradients of exactly those minibatches per step
  (``tests/property/test_minibatch_dist.py`` does it by hand) ends with the
  same parameters up to floating-point summation order (the allreduce adds in
  its own order).  ``P`` changes the schedule (``P`` minibatches per step),
  hence the trajectory, like data-parallel SGD; when every step holds one
  minibatch (one per epoch, e.g. Cora with batch 512 > 140 training
  vertices) every ``P`` trains bit-identically, since adding the zeros of
  empty steps is exact.
* Every rank holds bit-identical parameters after every step (the allreduce
  returns the same sums everywhere and the optimizer is deterministic).

Evaluation (:meth:`MinibatchTrainer.evaluate`) is **full-neighbourhood
inference**: the model runs on a :class:`~spgnn.gnn.data.DistGraph` of the
whole graph with ``aggregation="mean"``, so every layer aggregates the mean
over *all* neighbours through spgnn's distributed sparsity-aware SpMM
(``1d-aware``) and the reported accuracies carry no sampling noise.
"""

import time

import numpy as np

from ..comm import Communicator
from ..core.dist_dense import DistDenseMatrix
from ..grid import grid_1d, grid_15d
from ..io.preprocess import neighbour_pattern
from ..io.synthetic import SYNTHETIC_HINT
from ..layout import Layout, block_bounds
from ..sampling import (GraphSAGESampler, LADIESSampler, LocalGraph, PartitionedGraph,
                        sample_partitioned, sample_replicated)
from .context import BlockContext
from .data import DistGraph
from .train import Trainer, non_finite_error

__all__ = ["FeatureStore", "MinibatchGraph", "MinibatchTrainer", "bulk_positions",
           "step_schedule", "MODES"]

#: How the sampler sees the graph (``docs/sampling.md``, report §3).
MODES = ("replicated", "partitioned")


# --------------------------------------------------------------------------- #
# Who trains what
# --------------------------------------------------------------------------- #

def bulk_positions(k, size, rank, mode="replicated", replication=1):
    """``(lo, hi)``: the positions of a bulk of ``k`` minibatches rank ``rank`` receives. Pure.

    ``"replicated"``: ``block_bounds(k, P, rank)`` (:func:`sample_replicated`).
    ``"partitioned"`` on ``grid_15d(c)`` (rank = i·c + j): process row ``i``
    samples ``block_bounds(k, P/c, i)`` and replica ``j`` keeps
    ``block_bounds(k_i, c, j)`` of them (:func:`sample_partitioned`).
    """
    if mode == "replicated":
        return block_bounds(k, size, rank)
    c = int(replication)
    if c < 1 or size % c:
        raise ValueError(f"bulk_positions: replication {c} must divide the {size} ranks")
    i, j = divmod(rank, c)
    lo, hi = block_bounds(k, size // c, i)
    a, b = block_bounds(hi - lo, c, j)
    return lo + a, lo + b


def step_schedule(num_batches, bulk, size, mode="replicated", replication=1):
    """The optimizer steps of one epoch: ``(steps, size)`` int64, minibatch id or -1. Pure.

    Row ``s`` lists, per rank, the global minibatch id it trains in step
    ``s`` (``-1``: an empty step).  The trainer follows it exactly; the
    parameters after an epoch depend on the schedule, not on which rank
    holds which entry.
    """
    num_batches, bulk = int(num_batches), int(bulk)
    if bulk < 1:
        raise ValueError(f"step_schedule: bulk must be >= 1, but got {bulk}")
    rows = []
    for b0 in range(0, num_batches, bulk):
        k = min(bulk, num_batches - b0)
        pos = [bulk_positions(k, size, r, mode, replication) for r in range(size)]
        steps = max(hi - lo for lo, hi in pos)
        for t in range(steps):
            rows.append([b0 + lo + t if lo + t < hi else -1 for lo, hi in pos])
    return np.asarray(rows, dtype=np.int64).reshape(-1, size)


# --------------------------------------------------------------------------- #
# Features, row-partitioned
# --------------------------------------------------------------------------- #

class FeatureStore:
    """Node features split by rows over the ranks of ``comm``; sparsity-aware row fetching.

    A thin adapter over a :class:`~spgnn.core.dist_dense.DistDenseMatrix` in
    ``Layout("row", row_splits=offsets)`` on a 1-D grid of ``comm``: rank
    ``r`` holds global rows ``offsets[r]:offsets[r+1]`` and :meth:`fetch` is
    :meth:`DistDenseMatrix.gather_rows` (de-duplicated, sparsity-aware
    alltoallv; ledger labels ``<label>:ids`` and ``<label>:rows``).

    Build it with :meth:`from_global` (collective).
    """

    def __init__(self, matrix, *, label="feature-fetch"):
        self.matrix = matrix
        self.comm = matrix.grid.world
        self.offsets = np.asarray(matrix.layout.offsets(matrix.grid, matrix.shape[0], 0),
                                  dtype=np.int64)
        self.n, self.width = (int(v) for v in matrix.shape)
        self.label = str(label)

    @property
    def local(self):
        """This rank's rows (a numpy array)."""
        return self.matrix.local

    @property
    def dtype(self):
        return self.matrix.dtype

    @property
    def row_bytes(self) -> int:
        return self.width * self.matrix.dtype.itemsize

    @classmethod
    def from_global(cls, x, comm, *, root=0, offsets=None, label="feature-fetch"):
        """Split a global ``(n, f)`` array by rows (``block_offsets(n, P)`` by default).

        ``root=None``: every rank passes the same ``x`` and keeps its rows (no
        communication beyond building the 1-D grid).  ``root=r``: only rank
        ``r`` needs ``x``; the blocks are scattered with one alltoallv.

        Collective: yes.
        """
        grid = grid_1d(comm)
        layout = Layout("row", row_splits=None if offsets is None else tuple(offsets))
        matrix = DistDenseMatrix.from_global(x, grid, layout, root=root)
        return cls(matrix, label=label)

    def owner(self, ids):
        """Rank owning each global row id. Local, pure."""
        return np.searchsorted(self.offsets, np.asarray(ids, dtype=np.int64), side="right") - 1

    def fetch(self, global_ids, *, validate=True):
        """Rows ``global_ids`` (any order, repeats allowed), in request order. Collective.

        :func:`spgnn.core.row_gather.gather_rows` under this store's label;
        ``validate=False`` skips the agreed range check (sampler output is
        valid by construction).
        """
        return self.matrix.gather_rows(global_ids, validate=validate, label=self.label)


# --------------------------------------------------------------------------- #
# The graph prepared for minibatch training
# --------------------------------------------------------------------------- #

class MinibatchGraph:
    """A graph distributed for minibatch training (build with :meth:`from_graph`).

    Attributes
    ----------
    full : DistGraph
        The whole graph, ``1d-aware`` over all ranks with
        ``aggregation="mean"``: evaluation, and the features.
    comm : Communicator (all ranks)
    grid : the ``grid_1d`` over ``comm`` (features, evaluation, parameters)
    mode : ``"replicated"`` or ``"partitioned"``
    replication : int, ``c`` of the partitioned grid
    sampling_graph : LocalGraph (replicated) or PartitionedGraph
    features : FeatureStore over ``full.features`` (rows ``block_offsets(n, P)``)
    labels : int64 (n,), replicated (small next to the features)
    train_mask, val_mask, test_mask : bool (n,), replicated
    n, num_features, num_classes, name, backend
    """

    def __init__(self, full, sampling_graph, labels, masks, *, mode, replication, name):
        self.full = full
        self.comm, self.grid, self.backend = full.comm, full.grid, full.backend
        self.mode, self.replication = mode, int(replication)
        self.sampling_graph = sampling_graph
        self.features = FeatureStore(full.features)
        self.labels = labels
        self.train_mask, self.val_mask, self.test_mask = masks
        self.n = int(labels.size)
        self.num_features = full.num_features
        self.num_classes = full.num_classes
        self.name = name

    @classmethod
    def from_graph(cls, graph, comm, *, mode="replicated", replication=1, root=0,
                   normalize_features=True, dtype=np.float32, backend=None):
        """Distribute ``graph`` (a :class:`spgnn.io.Graph` with features, labels and masks).

        Parameters
        ----------
        graph : Graph on rank 0 (others may pass None) when ``root=0``; the
            same graph on every rank when ``root=None``
        comm : Communicator
        mode : ``"replicated"`` (whole ``A`` on every rank) or ``"partitioned"``
            (``A`` in block rows on ``grid_15d(replication)``)
        replication : int, ``c`` (partitioned mode)
        root : 0 or None
        normalize_features : row-normalise the features (zero rows stay 0)
        dtype : feature and parameter dtype
        backend : backend of the distributed matrices

        Collective: yes -- :meth:`DistGraph.from_graph` (the whole graph,
        mean aggregation, for evaluation and the features), broadcasts of the
        labels and masks (and ``A`` in replicated mode), the sampling graph's
        scatter (partitioned mode).
        """
        if mode not in MODES:
            raise ValueError(f"MinibatchGraph: mode must be one of {MODES}, but got {mode!r}")
        if root not in (0, None):
            raise ValueError(f"MinibatchGraph: root must be 0 or None, but got {root!r}")
        c = int(replication) if mode == "partitioned" else 1
        if c < 1 or comm.size % c:
            raise ValueError(f"MinibatchGraph: replication {replication} must divide the "
                             f"{comm.size} ranks")
        have = root is None or comm.rank == root
        err, payload, a = None, None, None
        if have:
            try:
                if graph is None or graph.features is None or graph.labels is None:
                    raise ValueError(f"MinibatchGraph: the graph needs features and labels; "
                                     f"{SYNTHETIC_HINT}")
                if graph.train_mask is None or graph.test_mask is None:
                    raise ValueError("MinibatchGraph: the graph needs a split (train/test masks; "
                                     "Graph.random_split)")
                a = neighbour_pattern(graph.adj)
                n = a.shape[0]
                masks = [np.zeros(n, bool) if m is None else np.asarray(m, bool)
                         for m in (graph.train_mask, graph.val_mask, graph.test_mask)]
                payload = dict(labels=graph.labels.astype(np.int64), masks=masks, name=graph.name)
            except (ValueError, TypeError) as exc:
                err = exc
        comm.agree(err)          # a bad graph raises on every rank, not only on root
        full = DistGraph.from_graph(graph if have else None, comm, "1d-aware",
                                    adjacency="mean", backend=backend, dtype=dtype,
                                    normalize_features=normalize_features, sparse_features=False)
        if root is not None:
            payload = comm.bcast_obj(payload, root=root, label="sage-setup")
            if mode == "replicated":
                a = comm.bcast_obj(a if have else None, root=root, label="sage-setup")
        # the sampling kernels run on the training backend (the device with cupy); the
        # sampler's graph stays on the host (its bookkeeping is numpy)
        if mode == "replicated":
            sgraph = LocalGraph(a, backend)
        else:
            sgraph = PartitionedGraph(PartitionedGraph.from_global(
                a if have else None, grid_15d(c, comm), root=root).A, backend)
        return cls(full, sgraph, payload["labels"], payload["masks"], mode=mode,
                   replication=c, name=payload["name"])


# --------------------------------------------------------------------------- #
# The trainer
# --------------------------------------------------------------------------- #

class MinibatchTrainer(Trainer):
    """Data-parallel minibatch training on sampled blocks (GraphSAGE, or any model of layers).

    ``grad_label`` (class attribute) is the ledger label of the gradient all-reduce.

    Parameters
    ----------
    model : Layer whose graph layers consume one sampled hop each
        (:class:`~spgnn.gnn.models.GraphSAGE`)
    graph : MinibatchGraph, or a :class:`spgnn.io.Graph` held by every rank
        (then distributed here with ``root=None`` over ``comm``)
    sampler : GraphSAGESampler or LADIESSampler (one hop per graph layer)
    optimizer : Optimizer over ``model.parameters()`` (Adam, SGD)
    batch_size : int, training vertices per minibatch
    bulk : int, minibatches sampled per bulk call (``k``)
    seed : int, keys the epoch permutations and the dropout masks
    mode : ``"replicated"`` or ``"partitioned"``; must match a MinibatchGraph's
    comm : Communicator, needed only when ``graph`` is a ``Graph`` (default:
        ``Communicator.world()``)
    dtype : parameter dtype (default: the features')

    Construction is collective (the graph's distribution when needed, and one
    evaluation pass that places the parameters, replicated on every rank).
    """

    #: Ledger label of the per-step gradient all-reduce.
    grad_label = "sage:allreduce"

    def __init__(self, model, graph, sampler, optimizer, *, batch_size=512, bulk=16, seed=0,
                 mode=None, comm=None, replication=1, dtype=None):
        if int(batch_size) < 1 or int(bulk) < 1:
            raise ValueError(f"MinibatchTrainer: batch_size and bulk must be >= 1, but got "
                             f"{batch_size} and {bulk}")
        if not isinstance(sampler, (GraphSAGESampler, LADIESSampler)):
            raise TypeError(f"MinibatchTrainer: sampler must be a GraphSAGESampler or "
                            f"LADIESSampler, but got {type(sampler).__name__}")
        hops = len(getattr(sampler, "fanouts", getattr(sampler, "layer_sizes", ())))
        if hops != model.hops:
            raise ValueError(f"MinibatchTrainer: the sampler has {hops} hops but the model "
                             f"{model.hops} graph layers")
        if mode is not None and mode not in MODES:
            raise ValueError(f"MinibatchTrainer: mode must be one of {MODES}, but got {mode!r}")
        if not isinstance(graph, MinibatchGraph):
            if comm is None:
                comm = Communicator.world()
            graph = MinibatchGraph.from_graph(graph, comm, mode=mode or "replicated",
                                              replication=replication, root=None,
                                              dtype=dtype or np.float32)
        elif mode is not None and mode != graph.mode:
            raise ValueError(f"MinibatchTrainer: mode={mode!r} but the graph was distributed "
                             f"for {graph.mode!r}")
        self.sampler = sampler
        self.mode = graph.mode
        self.batch_size, self.bulk = int(batch_size), int(bulk)
        self.dtype = np.dtype(dtype or graph.features.dtype)
        self.train_ids = np.flatnonzero(graph.train_mask).astype(np.int64)
        super().__init__(model, graph, optimizer, seed=seed)

    @property
    def eval_graph(self):
        return self.graph.full

    def _place(self):
        self.model.place(self.dtype, grid=self.graph.grid)
        super()._place()

    # -- schedule ------------------------------------------------------------ #
    @property
    def num_batches(self) -> int:
        return -(-self.train_ids.size // self.batch_size)

    def epoch_batches(self, epoch):
        """The epoch's minibatches (list of int64 arrays; minibatch ``j`` has id ``j``). Pure."""
        perm = np.random.default_rng([self.seed, int(epoch)]).permutation(self.train_ids)
        b = self.batch_size
        return [perm[j * b:(j + 1) * b] for j in range(self.num_batches)]

    def schedule(self):
        """:func:`step_schedule` of this trainer (same every epoch). Pure."""
        return step_schedule(self.num_batches, self.bulk, self.comm.size, self.mode,
                             self.graph.replication)

    def _sample(self, batches, ids, epoch):
        if self.mode == "replicated":
            return sample_replicated(self.sampler, self.graph.sampling_graph, batches, self.comm,
                                     minibatch_ids=ids, epoch=epoch)
        return sample_partitioned(self.sampler, self.graph.sampling_graph, batches,
                                  minibatch_ids=ids, epoch=epoch)

    # -- training ------------------------------------------------------------- #
    def _step(self, mb, x, epoch, mb_id):
        """Forward and backward of one minibatch: ``(loss sum, correct, count)``. Local."""
        g = self.graph
        y = g.labels[mb.blocks[0].dst_ids]
        ctx = BlockContext(mb.forward_blocks, labels=y, grid=g.grid, dtype=self.dtype,
                           backend=g.backend, training=True, epoch=epoch, seed=self.seed,
                           minibatch=mb_id)
        logits = self.model.forward(ctx, ctx.input(x))
        loss, d, correct = ctx.loss(logits)
        self.model.backward(ctx, d)
        return loss, correct, y.size

    def _allreduce_gradients(self, extra):
        """Sum every gradient and the ``extra`` scalars over all ranks in ONE all-reduce. Collective.

        The gradients are then divided by the summed ``extra[2]`` (the global
        number of loss terms: gradient of the mean loss; nothing is divided
        when it is 0).  The all-reduce runs in the parameters' dtype (counts
        stay exact below 2²⁴ in float32), and every rank gets the same sums,
        so replicas stay identical.  Returns the summed ``extra``.
        """
        params = self.model.parameters()
        dtype = params[0].grad.dtype
        flat = np.concatenate([p.grad.reshape(-1) for p in params]
                              + [np.asarray(extra, dtype=dtype).reshape(-1)])
        tot = self.comm.allreduce(flat, op="plus", label=self.grad_label)
        ex = tot[tot.size - len(extra):]
        scale = dtype.type(ex[2]) if float(ex[2]) > 0 else None
        at = 0
        for p in params:
            gsum = tot[at:at + p.grad.size].reshape(p.grad.shape)
            at += p.grad.size
            p.grad[...] = gsum / scale if scale is not None else gsum
        return ex

    def train_epoch(self):
        """One epoch of minibatch steps. Collective.

        Returns
        -------
        dict
            ``epoch``, ``loss`` (mean training cross-entropy over the epoch's
            batch vertices, training mode, before each step), ``train_acc``
            (of those predictions), ``steps``, ``bytes`` (bytes this rank
            sent: sampling, feature fetching, gradient all-reduces; from the
            ledger), ``fetch_bytes`` (received by the feature fetches),
            ``seconds``.
        """
        g, comm = self.graph, self.comm
        epoch = self.epoch
        batches = self.epoch_batches(epoch)
        nb = len(batches)
        p, r, c = comm.size, comm.rank, g.replication
        loss_sum = correct = count = 0.0
        steps = 0
        t0 = time.perf_counter()
        with comm.track("sage-epoch") as stats:
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
                    self.model.zero_grad()
                    extra = np.zeros(3)
                    if t < hi - lo:
                        x = x_in[int(last.col_ptr[t]):int(last.col_ptr[t + 1])]
                        extra[:] = self._step(bulk.minibatch(t), x, epoch,
                                              int(bulk.minibatch_ids[t]))
                    # empty steps send zeros: they add nothing to the sums
                    tot = self._allreduce_gradients(extra)
                    # parameters and all-reduced sums are identical on every
                    # rank: every rank raises here, no agreement needed
                    bad = non_finite_error(self.model, float(tot[-3]), epoch)
                    if bad is not None:
                        comm.raise_together(bad)
                    self.optimizer.step()
                    loss_sum += float(tot[0])
                    correct += float(tot[1])
                    count += float(tot[2])
                    steps += 1
        self.epoch += 1
        return dict(epoch=epoch, loss=loss_sum / max(count, 1.0),
                    train_acc=correct / max(count, 1.0), steps=steps,
                    bytes=int(stats.total("bytes_sent")),
                    fetch_bytes=int(sum(stats.total("bytes_recv", label=f"{g.features.label}:{x}")
                                        for x in ("ids", "rows"))),
                    seconds=time.perf_counter() - t0,
                    bytes_by_label={k: int(v["bytes_sent"])
                                    for k, v in stats.by_label().items()})

    # -- resumption ----------------------------------------------------------- #
    def _placement(self):
        return {"ranks": self.comm.size, "mode": self.mode, "replication": self.graph.replication,
                "batch_size": self.batch_size, "bulk": self.bulk, "n": self.graph.n,
                "sampler": repr(self.sampler)}

    def gather_state(self):
        """Rank 0's :meth:`state_dict`: every rank holds the same (replicated) state. Local."""
        return {"replicated": self.state_dict()}

    def restore_state(self, gathered):
        """Restore :meth:`gather_state`'s result on this rank. Local."""
        self.load_state_dict(gathered["replicated"])
