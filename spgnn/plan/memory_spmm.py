"""Per-rank memory model of one ``spgnn spmm`` command (issue 37 item 4). Pure.

``spgnn.plan.memory`` prices full-graph training (its setup transient and
saved activations were fitted on ``train`` runs and overprice a single
multiply, 3d most: docs/scale.md).  This module prices what one ``spmm``
command holds: the matrix blocks, X and Y, the algorithm's exchange
buffers and the command's own setup (reading or loading the rows)::

    peak = baseline + SPMM_FIXED_BYTES + max over ranks (counted + transient)

**Counted** (from the layouts the command builds; :func:`spmm_counted_bytes`):

* ``block``: the rank's block of the matrix: indices, float32 values,
  indptr; the indices and indptr are int32 where ``n`` and ``nnz`` fit, in
  memory (``from_global``'s blocks) and from shards (``spmm._from_shards``
  casts the rows it reads with int64 ids), else int64; the aware variants add
  their exchange plan (compacted column ids, int64 ``send_rows``, two int64
  counts per peer; values and indptr shared), as
  :func:`spgnn.plan.memory._graph_blocks_1d` counts the trainer's.  3d:
  layer 0's ``(d, o)`` block of A alone (no base copy, no transpose: one
  multiply needs neither).
* ``operands``: the rank's X and Y, float32: 1D/1.5D ``rows x feat`` each
  for the rank's row block; 3d X ``Layout((o, d), i)`` (``shard_input``)
  and Y ``Layout(d, i)``; an all-reduced Y (1.5D, 3d with ``G_o > 1``) and
  a scattered X (in memory) are the communicator's 64-byte-aligned buffers
  (+64 bytes each).
* ``exchange``: the send and receive buffers of the largest exchange (the
  planner's per-rank bytes of each communication step of
  :func:`~spgnn.plan.model.predict_spmm`, doubled).
* ``root`` (in memory only, rank 0): ``spmm --graph FILE|SPEC`` loads the
  whole matrix on rank 0 (int64 indptr and indices, float32 values) and
  draws the whole X there; both stay alive through the multiplies.
* ``draw``: drawing X (``spmm.operand_rows``): one chunk of up to
  :data:`X_CHUNK_ROWS` rows of float64 normals and its float32 copy, on
  every rank from shards, on rank 0 in memory.  (3d from shards also draws
  its rows with all ``feat`` columns before keeping its own; that copy is
  not at the peak on rmat: the read's transient is larger and freed by then.)

**Fitted** on ``spmm`` runs (``peak_rss_bytes`` of rmat:18:16, 2 ranks,
``--feat 64``; checked on rmat:16:16: docs/scale.md "One SpMM",
benchmarks/results/memory_peaks.jsonl):

* :data:`SPMM_FIXED_BYTES`: what a run holds beyond the baseline whatever the
  graph (Numba's compiled kernels, MPI's buffers, the allocator), from
  rmat:10:16 runs where the data is a few MB;
* :data:`SPMM_READ_BYTES_PER_NNZ` (by family) per stored entry of the rows a
  rank reads from shards or receives from rank 0: the rows' copies and the
  aware variants' plan building;
* in memory, rank 0: :data:`SPMM_SCATTER_BYTES_PER_NNZ` per stored entry it
  scatters (``DistSparseMatrix.from_global(root=0)``'s buffers).

The fitted terms add to the counted ones (an overestimate where they do not
coincide in time: +11 % and +18 % for the aware placements in memory on
rmat:18:16, the graph they were fitted on).
"""

from __future__ import annotations

import numpy as np

from ..grid import AXES_3D, roles_for_layer
from ..layout import block_offsets
from .memory import _F32, _I32, _I64, _pairs_sent, _slab_sent, baseline_bytes
from .events import as_counts
from .model import local_work

__all__ = ["SPMM_FIXED_BYTES", "SPMM_READ_BYTES_PER_NNZ", "SPMM_SCATTER_BYTES_PER_NNZ", "SOURCES",
           "spmm_counted_bytes", "spmm_peak_bytes", "spmm_within_limit"]

#: Where the command's matrix comes from: a shard directory (each rank reads its rows) or a
#: graph file / generator spec (rank 0 loads it and scatters).
SOURCES = ("shards", "memory")

#: Bytes a run holds beyond the baseline whatever the graph: Numba's compiled kernels, MPI's
#: buffers, the allocator (fitted: the median over rmat:10:16 runs, docs/scale.md "One SpMM").
SPMM_FIXED_BYTES = 107_400_000

#: Transient bytes per stored entry of the rows a rank reads (shards) or receives (in memory),
#: by algorithm family: the rows as read, their float32 copy, the column slice of 1.5D and 3d
#: layouts and, for the aware variants, building the exchange plan at the first multiply
#: (fitted on rmat:18:16 from shards, 2 ranks; 3d refitted at stop 46 once the shards' rows are
#: cast to int32: its peak is at the read, before the cast, and kept its measured value).
SPMM_READ_BYTES_PER_NNZ = {"1d": 8.0, "1d-aware": 22.0, "15d": 17.0, "3d": 9.5}

#: In memory, rank 0: transient bytes per stored entry it scatters (the sum of every rank's
#: block; 3d replicates blocks over its inner axis): the COO copy, block ids, selections and
#: coordinate buffers of ``DistSparseMatrix.from_global(root=0)``. Loading or generating the
#: graph comes first and its transient is freed before; on rmat it is below the scatter's, so
#: the fit sees only this (least squares on rmat:18:16's 1d and 3d runs, 2 ranks).
SPMM_SCATTER_BYTES_PER_NNZ = 61.0


def _read_family(algorithm):
    return ("3d" if algorithm == "3d" else "15d" if algorithm.startswith("15d")
            else "1d-aware" if algorithm == "1d-aware" else "1d")


#: An all-reduced result is one 64-byte-aligned allocation (64 bytes over its size).
_ALIGN = 64

#: Rows of X drawn at once (``spgnn.cli.spmm.X_CHUNK_ROWS``; plan may not import cli).
X_CHUNK_ROWS = 1 << 14


def _coords(grid):
    ranks = int(np.prod(grid))
    return np.array(np.unravel_index(np.arange(ranks), tuple(grid))).T   # (rank, axis)


def _read_rows_3d(a, grid):
    """3d: ``(rows, nnz)`` of the rows each world rank reads: A's ``d`` row block, all columns."""
    n = a.shape[0]
    g = dict(zip(AXES_3D, grid))
    _, _, d = roles_for_layer(0)
    roff = block_offsets(n, g[d])
    cd = _coords(grid)[:, AXES_3D.index(d)]
    return np.diff(roff)[cd], np.asarray(a.row_block_nnz(roff), dtype=np.int64)[cd]


def _index_size(a):
    """Bytes of the block's indices and indptr: int32 where ``n`` and the stored entries fit
    (``from_global``'s blocks in memory; ``spmm._from_shards`` casts the rows it reads with
    int64 ids), else int64."""
    n = a.shape[0]
    nnz = int(np.sum(a.row_block_nnz((0, n))))
    return _I32 if max(n, nnz) < np.iinfo(np.int32).max else _I64


def _counted_3d(a, p, feat, itemsize, index_size):
    """3d, by world rank: ``(block bytes, operand bytes, block nnz, nnz read)``, layer 0's roles."""
    n = a.shape[0]
    grid = tuple(int(v) for v in p.grid)
    g = dict(zip(AXES_3D, grid))
    o, i, d = roles_for_layer(0)
    c = _coords(grid)
    cd, co, ci = (c[:, AXES_3D.index(ax)] for ax in (d, o, i))
    roff, coff = block_offsets(n, g[d]), block_offsets(n, g[o])
    z = np.asarray(a.block_nnz(roff, coff), dtype=np.int64)
    nnz = z[cd, co]
    block = nnz * (index_size + itemsize) + (np.diff(roff)[cd] + 1) * index_size
    cols = np.diff(block_offsets(feat, g[i]))[ci]
    x_rows = np.array([np.diff(block_offsets(int(np.diff(coff)[k]), g[d]))[j]
                       for k, j in zip(co, cd)], dtype=np.int64)
    operands = (x_rows + np.diff(roff)[cd]) * cols * itemsize
    _, nnz_read = _read_rows_3d(a, grid)
    return block, operands, nnz, nnz_read, x_rows, 0 * x_rows


def _counted_rows(a, p, feat, itemsize, offsets, index_size):
    """1D/1.5D, by world rank: ``(block bytes, operand bytes, block nnz, nnz read)``.

    The block as :func:`spgnn.plan.memory._graph_blocks_1d` counts it (tested against the
    trainer's), with the index width of the command's blocks: the aware plan's compacted
    block shares the values and indptr and adds its own column ids."""
    c = p.replication if p.algorithm.startswith("15d") else 1
    k = p.ranks // c
    off = np.asarray(block_offsets(a.shape[0], k) if offsets is None else offsets,
                     dtype=np.int64)
    rows, nnz = local_work(a, p.algorithm, p.ranks, offsets=offsets, replication=p.replication)
    rows, nnz = np.asarray(rows, dtype=np.int64), np.asarray(nnz, dtype=np.int64)
    block = nnz * (index_size + itemsize) + (rows + 1) * index_size
    if p.algorithm.endswith("aware"):
        sent = np.repeat(_pairs_sent(a, off), c) if c == 1 else _slab_sent(a, off, c)
        block = block + nnz * index_size + sent * _I64 + 2 * k * _I64
    operands = 2 * rows * feat * itemsize
    nnz_read = np.repeat(np.asarray(a.row_block_nnz(off), dtype=np.int64), c)
    return block, operands, np.asarray(nnz, dtype=np.int64), nnz_read, rows, 0 * rows


def spmm_counted_bytes(a, prediction, feat, *, source="shards", offsets=None, itemsize=_F32):
    """The counted per-rank bytes of one ``spgnn spmm`` run of ``prediction``. Pure.

    ``a``: the matrix the command multiplies (``A'``: stored entries, no
    identity) or its :class:`~spgnn.plan.events.BlockCounts`;
    ``prediction``: a :func:`~spgnn.plan.model.predict_spmm` result (its
    ``steps`` price the exchange); ``feat``: the columns of X; ``source``:
    ``"shards"`` or ``"memory"`` (:data:`SOURCES`); ``offsets``: the 1D/1.5D
    row blocks (default even blocks; 3d is on even blocks).  A dict of int64
    arrays by world rank: ``block``, ``operands``, ``exchange``, ``root``
    (the whole matrix and X on rank 0, in memory; else 0), ``draw``, ``counted`` (their
    sum), and ``nnz_read`` (stored entries of the rows each rank reads or
    receives, what the fitted transient is priced on).
    """
    if source not in SOURCES:
        raise ValueError(f"spmm memory: source must be one of {SOURCES}, not {source!r}")
    a = as_counts(a)
    p, feat = prediction, int(feat)
    if p.algorithm == "3d":
        block, operands, nnz_block, nnz_read, x_rows, draw = _counted_3d(
            a, p, feat, itemsize, _index_size(a))
    else:
        block, operands, nnz_block, nnz_read, x_rows, draw = _counted_rows(
            a, p, feat, itemsize, offsets, _index_size(a))
    exchange = np.zeros(block.shape, dtype=np.int64)
    for s in p.steps:
        if s.kind == "compute":
            continue
        got = (s.rank_bytes if s.rank_bytes is not None and len(s.rank_bytes) == len(block)
               else np.full(block.shape, s.nbytes))
        exchange = np.maximum(exchange, np.asarray(got, dtype=np.int64))
    exchange = 2 * exchange
    if any(s.kind == "allreduce" for s in p.steps):     # Y is the all-reduce's result: the
        operands = operands + _ALIGN                    # communicator's aligned allocation
    if source == "memory":                              # X: the scatter's received buffer
        operands = operands + _ALIGN
    root = np.zeros(block.shape, dtype=np.int64)
    chunk = _I64 + itemsize       # a drawn chunk of X: float64 normals and their float32 copy
    if source == "memory":        # rank 0 draws the whole X; the others draw nothing
        n = a.shape[0]
        total = int(np.sum(a.row_block_nnz((0, n))))
        root[0] = (n + 1) * _I64 + total * (_I64 + itemsize) + n * feat * itemsize
        draw = np.zeros(block.shape, dtype=np.int64)
        draw[0] = min(X_CHUNK_ROWS, n) * feat * chunk
    else:
        draw = draw + np.minimum(X_CHUNK_ROWS, x_rows) * feat * chunk
    counted = block + operands + exchange + root + draw
    return {"block": block, "operands": operands, "exchange": exchange, "root": root,
            "draw": np.asarray(draw, dtype=np.int64),
            "counted": counted, "nnz_read": np.asarray(nnz_read, dtype=np.int64),
            "nnz_block": np.asarray(nnz_block, dtype=np.int64)}


def spmm_peak_bytes(a, prediction, feat, *, source="shards", offsets=None, baseline=None,
                    detail=False):
    """The predicted peak (bytes, the largest rank) of one ``spgnn spmm`` run. Pure.

    :func:`spmm_counted_bytes` plus the fitted terms (module docstring).
    ``detail=True``: ``(peak, dict)`` with the per-rank ``counted`` and
    ``transient`` arrays and the fixed part, to show where it goes.
    """
    a = as_counts(a)
    got = spmm_counted_bytes(a, prediction, feat, source=source, offsets=offsets)
    transient = (SPMM_READ_BYTES_PER_NNZ[_read_family(prediction.algorithm)]
                 * got["nnz_read"].astype(np.float64))
    if source == "memory":
        n = a.shape[0]
        transient[0] += SPMM_SCATTER_BYTES_PER_NNZ * float(got["nnz_block"].sum())
    per_rank = got["counted"] + transient
    peak = int(baseline_bytes(baseline) + SPMM_FIXED_BYTES + float(per_rank.max()))
    if detail:
        return peak, {**got, "transient": transient.astype(np.int64),
                      "fixed": SPMM_FIXED_BYTES, "baseline": baseline_bytes(baseline)}
    return peak


def spmm_within_limit(predictions, limit, *, a, feat, source="shards", baseline=None,
                      offsets=None, offsets_for=None):
    """``[(prediction, peak bytes)]`` of the one-SpMM ``predictions`` whose peak fits ``limit``.

    Pure; keeps the input order.  As :func:`spgnn.plan.memory.within_limit`
    with ``training=False``, priced by :func:`spmm_peak_bytes` (``source``:
    where the command's matrix comes from).  ``offsets_for(blocks)`` ->
    ``(matrix, offsets or None)`` as the ranking took it.
    """
    from .memory import _fitting_peaks

    return _fitting_peaks(predictions, limit, a, offsets, offsets_for,
                   lambda memo, p, off: spmm_peak_bytes(memo, p, feat, source=source, offsets=off,
                                                        baseline=baseline))
