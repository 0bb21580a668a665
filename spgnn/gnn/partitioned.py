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

Everything is checked against a single-process reference that replays the
same minibatches (``tests/property/test_hec_partitioned.py``,
``tests/mpi/hec_checks.py``).  The training loop is
:class:`~spgnn.gnn.train.Trainer` over the :class:`~spgnn.gnn.sources.Halo`
source.
"""

import numpy as np
import scipy.sparse as sp

from ..core.dist_dense import DistDenseMatrix
from ..layout import Layout
from ..partition import local_view, partition_graph, permute_graph
from ..sampling import LocalGraph
from .minibatch import FeatureStore, MinibatchGraph

__all__ = ["HaloGraph", "local_batches"]


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
    mg : MinibatchGraph of the renumbered graph (evaluation, labels, masks)
    offsets : int64 (P+1,), part ``r`` owns ids ``offsets[r]:offsets[r+1]``
    perm : int64 (n,), new id ``i`` is original vertex ``perm[i]``
    view : LocalGraph of this rank's rows of ``A`` (halo columns are leaves)
    features : FeatureStore in the partition's row split (this rank: its solids)
    lo, hi : this rank's id range
    degree : int64 (n,), in-degree in ``A`` (the push's degree bias)
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
