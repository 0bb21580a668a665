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
* resident arrays: the rank's CSR blocks (int32 indices + float32 data +
  int64 indptr, and a transposed copy for the backward SpMM), activations
  and saved tensors per layer (float32, the rank's rows), the halo /
  exchange buffers (the planner's per-rank received bytes in
  ``Prediction.steps``), parameters with gradients and Adam's two moments,
  features, labels and masks.

The counts come from the same quantities the time model prices
(:func:`spgnn.plan.model.local_work`), so every candidate of
:func:`spgnn.plan.model.rank_configs` has one.
"""

from __future__ import annotations

import os

import numpy as np

from .events import as_counts
from .model import local_work

__all__ = ["BASELINE_BYTES", "SETUP_BYTES_PER_NNZ", "SETUP_FIXED_BYTES", "baseline_bytes", "resident_bytes",
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


def resident_bytes(a, prediction, dims, *, offsets=None, training=True):
    """Per-rank bytes of the training arrays of ``prediction``'s configuration (array by rank). Pure.

    ``a``: the aggregation matrix Â or its block counts; ``dims``: layer
    widths ``[features, hidden..., classes]``.  Returns a dict of arrays
    (one entry per rank): ``graph``, ``activations``, ``halo``,
    ``parameters``, ``data`` and ``total``.  ``training=False``: one SpMM
    (``spgnn spmm``: X and Y only, no parameters, saved tensors or labels).
    """
    p = prediction
    rows, nnz = local_work(a, p.algorithm, p.ranks, offsets=offsets,
                           replication=p.replication, grid=p.grid)
    rows = np.asarray(rows, dtype=np.int64)
    nnz = np.asarray(nnz, dtype=np.int64)
    one_csr = nnz * (_I32 + _F32) + (rows + 1) * _I64
    graph = 2 * one_csr                           # the block and its transpose (backward)
    widths = sum(int(d) for d in dims)
    activations = rows * widths * _F32 * (2 if training else 1)   # outputs, saved inputs
    params = sum(int(dims[i]) * int(dims[i + 1]) + int(dims[i + 1]) for i in range(len(dims) - 1))
    parameters = np.full(rows.shape, params * _F32 * 4, dtype=np.int64)   # w, grad, Adam m, v
    data = rows * (int(dims[0]) * _F32 + _I64 + 3)                        # features, labels, masks
    if not training:
        parameters = np.zeros_like(parameters)
        data = np.zeros_like(data)
    halo = np.zeros(rows.shape, dtype=np.int64)
    for s in p.steps:
        if s.kind == "compute":
            continue
        got = s.rank_bytes if s.rank_bytes is not None and len(s.rank_bytes) == len(rows) \
            else np.full(rows.shape, s.nbytes)
        halo = np.maximum(halo, np.asarray(got, dtype=np.int64))
    halo = 2 * halo                               # send and receive buffers
    total = graph + activations + parameters + data + halo
    return {"graph": graph, "activations": activations, "halo": halo,
            "parameters": parameters, "data": data, "total": total,
            "nnz_total": int(nnz.sum())}


def peak_bytes(a, prediction, dims, *, baseline=None, offsets=None, training=True):
    """The predicted per-rank peak (bytes, the largest rank) of ``prediction``. Pure."""
    a = as_counts(a)
    priced = resident_bytes(a, prediction, dims, offsets=offsets, training=training)
    res = priced["total"]
    # every stored entry of Â lies in exactly one rank's block (3d: one per (d, o) block)
    share = priced["nnz_total"] / max(prediction.ranks, 1)
    setup = SETUP_FIXED_BYTES + SETUP_BYTES_PER_NNZ[_family(prediction.algorithm)] * share
    return int(baseline_bytes(baseline) + max(setup, float(res.max())))


def within_limit(predictions, limit, *, a=None, dims=None, baseline=None, offsets=None,
                 training=True):
    """``[(prediction, peak bytes)]`` of the ``predictions`` whose peak fits ``limit``. Pure.

    Keeps the input order (the ranking).  ``a`` (Â or its
    :class:`~spgnn.plan.events.BlockCounts`) and ``dims`` (the layer
    widths) price the predictions; without them a ValueError (nothing is
    kept unpriced).
    """
    if a is None or dims is None:
        raise ValueError("within_limit: pass a= (Â or its block counts) and dims= (the layer "
                         "widths) to price the predictions")
    out = []
    for p in predictions:
        peak = peak_bytes(a, p, dims, baseline=baseline, offsets=offsets, training=training)
        if peak <= int(limit):
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
