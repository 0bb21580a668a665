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

**From shards.**  :meth:`HaloGraph.from_shards` builds the same graph from a
shard directory (``spgnn partition``) without any rank holding the whole
graph, its features or its labels: the shards' parts are the partition, each
rank reads only its rows (its part file(s)), and evaluation runs on a
``1d-aware`` mean-aggregation :class:`~spgnn.gnn.data.DistGraph` of the same
rows (:meth:`DistGraph.from_shards`: layer by layer, each rank computes its
own vertices' embeddings and receives only the halo rows its rows reference).

Everything is checked against a single-process reference that replays the
same minibatches (``tests/property/test_hec_partitioned.py``,
``tests/mpi/hec_checks.py``).  The training loop is
:class:`~spgnn.gnn.train.Trainer` over the :class:`~spgnn.gnn.sources.Halo`
source.
"""

import contextlib

import numpy as np
import scipy.sparse as sp

from ..core.dist_dense import DistDenseMatrix
from ..errors import GridError
from ..layout import Layout
from ..partition import local_view, partition_graph, permute_graph
from ..sampling import LocalGraph
from .data import DistGraph, part_blocks, read_manifest_on_root, read_own_rows
from .minibatch import FeatureStore, MinibatchGraph, shard_pattern_rows

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
    mg : MinibatchGraph of the renumbered graph (evaluation, labels, masks), or,
        from shards, an :class:`OwnedMinibatchGraph` (this rank's labels and
        training ids only)
    offsets : int64 (P+1,), part ``r`` owns ids ``offsets[r]:offsets[r+1]``
    perm : int64 (n,), new id ``i`` is original vertex ``perm[i]``; None from
        shards (each row's original id is ``mg.orig``)
    view : LocalGraph of this rank's rows of ``A`` (halo columns are leaves)
    features : FeatureStore in the partition's row split (this rank: its solids)
    lo, hi : this rank's id range
    degree : int64 (n,), in-degree in ``A`` (the push's degree bias); from
        shards an :class:`OwnedRows` (this rank's rows, and the global maximum)
    """

    def __init__(self, mg, offsets, perm, view, features, degree):
        self.mg, self.offsets, self.perm = mg, np.asarray(offsets, np.int64), perm
        self.comm = mg.comm
        self.view, self.features, self.degree = view, features, degree
        self.lo, self.hi = (int(v) for v in self.offsets[self.comm.rank:self.comm.rank + 2])

    @classmethod
    def build(cls, graph, comm, *, method="metis", seed=0, dtype=np.float32, backend=None):
        """Partition, renumber and distribute ``graph`` (on rank 0; others pass None). Collective.

        ``method``: a key of :data:`spgnn.partition.PARTITIONERS`; ``"metis"``
        balances vertices and training vertices (two constraints, paper 001
        §3.1), ``"balanced"`` is METIS then the send-volume refinement.

        Rank 0 partitions (errors are raised on every rank), the renumbered
        graph is distributed as a replicated-mode :class:`MinibatchGraph`,
        each rank keeps its rows of ``A`` and moves its solid vertices'
        features into the partition's row split (one ``gather_rows``).
        Nothing here is counted in epoch bytes.
        """
        err, payload, pgraph = None, None, None
        if comm.rank == 0:
            try:
                if graph is None or graph.train_mask is None:
                    raise ValueError("partitioned training: the graph needs a train mask")
                # "metis" balances training vertices too (BALANCES_TRAINING: two constraints)
                perm, offsets, _ = partition_graph(graph.adj, method, comm.size, seed,
                                                   train_mask=graph.train_mask)
                perm = np.arange(graph.num_nodes, dtype=np.int64) if perm is None else \
                    np.asarray(perm, dtype=np.int64)
                pgraph = permute_graph(graph, perm)
                payload = (perm, offsets)
            except (ValueError, TypeError) as exc:
                err = exc
        comm.agree(err)
        mg = MinibatchGraph.from_graph(pgraph, comm, mode="replicated", root=0, dtype=dtype,
                                       backend=backend)
        perm, offsets = comm.bcast_obj(payload, root=0, label="hec:setup")
        lo, hi = int(offsets[comm.rank]), int(offsets[comm.rank + 1])
        a = mg.release_sampling_graph().a          # keep only this rank's view of it
        indptr = np.asarray(a.indptr, dtype=np.int64)
        degree = np.diff(indptr)
        view_csr = sp.csr_array((a.data, a.indices, indptr), shape=a.shape)
        view = LocalGraph(local_view(view_csr, lo, hi), backend=backend)
        mine = mg.features.fetch(np.arange(lo, hi, dtype=np.int64), validate=False)
        mat = DistDenseMatrix(np.ascontiguousarray(mine), (mg.n, mg.num_features), mg.grid,
                              Layout("row", row_splits=tuple(int(v) for v in offsets)),
                              backend=mg.features.matrix.backend)
        return cls(mg, offsets, perm, view, FeatureStore(mat, label="halo-fetch"), degree)

    @classmethod
    def from_shards(cls, directory, comm, *, partition=None, dtype=np.float32, backend=None,
                    clock=None):
        """Read a shard directory for partitioned minibatch training. Collective.

        The shards' parts are the partition (``K = P``: part ``r`` is rank
        ``r``'s; ``K = m·P``: rank ``r`` owns parts ``m·r .. m·r+m-1``;
        ``P = m·K``: each part is cut into ``m`` even blocks; otherwise one
        GridError on every rank naming ``--parts``).  Rank 0 reads the
        manifest; each rank reads only its rows, once: its view of ``A``,
        its labels and masks, and (through :meth:`DistGraph.from_shards`,
        ``1d-aware``, mean aggregation, dense features) its normalised
        feature rows and the evaluation graph.  No rank holds the whole
        graph, its features or its labels; what stays O(n) per rank is the
        sampler's row pointer (its view is an ``n x n`` CSR).

        With the shards written from a graph in the order of
        ``HaloGraph.build``'s partition, training equals ``build``'s bit for
        bit (``tests/test_shards_sampled.py``).  ``partition``: the method
        the caller asked for (``--partition``), or None; one other than the
        manifest's is a ValueError on every rank.  ``clock``: a stage clock
        (stages ``read-rows`` and ``place``).

        Raises
        ------
        ShardError, GridError, ValueError
            On every rank.
        """
        man = read_manifest_on_root(directory, comm, "hec:setup")
        offsets, err = None, None
        try:
            offsets = _shard_parts(man, directory, comm.size, partition)
        except (ValueError, GridError) as exc:      # every rank alike (the manifest's)
            err = exc
        comm.agree(err)
        lo, hi = int(offsets[comm.rank]), int(offsets[comm.rank + 1])
        n = int(man["n"])
        stage = clock.stage if clock is not None else (lambda name: contextlib.nullcontext())
        block = read_own_rows(comm, directory, man, lo, hi, stage)
        # the sampler's view: GraphSAGE's neighbour pattern of my rows (the shards'
        # A' has no self-loops and is symmetric; weights dropped), global column ids
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
        full = DistGraph.from_shards(directory, comm, "1d-aware", adjacency="mean",
                                     normalize_features=True, sparse_features=False,
                                     dtype=dtype, backend=backend, block=[block], clock=clock)
        del block
        mg = OwnedMinibatchGraph(full, labels, train, orig, name=man.get("name") or
                                 str(directory))
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
        x[mine] = self.features.local[ids[mine] - self.lo]
        return x

    def owner(self, ids):
        return self.features.owner(ids)


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

    Built by :meth:`HaloGraph.from_shards`: evaluation and features are a
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
