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
   (:func:`~spgnn.gnn.sources.allreduce_gradients`)
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

The loop is :class:`~spgnn.gnn.train.Trainer` over the
:class:`~spgnn.gnn.sources.Sampled` source.  Evaluation
(:meth:`Trainer.evaluate <spgnn.gnn.train.Trainer.evaluate>`) is **full-neighbourhood
inference**: the model runs on a :class:`~spgnn.gnn.data.DistGraph` of the
whole graph with ``aggregation="mean"``, so every layer aggregates the mean
over *all* neighbours through spgnn's distributed sparsity-aware SpMM
(``1d-aware``) and the reported accuracies carry no sampling noise.
"""

import contextlib

import numpy as np
import scipy.sparse as sp

from ..core.dist_dense import DistDenseMatrix
from ..core.dist_sparse import DistSparseMatrix
from ..errors import GridError
from ..grid import grid_1d, grid_15d
from ..io.preprocess import neighbour_pattern
from ..io.synthetic import SYNTHETIC_HINT
from ..layout import Layout, block_bounds
from ..sampling import LocalGraph, PartitionedGraph
from .data import DistGraph, part_blocks, read_manifest_on_root, read_own_rows

__all__ = ["FeatureStore", "MinibatchGraph", "TrainingLabels", "bulk_positions",
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
    labels : :class:`TrainingLabels`, the labels of the training vertices,
        on every rank (the only labels a minibatch's loss reads; evaluation
        reads ``full``'s node data, each rank its rows)
    n : int
    num_features : int
    num_classes : int
    name : str
    backend : str or None, as ``full``'s

    What every rank holds besides its share of ``full`` and of the sampler's
    graph: the training vertices' ids and labels, O(n_train) -- the
    epoch's minibatches are cut from one permutation of *all* training
    vertices, identical on every rank, and each sampler call takes the whole
    bulk (:func:`~spgnn.sampling.sample_partitioned`), so every rank needs
    every training id; a rank may train any of them, so it keeps their
    labels (a byte or two each) rather than fetching them every step (which
    would add epoch bytes).  Neither the other vertices' labels nor the
    validation and test masks are held: evaluation reads ``full``'s node data.
    """

    def __init__(self, full, sampling_graph, train_ids, train_labels, *, mode, replication,
                 name):
        self.full = full
        self.comm, self.grid, self.backend = full.comm, full.grid, full.backend
        self.mode, self.replication = mode, int(replication)
        self.sampling_graph = sampling_graph
        self.features = FeatureStore(full.features)
        self.n = int(full.num_nodes)
        self._train_ids = np.asarray(train_ids, dtype=np.int64)
        self.labels = TrainingLabels(self._train_ids, train_labels, self.n)
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
        mean aggregation, for evaluation and the features), a broadcast of
        the ids and labels of the training vertices (and of ``A`` in
        replicated mode), the sampling graph's scatter (partitioned mode).
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
                train = np.flatnonzero(np.asarray(graph.train_mask, bool)).astype(np.int64)
                payload = dict(train=train, labels=compact_labels(
                    np.asarray(graph.labels)[train].astype(np.int64)), name=graph.name)
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
        return cls(full, sgraph, payload["train"], payload["labels"], mode=mode,
                   replication=c, name=payload["name"])

    @classmethod
    def from_shards(cls, directory, comm, *, replication=1, normalize_features=True,
                    dtype=np.float32, backend=None, clock=None):
        """Read a shard directory for bulk sampling in ``"partitioned"`` mode. Collective.

        Each rank reads only its rows, once (:func:`spgnn.io.shards.read_rows`):
        the shards' ``K`` parts give the ``P`` ranks' row blocks as in
        :meth:`DistGraph.from_shards` (``K = P``, ``K = m·P`` or ``P = m·K``;
        otherwise one GridError on every rank naming ``--parts``).  From those
        rows come

        * ``full``: :meth:`DistGraph.from_shards` (``1d-aware``, mean
          aggregation, dense features) on the rows already read;
        * the sampler's ``A``: the neighbour pattern of the rows (the shards'
          ``A'`` has no self-loops and is symmetric; weights dropped), moved
          into ``P/c`` block rows on ``grid_15d(c)`` -- process row ``i`` is
          the rows of ranks ``i·c .. i·c+c-1`` -- with one redistribute; each
          rank holds ``1/(P/c)`` of ``A`` as :meth:`from_graph` does;
        * the training vertices' ids and labels, on every rank as
          :meth:`from_graph` holds them (two all-gathers of each rank's
          training rows: O(n_train) per rank; no other label, no mask).

        No rank holds the whole graph or its features.  The sampled blocks do
        not depend on the row split (:mod:`spgnn.sampling`), so on shards
        written in the graph's own order (``spgnn partition --method none``)
        training equals :meth:`from_graph`'s bit for bit
        (``tests/test_shards_sampled_bulk.py``).  ``clock``: a stage clock
        (stages ``read-rows`` and ``place``: the sampler's ``A`` and the
        evaluation graph).

        Raises
        ------
        ShardError, GridError, ValueError
            On every rank.
        """
        c = int(replication)
        if c < 1 or comm.size % c:
            raise ValueError(f"MinibatchGraph: replication {replication} must divide the "
                             f"{comm.size} ranks")
        man = read_manifest_on_root(directory, comm, "sage-setup")
        offsets = part_blocks(man["offsets"], comm.size)
        comm.agree(None if offsets is not None else GridError(
            f"MinibatchGraph.from_shards: the shards in {directory} have "
            f"K={len(man['offsets']) - 1} parts, but {comm.size} ranks need a divisor or "
            f"multiple of {comm.size} parts; re-partition with 'spgnn partition --parts "
            f"{comm.size}'"))
        lo, hi, n = int(offsets[comm.rank]), int(offsets[comm.rank + 1]), int(man["n"])
        stage = clock.stage if clock is not None else (lambda name: contextlib.nullcontext())
        block = read_own_rows(comm, directory, man, lo, hi, stage)
        with stage("place"):        # the sampler's A: my rows into my process row's block
            mine = DistSparseMatrix.from_local(
                shard_pattern_rows(block), (n, n), grid_15d(c, comm),
                Layout(("row", "layer"), row_splits=offsets))
            sgraph = PartitionedGraph(mine.redistribute(Layout("row", row_splits=offsets[::c])),
                                      backend)
            del mine
        mine = np.flatnonzero(np.asarray(block.train, dtype=bool))
        train = comm.allgatherv(mine.astype(np.int64) + lo, label="sage-setup")
        labels = compact_labels(comm.allgatherv(np.asarray(block.label, dtype=np.int64)[mine],
                                                label="sage-setup"))
        del mine
        full = DistGraph.from_shards(directory, comm, "1d-aware", adjacency="mean",
                                     normalize_features=normalize_features,
                                     sparse_features=False, dtype=dtype, backend=backend,
                                     block=[block], clock=clock)
        del block
        return cls(full, sgraph, train, labels, mode="partitioned", replication=c,
                   name=man.get("name") or str(directory))

    def train_ids(self):
        """The training vertices (global ids, ascending; the same array each call). Local."""
        return self._train_ids


def compact_labels(values):
    """``values`` (integer labels) in the smallest signed integer dtype holding them. Pure."""
    values = np.asarray(values, dtype=np.int64)
    lo, hi = int(values.min(initial=0)), int(values.max(initial=0))
    for dt in (np.int8, np.int16, np.int32):
        if np.iinfo(dt).min <= lo and hi <= np.iinfo(dt).max:
            return values.astype(dt)
    return values


class TrainingLabels:
    """The labels of the training vertices of an ``n``-vertex graph, indexed by global id. Local.

    ``labels[ids]`` (ids of training vertices) returns their labels as int64,
    what indexing the whole label vector returned; any other id is an
    IndexError naming it.  Holds the ascending training ids (shared with the
    caller) and one small integer per training vertex (:func:`compact_labels`).
    """

    def __init__(self, train_ids, values, n):
        self.ids = np.asarray(train_ids, dtype=np.int64)
        self.values = np.asarray(values)
        if self.values.shape != self.ids.shape:
            raise ValueError(f"TrainingLabels: {self.values.size} labels for "
                             f"{self.ids.size} training vertices")
        self.n = int(n)
        self.dtype = np.dtype(np.int64)

    @property
    def size(self):
        return self.n

    def __len__(self):
        return self.n

    def __getitem__(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        pos = np.searchsorted(self.ids, ids)
        pos = np.minimum(pos, max(self.ids.size - 1, 0))
        if ids.size and (self.ids.size == 0 or not np.array_equal(self.ids[pos], ids)):
            bad = ids[self.ids[pos] != ids][0] if self.ids.size else ids.flat[0]
            raise IndexError(f"TrainingLabels: vertex {int(bad)} is not a training vertex "
                             f"(only the training vertices' labels are held)")
        return self.values[pos].astype(np.int64)


def shard_pattern_rows(block):
    """GraphSAGE's neighbour pattern of a :class:`~spgnn.io.shards.RowBlock`'s rows. Local, pure.

    ``(hi - lo, n)`` CSR of float64 ones, global columns: the shards' ``A'``
    is symmetric without self-loops, so only its weights are dropped (a
    stored zero is no edge), as :func:`~spgnn.io.preprocess.neighbour_pattern`
    does to the whole graph.
    """
    pattern = block.adj
    if not np.all(pattern.data != 0):
        pattern = sp.csr_array(pattern, copy=True)
        pattern.eliminate_zeros()
    return sp.csr_array((np.ones(pattern.nnz), pattern.indices,
                         np.asarray(pattern.indptr, dtype=np.int64)), shape=pattern.shape)
