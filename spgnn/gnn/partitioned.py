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
same minibatches (``tests/unit/test_partitioned_train.py``,
``tests/mpi/hec_checks.py``).
"""

import dataclasses
import time

import numpy as np
import scipy.sparse as sp

from ..core.dist_dense import DistDenseMatrix
from ..layout import Layout
from ..partition import balanced_partition, metis_partition, random_partition
from ..partition.metis import metis_train_partition
from ..sampling import LocalGraph
from .context import BlockContext
from .minibatch import FeatureStore, MinibatchGraph, MinibatchTrainer
from .train import non_finite_error

__all__ = ["PARTITION_METHODS", "partition_graph_for_training", "permute_graph", "HaloGraph",
           "PartitionedTrainer", "local_batches", "local_view"]

#: ``--partition`` choices.
PARTITION_METHODS = ("metis", "random", "balanced")


def partition_graph_for_training(graph, nparts, method="metis", seed=0):
    """``(parts, perm, offsets)`` of ``graph`` in ``nparts`` for partitioned training. Local.

    ``"metis"``: METIS k-way with two balance constraints, vertices and
    training vertices (paper 001 §3.1); ``"random"``: balanced random;
    ``"balanced"``: METIS then the send-volume refinement
    (:func:`~spgnn.partition.balanced_partition`).
    """
    if method not in PARTITION_METHODS:
        raise ValueError(f"partition: method must be one of {PARTITION_METHODS}, but got "
                         f"{method!r}")
    a = graph.adj
    if method == "metis":
        p = metis_train_partition(a, nparts, graph.train_mask, seed=seed)
    elif method == "random":
        p = random_partition(a, nparts, seed=seed)
    else:
        p = balanced_partition(a, nparts, seed=seed)
    return p.parts, np.asarray(p.perm, dtype=np.int64), np.asarray(p.offsets, dtype=np.int64)


def permute_graph(graph, perm):
    """The same graph with new vertex ``i`` = old vertex ``perm[i]``. Local, pure."""
    def take(x):
        return None if x is None else x[perm]
    adj = sp.csr_array(graph.adj[perm][:, perm])
    return dataclasses.replace(graph, adj=adj, features=take(graph.features),
                               labels=take(graph.labels), train_mask=take(graph.train_mask),
                               val_mask=take(graph.val_mask), test_mask=take(graph.test_mask),
                               node_ids=perm if graph.node_ids is None else graph.node_ids[perm])


def local_view(a, lo, hi):
    """``A`` with only rows ``lo:hi`` kept (same shape): a rank's one-hop view. Local, pure."""
    a = sp.csr_array(a)
    indptr = np.asarray(a.indptr, dtype=np.int64)
    n = a.shape[0]
    new_ptr = np.zeros(n + 1, dtype=np.int64)
    new_ptr[lo + 1:hi + 1] = indptr[lo + 1:hi + 1] - indptr[lo]
    new_ptr[hi + 1:] = new_ptr[hi]
    s, e = indptr[lo], indptr[hi]
    return sp.csr_array((a.data[s:e], a.indices[s:e], new_ptr), shape=a.shape)


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
                _, perm, offsets = partition_graph_for_training(graph, comm.size, method, seed)
                pgraph = permute_graph(graph, perm)
                payload = (perm, offsets)
            except (ValueError, TypeError) as exc:
                err = exc
        comm.agree(err)
        mg = MinibatchGraph.from_graph(pgraph, comm, mode="replicated", root=0, dtype=dtype,
                                       backend=backend)
        perm, offsets = comm.bcast_obj(payload, root=0, label="hec:setup")
        lo, hi = int(offsets[comm.rank]), int(offsets[comm.rank + 1])
        a = mg.sampling_graph.a
        indptr = np.asarray(a.indptr, dtype=np.int64)
        degree = np.diff(indptr)
        view_csr = sp.csr_array((a.data, a.indices, indptr), shape=a.shape)
        view = LocalGraph(local_view(view_csr, lo, hi), backend=backend)
        mg.sampling_graph = None        # keep only the view
        mine = mg.features.fetch(np.arange(lo, hi, dtype=np.int64), validate=False)
        mat = DistDenseMatrix(np.ascontiguousarray(mine), (mg.n, mg.num_features), mg.grid,
                              Layout("row", row_splits=tuple(int(v) for v in offsets)),
                              backend=mg.features.matrix.backend)
        return cls(mg, offsets, perm, view, FeatureStore(mat, label="halo-fetch"), degree)

    def is_halo(self, ids):
        """True where ``ids`` are owned by another rank. Local."""
        ids = np.asarray(ids)
        return (ids < self.lo) | (ids >= self.hi)

    def owner(self, ids):
        return self.features.owner(ids)


class PartitionedTrainer(MinibatchTrainer):
    """Partitioned minibatch training with local sampling (module docstring). Collective.

    Parameters
    ----------
    model, sampler, optimizer, batch_size, seed : as :class:`MinibatchTrainer`
    graph : HaloGraph
    hec : optional :class:`spgnn.gnn.hec.HECRunner` (None: ``--hec off``)

    The gradient all-reduce is labelled ``hec:grad-allreduce``, the halo
    feature fetch ``halo-fetch:ids`` / ``halo-fetch:rows``.
    """

    grad_label = "hec:grad-allreduce"

    def __init__(self, model, graph, sampler, optimizer, *, batch_size=512, seed=0, hec=None,
                 dtype=None):
        if not isinstance(graph, HaloGraph):
            raise TypeError(f"PartitionedTrainer: graph must be a HaloGraph, but got "
                            f"{type(graph).__name__}")
        self.halo = graph
        super().__init__(model, graph.mg, sampler, optimizer, batch_size=batch_size, bulk=1,
                         seed=seed, dtype=dtype)
        g = graph
        self.local_train = self.train_ids[(self.train_ids >= g.lo) & (self.train_ids < g.hi)]
        self.local_batches_count = -(-self.local_train.size // self.batch_size)
        m = self.comm.allreduce(np.array([self.local_batches_count], dtype=np.int64), op="max",
                                label="hec:setup")
        self.iterations = int(m[0])
        self.hec = hec
        if hec is not None:
            hec.attach(self)

    def epoch_batches(self, epoch):
        """This rank's minibatches of ``epoch`` (:func:`local_batches`). Pure."""
        return local_batches(self.local_train, self.batch_size, self.seed, epoch, self.comm.rank)

    def minibatch_id(self, k, rank=None):
        """Global id of iteration ``k``'s minibatch of ``rank``: ``k·P + rank``. Pure."""
        return int(k) * self.comm.size + (self.comm.rank if rank is None else int(rank))

    def _context(self, mb, epoch, mb_id):
        g = self.graph
        kw = dict(labels=g.labels[mb.blocks[0].dst_ids], grid=g.grid, dtype=self.dtype,
                  backend=g.backend, training=True, epoch=epoch, seed=self.seed, minibatch=mb_id)
        if self.hec is None:
            return BlockContext(mb.forward_blocks, **kw)
        return self.hec.context(mb.forward_blocks, **kw)

    def train_epoch(self):
        """One epoch of ``M`` lockstep iterations. Collective.

        Returns the :meth:`MinibatchTrainer.train_epoch` record plus
        ``bytes_by_label`` (bytes this rank sent per ledger label) and, with
        the cache, ``hec`` (hits and requests per level).
        """
        comm, hg = self.comm, self.halo
        epoch = self.epoch
        batches = self.epoch_batches(epoch)
        loss_sum = correct = count = 0.0
        t0 = time.perf_counter()
        if self.hec is not None:
            self.hec.start_epoch(epoch, self.iterations)
        with comm.track("hec-epoch") as stats:
            for k in range(self.iterations):
                self.model.zero_grad()
                extra = np.zeros(3)
                mine = k < len(batches)
                mb_id = self.minibatch_id(k)
                if mine:
                    mb = self.sampler.sample(hg.view, [batches[k]], [mb_id], epoch=epoch)
                    src = mb.forward_blocks[0].src_ids
                else:
                    mb, src = None, np.zeros(0, dtype=np.int64)
                if self.hec is None:
                    x = hg.features.fetch(src, validate=False)        # collective, exact
                else:
                    x = self.hec.input_rows(src)                        # solids local, halos 0
                if mine:
                    ctx = self._context(mb, epoch, mb_id)
                    if self.hec is not None:
                        self.hec.begin(k, ctx)
                    logits = self.model.forward(ctx, ctx.input(x))
                    loss, d, corr = ctx.loss(logits)
                    self.model.backward(ctx, d)
                    extra[:] = (loss, corr, ctx.labels.size)
                elif self.hec is not None:
                    self.hec.empty_iteration(k)                         # its collectives
                if self.hec is not None:
                    self.hec.end(k)
                tot = self._allreduce_gradients(extra)
                bad = non_finite_error(self.model, float(tot[0]), epoch)
                if bad is not None:
                    comm.raise_together(bad)
                self.optimizer.step()
                loss_sum += float(tot[0])
                correct += float(tot[1])
                count += float(tot[2])
        self.epoch += 1
        by_label = {k.split("/", 1)[-1]: int(v["bytes_sent"]) for k, v in stats.by_label().items()}
        rec = dict(epoch=epoch, loss=loss_sum / max(count, 1.0),
                   train_acc=correct / max(count, 1.0), steps=self.iterations,
                   bytes=int(stats.total("bytes_sent")), bytes_by_label=by_label,
                   fetch_bytes=int(sum(v["bytes_recv"] for k, v in stats.by_label().items()
                                       if "halo-fetch" in k)),
                   seconds=time.perf_counter() - t0)
        if self.hec is not None:
            rec["hec"] = self.hec.epoch_record()
        return rec

    def _placement(self):
        out = super()._placement()
        out.update(partitioned=True, offsets=[int(v) for v in self.halo.offsets],
                   hec=None if self.hec is None else self.hec.config_record())
        return out
