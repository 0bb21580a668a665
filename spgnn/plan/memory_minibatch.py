"""Per-rank memory model of minibatch training (``train --model sage [--hec ...]``). Pure.

The full-graph model (:mod:`spgnn.plan.memory`) prices GCN training; this
one prices what a partitioned GraphSAGE trainer (``--hec off|on|none``,
:class:`~spgnn.gnn.sources.Halo` over a
:class:`~spgnn.gnn.partitioned.HaloGraph`) holds on each rank, in memory
(``--partition metis|random|balanced``, rank 0 loads the graph) or from
shards (``--graph DIR``), and ``--model sage`` without ``--hec``
(replicated bulk sampling, :class:`~spgnn.gnn.sources.Sampled`: the whole
pattern on every rank; or ``--partition-mode partitioned``, bulk sampling on
``P/c`` block rows of a ``PartitionedGraph``, in memory or from shards: rank
``r`` holds block row ``r // c``, :func:`with_partitioned_view`).  The predicted per-rank peak is

    baseline + max(setup transient, held + max(one iteration, evaluation)) + HEC resident

* ``baseline``: :func:`spgnn.plan.memory.baseline_bytes` (measured);
* setup transient (:func:`setup_bytes`): **fitted**, as the full-graph
  model's: :data:`~spgnn.plan.memory.SETUP_FIXED_BYTES` plus, partitioned
  (in memory or from shards: every rank builds its share from its own rows,
  ``HaloGraph.from_rows``), :data:`SETUP_SHARD_BYTES_PER_NNZ` per entry of
  the rank's own rows, and in memory on rank 0 (it loads, partitions and
  renumbers the whole graph and sends each rank its rows)
  :data:`SETUP_HALO_ROOT_BYTES_PER_NNZ` per entry and
  :data:`SETUP_HALO_ROOT_BYTES_PER_FEATURE` per feature value of the whole graph;
  replicated, ``SETUP_BYTES_PER_NNZ["1d"]`` per entry of the whole pattern
  on every rank (``MinibatchGraph.from_graph`` broadcasts it; with
  ``--partition-mode partitioned`` per entry of the rank's block row, all it
  is sent: the same price, not fitted) and on rank 0
  :data:`SETUP_BYTES_PER_ROOT_NNZ` per entry and the feature term;
* held (:func:`halo_held_bytes`): **counted exactly**, the arrays a built
  trainer keeps between iterations (tested equal to them and to
  tracemalloc, ``tests/test_memory_minibatch_tracemalloc.py``): the
  sampler's view of the rank's rows, the evaluation graph (a ``1d-aware``
  mean-aggregation DistGraph in the partition's row split: its block,
  exchange plan, features and node data), the rank's rows' labels, ids and
  degrees and its training ids (in memory as from shards: rank 0 sends each
  rank its rows), parameters with gradients and
  Adam's two moments, and with ``--hec on`` the caches
  (:func:`~spgnn.plan.memory.hec_cache_bytes`, with the ring
  :class:`~spgnn.gnn.hec.HECRunner` really allocates) and their halo tables;
* one iteration (:func:`iteration_bytes`): an **upper bound** -- the
  sampled blocks depend on the draws, so every hop's frontier is priced at
  its largest, ``dst·(1 + fanout)`` (capped at ``n``), from the batch size
  outwards; on them the input rows, the halo fetch's buffers (``off``), the
  activations and gradients of every layer.  ``--hec on`` with the default
  ``--hec-push-cap auto`` samples the whole epoch first (the plan): its
  minibatches' blocks are all held, priced by the same bound;
* evaluation (:func:`evaluation_bytes`): full-neighbourhood inference on
  the evaluation graph, priced: each layer's input, aggregate and output
  over the rank's rows, and the exchange's send and receive buffers
  (the exact row counts of the ``1d-aware`` plan).

The counts a prediction needs are a :class:`HaloCounts` (per rank), made
from the whole graph (:func:`halo_counts`) or from each rank's rows
(:func:`gather_halo_counts`, collective).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .memory import SETUP_BYTES_PER_NNZ, SETUP_FIXED_BYTES, baseline_bytes, hec_cache_bytes

__all__ = ["HaloCounts", "halo_counts", "gather_halo_counts", "rank_summary",
           "counts_from_summaries", "with_partitioned_view", "partitioned_view_counts", "sage_dims", "frontier_bound",
           "halo_held_bytes", "iteration_bytes", "partitioned_sampling_bytes",
           "top_degrees_of", "top_degrees_needed", "evaluation_bytes", "hec_ring_rows",
           "sage_peak_bytes", "setup_bytes", "label_itemsize", "hec_resident_bytes",
           "SETUP_BYTES_PER_ROOT_NNZ", "SETUP_HALO_ROOT_BYTES_PER_NNZ",
           "SETUP_HALO_ROOT_BYTES_PER_FEATURE",
           "SETUP_SHARD_BYTES_PER_NNZ", "SETUP_ROOT_BYTES_PER_FEATURE", "HEC_DEFAULT_CAPACITY"]

_F32, _I32, _I64 = 4, 4, 8

#: Rank 0's extra setup transient of replicated sampling in memory, per stored entry of
#: the whole neighbour pattern: it loads and normalises the whole graph (the full-graph
#: fit's price, docs/scale.md "Minibatch and HEC").
SETUP_BYTES_PER_ROOT_NNZ = 53.0

#: Rank 0's extra setup transient of partitioned training in memory (``HaloGraph.build``),
#: per stored entry of the whole neighbour pattern: it loads, partitions and renumbers the
#: whole graph and cuts its rows for the other ranks, before it builds its own share as
#: every rank does (:data:`SETUP_SHARD_BYTES_PER_NNZ`); fitted on rank 0 of
#: plsbm:200000:47:60:100 in memory at 4 ranks with :data:`SETUP_HALO_ROOT_BYTES_PER_FEATURE`
#: fixed (docs/scale.md "Minibatch and HEC").
SETUP_HALO_ROOT_BYTES_PER_NNZ = 26.0

#: Rank 0's extra setup transient of partitioned training in memory per feature value of
#: the whole graph: two float64 copies (the loaded features and the renumbered ones the
#: rows are cut from).  Not fitted: on plsbm the features and the entries grow together,
#: so the fit cannot tell the two terms apart.
SETUP_HALO_ROOT_BYTES_PER_FEATURE = 16.0

#: Rank 0's extra setup transient of replicated sampling in memory per feature value of
#: the whole graph (it loads the features, replaces or normalises them: about 3.6 float64
#: copies at once), fitted on plsbm:200000:47:60:100 in memory at 4 ranks when the
#: partitioned path broadcast the whole pattern too (docs/scale.md).
SETUP_ROOT_BYTES_PER_FEATURE = 28.5

#: Setup transient per stored entry of a rank's own rows when ``HaloGraph.from_shards``
#: reads them (the shard block, the sampler's pattern and its int64/float64 copy, the
#: mean-aggregation block and its exchange plan, built one after another), fitted on
#: plsbm:200000:47:60:100 in 4 LDG shards at 4 ranks (docs/scale.md "Minibatch and HEC").
SETUP_SHARD_BYTES_PER_NNZ = 166.0

#: ``--hec-capacity``'s default (``HECConfig.cs``; the plan package cannot import gnn).
HEC_DEFAULT_CAPACITY = 1_000_000


@dataclasses.dataclass(frozen=True)
class HaloCounts:
    """What the memory of a partitioned minibatch trainer depends on, per rank (arrays by rank).

    Attributes
    ----------
    n, features, classes : int
        The graph's vertices, feature columns and classes.
    offsets : int64 (P + 1,)
        The partition's id ranges: rank ``r`` owns ``offsets[r]:offsets[r+1]``.
    view_nnz : int64 (P,)
        Stored entries of the rank's rows of the neighbour pattern (the sampler's view).
    halos : int64 (P,)
        Distinct columns of the rank's rows owned by another rank.
    train : int64 (P,)
        The rank's training vertices.
    eval_offsets : int64 (P + 1,)
        The evaluation graph's row blocks (partitioned: the partition's;
        replicated: ``block_offsets(n, P)``, which are then ``offsets`` too).
    eval_nnz, eval_sent, eval_recv : int64 (P,)
        Entries of the rank's evaluation rows, and the rows its ``1d-aware`` exchange
        sends and receives.
    sharded : bool
        Read from shards (no rank loads the whole graph: the setup term).
    total_nnz : int
        Entries of the whole pattern.
    view_offsets, view_block_nnz : int64 (P/c + 1,), int64 (P/c,), or None
        ``--partition-mode partitioned`` without ``--hec`` (bulk partitioned sampling,
        ``PartitionedGraph`` on ``grid_15d(c)``): the sampler's block rows and their
        entries (rank ``r`` holds block row ``r // c``); None: the whole pattern on every
        rank (replicated) or the partition's rows (``--hec``).  :func:`with_partitioned_view`.
    top_degrees : int64 array or None
        ``--partition-mode partitioned``: the whole pattern's largest row degrees, in
        descending order (at least :func:`top_degrees_needed` of them, or all): what
        :func:`partitioned_sampling_bytes` bounds the distributed sampler's rows with.
        None: not known (the sampler's transient is then not priced).
    """

    n: int
    features: int
    classes: int
    offsets: np.ndarray
    view_nnz: np.ndarray
    halos: np.ndarray
    train: np.ndarray
    eval_offsets: np.ndarray
    eval_nnz: np.ndarray
    eval_sent: np.ndarray
    eval_recv: np.ndarray
    sharded: bool
    total_nnz: int
    view_offsets: np.ndarray = None
    view_block_nnz: np.ndarray = None
    top_degrees: np.ndarray = None

    @property
    def ranks(self):
        return len(self.offsets) - 1

    @property
    def rows(self):
        return np.diff(np.asarray(self.offsets, dtype=np.int64))

    @property
    def eval_rows(self):
        return np.diff(np.asarray(self.eval_offsets, dtype=np.int64))


def _exchange_rows(pattern, eval_offsets):
    """Per rank of ``eval_offsets``' blocks: ``(entries, rows sent, rows received)`` of the
    ``1d-aware`` exchange (distinct off-block columns per rank pair). Pure."""
    off = np.asarray(eval_offsets, dtype=np.int64)
    k = len(off) - 1
    indptr = np.asarray(pattern.indptr, dtype=np.int64)
    nnz = indptr[off[1:]] - indptr[off[:-1]]
    sent, recv = np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int64)
    for i in range(k):
        cols = np.unique(np.asarray(pattern.indices[indptr[off[i]]:indptr[off[i + 1]]],
                                    dtype=np.int64))
        cols = cols[(cols < off[i]) | (cols >= off[i + 1])]
        owner = np.searchsorted(off, cols, side="right") - 1
        recv[i] = cols.size
        sent += np.bincount(owner, minlength=k)
    return nnz, sent, recv


def halo_counts(pattern, offsets, train_mask, features, classes, *, sharded=False,
                eval_offsets=None):
    """The :class:`HaloCounts` of a whole neighbour pattern in the partition's order. Pure.

    ``pattern``: the ``n x n`` CSR the sampler and the evaluation graph use
    (GraphSAGE's neighbour pattern of the renumbered graph); ``offsets``:
    the partition's ``P + 1`` id boundaries; ``train_mask``: bool (n,);
    ``eval_offsets``: the evaluation graph's row blocks (default ``offsets``:
    the partitioned trainer's evaluation graph is in the partition's row
    split, in memory and from shards; the replicated one's callers pass even
    blocks as ``offsets``); ``sharded``: read from shards (the setup term).
    """
    off = np.asarray(offsets, dtype=np.int64)
    n = int(pattern.shape[0])
    if eval_offsets is None:
        eval_offsets = off
    view_nnz, _, halos = _exchange_rows(pattern, off)
    cum = np.concatenate([[0], np.cumsum(np.asarray(train_mask, dtype=np.int64))])
    train = cum[off[1:]] - cum[off[:-1]]
    e_nnz, e_sent, e_recv = _exchange_rows(pattern, eval_offsets)
    return HaloCounts(n, int(features), int(classes), off, view_nnz, halos, train,
                      np.asarray(eval_offsets, dtype=np.int64), e_nnz, e_sent, e_recv,
                      bool(sharded), int(pattern.nnz))


def gather_halo_counts(comm, n, offsets, view_indices, view_nnz, train, eval_offsets,
                       eval_indices, eval_nnz, features, classes, *, sharded):
    """The :class:`HaloCounts` from what each rank holds (a built graph, or its shard rows).
    Collective.

    Per rank: ``view_indices`` / ``view_nnz``, the global columns and entries
    of its rows of the pattern (rows ``offsets[r]:offsets[r+1]``); ``train``,
    its training vertices; ``eval_indices`` / ``eval_nnz``, the same of its
    evaluation rows (``eval_offsets[r]:eval_offsets[r+1]``).  One allgather
    of ``3 + P`` ints per rank (label ``plan:memory``); every rank returns
    the same counts.
    """
    mine = rank_summary(comm.rank, offsets, view_indices, view_nnz, train, eval_offsets,
                        eval_indices, eval_nnz)
    got = comm.allgather_obj(mine, label="plan:memory")
    return counts_from_summaries(got, n, offsets, eval_offsets, features, classes,
                                 sharded=sharded)


def rank_summary(r, offsets, view_indices, view_nnz, train, eval_offsets, eval_indices,
                 eval_nnz):
    """Rank ``r``'s ``3 + 2 + P`` ints :func:`counts_from_summaries` joins (its view's entries
    and halos, training vertices, evaluation entries, received rows, rows per owner). Pure."""
    off = np.asarray(offsets, dtype=np.int64)
    eoff = np.asarray(eval_offsets, dtype=np.int64)

    def off_block(indices, bounds):
        cols = np.unique(np.asarray(indices, dtype=np.int64))
        return cols[(cols < bounds[r]) | (cols >= bounds[r + 1])]

    halos = off_block(view_indices, off)
    ecols = off_block(eval_indices, eoff)
    by_owner = np.bincount(np.searchsorted(eoff, ecols, side="right") - 1,
                           minlength=len(eoff) - 1)
    return np.concatenate([[int(view_nnz), halos.size, int(train), int(eval_nnz), ecols.size],
                           by_owner]).astype(np.int64)


def counts_from_summaries(summaries, n, offsets, eval_offsets, features, classes, *, sharded):
    """The :class:`HaloCounts` of every rank's :func:`rank_summary` (in rank order). Pure."""
    got = np.asarray(summaries, dtype=np.int64)
    return HaloCounts(int(n), int(features), int(classes), np.asarray(offsets, dtype=np.int64),
                      got[:, 0], got[:, 1], got[:, 2], np.asarray(eval_offsets, dtype=np.int64),
                      got[:, 3], got[:, 5:].sum(axis=0), got[:, 4], bool(sharded),
                      int(got[:, 0].sum()))


def with_partitioned_view(counts, view_offsets, view_block_nnz, top_degrees=None):
    """``counts`` (the replicated sampler's: even evaluation blocks) with the partitioned
    sampler's block rows ``view_offsets`` (``P/c + 1`` ids), their entries and, when
    known, the pattern's largest row degrees (:func:`top_degrees_of`). Pure."""
    off = np.asarray(view_offsets, dtype=np.int64)
    nnz = np.asarray(view_block_nnz, dtype=np.int64)
    q = len(off) - 1
    if nnz.shape != (q,) or q < 1 or counts.ranks % q:
        raise ValueError(f"with_partitioned_view: {q} block rows with {nnz.shape} entry "
                         f"counts do not split {counts.ranks} ranks evenly")
    top = None if top_degrees is None else -np.sort(-np.asarray(top_degrees, dtype=np.int64))
    return dataclasses.replace(counts, view_offsets=off, view_block_nnz=nnz, top_degrees=top)


def partitioned_view_counts(counts, pattern, view_offsets, keep=None):
    """:func:`with_partitioned_view` with the block rows' entries and the ``keep`` largest
    row degrees (default all) read off the whole ``pattern`` (CSR, the sampler's order). Pure."""
    off = np.asarray(view_offsets, dtype=np.int64)
    indptr = np.asarray(pattern.indptr, dtype=np.int64)
    return with_partitioned_view(counts, off, indptr[off[1:]] - indptr[off[:-1]],
                                 top_degrees_of(np.diff(indptr), keep))


def top_degrees_of(degrees, keep=None):
    """The ``keep`` largest of ``degrees`` (all when None), descending. Pure."""
    d = np.asarray(degrees, dtype=np.int64)
    if keep is not None and int(keep) < d.size:
        d = np.partition(d, d.size - int(keep))[d.size - int(keep):]
    return -np.sort(-d)


def top_degrees_needed(batch_size, fanout, n):
    """How many of the pattern's largest degrees :func:`partitioned_sampling_bytes` reads:
    the largest per-minibatch hop destination count of :func:`frontier_bound`. Pure."""
    return max(d for d, _, _ in frontier_bound(batch_size, fanout, n))


def sage_dims(features, hidden, classes, layers):
    """Layer widths ``[features, hidden, ..., classes]`` of a ``layers``-layer GraphSAGE. Pure."""
    return [int(features)] + [int(hidden)] * (int(layers) - 1) + [int(classes)]


def frontier_bound(batch_size, fanout, n):
    """Per hop (``fanout[0]`` touches the batch): ``(dst, src, edges)`` upper bounds. Pure.

    A hop's sources are its destinations and at most ``fanout`` sampled
    neighbours of each (GraphSAGE with ``include_dst``), at most ``n``; its
    sampled edges at most ``dst·fanout``; the next hop's destinations are
    this hop's sources.
    """
    out, dst = [], min(int(batch_size), int(n))
    for f in fanout:
        src = min(int(n), dst * (1 + int(f)))
        out.append((dst, src, dst * int(f)))
        dst = src
    return out


#: Bytes :func:`~spgnn.sampling.distributed.sa_spgemm_15d` holds at once per entry of
#: the product ``P = Q A`` of one hop (``c = 1``): the owned and received rows (int64
#: column ids, float64 values), their concatenated copy, the backend's product and its
#: host copy.  Counted from the code (docs/scale.md "Minibatch and HEC").
SAMPLER_BYTES_PER_ENTRY = 64

#: Extra bytes per entry of ``P`` when ``c > 1``: the allgathered pieces (ids, values),
#: the repeated row ids, the COO-to-CSR sum and its int64/float64 copy.
SAMPLER_ALLREDUCE_BYTES_PER_ENTRY = 64

#: Bytes per row of ``Q`` (one per hop destination): the selection matrix, the column
#: plan (``need``, ``owner``, masks), the compact ``Q`` and the sampler's row keys.
SAMPLER_BYTES_PER_ROW = 160


def partitioned_sampling_bytes(counts, fanout, batch_size, bulk=16):
    """Per rank, an upper bound of the distributed sampler's transient at its largest hop
    (``--partition-mode partitioned``: :func:`~spgnn.sampling.sample_partitioned` on
    ``grid_15d(c)``), or None when ``counts.top_degrees`` is not known. Pure.

    Process row ``i`` samples ``m = ceil(bulk / (P/c))`` minibatches at once; hop ``h``
    gathers ``A[dst]`` for their ``m·dst_h`` frontier rows (:func:`frontier_bound`).
    The frontier of one minibatch holds each vertex once (``--frontier unique``), so
    its rows' entries are at most the sum of the ``dst_h`` largest degrees ``T(dst_h)``
    and ``P`` has at most ``E_h = m·T(dst_h)`` entries (at most ``m·nnz``).  The
    rank holds :data:`SAMPLER_BYTES_PER_ENTRY` per entry of it (plus
    :data:`SAMPLER_ALLREDUCE_BYTES_PER_ENTRY` when ``c > 1``), the rows it sends to
    the other ``P/c - 1`` process rows of its column (16 bytes per entry, at most its
    block row's entries), :data:`SAMPLER_BYTES_PER_ROW` per frontier row, and the
    blocks of the hops already sampled.  ``--frontier tree`` may repeat a vertex in a
    minibatch's frontier: there this is an estimate, not a bound.  The constants are the
    compiled backends' (numba, the default): the numpy backend's reference SpGEMM
    expands every term of ``Q·A`` into several int64 arrays and can exceed it.
    """
    c = counts
    if c.view_offsets is None or c.top_degrees is None:
        return None
    q = len(c.view_offsets) - 1
    m = -(-int(bulk) // q)
    top = np.asarray(c.top_degrees, dtype=np.int64)
    csum = np.concatenate([[0], np.cumsum(top)])
    hops = frontier_bound(batch_size, fanout, c.n)
    if max(d for d, _, _ in hops) > top.size and top.size < c.n:
        raise ValueError(f"partitioned_sampling_bytes: {top.size} top degrees, but the "
                         f"frontier needs {top_degrees_needed(batch_size, fanout, c.n)}")
    per_entry = SAMPLER_BYTES_PER_ENTRY + (SAMPLER_ALLREDUCE_BYTES_PER_ENTRY
                                           if c.ranks // q > 1 else 0)
    block = np.asarray(c.view_block_nnz, dtype=np.int64)[np.arange(c.ranks) // (c.ranks // q)]
    best = np.zeros(c.ranks, dtype=np.int64)
    done = 0                            # the blocks of the hops already sampled (all m)
    for d, s, e in hops:
        entries = m * min(int(csum[min(d, top.size)]), int(c.total_nnz))
        sent = np.minimum(block, (q - 1) * entries)
        now = done + entries * per_entry + 16 * sent + m * d * SAMPLER_BYTES_PER_ROW
        best = np.maximum(best, now)
        done += m * _blocks_bytes([(d, s, e)])
    return best


def _blocks_bytes(hops):
    """Bytes of one minibatch's sampled blocks (``SampledBlock``: int64 indptr and indices,
    float64 values, int64 ids, two int64 pointers) for the ``frontier_bound`` hops. Pure."""
    return sum((d + 1) * _I64 + e * (_I64 + _I64) + (d + s) * _I64 + 4 * _I64
               for d, s, e in hops)


def hec_ring_rows(halos, steps, capacity=HEC_DEFAULT_CAPACITY, reset="epoch"):
    """The ring rows :class:`~spgnn.gnn.hec.HECRunner` allocates per level. Pure.

    With the per-epoch reset at most ``halos·(steps + 1)`` rows arrive in an
    epoch, so the ring is that or ``capacity``, the smaller; ``capacity``
    None is unbounded; ``--hec-reset never`` allocates ``capacity``.
    """
    bound = max(1, int(halos) * (int(steps) + 1))
    if capacity is None:
        return bound
    return min(int(capacity), bound) if reset == "epoch" else int(capacity)


def _steps(counts, batch_size):
    """Lockstep iterations per epoch: the largest rank's ``ceil(train / batch)``. Pure."""
    return int(max(-(-int(t) // int(batch_size)) for t in counts.train))


def _caches_bytes(c, dims, hec_capacity, hec_levels, batch_size, hec_reset, itemsize):
    """Per rank: :func:`~spgnn.plan.memory.hec_cache_bytes` of the rings alone. Pure."""
    layers = len(dims) - 1
    levels = layers if hec_levels is None else min(int(hec_levels), layers)
    steps = _steps(c, batch_size)
    return np.array([hec_cache_bytes(c.n, hec_ring_rows(h, steps, hec_capacity, hec_reset),
                                     dims[:levels], itemsize) for h in c.halos], dtype=np.int64)


def halo_held_bytes(counts, dims, *, hec="off", batch_size=512, hec_capacity=None,
                    hec_levels=None, hec_delay=1, hec_reset="epoch", planned=True,
                    itemsize=_F32):
    """Per-rank bytes of the arrays a built partitioned GraphSAGE trainer holds. Pure.

    Exact counts (tests/test_memory_minibatch_tracemalloc.py), a dict of
    arrays by rank:

    * ``view``: the sampler's CSR of the rank's rows (int64 indptr over all
      ``n + 1`` ids, int64 indices, float64 values);
    * ``eval_graph``: the evaluation graph's ``1d-aware`` block (int32
      indices, values, int32 indptr), its exchange plan (int32 compacted
      columns, int64 ``send_rows``, two int64 counts per rank);
    * ``data``: the evaluation features and packed node table, the
      unpacked node data (19 bytes a row), the rank's labels, original ids
      and degrees (int64), its training ids twice (the owned graph's and the
      source's); the same in memory and from shards (``HaloGraph.from_rows``
      builds both);
    * ``parameters``: every layer's ``w_self``, ``w_neigh`` and bias, with
      gradients and Adam's two moments;
    * ``hec=None`` (``--model sage`` without ``--hec``, replicated sampling):
      ``view`` is the whole pattern on every rank, ``data`` the evaluation
      graph's (64-byte aligned features and node table) and every training
      vertex's id (int64) and label (:func:`label_itemsize`)
      (``counts`` on the evaluation graph's even row blocks);
    * ``hec`` (``hec="on"``): :func:`~spgnn.plan.memory.hec_cache_bytes` of
      the rings (:func:`hec_ring_rows`), the halo tables (``halo_on``: bool
      rows x P, ``my_halos``: int64) and the auto plan's count tables and
      budgets (``planned``).
    """
    c = counts
    p, n, s = c.ranks, int(c.n), int(itemsize)
    dims = [int(d) for d in dims]
    if hec is None:
        return _replicated_held_bytes(c, dims, s)
    rows, erows = c.rows, c.eval_rows
    view = (n + 1) * _I64 + c.view_nnz * (_I64 + 8)
    eval_graph = (c.eval_nnz * (_I32 + s) + (erows + 1) * _I32 + c.eval_nnz * _I32
                  + c.eval_sent * _I64 + 2 * p * _I64)
    # the evaluation features and node data (placed from the rank's rows), the unpacked
    # node data; the rank's labels, original ids and degrees (OwnedRows); its training ids
    # (the owned graph's and the source's local_train): in memory rank 0 sends each rank
    # its rows (HaloGraph.from_rows, as from shards), so both hold the same
    data = (erows * dims[0] * s + erows * 5 * _I64 + erows * (2 * _I64 + 3)
            + 3 * (p + 1) * _I64 + rows * 3 * _I64 + c.train * _I64)
    data = data + c.train * _I64                    # the source's local_train
    parameters = np.full(p, 4 * _weights(dims) * s, dtype=np.int64)
    out = {"view": view, "eval_graph": eval_graph, "data": data, "parameters": parameters,
           "hec": np.zeros(p, dtype=np.int64)}
    if hec == "on":
        layers = len(dims) - 1
        levels = layers if hec_levels is None else min(int(hec_levels), layers)
        steps = _steps(c, batch_size)
        caches = _caches_bytes(c, dims, hec_capacity, hec_levels, batch_size, hec_reset, s)
        tables = rows * p + c.halos * _I64
        if planned:                 # count tables sent and received, four budgets per peer
            cols = 1 + max(levels - 1, 0) * max(0, steps - int(hec_delay))
            tables = tables + 2 * p * cols * _I64 + (64 if levels else 0) + 4 * p * 8
        out["hec"] = caches + tables
    return out


def _weights(dims):
    """GraphSAGE's parameter count: ``w_self``, ``w_neigh`` and a bias per layer. Pure."""
    return sum(2 * dims[i] * dims[i + 1] + dims[i + 1] for i in range(len(dims) - 1))


def label_itemsize(classes):
    """Bytes per label of :class:`~spgnn.gnn.minibatch.TrainingLabels` (``compact_labels``: the
    smallest signed integer dtype holding the labels 0 to ``classes - 1``). Pure."""
    top = max(int(classes) - 1, 0)
    for size, bound in ((1, 2 ** 7), (2, 2 ** 15), (4, 2 ** 31)):
        if top < bound:
            return size
    return _I64


def _replicated_held_bytes(c, dims, s):
    """:func:`halo_held_bytes` of ``--model sage`` without ``--hec`` (``--partition-mode
    replicated``, :class:`~spgnn.gnn.sources.Sampled`): the whole neighbour pattern on
    every rank as the sampler's graph, the evaluation graph on even row blocks with its
    features and node data, and every training vertex's id and label (``TrainingLabels``). Pure."""
    p, n = c.ranks, int(c.n)
    erows = c.eval_rows
    view = np.full(p, (n + 1) * _I64 + int(c.total_nnz) * (_I64 + 8), dtype=np.int64)
    if c.view_offsets is not None:
        # --partition-mode partitioned: rank r holds block row r // c of PartitionedGraph
        # (P/c block rows): its DistSparseMatrix block (int32 indptr and indices, float64
        # values) and the sampler's int64 LocalCSR of it (int64 indptr and indices, the
        # values shared), and the block rows' int64 offsets
        q = len(c.view_offsets) - 1
        i = np.arange(p) // (p // q)
        brows = np.diff(c.view_offsets)[i]
        view = ((brows + 1) * (_I64 + _I32) + c.view_block_nnz[i] * (_I64 + 8 + _I32)
                + (q + 1) * _I64)
    eval_graph = (c.eval_nnz * (_I32 + s) + (erows + 1) * _I32 + c.eval_nnz * _I32
                  + c.eval_sent * _I64 + 2 * p * _I64)
    # two 64-byte alignment pads in memory, one from shards (--partition-mode partitioned
    # only: replicated sampling from shards is refused): measured against a built trainer
    pads = 64 if c.sharded else 128
    data = (erows * dims[0] * s + erows * 5 * _I64 + pads + erows * (2 * _I64 + 3)
            + (p + 1) * _I64 + int(np.sum(c.train)) * (_I64 + label_itemsize(c.classes)))
    parameters = np.full(p, 4 * _weights(dims) * s, dtype=np.int64)
    return {"view": view, "eval_graph": eval_graph, "data": data, "parameters": parameters,
            "hec": np.zeros(p, dtype=np.int64)}


def iteration_bytes(counts, dims, fanout, batch_size, *, hec="off", planned=True, bulk=16,
                    itemsize=_F32):
    """Per rank, an upper bound of one training iteration's transient bytes. Pure.

    On :func:`frontier_bound`'s hops: the minibatch's sampled blocks (and,
    ``hec="on"`` with planned pushes, every minibatch of the epoch's,
    sampled before it runs), its input rows, with ``hec="off"`` the halo
    fetch's receive buffer and ids, and per layer the saved root and
    aggregate inputs, the output, a dropout mask, and their gradients
    (the backward pass holds an input's gradient beside the output's).
    """
    c = counts
    s = int(itemsize)
    dims = [int(d) for d in dims]
    hops = frontier_bound(batch_size, fanout, c.n)
    blocks = _blocks_bytes(hops)
    # forward order: layer l takes hop L-1-l's sources to its destinations
    fwd = hops[::-1]
    src0 = fwd[0][1]
    act = src0 * dims[0] * s * 2 + src0 * _I64          # input rows, input dropout, its rows
    for l, (d, src, _) in enumerate(fwd):
        w_in, w_out = dims[l], dims[l + 1]
        # root and aggregate (saved), output, dropout mask; the gradients of all of them
        act += 2 * (2 * d * w_in * s + d * w_out * s) + d * w_out
    fetch = src0 * (dims[0] * s + 2 * _I64) if hec == "off" else 0
    if hec is None:             # a bulk: my share of its minibatches, their inputs fetched at once
        share = -(-int(bulk) // c.ranks)
        sampling = partitioned_sampling_bytes(c, fanout, batch_size, bulk)
        if sampling is None:
            return np.full(c.ranks, share * (blocks + src0 * (dims[0] * s + 2 * _I64)) + act,
                           dtype=np.int64)
        # partitioned: process row i samples m minibatches; replica j keeps ceil(m / c)
        q = len(c.view_offsets) - 1
        share = -(-(-(-int(bulk) // q)) // (c.ranks // q))
        step = share * (blocks + src0 * (dims[0] * s + 2 * _I64)) + act
        return np.maximum(sampling, step).astype(np.int64)
    local_batches = np.array([-(-int(t) // int(batch_size)) for t in c.train], dtype=np.int64)
    held_blocks = local_batches * blocks if (hec == "on" and planned) else \
        np.full(c.ranks, blocks, dtype=np.int64)
    return held_blocks + act + fetch


def evaluation_bytes(counts, dims, itemsize=_F32):
    """Per rank, the transient of full-neighbourhood evaluation on the ``1d-aware`` graph. Pure.

    Per layer: the input, its aggregate, the root term and the output over
    the rank's evaluation rows, and the exchange's send and receive buffers
    (``eval_sent`` / ``eval_recv`` rows of the layer's input width); the
    largest layer.
    """
    c, s = counts, int(itemsize)
    dims = [int(d) for d in dims]
    rows = c.eval_rows
    best = np.zeros(c.ranks, dtype=np.int64)
    for l in range(len(dims) - 1):
        w_in, w_out = dims[l], dims[l + 1]
        layer = rows * (3 * w_in + w_out) * s + (c.eval_sent + c.eval_recv) * w_in * s
        best = np.maximum(best, layer)
    return best


def hec_resident_bytes(counts, dims, *, hec_capacity=None, hec_levels=None, batch_size=512,
                       hec_reset="epoch", itemsize=_F32):
    """Per rank, an **estimate** of the HEC caches' resident bytes (what RSS sees). Pure.

    The rings are allocated zeroed (:func:`halo_held_bytes` counts them
    whole) but their pages are only touched as rows arrive: the tag tables
    filled with -1 (``tag2slot`` over ``n``, ``slot2tag`` and ``born`` over
    the ring) are resident at once; of the ring's rows (values, ``stamp``,
    ``read``) this prices one row per halo vertex per level -- level 0
    receives each halo's features at most once, and ``--hec-push-cap auto``
    spends its budget (a quarter of the fetch's bytes) mostly there.  Not a
    bound: a level >= 1 row can arrive several times in an epoch.  With
    ``--hec-reset never`` the ring keeps filling across epochs: all of it.
    """
    c, s = counts, int(itemsize)
    dims = [int(d) for d in dims]
    layers = len(dims) - 1
    levels = layers if hec_levels is None else min(int(hec_levels), layers)
    steps = _steps(c, batch_size)
    out = np.zeros(c.ranks, dtype=np.int64)
    for r, h in enumerate(c.halos):
        cs = hec_ring_rows(h, steps, hec_capacity, hec_reset)
        # --hec-reset never: the ring keeps filling across epochs, to its whole capacity
        stored = cs if hec_reset == "never" else min(cs, int(h))
        out[r] = sum(int(c.n) * _I64 + 2 * cs * _I64 + stored * (w * s + _I64 + 1)
                     for w in dims[:levels])
    return out


def setup_bytes(counts, hec):
    """Per rank, the **fitted** setup transient (float64 array). Pure.

    Partitioned (``hec`` not None): every rank builds its share from its own
    rows (``HaloGraph.from_rows``), :data:`SETUP_SHARD_BYTES_PER_NNZ` per
    entry of them over :data:`~spgnn.plan.memory.SETUP_FIXED_BYTES`; in
    memory rank 0 first loads, partitions and renumbers the whole graph and
    cuts it into rows (:data:`SETUP_HALO_ROOT_BYTES_PER_NNZ` per entry,
    :data:`SETUP_HALO_ROOT_BYTES_PER_FEATURE` per feature value of the whole
    graph, on top).  Replicated (``hec`` None, in memory): the whole pattern
    is broadcast, ``SETUP_BYTES_PER_NNZ["1d"]`` per entry of it on every
    rank, and rank 0 loads and normalises the whole graph
    (:data:`SETUP_BYTES_PER_ROOT_NNZ`, :data:`SETUP_ROOT_BYTES_PER_FEATURE`).
    """
    c = counts
    values = float(c.n) * c.features
    if hec is None:
        setup = SETUP_FIXED_BYTES + SETUP_BYTES_PER_NNZ["1d"] * np.full(c.ranks,
                                                                        float(c.total_nnz))
        if c.view_offsets is not None:  # partitioned: each rank is sent its block row only
            q = len(c.view_offsets) - 1
            setup = SETUP_FIXED_BYTES + SETUP_BYTES_PER_NNZ["1d"] * c.view_block_nnz[
                np.arange(c.ranks) // (c.ranks // q)].astype(np.float64)
        if not c.sharded:
            setup[0] += (SETUP_BYTES_PER_ROOT_NNZ * c.total_nnz
                         + SETUP_ROOT_BYTES_PER_FEATURE * values)
        return setup
    setup = SETUP_FIXED_BYTES + SETUP_SHARD_BYTES_PER_NNZ * c.view_nnz.astype(np.float64)
    if not c.sharded:
        setup[0] += (SETUP_HALO_ROOT_BYTES_PER_NNZ * c.total_nnz
                     + SETUP_HALO_ROOT_BYTES_PER_FEATURE * values)
    return setup


def sage_peak_bytes(counts, dims, fanout, batch_size, *, hec="off", hec_capacity=None,
                    hec_levels=None, hec_delay=1, hec_reset="epoch", planned=True, bulk=16,
                    baseline=None, itemsize=_F32):
    """The predicted per-rank peak of GraphSAGE minibatch training and its parts. Pure.

    ``hec``: ``"off"``, ``"on"`` or ``"none"`` (partitioned training,
    ``counts`` of the partition), or None (``--model sage`` without ``--hec``:
    replicated bulk sampling, ``bulk`` minibatches a bulk, ``counts`` on even
    row blocks).

    Returns a dict: ``peak`` (bytes, the largest rank), ``per_rank`` (list),
    ``held`` (:func:`halo_held_bytes`, lists by part: exact allocations),
    ``hec_resident`` (the caches' pages RSS sees, :func:`hec_resident_bytes`), ``iteration``
    (:func:`iteration_bytes`, an upper bound), ``evaluation``, ``setup``
    (the fitted transient) and ``baseline``.
    """
    c = counts
    held = halo_held_bytes(c, dims, hec=hec, batch_size=batch_size, hec_capacity=hec_capacity,
                           hec_levels=hec_levels, hec_delay=hec_delay, hec_reset=hec_reset,
                           planned=planned, itemsize=itemsize)
    # the rings' pages are touched as rows arrive: RSS sees hec_resident_bytes, not the
    # allocation (held["hec"] keeps the exact allocation, what tracemalloc sees); the
    # caches come after the setup's high-water mark and add to it (measured: docs/scale.md)
    hec_rss = np.zeros(c.ranks, dtype=np.int64)
    if hec == "on":
        hec_rss = np.minimum(held["hec"], hec_resident_bytes(
            c, dims, hec_capacity=hec_capacity, hec_levels=hec_levels, batch_size=batch_size,
            hec_reset=hec_reset, itemsize=itemsize) + (held["hec"] - _caches_bytes(
                c, dims, hec_capacity, hec_levels, batch_size, hec_reset, itemsize)))
    total_held = sum(v for k, v in held.items() if k != "hec")
    it = iteration_bytes(c, dims, fanout, batch_size, hec=hec, planned=planned, bulk=bulk,
                         itemsize=itemsize)
    ev = evaluation_bytes(c, dims, itemsize)
    setup = setup_bytes(c, hec)
    base = baseline_bytes(baseline)
    per_rank = base + np.maximum(setup, total_held + np.maximum(it, ev)) + hec_rss
    return {"peak": int(per_rank.max()), "per_rank": [int(v) for v in per_rank],
            "held": {k: [int(x) for x in v] for k, v in held.items()},
            "hec_resident": [int(v) for v in hec_rss],
            "iteration": [int(v) for v in it], "evaluation": [int(v) for v in ev],
            "setup": [int(v) for v in setup], "baseline": int(base)}
