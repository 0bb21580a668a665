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
inference**: every layer aggregates the mean over *all* neighbours through
spgnn's distributed sparsity-aware SpMM (``1d-aware``) on the row-normalised
adjacency, so the reported accuracies carry no sampling noise.
"""

import time

import numpy as np
import scipy.sparse as sp

from ..core.dist_dense import DistDenseMatrix
from ..core.dist_sparse import DistSparseMatrix
from ..core.spmm import spmm
from ..grid import grid_1d, grid_15d
from ..layout import Layout, block_bounds
from .sage import GraphSAGE, softmax_cross_entropy_sum
from .train import fit_epochs

__all__ = ["FeatureStore", "MinibatchGraph", "MinibatchTrainer", "bulk_positions",
           "step_schedule", "sage_adjacency", "train_sage", "MODES"]

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

def sage_adjacency(adj):
    """The sampling graph: symmetrised pattern of ``adj`` without self-loops, float64 ones. Pure.

    GraphSAGE aggregates over neighbours (the root term is separate), so
    stored self-loops are dropped; an undirected model on a directed file
    uses ``A ∪ Aᵀ`` (report §9.11).
    """
    a = sp.csr_array(adj, dtype=np.float64)
    a = sp.csr_array(a.maximum(a.T)).tocoo()
    keep = (a.row != a.col) & (a.data != 0)
    n = a.shape[0]
    out = sp.csr_array((np.ones(int(keep.sum())), (a.row[keep], a.col[keep])), shape=(n, n))
    out.sum_duplicates()
    out.data[:] = 1.0
    out.sort_indices()
    return out


def _row_normalize(a):
    deg = np.diff(a.indptr)
    inv = 1.0 / np.maximum(deg, 1)
    out = sp.csr_array((np.repeat(inv, deg), a.indices.copy(), a.indptr.copy()), shape=a.shape)
    return out


def _normalize_features(x):
    if sp.issparse(x):
        x = sp.csr_array(x, dtype=np.float64).toarray()
    x = np.asarray(x, dtype=np.float64)
    s = x.sum(axis=1, keepdims=True)
    return np.where(s != 0, x / np.where(s != 0, s, 1.0), 0.0)


class MinibatchGraph:
    """A graph distributed for minibatch training (build with :meth:`from_graph`).

    Attributes
    ----------
    comm : Communicator (all ranks)
    grid : the ``grid_1d`` over ``comm`` (features, evaluation, parameters)
    mode : ``"replicated"`` or ``"partitioned"``
    replication : int, ``c`` of the partitioned grid
    sampling_graph : LocalGraph (replicated) or PartitionedGraph
    features : FeatureStore (rows ``block_offsets(n, P)``)
    labels : int64 (n,), replicated (small next to the features)
    train_mask, val_mask, test_mask : bool (n,), replicated
    mean_adj : DistSparseMatrix, ``D⁻¹A`` in ``Layout("row")`` on ``grid``
        (full-neighbourhood inference)
    n, num_features, num_classes, name
    """

    def __init__(self, **kw):
        self.__dict__.update(kw)

    @classmethod
    def from_graph(cls, graph, comm, *, mode="replicated", replication=1, root=0,
                   normalize_features=True, dtype=np.float32, backend=None):
        """Distribute ``graph`` (a :class:`spgnn.io.Graph` with features, labels and masks).

        Parameters
        ----------
        graph : Graph on ``root`` (others may pass None); on every rank when
            ``root=None``
        comm : Communicator
        mode : ``"replicated"`` (whole ``A`` on every rank) or ``"partitioned"``
            (``A`` in block rows on ``grid_15d(replication)``)
        replication : int, ``c`` (partitioned mode)
        root : int or None
        normalize_features : row-normalise the features (zero rows stay 0)
        dtype : feature dtype
        backend : backend of the distributed matrices

        Collective: yes -- broadcasts of the graph's metadata, labels, masks
        (and ``A`` in replicated mode), the feature scatter, the evaluation
        matrix's scatter, the grids' splits.
        """
        from ..sampling import LocalGraph, PartitionedGraph

        if mode not in MODES:
            raise ValueError(f"MinibatchGraph: mode must be one of {MODES}, but got {mode!r}")
        c = int(replication) if mode == "partitioned" else 1
        if c < 1 or comm.size % c:
            raise ValueError(f"MinibatchGraph: replication {replication} must divide the "
                             f"{comm.size} ranks")
        have = root is None or comm.rank == root
        err, payload = None, None
        if have:
            try:
                if graph is None or graph.features is None or graph.labels is None:
                    raise ValueError("MinibatchGraph: the graph needs features and labels")
                if graph.train_mask is None or graph.test_mask is None:
                    raise ValueError("MinibatchGraph: the graph needs a split (train/test masks; "
                                     "Graph.random_split)")
                a = sage_adjacency(graph.adj)
                x = _normalize_features(graph.features) if normalize_features else \
                    (graph.features.toarray() if sp.issparse(graph.features) else graph.features)
                x = np.ascontiguousarray(x, dtype=dtype)
                n = a.shape[0]
                masks = [np.zeros(n, bool) if m is None else np.asarray(m, bool)
                         for m in (graph.train_mask, graph.val_mask, graph.test_mask)]
                payload = dict(labels=graph.labels.astype(np.int64), masks=masks,
                               num_classes=graph.num_classes, name=graph.name)
            except (ValueError, TypeError) as exc:
                err = exc
        comm.agree(err)          # a bad graph raises on every rank, not only on root
        if root is not None:
            payload = comm.bcast_obj(payload, root=root, label="sage-setup")
            if mode == "replicated":
                a = comm.bcast_obj(a if have else None, root=root, label="sage-setup")
        grid = grid_1d(comm)
        labels, masks = payload["labels"], payload["masks"]
        n = labels.size
        if mode == "replicated":
            sgraph = LocalGraph(a)
        else:
            g15 = grid_15d(c, comm)
            sgraph = PartitionedGraph.from_global(a if have else None, g15, root=root)
        store = FeatureStore.from_global(x if have else None, comm, root=root)
        mean_adj = DistSparseMatrix.from_global(
            _row_normalize(a).astype(dtype) if have else None, grid, Layout("row"),
            backend=backend, root=root)
        return cls(comm=comm, grid=grid, mode=mode, replication=c, sampling_graph=sgraph,
                   features=store, labels=labels, train_mask=masks[0], val_mask=masks[1],
                   test_mask=masks[2], mean_adj=mean_adj, n=int(n),
                   num_features=store.width, num_classes=int(payload["num_classes"]),
                   name=payload["name"], backend=backend)

    def aggregate(self, h_local):
        """Mean over all neighbours of this rank's rows: ``(D⁻¹A·H)`` rows. Collective (1d-aware SpMM)."""
        H = DistDenseMatrix(np.ascontiguousarray(h_local), (self.n, h_local.shape[1]), self.grid,
                            Layout("row"), backend=self.mean_adj.backend)
        out = spmm(self.mean_adj, H, algorithm="1d-aware")
        return np.asarray(out.backend.to_host(out.local))


# --------------------------------------------------------------------------- #
# The trainer
# --------------------------------------------------------------------------- #

class MinibatchTrainer:
    """Data-parallel minibatch training of a :class:`~spgnn.gnn.sage.GraphSAGE`.

    Parameters
    ----------
    model : GraphSAGE
    graph : MinibatchGraph, or a :class:`spgnn.io.Graph` held by every rank
        (then distributed here with ``root=None`` over ``comm``)
    sampler : GraphSAGESampler or LADIESSampler (one hop per model layer)
    optimizer : Optimizer over ``model.parameters()`` (Adam, SGD)
    batch_size : int, training vertices per minibatch
    bulk : int, minibatches sampled per bulk call (``k``)
    seed : int, keys the epoch permutations and the dropout masks
    mode : ``"replicated"`` or ``"partitioned"``; must match a MinibatchGraph's
    comm : Communicator, needed only when ``graph`` is a ``Graph`` (default:
        ``Communicator.world()``)
    dtype : parameter dtype (default: the features')

    Construction is collective (the graph's distribution when needed); the
    parameters are placed replicated on every rank.
    """

    def __init__(self, model, graph, sampler, optimizer, *, batch_size=512, bulk=16, seed=0,
                 mode=None, comm=None, replication=1, dtype=None):
        if not isinstance(model, GraphSAGE):
            raise TypeError(f"MinibatchTrainer: model must be a GraphSAGE, but got "
                            f"{type(model).__name__}")
        if int(batch_size) < 1 or int(bulk) < 1:
            raise ValueError(f"MinibatchTrainer: batch_size and bulk must be >= 1, but got "
                             f"{batch_size} and {bulk}")
        hops = len(getattr(sampler, "fanouts", getattr(sampler, "layer_sizes", ())))
        if hops != model.num_layers:
            raise ValueError(f"MinibatchTrainer: the sampler has {hops} hops but the model "
                             f"{model.num_layers} layers")
        if mode is not None and mode not in MODES:
            raise ValueError(f"MinibatchTrainer: mode must be one of {MODES}, but got {mode!r}")
        if not isinstance(graph, MinibatchGraph):
            if comm is None:
                from ..comm import Communicator

                comm = Communicator.world()
            graph = MinibatchGraph.from_graph(graph, comm, mode=mode or "replicated",
                                              replication=replication, root=None,
                                              dtype=dtype or np.float32)
        elif mode is not None and mode != graph.mode:
            raise ValueError(f"MinibatchTrainer: mode={mode!r} but the graph was distributed "
                             f"for {graph.mode!r}")
        mine = {id(p) for p in model.parameters()}
        if any(id(p) not in mine for p in optimizer.params):
            raise ValueError("MinibatchTrainer: the optimizer holds parameters that are not the "
                             "model's")
        self.model, self.graph, self.sampler, self.optimizer = model, graph, sampler, optimizer
        self.comm = graph.comm
        self.mode = graph.mode
        self.batch_size, self.bulk, self.seed = int(batch_size), int(bulk), int(seed)
        self.epoch = 0
        model.place(np.dtype(dtype or graph.features.dtype), grid=graph.grid)
        self.train_ids = np.flatnonzero(graph.train_mask).astype(np.int64)

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
        from ..sampling import sample_partitioned, sample_replicated

        if self.mode == "replicated":
            return sample_replicated(self.sampler, self.graph.sampling_graph, batches, self.comm,
                                     minibatch_ids=ids, epoch=epoch)
        return sample_partitioned(self.sampler, self.graph.sampling_graph, batches,
                                  minibatch_ids=ids, epoch=epoch)

    # -- training ------------------------------------------------------------- #
    def train_epoch(self):
        """One epoch of minibatch steps. Collective.

        Returns
        -------
        dict
            ``epoch``, ``loss`` (mean training cross-entropy over the epoch's
            batch vertices, training mode, before each step), ``train_acc``
            (of those predictions), ``steps``, ``bytes`` (bytes this rank
            sent: sampling, feature fetching, gradient allreduces; from the
            ledger), ``fetch_bytes`` (received by the feature fetches),
            ``seconds``.
        """
        g, comm, model = self.graph, self.comm, self.model
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
                    model.zero_grad()
                    extra = np.zeros(3)
                    if t < hi - lo:
                        mb = bulk.minibatch(t)
                        x = x_in[int(last.col_ptr[t]):int(last.col_ptr[t + 1])]
                        logits = model.forward(mb.forward_blocks, x, training=True,
                                               key=(epoch, int(bulk.minibatch_ids[t])))
                        y = g.labels[mb.blocks[0].dst_ids]
                        ls, d, ok = softmax_cross_entropy_sum(logits, y)
                        model.backward(d)
                        extra[:] = (ls, ok, y.size)
                    # empty steps send zeros: they add nothing to the sums
                    tot = model.allreduce_gradients(comm, extra, scale_by_extra=2)
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
                    seconds=time.perf_counter() - t0)

    def evaluate(self):
        """Full-neighbourhood inference (no sampling, no dropout) and accuracies. Collective.

        Every layer's mean aggregator runs over all neighbours through the
        ``1d-aware`` distributed SpMM on ``D⁻¹A``; each rank scores the rows
        it owns and one allreduce sums the counts.

        Returns
        -------
        dict ``train_acc``, ``val_acc``, ``test_acc``, ``train_loss``,
        ``val_loss``, ``test_loss`` (NaN for an empty set).
        """
        g = self.graph
        with self.comm.track("sage-eval"):
            logits = self.model.infer(g.features.local, g.aggregate)
            r0, r1 = (int(v) for v in g.features.offsets[self.comm.rank:self.comm.rank + 2])
            y = g.labels[r0:r1]
            z = logits.astype(np.float64)
            z = z - z.max(axis=1, keepdims=True) if z.size else z
            lse = np.log(np.exp(z).sum(axis=1)) if z.size else np.zeros(0)
            rows = np.arange(y.size)
            nll = lse - z[rows, np.clip(y, 0, None)] if z.size else np.zeros(0)
            hit = (np.argmax(z, axis=1) == y) if z.size else np.zeros(0, dtype=bool)
            vals = []
            for m in (g.train_mask, g.val_mask, g.test_mask):
                mm = m[r0:r1] & (y >= 0)
                vals += [float(hit[mm].sum()), float(nll[mm].sum()), float(mm.sum())]
            tot = self.comm.allreduce(np.asarray(vals), label="sage-eval:scores")
        out = {}
        for k, name in enumerate(("train", "val", "test")):
            h, l, n = tot[3 * k:3 * k + 3]
            out[f"{name}_acc"] = float(h / n) if n else float("nan")
            out[f"{name}_loss"] = float(l / n) if n else float("nan")
        return out

    def fit(self, epochs, callback=None, evaluate=True):
        """Train ``epochs`` epochs; ``callback(trainer, record)`` returning True stops. Collective."""
        return fit_epochs(self, epochs, callback, evaluate)

    # -- resumption ----------------------------------------------------------- #
    def _config(self):
        return {"ranks": self.comm.size, "mode": self.mode, "replication": self.graph.replication,
                "batch_size": self.batch_size, "bulk": self.bulk, "n": self.graph.n,
                "sampler": repr(self.sampler)}

    def state_dict(self):
        """Everything a bit-identical resume at an epoch boundary needs. Local.

        The RNG state is the pair ``(seed, epoch)``: permutations, samples
        and dropout masks are keyed by it (and the minibatch id), so there is
        no generator state to save.
        """
        return {"epoch": self.epoch, "seed": self.seed, "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(), "config": self._config()}

    def load_state_dict(self, state):
        """Restore :meth:`state_dict` (same configuration). Local.

        Raises
        ------
        ValueError
            Saved for another rank count, mode, batch size, bulk, graph or sampler.
        """
        if state.get("config") != self._config():
            raise ValueError(f"MinibatchTrainer.load_state_dict: state saved for "
                             f"{state.get('config')}, this trainer is {self._config()}")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.epoch = int(state["epoch"])
        self.seed = int(state["seed"])


# --------------------------------------------------------------------------- #
# Entry point for ``python -m spgnn train --model sage``
# --------------------------------------------------------------------------- #

def _parse_fanout(value):
    if isinstance(value, str):
        try:
            out = tuple(int(v) for v in value.replace(" ", "").split(",") if v)
        except ValueError:
            raise ValueError(f"train_sage: --fanout must look like 15,10,5, but got "
                             f"{value!r}") from None
    else:
        out = tuple(int(v) for v in value)
    if not out or min(out) < 1:
        raise ValueError(f"train_sage: --fanout needs positive ints, but got {value!r}")
    return out


def random_projection(x, dim, seed=0):
    """``x · R`` with ``R`` (f x dim) Gaussian / sqrt(dim) from ``default_rng([seed, 7])``. Pure.

    Optional preprocessing for wide bag-of-words features (musae_facebook:
    4714 columns) so that fetching and the first layer stay cheap.
    """
    r = np.random.default_rng([int(seed), 7]).normal(size=(x.shape[1], int(dim)))
    r /= np.sqrt(dim)
    return np.asarray(x @ r, dtype=np.float64)


def _load_for_sage(args):
    from ..io import load_graph

    graph = load_graph(args.graph, name=getattr(args, "name", None))
    split = getattr(args, "split", None)
    if isinstance(split, str):
        split = tuple(float(v) for v in split.split(":"))
    if split is None and graph.train_mask is None:
        split = (0.6, 0.2)
    if split is not None:
        graph = graph.random_split(*split, seed=getattr(args, "split_seed", 0))
    dim = getattr(args, "feature_dim", None)
    if dim:
        import dataclasses

        # project the row-normalised features, then standardise each column:
        # projected rows hold both signs (row-normalising them again would
        # divide by sums near 0) and are small (~1/sqrt(words per row))
        z = random_projection(_normalize_features(graph.features), dim, getattr(args, "seed", 0))
        z -= z.mean(axis=0)
        z /= np.where(z.std(axis=0) > 0, z.std(axis=0), 1.0)
        graph = dataclasses.replace(graph, features=z)
    return graph


#: ``train --model sage`` options that must match between a checkpoint and the
#: run resuming it (the trainer adds ranks, mode, batch size, bulk, graph size
#: and sampler in :meth:`MinibatchTrainer.load_state_dict`).
_SAGE_CONFIG_KEYS = ("graph", "name", "sampler", "batch_size", "fanout", "bulk", "hidden", "lr",
                     "weight_decay", "dropout", "input_dropout", "seed", "partition_mode",
                     "replication", "ladies_size", "frontier", "split", "split_seed",
                     "feature_dim", "dtype", "eval_every", "model_selection")


def _sage_config(args, ranks):
    cfg = {k: getattr(args, k, None) for k in _SAGE_CONFIG_KEYS}
    cfg["graph"] = str(cfg["graph"])
    cfg["fanout"] = list(_parse_fanout(args.fanout))
    cfg["ranks"] = int(ranks)
    return cfg


def _save_sage_checkpoint(comm, directory, trainer, cfg, best, best_state):
    """Write the training state from rank 0 (everything is replicated). Collective."""
    from ..checkpoint import save_checkpoint_collective

    state = {"format": "spgnn-train-sage", "config": cfg, "epoch": trainer.epoch,
             # permutations, samples and dropout masks are keyed by (seed, epoch):
             # that pair is the whole RNG state
             "rng": {"kind": "keyed by (seed, epoch, minibatch id)", "seed": trainer.seed,
                     "epoch": trainer.epoch},
             "trainer": trainer.state_dict(), "best": best, "best_state": best_state}
    save_checkpoint_collective(comm, directory, state if comm.rank == 0 else None,
                               step=trainer.epoch)


def _load_sage_checkpoint(comm, directory, cfg):
    """The state saved by :func:`_save_sage_checkpoint`, on every rank. Collective.

    Raises ``ValueError`` on every rank for a folder holding another kind of
    checkpoint or one written by another configuration.
    """
    from ..checkpoint import load_training_state

    return load_training_state(comm, directory, "spgnn-train-sage", cfg, "--model sage training")


def _progress_bar(comm, args, done, desc):
    """A tqdm bar on rank 0 unless ``args.no_progress`` (absent: no bar). Local."""
    if comm.rank != 0 or getattr(args, "no_progress", True):
        return None
    import sys

    from tqdm import tqdm

    return tqdm(total=int(args.epochs), initial=min(done, int(args.epochs)), unit="epoch",
                file=sys.stderr, desc=desc, dynamic_ncols=True)


def train_sage(args, comm) -> dict:
    """Minibatch GraphSAGE training for ``train --model sage``; the result on every rank.

    Rank 0 loads the graph (adding a stratified random split when it has
    none), :meth:`MinibatchGraph.from_graph` distributes it, then
    ``args.epochs`` epochs of :class:`MinibatchTrainer` with Adam, a
    full-neighbourhood evaluation every ``eval_every`` epochs and at the end,
    and, with ``model_selection="best-val"``, the parameters of the epoch
    with the best validation accuracy restored before the final evaluation
    (model selection on the validation set; the test set never decides).

    Parameters
    ----------
    args : argparse.Namespace with
        ``graph`` (path or generator spec), ``name`` (dataset in a folder,
        e.g. ``cora``; may be None), ``sampler`` (``"sage"`` or ``"ladies"``),
        ``batch_size`` (int), ``fanout`` (``"15,10,5"`` or a sequence; one
        hop per layer, so it also sets the number of layers), ``bulk`` (k),
        ``hidden``, ``lr``, ``weight_decay`` (L2 on the weights, not the
        biases), ``dropout``, ``epochs``, ``seed`` (initialisation, epoch
        permutations, dropout; the sampler uses ``seed``), ``partition_mode``
        (``"replicated"`` or ``"partitioned"``), ``json`` (read by the
        caller, not here).  Optional, read with ``getattr``:
        ``replication`` (c for partitioned, default 1), ``ladies_size``
        (vertices per LADIES layer, default ``batch_size``), ``frontier``
        (GraphSAGE, default ``"unique"``), ``split`` (``"0.6:0.2"``),
        ``split_seed`` (0), ``feature_dim`` (random projection of the
        row-normalised features to that many columns, each then standardised
        to mean 0 and variance 1; default None = keep the features and
        row-normalise them),
        ``input_dropout`` (0.0), ``dtype`` (``"float32"``), ``eval_every``
        (0: evaluate only at the end; k: also every k epochs, reporting the
        test accuracy at the best validation accuracy), ``model_selection``
        (``"last"``, default here, or ``"best-val"``: needs ``eval_every``;
        the earliest epoch with the highest validation accuracy wins),
        ``checkpoint`` / ``resume`` (folders, as for the GCN command: the
        whole state, model-selection state included, is replicated and
        written by rank 0 every ``every`` epochs), ``save_weights`` (npz of
        the reported model's parameters), ``no_progress`` (default True: no
        tqdm bar).
    comm : Communicator

    Returns
    -------
    dict with ``test_acc``, ``val_acc``, ``train_acc`` (full-neighbourhood
    inference of the selected model), ``loss_history`` (training loss of each epoch of
    this run), ``model_selection`` (what was
    selected), ``last_epoch_test_acc``, ``last_epoch_val_acc`` (the last
    epoch's model, equal to the above with ``"last"``), ``epochs`` (in total,
    resumed ones included), ``epochs_this_run``, ``resumed_from`` (epoch or
    None), ``seconds_per_epoch`` (mean over epochs after the first, slowest
    rank), ``bytes_per_epoch`` (bytes all ranks sent in the last epoch:
    sampling, feature fetching, gradient allreduces), ``fetch_bytes_per_epoch``, ``final_loss``,
    ``algorithm="sage-minibatch"``, ``sampler``, ``ranks``, ``seed``,
    ``graph``, ``fanout``, ``batch_size``, ``bulk``, ``partition_mode``;
    ``best_val_acc``, ``test_acc_at_best_val``, ``best_epoch`` (None unless
    ``eval_every``).

    Collective over ``comm``.  Argument errors raise on every rank before
    any communication; a graph that cannot be loaded raises on every rank.
    """
    from ..io import load_on_root
    from ..sampling import GraphSAGESampler, LADIESSampler
    from .optim import Adam

    fanout = _parse_fanout(args.fanout)
    sampler_name = getattr(args, "sampler", "sage")
    mode = getattr(args, "partition_mode", "replicated") or "replicated"
    if sampler_name not in ("sage", "ladies"):
        raise ValueError(f"train_sage: --sampler must be 'sage' or 'ladies', but got "
                         f"{sampler_name!r}")
    if mode not in MODES:
        raise ValueError(f"train_sage: --partition-mode must be one of {MODES}, but got {mode!r}")
    if (getattr(args, "model_selection", "last") or "last") not in ("last", "best-val"):
        raise ValueError(f"train_sage: --model-selection must be 'last' or 'best-val', but got "
                         f"{args.model_selection!r}")
    if int(getattr(args, "eval_every", 0) or 0) < 0:
        raise ValueError("train_sage: --eval-every must be >= 0")
    if getattr(args, "model_selection", None) == "best-val" and not getattr(args, "eval_every", 0):
        raise ValueError("train_sage: --model-selection best-val needs --eval-every >= 1")
    if args.batch_size < 1 or args.bulk < 1 or args.hidden < 1 or args.epochs < 0:
        raise ValueError("train_sage: --batch-size, --bulk, --hidden must be >= 1 and --epochs "
                         ">= 0")
    input_dropout = float(getattr(args, "input_dropout", 0.0) or 0.0)
    if (not 0 <= args.dropout < 1 or not 0 <= input_dropout < 1 or not args.lr > 0
            or args.weight_decay < 0):
        raise ValueError(f"train_sage: need 0 <= dropout < 1, 0 <= input_dropout < 1, lr > 0, "
                         f"weight_decay >= 0, but got dropout={args.dropout}, "
                         f"input_dropout={input_dropout}, lr={args.lr}, "
                         f"weight_decay={args.weight_decay}")
    c = int(getattr(args, "replication", 1) or 1) if mode == "partitioned" else 1
    if c < 1 or comm.size % c:
        raise ValueError(f"train_sage: --replication {c} must divide the {comm.size} ranks")
    dtype = np.dtype(getattr(args, "dtype", "float32") or "float32")
    seed = int(args.seed)

    t_setup = time.perf_counter()
    graph = load_on_root(comm, lambda: _load_for_sage(args))
    projected = bool(getattr(args, "feature_dim", None))     # then already normalised
    mg = MinibatchGraph.from_graph(graph, comm, mode=mode, replication=c, root=0, dtype=dtype,
                                   normalize_features=not projected)
    del graph
    if sampler_name == "sage":
        sampler = GraphSAGESampler(fanout, frontier=getattr(args, "frontier", "unique") or "unique",
                                   include_dst=True, seed=seed)
    else:
        size = int(getattr(args, "ladies_size", None) or args.batch_size)
        sampler = LADIESSampler((size,) * len(fanout), seed=seed)
    model = GraphSAGE(mg.num_features, args.hidden, mg.num_classes, layers=len(fanout),
                      dropout=args.dropout, seed=seed, input_dropout=input_dropout)
    opt = Adam(model.param_groups(args.weight_decay), lr=args.lr)
    trainer = MinibatchTrainer(model, mg, sampler, opt, batch_size=args.batch_size,
                               bulk=args.bulk, seed=seed, dtype=dtype)
    every = int(getattr(args, "eval_every", 0) or 0)
    selection = getattr(args, "model_selection", "last") or "last"
    best = {"best_val_acc": None, "test_acc_at_best_val": None, "best_epoch": None}
    best_state = None
    cfg = _sage_config(args, comm.size)
    resumed_from = None
    if getattr(args, "resume", None):
        saved = _load_sage_checkpoint(comm, args.resume, cfg)
        trainer.load_state_dict(saved["trainer"])
        best, best_state = saved["best"], saved["best_state"]
        resumed_from = trainer.epoch
    ckpt_dir = getattr(args, "checkpoint", None) or getattr(args, "resume", None)
    ckpt_every = int(getattr(args, "every", 10) or 10)
    setup_seconds = time.perf_counter() - t_setup
    bar = _progress_bar(comm, args, trainer.epoch, f"{mg.name} {sampler_name} P={comm.size}")
    times, recs = [], []
    while trainer.epoch < int(args.epochs):
        rec = trainer.train_epoch()
        times.append(rec["seconds"])
        recs.append(rec)
        if every and trainer.epoch % every == 0:
            # model selection on the validation set; the accuracies are
            # allreduced, so every rank takes the same decision
            e = trainer.evaluate()
            if best["best_val_acc"] is None or e["val_acc"] > best["best_val_acc"]:
                best = {"best_val_acc": e["val_acc"], "test_acc_at_best_val": e["test_acc"],
                        "best_epoch": trainer.epoch}
                if selection == "best-val":
                    best_state = model.state_dict()
        if bar is not None:
            bar.set_postfix(loss=f"{rec['loss']:.4f}", acc=f"{rec['train_acc']:.3f}",
                            bytes_rank0=f"{rec['bytes']:,}", refresh=False)
            bar.update(1)
        if ckpt_dir and trainer.epoch % ckpt_every == 0:
            _save_sage_checkpoint(comm, ckpt_dir, trainer, cfg, best, best_state)
    if bar is not None:
        bar.close()
    last_ev = trainer.evaluate()
    if best_state is not None:
        model.load_state_dict(best_state)
        ev = trainer.evaluate()
    else:
        ev = last_ev
    if getattr(args, "save_weights", None):
        from ..checkpoint import write_npz_atomic

        if comm.rank == 0:           # parameters are replicated: rank 0's are everyone's
            write_npz_atomic(args.save_weights, model.state_dict())
        comm.barrier()
    t = np.asarray(times, dtype=np.float64)
    steady = t[1:] if t.size > 1 else t
    last = recs[-1] if recs else {"bytes": 0, "fetch_bytes": 0, "loss": None}
    red = comm.allreduce(np.array([last["bytes"], last["fetch_bytes"]], dtype=np.int64),
                         label="train:report")
    slow = comm.allreduce(np.array([steady.sum()]), op="max", label="train:report")
    return {"algorithm": "sage-minibatch", "graph": mg.name, "sampler": sampler_name,
            "ranks": comm.size, "seed": seed, "fanout": list(fanout),
            "batch_size": int(args.batch_size), "bulk": int(args.bulk),
            "partition_mode": mode, "replication": c, "hidden": int(args.hidden),
            "n": mg.n, "features": mg.num_features, "classes": mg.num_classes,
            "epochs": trainer.epoch, "epochs_this_run": len(times), "resumed_from": resumed_from,
            "steps_per_epoch": int(trainer.schedule().shape[0]),
            "test_acc": ev["test_acc"], "val_acc": ev["val_acc"], "train_acc": ev["train_acc"],
            "test_loss": ev["test_loss"], "val_loss": ev["val_loss"],
            "model_selection": "best-val" if best_state is not None else "last",
            "last_epoch_test_acc": last_ev["test_acc"], "last_epoch_val_acc": last_ev["val_acc"],
            "final_loss": last["loss"], "loss_history": [float(r["loss"]) for r in recs],
            "seconds_per_epoch": float(slow[0] / steady.size) if steady.size else None,
            "first_epoch_seconds": float(t[0]) if t.size else None,
            "setup_seconds": setup_seconds,
            "bytes_per_epoch": int(red[0]), "fetch_bytes_per_epoch": int(red[1]), **best}
