"""Elementwise functions, counter-based dropout masks, and the distributed masked loss.

Everything here works on local numpy blocks.  The only communication is in
:func:`softmax_cross_entropy` and :func:`masked_scores`, which take the
communicators spanning the node (row) axes and the class (column) axes of
the logits' layout; :class:`~spgnn.gnn.context.GraphContext` picks them from the
layout, so layers never do.

Dropout masks are a pure function of ``(seed, epoch, layer key, GLOBAL
node id, GLOBAL column)``: the node id is the vertex's id in the *input*
graph (before any partition permutation), so a mask does not depend on the
number of ranks, the algorithm, the partition or the layout.
"""

import numpy as np

from ..backends import get_backend
from ..counter_rng import GOLDEN, mix64
from ..errors import DimensionMismatch

__all__ = ["relu", "relu_backward", "dropout_mask", "hash_uniform", "key_base", "dropout_apply",
           "dropout_apply_csr", "softmax_cross_entropy", "masked_scores", "predictions"]

def relu(x, backend=None):
    """``max(x, 0)`` and the boolean mask ``x > 0`` (kept for the backward). Local.

    The backend's :meth:`~spgnn.backends.Backend.relu` (numba: one fused,
    threaded pass for large blocks; the same values: ``x`` where ``x > 0``,
    else ``+0``).
    """
    return get_backend(backend).relu(x)


def relu_backward(dy, mask, backend=None):
    """Gradient of ReLU: ``dy * (x > 0)``. Local."""
    return get_backend(backend).relu_backward(dy, mask)


def _mix(z):
    """splitmix64 on ``z + golden`` (the dropout hash's mixing step), uint64 arrays."""
    with np.errstate(over="ignore"):
        return mix64(np.asarray(z, dtype=np.uint64) + GOLDEN)


def key_base(keys):
    """The uint64 that mixes ``keys`` (the per-call part of :func:`hash_uniform`). Pure."""
    base = np.zeros(1, dtype=np.uint64)
    for k in keys:
        base = _mix(base ^ np.uint64(int(k) & 0xFFFFFFFFFFFFFFFF))
    return base[0]


def hash_uniform(keys, rows, cols, ncols):
    """Uniform [0, 1) numbers, one per ``(row, col)``, from integer ``keys``. Pure.

    ``keys`` is a tuple of non-negative ints (e.g. seed, epoch, layer);
    ``rows`` (global node ids, 1-D) and ``cols`` (global column ids, 1-D)
    span the block; ``ncols`` is the global column count.  The value at
    ``(r, c)`` depends only on ``keys``, ``r``, ``c`` and ``ncols``.
    """
    base = key_base(keys)
    rows = np.asarray(rows, dtype=np.uint64)
    cols = np.asarray(cols, dtype=np.uint64)
    with np.errstate(over="ignore"):
        counter = rows[:, None] * np.uint64(int(ncols)) + cols[None, :]
    h = _mix(counter ^ base)
    return (h >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def dropout_mask(p, keys, rows, cols, ncols, dtype=np.float32):
    """Inverted-dropout scale mask: ``1/(1-p)`` where kept, 0 where dropped. Pure.

    An entry is kept when its :func:`hash_uniform` number is ``>= p``.
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout_mask: p must lie in [0, 1), but got {p}")
    u = hash_uniform(keys, rows, cols, ncols)
    return np.where(u >= p, 1.0 / (1.0 - p), 0.0).astype(dtype)


def _check_p(p, what):
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{what}: p must lie in [0, 1), but got {p}")


def dropout_apply(x, p, keys, rows, col0, ncols, out=None, backend=None):
    """``x * dropout_mask(p, keys, rows, col0 + arange(k), ncols)`` without building the mask. Pure.

    Bit-identical to the numpy expression (same hash, same float scale, a
    dropped entry is multiplied by 0), computed in one Numba pass.

    Parameters
    ----------
    x : ndarray (m, k), float32 or float64
    p : float
        Drop probability in [0, 1).
    keys : tuple of int
        ``(seed, epoch, layer key)``.
    rows : int array (m,)
        Global node id of every row.
    col0, ncols : int
        Global column of ``x[:, 0]`` and the global column count.
    out : ndarray like ``x``, optional
        Written and returned (may be ``x``).
    """
    _check_p(p, "dropout_apply")
    return get_backend(backend).dropout(x, p, key_base(keys), rows, col0, ncols, out=out)


def dropout_apply_csr(indptr, indices, data, p, keys, rows, col0, ncols, backend=None):
    """:func:`dropout_apply` on the stored entries of a CSR block: the new ``data``. Pure.

    Entries that are not stored are 0 and stay 0 under dropout, so only
    ``nnz`` hashes are needed; the pattern is kept (dropped entries become
    explicit zeros).  ``indices`` are local columns; ``col0`` shifts them to
    global ones.
    """
    _check_p(p, "dropout_apply_csr")
    return get_backend(backend).dropout_csr(indptr, indices, data, p, key_base(keys), rows, col0,
                                            ncols)


def _softmax_parts(z, labels, col_start, class_comm):
    """Row max, exp, sum-exp, picked logit and global argmax over a class-split block."""
    n, c = z.shape
    m = z.max(axis=1) if c else np.full(n, -np.inf, dtype=z.dtype)
    if class_comm is not None and class_comm.size > 1:
        m = class_comm.allreduce(m, op="max", label="gnn-loss:max")
    m_safe = np.where(np.isfinite(m), m, 0).astype(z.dtype)
    e = np.exp(z - m_safe[:, None])
    local = labels - col_start
    mine = (local >= 0) & (local < c)
    picked = np.zeros(n, dtype=z.dtype)
    rows = np.flatnonzero(mine)
    picked[rows] = z[rows, local[rows]]
    both = np.stack([e.sum(axis=1), picked])
    if class_comm is not None and class_comm.size > 1:
        both = class_comm.allreduce(both, label="gnn-loss:sumexp")
    s, picked = both[0], both[1]
    # argmax over the global class axis, smallest index on ties
    big = np.iinfo(np.int64).max
    if c:
        hit = z == m[:, None]
        first = np.where(hit.any(axis=1), hit.argmax(axis=1) + col_start, big).astype(np.int64)
    else:
        first = np.full(n, big, dtype=np.int64)
    if class_comm is not None and class_comm.size > 1:
        first = class_comm.allreduce(first, op="min", label="gnn-loss:argmax")
    return m_safe, e, s, picked, first


def softmax_cross_entropy(logits, labels, mask=None, *, row_comm=None, class_comm=None,
                          col_start=0, reduction="mean"):
    """Softmax cross-entropy over the masked rows, its gradient, and accuracy.

    ``reduction="mean"`` (full-graph training): the mean over the masked rows
    of *all* ranks.  Collective over ``class_comm`` (three small all-reduces
    when the classes are split over ranks) and over ``row_comm`` (one
    all-reduce of three numbers: loss sum, masked-node count, correct
    count).  The normaliser is the GLOBAL number of masked nodes, so unequal
    blocks are weighted correctly.  ``row_comm`` must span one replica of
    every node row (the layout's row axes) and ``class_comm`` the class
    axes; replicas are never reduced.

    ``reduction="sum"`` (a minibatch): the sum over this rank's masked rows
    and the gradient of that sum; ``row_comm`` is not used (the caller
    reduces), and the third value is the number of correct predictions.

    Parameters
    ----------
    logits : ndarray (n_local, c_local)
        This rank's block; its columns are classes ``[col_start, col_start + c_local)``.
        The arithmetic runs in its dtype.
    labels : ndarray of int (n_local,)
        Global class ids (-1: unlabelled, never counted).
    mask : ndarray of bool (n_local,), or None for every row

    Returns
    -------
    loss : float
    grad : ndarray like ``logits``
        ``(softmax - onehot) * mask / count`` (``count = 1`` for ``"sum"``),
        complete on every replica.
    accuracy : float (``"mean"``) or correct : int (``"sum"``)
        Fraction of masked nodes whose argmax equals the label (0 when none),
        or their number.

    Raises
    ------
    ValueError
        A label at or above the number of classes (when the classes are not
        split over ranks), or an unknown ``reduction``.
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"softmax_cross_entropy: reduction must be 'mean' or 'sum', but got "
                         f"{reduction!r}")
    z = np.asarray(logits)
    labels = np.asarray(labels, dtype=np.int64)
    if z.ndim != 2 or labels.shape != (z.shape[0],):
        raise DimensionMismatch(f"softmax_cross_entropy: logits (m, C) and labels (m,) needed, "
                                f"but got {z.shape} and {labels.shape}")
    if (class_comm is None or class_comm.size == 1) and labels.size \
            and labels.max() >= col_start + z.shape[1]:
        raise ValueError(f"softmax_cross_entropy: labels must lie in [0, {z.shape[1]}), but got "
                         f"{labels.max()}")
    mask = (np.ones(labels.size, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)) \
        & (labels >= 0)
    m, e, s, picked, pred = _softmax_parts(z, labels, col_start, class_comm)
    loss_rows = np.log(s) + m - picked
    stats = np.array([loss_rows[mask].sum(dtype=np.float64), mask.sum(),
                      (pred[mask] == labels[mask]).sum()], dtype=np.float64)
    if reduction == "mean" and row_comm is not None and row_comm.size > 1:
        stats = row_comm.allreduce(stats, label="gnn-loss:total")
    count = stats[1] if reduction == "mean" else 1.0
    scale = 1.0 / count if count > 0 else 0.0
    grad = e / s[:, None]
    local = labels - col_start
    rows = np.flatnonzero((local >= 0) & (local < z.shape[1]))
    grad[rows, local[rows]] -= 1
    grad *= (mask * scale).astype(z.dtype)[:, None]
    loss = float(stats[0] * scale)
    if reduction == "sum":
        return loss, grad.astype(z.dtype, copy=False), int(stats[2])
    acc = float(stats[2] / count) if count > 0 else 0.0
    return loss, grad.astype(z.dtype, copy=False), acc


def predictions(logits, col_start=0, class_comm=None):
    """The predicted class (global argmax, smallest index on ties) of every row.

    Collective over ``class_comm`` when the classes are split over ranks.
    """
    z = np.asarray(logits)
    return _softmax_parts(z, np.zeros(z.shape[0], dtype=np.int64), col_start, class_comm)[4]


def masked_scores(logits, labels, masks, *, row_comm=None, class_comm=None, col_start=0):
    """Loss and accuracy for several masks at once (evaluation).

    Collective: as :func:`softmax_cross_entropy`, with one all-reduce over
    ``row_comm`` for all masks together.

    Returns
    -------
    dict ``{name: (loss, accuracy, count)}`` for each ``name`` in ``masks``.
    """
    z = np.asarray(logits)
    labels = np.asarray(labels, dtype=np.int64)
    m, e, s, picked, pred = _softmax_parts(z, labels, col_start, class_comm)
    loss_rows = np.log(s) + m - picked
    names = list(masks)
    vals = []
    for name in names:
        mk = np.asarray(masks[name], dtype=bool) & (labels >= 0)
        vals += [loss_rows[mk].sum(dtype=np.float64), mk.sum(), (pred[mk] == labels[mk]).sum()]
    stats = np.array(vals, dtype=np.float64)
    if row_comm is not None and row_comm.size > 1:
        stats = row_comm.allreduce(stats, label="gnn-eval:total")
    out = {}
    for k, name in enumerate(names):
        tot, cnt, cor = stats[3 * k:3 * k + 3]
        # an empty set has no loss and no accuracy: NaN (null in --json), never 0.0
        out[name] = (float(tot / cnt) if cnt else float("nan"),
                     float(cor / cnt) if cnt else float("nan"), int(cnt))
    return out
