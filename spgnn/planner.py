"""Exact communication plans for distributed SpMM, without running the ranks.

Given the (already permuted) global matrix, a row partition into blocks, the
number of ranks and the feature width, a planner returns the ledger events a
real run records, rank by rank, under the communicator's byte model
(:mod:`spgnn.comm.stats`).  Tests check plan == ledger exactly for every
configuration that fits in 8 ranks, so the plans for 1024 ranks can be
trusted as much as the model.

An α–β estimate turns the events into time: each collective costs
``α · max_r messages_r + β · max_r max(sent_r, recv_r)`` (the slowest rank
of a bulk-synchronous step), summed over the collectives.
"""

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .comm.stats import model_allgather, model_allreduce, model_alltoallv
from .errors import DimensionMismatch
from .layout import block_offsets

__all__ = ["PlannedEvent", "SpmmPlan", "plan_spmm", "PLANNERS", "pair_rows"]


@dataclass
class PlannedEvent:
    """One collective as every rank records it: arrays indexed by world rank."""

    op: str
    label: str
    axis: tuple
    sent: np.ndarray
    recv: np.ndarray
    messages: np.ndarray
    phase: str = "spmm"   # "setup" (once per matrix) or "spmm" (every multiply)

    def seconds(self, alpha, beta):
        if not len(self.sent):
            return 0.0
        return float(alpha * self.messages.max() + beta * np.maximum(self.sent, self.recv).max())


@dataclass
class SpmmPlan:
    """Planned events of one algorithm, with totals and an α–β time estimate."""

    algorithm: str
    ranks: int
    feat: int
    itemsize: int
    events: list = field(default_factory=list)

    def select(self, phase="spmm"):
        return [e for e in self.events if e.phase == phase]

    def bytes_total(self, phase="spmm") -> int:
        return int(sum(int(e.sent.sum()) for e in self.select(phase)))

    def bytes_per_rank(self, phase="spmm") -> np.ndarray:
        out = np.zeros(self.ranks, dtype=np.int64)
        for e in self.select(phase):
            out += e.sent
        return out

    def bytes_max_rank(self, phase="spmm") -> int:
        return int(self.bytes_per_rank(phase).max(initial=0))

    def seconds(self, alpha, beta, phase="spmm") -> float:
        return sum(e.seconds(alpha, beta) for e in self.select(phase))

    def to_dict(self, alpha=None, beta=None) -> dict:
        out = {"algorithm": self.algorithm, "ranks": self.ranks, "feat": self.feat,
               "bytes_total": self.bytes_total(), "bytes_max_rank": self.bytes_max_rank(),
               "setup_bytes_total": self.bytes_total("setup"),
               "collectives": [{"op": e.op, "label": e.label, "axis": list(e.axis), "phase": e.phase,
                                "bytes_total": int(e.sent.sum()),
                                "bytes_max_rank": int(np.maximum(e.sent, e.recv).max(initial=0)),
                                "messages_max_rank": int(e.messages.max(initial=0))}
                               for e in self.events]}
        if alpha is not None and beta is not None:
            out["seconds_estimate"] = self.seconds(alpha, beta)
        return out


def _event(op, label, axis, rows, phase="spmm"):
    sent, recv, msgs = (np.array(v, dtype=np.int64) for v in zip(*rows)) if rows else ([],) * 3
    return PlannedEvent(op, label, tuple(axis), sent, recv, msgs, phase)


def pair_rows(a, offsets):
    """``r[i, j]``: rows of X owned by part ``j`` that part ``i``'s block of A touches (i ≠ j).

    ``offsets`` splits both the rows of A and the rows of X (square A).
    """
    a = sp.coo_array(a)
    offsets = np.asarray(offsets, dtype=np.int64)
    k = offsets.size - 1
    if a.nnz == 0:
        return np.zeros((k, k), dtype=np.int64)
    row_part = np.searchsorted(offsets, a.row, side="right") - 1
    # distinct (row part, column) pairs: each is one row of X that part needs
    key = np.unique(row_part.astype(np.int64) * a.shape[1] + a.col)
    i, col = np.divmod(key, a.shape[1])
    j = np.searchsorted(offsets, col, side="right") - 1
    r = np.zeros((k, k), dtype=np.int64)
    np.add.at(r, (i, j), 1)
    np.fill_diagonal(r, 0)
    return r


def _plan_1d(a, offsets, p, f, w):
    sizes = np.diff(offsets)
    n = int(offsets[-1])
    rows = [model_allgather(int(sizes[r]) * f * w, n * f * w, p) for r in range(p)]
    return [_event("allgatherv", "spmm-1d:allgather", ("row",), rows)]


def _plan_1d_aware(a, offsets, p, f, w):
    r = pair_rows(a, offsets)          # r[i, j]: part i needs r rows from part j
    setup = [
        _event("alltoall", "spmm-1d-aware:plan", ("row",),
               [((p - 1) * 8, (p - 1) * 8, p - 1) for _ in range(p)], "setup"),
        _event("allreduce:split", "spmm-1d-aware:plan", ("row",),
               [model_allreduce(1, 8, p, q) for q in range(p)], "setup"),
        # rank i sends part j the ids of the r[i, j] rows it needs
        _event("alltoallv", "spmm-1d-aware:plan", ("row",),
               [model_alltoallv(r[q] * 8, r[:, q] * 8, q) for q in range(p)], "setup"),
        _event("allreduce", "spmm-1d-aware:plan", ("row",),
               [model_allreduce(1, 8, p, q) for q in range(p)], "setup"),
    ]
    exchange = _event("alltoallv", "spmm-1d-aware:exchange", ("row",),
                      [model_alltoallv(r[:, q] * f * w, r[q] * f * w, q) for q in range(p)])
    return setup + [exchange]


PLANNERS = {"1d": _plan_1d, "1d-aware": _plan_1d_aware}


def plan_spmm(a, algorithm, ranks, feat, *, offsets=None, itemsize=4):
    """Plan one algorithm's communication for ``Y = A X`` (A square, n×n; X n×feat).

    Parameters
    ----------
    a : scipy sparse matrix
        The matrix as it will be distributed (apply a partition's
        permutation first).
    algorithm : str
        A key of :data:`PLANNERS`.
    ranks : int
        Number of ranks P (any size: nothing is launched).
    offsets : sequence of int, optional
        Block boundaries of the row partition (P + 1 entries); default even.
    itemsize : int
        Bytes per element of X (4 for float32).

    Returns
    -------
    SpmmPlan
    """
    if a.shape[0] != a.shape[1]:
        raise DimensionMismatch(f"plan_spmm: A must be square, but got shape {a.shape}")
    n = a.shape[0]
    offsets = np.asarray(block_offsets(n, ranks) if offsets is None else offsets, dtype=np.int64)
    if offsets.size != ranks + 1 or offsets[0] != 0 or offsets[-1] != n or np.any(np.diff(offsets) < 0):
        raise DimensionMismatch(f"plan_spmm: offsets must be {ranks + 1} non-decreasing boundaries "
                                f"from 0 to n={n}, but got {offsets.size} values "
                                f"from {offsets[0] if offsets.size else None} to "
                                f"{offsets[-1] if offsets.size else None}")
    try:
        planner = PLANNERS[algorithm]
    except KeyError:
        raise ValueError(f"plan_spmm: unknown algorithm {algorithm!r}; expected one of "
                         f"{sorted(PLANNERS)}") from None
    events = planner(sp.csr_array(a), offsets, int(ranks), int(feat), int(itemsize))
    return SpmmPlan(algorithm, int(ranks), int(feat), int(itemsize), events)
