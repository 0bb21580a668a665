"""Per-rank memory model of full-graph GCN training (issue 37 item 4). Pure.

A configuration's predicted per-rank peak is

    baseline + max(setup transient, resident training arrays)

* ``baseline``: the process before any data (interpreter plus numpy,
  scipy, numba, mpi4py imports), measured at 85 MB per rank
  (docs/scale.md, "Memory model"); override with ``baseline=`` or the
  environment variable ``SPGNN_BASELINE_BYTES``.
* setup transient: drawing, symmetrising and placing the rows: a fixed part
  (``SETUP_FIXED_BYTES``) plus a price per nonzero of the rank's share of Â
  (``SETUP_BYTES_PER_NNZ``), fitted on rmat:18:16 and rmat:20:16 at 2 ranks,
  where every placement peaks in setup at hidden 16.
* resident arrays: what the trainer holds between epochs, counted exactly
  (:func:`held_bytes`, tested equal to a built trainer's arrays and
  cross-checked by tracemalloc: the CSR blocks, int32 indices and indptr,
  no transposed copy in 1d/1.5D, the aware exchange plans' column ids and
  ``send_rows``, 3d's base copy and every layer's block with its
  transpose; features and node data; saved inputs and dropout masks;
  weights with gradients and Adam's two moments), plus the epoch's
  transients, priced: one output per layer and the send and receive
  buffers of the largest exchange (the planner's per-rank received bytes
  in ``Prediction.steps``).
* codec buffers (``train --quantize int8|int4|int2``, 1d-aware only): the
  largest quantized exchange's codes and ``(Z, S)`` parameters, sent and
  received, counted per peer by the wire formula the codec allocates
  (:func:`codec_bytes`, :func:`spgnn.core.codec.wire_bytes`).
* the HEC (``train --hec on``, mini-batch): :func:`hec_cache_bytes`, the
  count :class:`~spgnn.gnn.hec.HECRunner` refuses over-large caches with
  (every level's ring, its tag arrays and the level-0 feature cache).

The counts come from the same quantities the time model prices
(:func:`spgnn.plan.model.local_work`), so every candidate of
:func:`spgnn.plan.model.rank_configs` has one.
"""

from __future__ import annotations

import os

import numpy as np

from ..grid import AXES_3D
from ..layout import block_offsets
from .events import BlockCounts, as_counts, gcn_3d_layers
from .model import local_work

__all__ = ["BASELINE_BYTES", "held_bytes", "codec_bytes", "hec_cache_bytes", "SETUP_BYTES_PER_NNZ", "SETUP_FIXED_BYTES", "baseline_bytes", "resident_bytes",
           "peak_bytes", "within_limit", "parse_bytes"]

#: The process before data: interpreter + numpy/scipy/numba/mpi4py (measured, docs/scale.md).
BASELINE_BYTES = 85 * 2 ** 20

#: Setup transient per nonzero of a rank's share of Â, by algorithm family, fitted
#: to ``peak_rss_bytes.max`` of rmat:18:16 and rmat:20:16 at 2 ranks (docs/scale.md).
SETUP_BYTES_PER_NNZ = {"1d": 53.0, "15d": 104.0, "3d": 251.0}

#: Setup transient independent of the graph's size (the kernels' JIT compilation and
#: the setup's working sets; the intercept of the same fit).
SETUP_FIXED_BYTES = 152_000_000

_F32, _I32, _I64 = 4, 4, 8


def baseline_bytes(baseline=None):
    """The fixed per-process bytes: ``baseline``, else ``$SPGNN_BASELINE_BYTES``, else the measure."""
    if baseline is not None:
        return int(baseline)
    env = os.environ.get("SPGNN_BASELINE_BYTES")
    return int(env) if env else BASELINE_BYTES


def _family(algorithm):
    return "3d" if algorithm == "3d" else "15d" if algorithm.startswith("15d") else "1d"


class _Memo(BlockCounts):
    """``counts`` answering each question once (one pricing asks the same blocks many times);
    a whole matrix's block counts by one ``bincount`` instead of ``np.add.at``."""

    def __init__(self, counts):
        self._c, self.shape, self._got = counts, counts.shape, {}

    def _ask(self, key, compute):
        if key not in self._got:
            self._got[key] = compute()
        return self._got[key]

    def block_nnz(self, row_off, col_off):
        r, c = tuple(int(v) for v in row_off), tuple(int(v) for v in col_off)
        return self._ask(("nnz", r, c), lambda: self._block_nnz(r, c))

    def _block_nnz(self, r, c):
        m = getattr(self._c, "matrix", None)
        if m is None:
            return np.asarray(self._c.block_nnz(r, c), dtype=np.int64)
        i = np.repeat(np.searchsorted(r, np.arange(m.shape[0]), side="right") - 1,
                      np.diff(m.indptr))
        j = np.searchsorted(c, m.indices, side="right") - 1
        k = len(c) - 1
        return np.bincount(i * k + j, minlength=(len(r) - 1) * k).reshape(len(r) - 1, k)

    def row_block_nnz(self, offsets):
        off = tuple(int(v) for v in offsets)
        return self._ask(("rows", off), lambda: np.asarray(self._c.row_block_nnz(off),
                                                           dtype=np.int64))

    def pair_rows(self, offsets):
        off = tuple(int(v) for v in offsets)
        return self._ask(("pairs", off), lambda: np.asarray(self._c.pair_rows(off),
                                                            dtype=np.int64))

    def transpose(self):
        return _Memo(self._c.transpose())


def _memo(a):
    a = as_counts(a)
    return a if isinstance(a, _Memo) else _Memo(a)


def _pairs_sent(a, off):
    """Rows each part sends in a 1D/1.5D-aware exchange: column sums of ``pair_rows``."""
    r = np.asarray(a.pair_rows(off), dtype=np.int64)
    return r.sum(axis=0)


def _graph_blocks_1d(a, p, itemsize, offsets=None):
    """Bytes of the sparse blocks a 1d / 1d-aware / 15d / 15d-aware rank holds (array by rank).

    Counted from what :class:`~spgnn.core.dist_sparse.DistSparseMatrix` keeps:
    the rank's block (int32 indices, values, int32 indptr); the aware
    variants add the exchange plan's compacted column ids (int32, one per
    stored entry; values and indptr are shared with the block), its
    ``send_rows`` (int64, one per row sent) and two int64 counts per peer
    block.  No transposed copy: Â is symmetric and the backward pass
    multiplies by the same block.
    """
    rows, nnz = local_work(a, p.algorithm, p.ranks, offsets=offsets, replication=p.replication,
                           grid=p.grid)
    rows, nnz = np.asarray(rows, dtype=np.int64), np.asarray(nnz, dtype=np.int64)
    graph = nnz * (_I32 + itemsize) + (rows + 1) * _I32
    if p.algorithm.endswith("aware"):
        c = p.replication if p.algorithm.startswith("15d") else 1
        k = p.ranks // c
        off = block_offsets(a.shape[0], k) if offsets is None else offsets
        sent = np.repeat(_pairs_sent(a, off), c) if c == 1 else _slab_sent(a, off, c)
        graph = graph + nnz * _I32 + sent * _I64 + 2 * k * _I64
    return rows, graph


def _slab_sent(a, off, c):
    """1.5D-aware: rows rank ``i·c + j`` sends, the pairs of column slab ``j``'s parts."""
    k = len(off) - 1
    slab = block_offsets(k, c)
    sent = _pairs_sent(a, off)                # per row block of the whole matrix
    out = np.zeros(k * c, dtype=np.int64)
    for i in range(k):
        for j in range(c):
            out[i * c + j] = sent[i] if slab[j] <= i < slab[j + 1] else 0
    return out


def _graph_blocks_3d(a, p, dims, itemsize):
    """Bytes of the sparse blocks a 3d rank holds (array by world rank).

    The row-split base copy (1D blocks over all P ranks, kept to make the
    layer blocks) plus, for every distinct aggregation of the layers
    (:func:`~spgnn.plan.events.gcn_3d_layers`, Â's ``(d, o)`` block), that
    block and its local transpose (the backward pass's ``Âᵀ``, rows split by
    ``o``): int32 indices, values, int32 indptr each.
    """
    n = a.shape[0]
    g = dict(zip(AXES_3D, p.grid))
    ranks = int(np.prod(p.grid))
    coords = np.array(np.unravel_index(np.arange(ranks), tuple(p.grid))).T   # (rank, axis)
    axis = {name: k for k, name in enumerate(AXES_3D)}
    base_off = block_offsets(n, ranks)
    graph = (np.asarray(a.row_block_nnz(base_off), dtype=np.int64) * (_I32 + itemsize)
             + (np.diff(base_off) + 1) * _I32)
    for d, o in dict.fromkeys((lay["prop"][2], lay["prop"][0]) for lay in gcn_3d_layers(dims)):
        roff, coff = block_offsets(n, g[d]), block_offsets(n, g[o])
        z = np.asarray(a.block_nnz(roff, coff), dtype=np.int64)
        cd, co = coords[:, axis[d]], coords[:, axis[o]]
        nnz = z[cd, co]
        graph = graph + 2 * nnz * (_I32 + itemsize) + (np.diff(roff)[cd] + np.diff(coff)[co] + 2) * _I32
    return graph


def _rows_3d(n, grid, dims):
    """3d: the rows of the first aggregation's block (Â's ``(d, o)``) on every world rank."""
    d = gcn_3d_layers(dims)[0]["prop"][2]
    k = AXES_3D.index(d)
    coords = np.array(np.unravel_index(np.arange(int(np.prod(grid))), tuple(grid))).T
    return np.diff(block_offsets(n, int(grid[k])))[coords[:, k]].astype(np.int64)


def codec_bytes(send_rows, recv_rows, width, quantize, *, param_dtype="bf16",
                pack_axis="feature"):
    """Bytes of one quantized exchange's codec buffers on one rank. Pure.

    ``send_rows``/``recv_rows``: rows to / from each peer; ``width``: the
    row width.  The codes and ``(Z, S)`` parameters
    :meth:`~spgnn.core.codec.Codec.alltoallv` encodes and receives (per
    peer: ``ceil(n_p·F·b/8)`` code bytes, 4 or 8 parameter bytes a row),
    sent plus received; the fp32 rows on either side are the exchange's
    send and receive buffers (``halo``).  0 for ``quantize`` none.
    """
    # the wire formula of spgnn.core.codec.wire_bytes, from the layer below it (plan may
    # not import core): codes from backends._quant, 4 (bf16) or 8 (fp32) parameter bytes a row
    from ..backends import _quant

    if quantize in (None, "none", "fp32"):
        return 0
    bits = int(str(quantize)[3:])
    _quant.check_codec(bits, "stochastic", param_dtype, pack_axis)
    total = 0
    for rows in (send_rows, recv_rows):
        n = np.asarray(rows, dtype=np.int64)
        total += int(np.sum(_quant.code_bytes(n, bits, width, pack_axis))
                     + np.sum(n) * (4 if param_dtype == "bf16" else 8))
    return total


def hec_cache_bytes(n, cs, dims, itemsize=_F32):
    """Bytes the HEC's caches of one rank allocate (``train --hec on``). Pure.

    One :class:`~spgnn.gnn.hec_cache.HistoricalCache` per cached level
    (``dims``: each level's row width, level 0 the features): a ``cs``-row
    ring of ``width`` values, its int64 ``slot2tag``, ``stamp`` and ``born``
    and bool ``read`` per slot, and the int64 ``tag2slot`` table over the
    ``n`` keys.  :meth:`~spgnn.gnn.hec.HECRunner.cache_bytes` is this count.
    """
    n, cs = int(n), int(cs)
    return sum(cs * (int(d) * int(itemsize) + 3 * _I64 + 1) + n * _I64 for d in dims)


def _codec_1d_aware(a, p, dims, offsets, quantize, param_dtype):
    """Per rank: the codec buffers of the widest quantized exchange of a 1d-aware GCN.

    Each layer propagates ``min(in, out)`` columns (GCNConv's auto order),
    forward and backward; every exchange moves the same rows (``pair_rows``).
    """
    k = p.ranks
    off = block_offsets(a.shape[0], k) if offsets is None else offsets
    r = np.asarray(a.pair_rows(off), dtype=np.int64)      # r[i, j]: rows i gets from j
    width = max(min(dims[i], dims[i + 1]) for i in range(len(dims) - 1))
    return np.array([codec_bytes(r[:, i], r[i, :], width, quantize, param_dtype=param_dtype)
                     for i in range(k)], dtype=np.int64)


def held_bytes(a, prediction, dims, *, itemsize=_F32, dropout=True, offsets=None):
    """Per-rank bytes of the arrays a full-graph GCN trainer holds between epochs. Pure.

    Exact counts of what :class:`~spgnn.gnn.train.Trainer` over a
    :class:`~spgnn.gnn.data.DistGraph` keeps after an epoch (checked
    against the arrays a built trainer holds and tracemalloc,
    tests/test_memory_tracemalloc.py).  A dict of arrays by rank:

    * ``graph``: the sparse blocks (:func:`_graph_blocks_1d`, :func:`_graph_blocks_3d`);
    * ``data``: the features (rows x features values) and the packed node
      table (rows x 5 int64: label, masks, ids), each one 64-byte-aligned
      allocation (+64 bytes), and the unpacked node data of every row
      layout used (int64 label and id, three bool masks: 19 bytes a row);
    * ``saved``: what the backward pass keeps: every layer's input (rows x
      width values) and, with dropout, a bool mask per hidden layer;
    * ``parameters``: weights, gradients, Adam's two moments (GCN: no bias).

    ``offsets``: the 1D/1.5D row blocks (default: even blocks).

    1d and 1.5D only: on 3d, ``graph`` is exact and the rest is None (its
    features, activations and weights are sharded over the grid's axes in
    ways this count does not follow; :func:`resident_bytes` prices them by
    the rows of the rank's row block).
    """
    a = as_counts(a)
    p = prediction
    dims = [int(d) for d in dims]
    weights = sum(dims[i] * dims[i + 1] for i in range(len(dims) - 1))
    if p.algorithm == "3d":
        return {"graph": _graph_blocks_3d(a, p, dims, itemsize), "data": None, "saved": None,
                "parameters": None}
    rows, graph = _graph_blocks_1d(a, p, itemsize, offsets)
    data = rows * dims[0] * itemsize + 64 + rows * 5 * _I64 + 64 + rows * (2 * _I64 + 3)
    saved = rows * sum(dims[:-1]) * itemsize + (rows * sum(dims[1:-1]) if dropout else 0)
    parameters = np.full(rows.shape, 4 * weights * itemsize, dtype=np.int64)
    return {"graph": graph, "data": data, "saved": saved, "parameters": parameters}


def resident_bytes(a, prediction, dims, *, offsets=None, training=True, quantize="none",
                   param_dtype="bf16"):
    """Per-rank bytes of the training arrays of ``prediction``'s configuration (array by rank). Pure.

    ``a``: the aggregation matrix Â or its block counts; ``dims``: layer
    widths ``[features, hidden..., classes]``.  Returns a dict of arrays
    (one entry per rank): ``graph``, ``activations``, ``halo``,
    ``parameters``, ``data`` and ``total``.  ``training=False``: one SpMM
    (``spgnn spmm``: X and Y only, no parameters, saved tensors or labels).

    ``graph`` is :func:`held_bytes`' exact count (1d and 1.5D on even
    blocks or ``offsets``; 3d).  Training on 1d/1.5D, ``data``,
    ``parameters`` and the saved part of ``activations`` are also
    :func:`held_bytes`' counts; the epoch's transients are priced, not
    counted: one output per layer (rows x width, in ``activations``) and the
    send and receive buffers of the largest exchange (``halo``: the
    planner's per-rank bytes).  3d's node data, activations and weights are
    priced by the rows of the rank's first aggregation block.

    ``quantize`` (``train --quantize``; the trainer codes only 1d-aware
    exchanges): ``codec`` holds the widest quantized exchange's codec
    buffers (:func:`codec_bytes`), 0 elsewhere.
    """
    p = prediction
    a = as_counts(a)
    rows, nnz = local_work(a, p.algorithm, p.ranks, offsets=offsets,
                           replication=p.replication, grid=p.grid)
    rows = np.asarray(rows, dtype=np.int64)
    nnz = np.asarray(nnz, dtype=np.int64)
    dims = [int(d) for d in dims]
    if p.algorithm == "3d":
        graph = _graph_blocks_3d(a, p, dims, _F32)
        rows = _rows_3d(a.shape[0], p.grid, dims)
    else:
        graph = _graph_blocks_1d(a, p, _F32, offsets)[1]
    if training and p.algorithm != "3d":   # counted: what the trainer holds between epochs
        held = held_bytes(a, p, dims, offsets=offsets)
        data, parameters = held["data"], held["parameters"]
        activations = held["saved"] + rows * sum(dims[1:]) * _F32    # + one output per layer
    elif training:                          # 3d: priced by the rows of the rank's block
        activations = rows * sum(dims) * _F32 * 2                    # outputs, saved inputs
        weights = sum(dims[i] * dims[i + 1] for i in range(len(dims) - 1))
        parameters = np.full(rows.shape, weights * _F32 * 4, dtype=np.int64)
        data = rows * (dims[0] * _F32 + 5 * _I64 + 2 * _I64 + 3)   # features, node data
    else:                                   # one SpMM: X and Y
        activations = rows * sum(dims) * _F32
        parameters = data = np.zeros(rows.shape, dtype=np.int64)
    halo = np.zeros(rows.shape, dtype=np.int64)
    for s in p.steps:
        if s.kind == "compute":
            continue
        got = s.rank_bytes if s.rank_bytes is not None and len(s.rank_bytes) == len(rows) \
            else np.full(rows.shape, s.nbytes)
        halo = np.maximum(halo, np.asarray(got, dtype=np.int64))
    halo = 2 * halo                               # send and receive buffers
    codec = np.zeros(rows.shape, dtype=np.int64)
    if training and p.algorithm == "1d-aware" and quantize not in (None, "none"):
        codec = _codec_1d_aware(a, p, dims, offsets, quantize, param_dtype)
    total = graph + activations + parameters + data + halo + codec
    return {"graph": graph, "activations": activations, "halo": halo,
            "parameters": parameters, "data": data, "codec": codec, "total": total,
            "nnz_total": int(nnz.sum())}


def peak_bytes(a, prediction, dims, *, baseline=None, offsets=None, training=True,
               quantize="none"):
    """The predicted per-rank peak (bytes, the largest rank) of ``prediction``. Pure.

    ``quantize``: ``train --quantize`` (prices the codec buffers, :func:`resident_bytes`)."""
    a = as_counts(a)
    priced = resident_bytes(a, prediction, dims, offsets=offsets, training=training,
                            quantize=quantize)
    res = priced["total"]
    # every stored entry of Â lies in exactly one rank's block (3d: one per (d, o) block)
    share = priced["nnz_total"] / max(prediction.ranks, 1)
    setup = SETUP_FIXED_BYTES + SETUP_BYTES_PER_NNZ[_family(prediction.algorithm)] * share
    return int(baseline_bytes(baseline) + max(setup, float(res.max())))


def within_limit(predictions, limit, *, a=None, dims=None, baseline=None, offsets=None,
                 training=True, offsets_for=None, quantize="none"):
    """``[(prediction, peak bytes)]`` of the ``predictions`` whose peak fits ``limit``. Pure.

    Keeps the input order (the ranking).  ``a`` (Â or its
    :class:`~spgnn.plan.events.BlockCounts`) and ``dims`` (the layer
    widths) price the predictions; without them a ValueError (nothing is
    kept unpriced).  ``offsets_for(blocks)`` -> ``(matrix, offsets or
    None)``, as :func:`~spgnn.plan.model.rank_configs` takes it: each
    prediction is priced on the row blocks it was ranked on (a partition's,
    a shard directory's parts) instead of even blocks.  ``quantize``:
    ``train --quantize`` (1d-aware predictions price their codec buffers).
    """
    if a is None or dims is None:
        raise ValueError("within_limit: pass a= (Â or its block counts) and dims= (the layer "
                         "widths) to price the predictions")
    return _fitting_peaks(predictions, limit, a, offsets, offsets_for,
                   lambda memo, p, off: peak_bytes(memo, p, dims, baseline=baseline, offsets=off,
                                                   training=training, quantize=quantize))


def _fitting_peaks(predictions, limit, a, offsets, offsets_for, price):
    """``[(prediction, peak)]`` of the ``predictions`` whose ``price(memo, prediction,
    offsets)`` fits ``limit``, in their order. Pure.

    Each prediction is priced on the row blocks it was ranked on:
    ``offsets_for(blocks)`` -> ``(matrix, offsets or None)`` when given, else
    ``a`` and ``offsets``; one block-count memo per matrix (the predictions
    share its blocks).  :func:`within_limit` and
    :func:`spgnn.plan.memory_spmm.spmm_within_limit` differ only in ``price``.
    """
    out, memos = [], {}

    def memo(m):
        if id(m) not in memos:
            memos[id(m)] = (m, _memo(m))
        return memos[id(m)][1]

    for p in predictions:
        m, off = a, offsets
        if offsets_for is not None:
            c = p.replication if p.algorithm.startswith("15d") else 1
            m, off = offsets_for(p.ranks if p.algorithm == "3d" else p.ranks // c)
            off = None if p.algorithm == "3d" else off
        peak = price(memo(m), p, off)
        if peak <= limit:
            out.append((p, peak))
    return out


_SUFFIX = {"": 1, "K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30, "T": 2 ** 40}


def parse_bytes(text, what="--memory-limit"):
    """Bytes from ``text``: an integer with an optional K/M/G/T suffix (powers of 2), e.g. ``2G``. Pure.

    Raises ValueError naming ``what`` on anything else or a value < 1.
    """
    t = str(text).strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1:] if t[-1:] in _SUFFIX and t[-1:] else ""
    try:
        value = float(t[:-1] if unit else t) * _SUFFIX[unit]
    except ValueError:
        raise ValueError(f"{what} must be bytes such as 2G or 500M, but got {text!r}") from None
    if not value >= 1:
        raise ValueError(f"{what} must be at least 1 byte, but got {text!r}")
    return int(value)
