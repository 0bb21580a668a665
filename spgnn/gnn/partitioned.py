"""Partitioned minibatch training (DistGNN-MB, paper 001 §3): local sampling, halo leaves.

The graph is split into ``P`` parts (``--partition metis|random|balanced``)
and renumbered so that part ``r`` is the contiguous id range
``offsets[r]:offsets[r+1]``.  Rank ``r`` owns those vertices' features,
labels and training vertices and holds only their rows of ``A`` (the in-edges
of its *solid* vertices): its one-hop view.  A column of that view owned by
another rank is a *halo* vertex.

* **Minibatches.**  Rank ``r`` shuffles its own training vertices with
  ``default_rng([seed, epoch, r])`` and cuts them into
  ``M_r = ceil(n_train_r / batch_size)`` minibatches.  Its ``k``-th one has
  the global id ``k·P + r`` (the sampler's and the dropout masks' key).
* **Local sampling.**  The sampler runs on the rank's view: a halo vertex has
  no row there, so it is sampled as a leaf and never expanded.
* **Halo inputs.**  Without the cache (``--hec off``) the input features of
  every halo column of block 0 are fetched exactly, each iteration, with
  :meth:`FeatureStore.fetch` (the sparsity-aware ``gather_rows``: only rows
  owned elsewhere travel).  Halo rows at levels ≥ 1 keep their local value
  (a leaf has no sampled neighbour: a self-only transform), the value the
  HEC replaces with the owner's embedding (:mod:`spgnn.gnn.hec`).
* **Lockstep.**  Every rank runs ``M = max_r M_r`` iterations per epoch (one
  all-reduce MAX at construction).  A rank whose minibatches are used up runs
  *empty steps*: it takes part in every collective of the iteration (the
  feature fetch with no ids, the gradient all-reduce with zero gradients and
  zero loss terms), so nobody hangs and the step is the mean loss over the
  minibatches that exist.  Parameters are replicated and identical.

**Rows, not the graph.**  Every rank builds its share from its own rows of
the renumbered graph (:meth:`HaloGraph.from_rows`): a
:class:`~spgnn.io.shards.RowBlock` of ``A'`` with global column ids, raw
features, labels, masks and original ids.  :meth:`HaloGraph.from_shards`
reads them from a shard directory (``spgnn partition``: the shards' parts are
the partition); :meth:`HaloGraph.build` has rank 0 load, partition and
renumber the graph, then sends each rank its rows (one move,
``gnn-setup:move-rows``).  Either way no other rank holds the whole graph, its
features or its labels, and evaluation runs on a ``1d-aware``
mean-aggregation :class:`~spgnn.gnn.data.DistGraph` of the same rows (layer
by layer, each rank computes its own vertices' embeddings and receives only
the halo rows its rows reference).

Everything is checked against a single-process reference that replays the
same minibatches (``tests/property/test_hec_partitioned.py``,
``tests/mpi/hec_checks.py``).  The training loop is
:class:`~spgnn.gnn.train.Trainer` over the :class:`~spgnn.gnn.sources.Halo`
source.
"""

import contextlib
import dataclasses

import numpy as np
import scipy.sparse as sp

from ..backends import get_backend
from ..errors import GridError, NonFiniteError
from ..io.preprocess import feature_form, gcn_degrees, undirected_weights
from ..io.shards import RowBlock
from ..io.synthetic import SYNTHETIC_HINT
from ..partition import partition_graph, permute_graph
from ..sampling import LocalGraph
from .data import (DistGraph, _check_options, held_rows, part_blocks, place_rows,
                   read_manifest_on_root, read_own_rows, require_finite)
from .minibatch import FeatureStore, shard_pattern_rows
from .placement import as_placement

__all__ = ["HaloGraph", "OwnedMinibatchGraph", "OwnedRows", "local_batches"]


def local_batches(train_ids, batch_size, seed, epoch, rank):
    """Rank ``rank``'s minibatches of an epoch from its training ids (list of arrays). Pure."""
    perm = np.random.default_rng([int(seed), int(epoch), int(rank)]).permutation(
        np.asarray(train_ids, dtype=np.int64))
    b = int(batch_size)
    return [perm[j:j + b] for j in range(0, perm.size, b)]


class HaloGraph:
    """A graph split over the ranks for partitioned minibatch training (:meth:`build`).

    Attributes
    ----------
    mg : :class:`OwnedMinibatchGraph` (evaluation graph, this rank's labels,
        training ids and original ids ``mg.orig``)
    offsets : int64 (P+1,), part ``r`` owns ids ``offsets[r]:offsets[r+1]``
    perm : None (kept for callers: each row's original id is ``mg.orig``)
    view : LocalGraph of this rank's rows of ``A`` (halo columns are leaves)
    features : FeatureStore in the partition's row split (this rank: its solids)
    lo, hi : this rank's id range
    degree : :class:`OwnedRows` of the in-degrees in ``A`` (the push's degree
        bias): this rank's rows, and the global maximum
    """

    def __init__(self, mg, offsets, perm, view, features, degree):
        self.mg, self.offsets, self.perm = mg, np.asarray(offsets, np.int64), perm
        self.comm = mg.comm
        self.view, self.features, self.degree = view, features, degree
        self.lo, self.hi = (int(v) for v in self.offsets[self.comm.rank:self.comm.rank + 2])

    @classmethod
    def build(cls, graph, comm, *, method="metis", seed=0, dtype=np.float32, backend=None,
              clock=None):
        """Partition and renumber ``graph`` on rank 0, scatter each rank its rows. Collective.

        ``graph``: on rank 0 (others pass None).  ``method``: a key of
        :data:`spgnn.partition.PARTITIONERS`; ``"metis"`` balances vertices
        and training vertices (two constraints, paper 001 §3.1),
        ``"balanced"`` is METIS then the send-volume refinement.

        Rank 0 checks the graph, partitions it and renumbers it (errors are
        raised on every rank), then every rank receives only its rows of the
        renumbered graph (``A'`` with global column ids, raw features,
        labels, masks and original ids: the :class:`~spgnn.io.shards.RowBlock`
        a shard read of those rows makes; one :func:`~spgnn.gnn.data.held_rows`
        move from rank 0, label ``gnn-setup:move-rows``) and the graph is built
        from them exactly as :meth:`from_shards` builds it from the rows a
        rank read (:meth:`from_rows`).  No rank but 0 ever holds the whole
        graph, its features or its labels.  Nothing here is counted in epoch
        bytes.  ``clock``: a stage clock (stages ``move-rows``, ``place``).

        Raises
        ------
        ValueError, TypeError, NonFiniteError
            On every rank: no train (or test) mask, no features or labels,
            non-finite features or edge weights, a bad ``method``.
        """
        _check_dtype(dtype, backend)
        stage = clock.stage if clock is not None else _no_stage
        err, info, block = None, None, None
        if comm.rank == 0:
            try:
                block, info = _rows_on_root(graph, comm.size, method, seed)
            except (ValueError, TypeError, NonFiniteError) as exc:
                err = exc
        comm.agree(err)
        info = comm.bcast_obj(info, root=0, label="hec:setup")
        n, offsets = info["n"], info["offsets"]
        if block is None:           # no rows here until they are moved (an empty range at n)
            block = dataclasses.replace(info.pop("empty"), lo=n, hi=n)
        info.pop("empty", None)
        lo, hi = offsets[comm.rank], offsets[comm.rank + 1]
        block = held_rows(comm, block, lo, hi, stage)
        if block is None:           # on every rank alike (move_rows' own decision)
            raise RuntimeError("HaloGraph.build: the rows could not be scattered from rank 0")
        return cls.from_rows(comm, _owned(block), info, dtype=dtype, backend=backend,
                             clock=clock)

    @classmethod
    def from_shards(cls, directory, comm, *, partition=None, dtype=np.float32, backend=None,
                    clock=None):
        """Read a shard directory for partitioned minibatch training. Collective.

        The shards' parts are the partition (``K = P``: part ``r`` is rank
        ``r``'s; ``K = m·P``: rank ``r`` owns parts ``m·r .. m·r+m-1``;
        ``P = m·K``: each part is cut into ``m`` even blocks; otherwise one
        GridError on every rank naming ``--parts``).  Rank 0 reads the
        manifest; each rank reads only its rows, once, and builds its share
        from them (:meth:`from_rows`).  No rank holds the whole graph, its
        features or its labels; what stays O(n) per rank is the sampler's
        row pointer (its view is an ``n x n`` CSR).

        With the shards written from a graph in the order of
        :meth:`build`'s partition, training equals ``build``'s bit for
        bit (``tests/test_shards_sampled.py``).  ``partition``: the method
        the caller asked for (``--partition``), or None; one other than the
        manifest's is a ValueError on every rank.  ``clock``: a stage clock
        (stages ``read-rows`` and ``place``).

        Raises
        ------
        ShardError, GridError, ValueError
            On every rank.
        """
        _check_dtype(dtype, backend)
        man = read_manifest_on_root(directory, comm, "hec:setup")
        offsets, err = None, None
        try:
            offsets = _shard_parts(man, directory, comm.size, partition)
        except (ValueError, GridError) as exc:      # every rank alike (the manifest's)
            err = exc
        comm.agree(err)
        lo, hi = int(offsets[comm.rank]), int(offsets[comm.rank + 1])
        stage = clock.stage if clock is not None else _no_stage
        block = read_own_rows(comm, directory, man, lo, hi, stage)
        info = dict(n=int(man["n"]), f=int(man["num_features"]), c=int(man["num_classes"]),
                    offsets=tuple(int(v) for v in offsets), feature_form=man["feature_form"],
                    counts=dict(man["counts"]), name=man.get("name") or str(directory),
                    method=man.get("partition", {}).get("method", "none"))
        files = list(block.files)
        hg = cls.from_rows(comm, block, info, dtype=dtype, backend=backend, clock=clock)
        hg.mg.full.shard_files = files
        return hg

    @classmethod
    def from_rows(cls, comm, block, info, *, dtype=np.float32, backend=None, clock=None):
        """This rank's share from its rows: what :meth:`build` and :meth:`from_shards` end with.

        Collective (the evaluation graph's placement, one all-reduce MAX of
        the degrees).  ``block``: a :class:`~spgnn.io.shards.RowBlock` of
        exactly this rank's rows ``offsets[r]:offsets[r+1]`` of the renumbered
        graph (``A'`` with global column ids; it is consumed).  ``info``:
        ``n``, ``f``, ``c``, ``offsets`` (``P + 1`` part boundaries),
        ``feature_form`` (:func:`~spgnn.io.preprocess.feature_form` of the
        whole feature matrix), ``counts`` (global train/val/test counts),
        ``name``, ``method`` (the partitioner's).  From the rows come the
        sampler's view (GraphSAGE's neighbour pattern of the rows, global
        column ids), the degrees (this rank's rows, and the global maximum),
        this rank's labels and training ids, and, on the same rows, the
        evaluation graph: a ``1d-aware`` mean-aggregation
        :class:`~spgnn.gnn.data.DistGraph` in the partition's row split, whose
        row-normalised features are the training features
        (:func:`~spgnn.gnn.data.place_rows`: layer by layer, each rank
        computes its own vertices' embeddings and receives only the halo rows
        its rows reference).  Nothing but the view's row pointer is O(n).
        """
        offsets = tuple(int(v) for v in info["offsets"])
        lo, hi = offsets[comm.rank], offsets[comm.rank + 1]
        n = int(info["n"])
        if (int(block.lo), int(block.hi)) != (lo, hi):
            raise ValueError(f"HaloGraph.from_rows: rank {comm.rank} holds rows "
                             f"{block.lo}:{block.hi}, but its part is {lo}:{hi}")
        stage = clock.stage if clock is not None else _no_stage
        # the sampler's view: GraphSAGE's neighbour pattern of my rows (A' has no
        # self-loops and is symmetric; weights dropped), global column ids
        pattern = shard_pattern_rows(block)
        rows_ptr = np.asarray(pattern.indptr, dtype=np.int64)
        indptr = np.empty(n + 1, dtype=np.int64)
        indptr[:lo + 1] = 0
        indptr[lo + 1:hi + 1] = rows_ptr[1:]
        indptr[hi + 1:] = rows_ptr[-1]
        view = LocalGraph(sp.csr_array((pattern.data, pattern.indices, indptr),
                                       shape=(n, n)), backend=backend)
        del pattern
        deg = np.diff(rows_ptr)
        dmax = comm.allreduce(np.array([deg.max(initial=0)], dtype=np.int64), op="max",
                              label="hec:setup")[0]
        degree = OwnedRows(deg, lo, n, maximum=int(dmax))
        labels = OwnedRows(np.asarray(block.label, dtype=np.int64), lo, n)
        train = np.flatnonzero(block.train).astype(np.int64) + lo
        orig = np.asarray(block.orig)
        full = _mean_graph(comm, block, info, dtype, backend, stage)
        del block
        mg = OwnedMinibatchGraph(full, labels, train, orig, name=info["name"])
        return cls(mg, offsets, None, view, FeatureStore(full.features, label="halo-fetch"),
                   degree)

    def is_halo(self, ids):
        """True where ``ids`` are owned by another rank. Local."""
        ids = np.asarray(ids)
        return (ids < self.lo) | (ids >= self.hi)

    def local_input(self, ids):
        """Input rows of ``ids``: my solids' features, zero rows for halos. Local (nothing sent)."""
        ids = np.asarray(ids, dtype=np.int64)
        x = np.zeros((ids.size, self.features.width), dtype=self.features.dtype)
        mine = ~self.is_halo(ids)
        be = self.features.matrix.backend        # the rows live on the training backend
        x[mine] = be.to_host(self.features.local[be.asarray(ids[mine] - self.lo)])
        return x

    def owner(self, ids):
        return self.features.owner(ids)


# --------------------------------------------------------------------------- #
# Rows: what every rank builds its share from
# --------------------------------------------------------------------------- #

@contextlib.contextmanager
def _no_stage(name):
    yield


def _check_dtype(dtype, backend):
    """The ValueError of a dtype the evaluation graph refuses, before anything moves. Pure."""
    _check_options(as_placement("1d-aware"), "none", "mean", False,
                   get_backend(backend).xp is not np, dtype)


def _rows_on_root(graph, size, method, seed):
    """Rank 0: check, partition and renumber ``graph``; ``(RowBlock of all rows, info)``. Local.

    The block holds rows ``0:n`` of the renumbered graph in the form a shard
    read makes (:func:`spgnn.io.shards.read_rows`): ``A'``
    (:func:`~spgnn.io.preprocess.undirected_weights`, float64, global
    columns), the GCN degrees, the raw feature rows (as the graph stores
    them), labels, masks and original ids.  ``info``: what
    :meth:`HaloGraph.from_rows` needs besides the rows, and ``empty``: a
    block of no rows of the same dtypes (the other ranks' start).
    """
    if graph is None or graph.train_mask is None:
        raise ValueError("partitioned training: the graph needs a train mask")
    if graph.features is None or graph.labels is None:
        raise ValueError(f"MinibatchGraph: the graph needs features and labels; "
                         f"{SYNTHETIC_HINT}")
    if graph.test_mask is None:
        raise ValueError("MinibatchGraph: the graph needs a split (train/test masks; "
                         "Graph.random_split)")
    require_finite(graph)
    # "metis" balances training vertices too (BALANCES_TRAINING: two constraints)
    perm, offsets, _ = partition_graph(graph.adj, method, size, seed,
                                       train_mask=graph.train_mask)
    n = graph.num_nodes
    perm = np.arange(n, dtype=np.int64) if perm is None else np.asarray(perm, dtype=np.int64)
    pgraph = permute_graph(graph, perm)
    a = undirected_weights(pgraph.adj)
    deg = gcn_degrees(a, undirected=True)
    x = pgraph.features
    x = sp.csr_array(x) if sp.issparse(x) else np.asarray(x)
    labels = np.asarray(pgraph.labels).astype(np.int64)
    masks = [np.zeros(n, bool) if m is None else np.asarray(m).astype(bool)
             for m in (pgraph.train_mask, pgraph.val_mask, pgraph.test_mask)]
    block = RowBlock(0, n, a, deg, x, labels, *masks, perm, [],
                     np.arange(n, dtype=np.int64), deg)
    empty = RowBlock(0, 0, a[0:0], deg[:0], x[0:0], labels[:0], *(m[:0] for m in masks),
                     perm[:0], [])
    info = dict(n=n, f=int(x.shape[1]), c=int(max(labels.max(initial=-1), -1)) + 1,
                offsets=tuple(int(v) for v in offsets), feature_form=feature_form(x),
                counts={k: int(m.sum()) for k, m in zip(("train", "val", "test"), masks)},
                name=graph.name, method=method, empty=empty)
    return block, info


def _owned(block):
    """``block`` with arrays of its own (rows kept by rank 0 are views of the whole graph's,
    which would otherwise stay alive). Local."""
    a = block.adj
    if a.indices.base is not None or a.data.base is not None:
        block.adj = sp.csr_array((a.data.copy(), a.indices.copy(), a.indptr.copy()),
                                 shape=a.shape)
    x = block.x
    if sp.issparse(x) and (x.indices.base is not None or x.data.base is not None):
        block.x = sp.csr_array((x.data.copy(), x.indices.copy(), x.indptr.copy()),
                               shape=x.shape)
    elif not sp.issparse(x) and x.base is not None:
        block.x = x.copy()
    return block


def _mean_graph(comm, block, info, dtype, backend, stage):
    """The evaluation graph from this rank's rows: ``1d-aware``, mean aggregation, dense
    row-normalised features, in the partition's row split. Collective (:func:`place_rows`)."""
    placement = as_placement("1d-aware")
    grid = placement.make_grid(comm)
    n = int(info["n"])
    layouts = placement.layouts(grid, n, info["offsets"])
    lo = int(info["offsets"][comm.rank])
    with stage("place"):
        meta, shards = place_rows(comm, grid, layouts, block, lo, info, "mean", True,
                                  np.dtype(dtype), backend)
    return DistGraph(comm, grid, placement, meta, shards, partition=info.get("method", "none"),
                     adjacency="mean", sparse_features=False, dtype=np.dtype(dtype),
                     backend=backend)


def _shard_parts(man, directory, size, partition):
    """The ``size + 1`` id boundaries of the ranks' parts from a manifest. Pure.

    Raises ValueError (``partition`` is not the shards' method; no training
    vertex) or GridError (neither of ``K`` and ``size`` divides the other).
    """
    method = man.get("partition", {}).get("method", "none")
    if partition not in (None, "none", method):
        raise ValueError(f"HaloGraph.from_shards: {directory} holds shards partitioned with "
                         f"'{method}' (spgnn partition --method); --partition {partition} "
                         f"cannot apply (leave it out)")
    offsets = part_blocks(man["offsets"], size)
    if offsets is None:
        k = len(man["offsets"]) - 1
        raise GridError(f"HaloGraph.from_shards: the shards in {directory} have K={k} parts, "
                        f"but partitioned minibatch training on {size} ranks needs one part "
                        f"per rank (or a divisor or multiple of {size} parts); re-partition "
                        f"with 'spgnn partition --parts {size}'")
    if not man.get("counts", {}).get("train", 0):
        raise ValueError(f"HaloGraph.from_shards: the shards in {directory} have no training "
                         f"vertices")
    return offsets


class OwnedRows:
    """Per-vertex values of one rank's id range ``lo:lo+len(values)`` of ``n``. Local.

    Indexing with global ids of that range returns their values (an
    IndexError names any other id): what a rank needs of an O(n) vector when
    it only ever reads its own vertices' entries (labels of its minibatches'
    targets, the degrees of the vertices it pushes).  ``max(initial=)``: the
    maximum over all ranks when given at construction (``maximum``), else
    over this rank's values.
    """

    def __init__(self, values, lo, n, *, maximum=None):
        self.values = np.asarray(values)
        self.lo, self.hi, self.n = int(lo), int(lo) + self.values.size, int(n)
        self.maximum = maximum
        self.dtype = self.values.dtype

    @property
    def size(self):
        return self.n

    def __len__(self):
        return self.n

    def __getitem__(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < self.lo or ids.max() >= self.hi):
            bad = ids[(ids < self.lo) | (ids >= self.hi)][0]
            raise IndexError(f"OwnedRows: vertex {int(bad)} is not in this rank's rows "
                             f"{self.lo}:{self.hi}")
        return self.values[ids - self.lo]

    def max(self, initial=None):
        m = self.values.max(initial=initial) if initial is not None or self.values.size else None
        if self.maximum is not None:
            m = self.maximum if m is None else max(m, self.maximum)
        return m


class OwnedMinibatchGraph:
    """What partitioned minibatch training needs of a :class:`MinibatchGraph`, one rank's share.

    Built by :meth:`HaloGraph.from_rows`: evaluation and features are a
    ``1d-aware`` mean-aggregation :class:`~spgnn.gnn.data.DistGraph`
    (``full``) in the partition's row split; labels are this rank's rows
    (:class:`OwnedRows`), training ids this rank's training vertices
    (:meth:`train_ids`).  Nothing here is O(n).

    Attributes: as :class:`MinibatchGraph` (``full``, ``comm``, ``grid``,
    ``backend``, ``mode`` "replicated" and ``replication`` 1 as
    ``HaloGraph.build``'s, ``features``, ``labels``, ``n``, ``num_features``,
    ``num_classes``, ``name``), and ``orig``: each row's vertex id in the
    source graph.
    """

    def __init__(self, full, labels, train_ids, orig, *, name):
        self.full = full
        self.comm, self.grid, self.backend = full.comm, full.grid, full.backend
        self.mode, self.replication = "replicated", 1
        self.features = FeatureStore(full.features)
        self.labels = labels
        self._train_ids = np.asarray(train_ids, dtype=np.int64)
        self.orig = orig
        self.n = int(full.num_nodes)
        self.num_features = full.num_features
        self.num_classes = full.num_classes
        self.name = name

    def train_ids(self):
        """This rank's training vertices (global ids, ascending). Local."""
        return self._train_ids
