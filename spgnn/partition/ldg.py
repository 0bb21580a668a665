"""Linear Deterministic Greedy (LDG): a one-pass streaming partitioner for graphs METIS cannot hold.

Stanton & Kliot, *Streaming Graph Partitioning for Large Distributed Graphs*
(KDD 2012): the vertices arrive one at a time with their adjacency; vertex
``v`` goes to the part ``i`` maximising

    |N(v) ∩ P_i| · (1 − |P_i| / C)

among the parts not yet full (``|P_i| < C``), where ``N(v)`` are its
neighbours already placed and ``C = ceil(slack · n / K)`` the capacity; ties go
to the smaller part, then the lower id.  A vertex without placed neighbours
goes to the smallest part.  With ``passes > 1`` the stream is replayed
(restreaming LDG, Nishimura & Ugander, KDD 2013): each later pass sees every
vertex's previous part and moves it if the rule says so, which lowers the cut
at the cost of another read of the graph.

Memory: the part of each vertex (``int32``, ``O(n)``) and ``K`` counters;
the adjacency is read in row chunks (:func:`ldg_stream`), so the graph itself
never has to be in memory -- the streaming path of ``spgnn partition``
(:mod:`spgnn.partition.stream_shards`) reads it from a CSR file on disk.
The stream order is the vertex order (a sequential read); ``seed`` is
accepted for the registry's signature and ignored: LDG is deterministic.

The kernel is Numba (compiled on first use, cached on disk).  Local.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import BackendUnavailable
from ._common import as_pattern, check_nparts
from .result import Partition, make_partition

__all__ = ["ldg_partition", "ldg_stream", "ldg_capacity", "LDG_PASSES", "LDG_SLACK"]

#: Default passes over the stream (1 = classic LDG; restreaming lowers the cut).
LDG_PASSES = 1
#: Default capacity factor: parts hold at most ``ceil(slack * n / K)`` vertices.
LDG_SLACK = 1.0

_KERNEL = {}


def _ldg_rows(indptr, indices, row0, parts, sizes, capacity, score):
    """The LDG kernel over one row chunk (compiled by Numba in :func:`_kernel`)."""
    base = indptr[0]
    nparts = sizes.shape[0]
    for r in range(indptr.shape[0] - 1):
        v = row0 + r
        old = parts[v]
        if old >= 0:
            sizes[old] -= 1
        a, b = indptr[r] - base, indptr[r + 1] - base
        for j in range(a, b):
            p = parts[indices[j]]
            if p >= 0:
                score[p] += 1.0
        best = -1
        best_val = -1.0
        for i in range(nparts):
            if sizes[i] >= capacity:
                continue
            val = score[i] * (1.0 - sizes[i] / capacity)
            if best < 0 or val > best_val or (val == best_val and sizes[i] < sizes[best]):
                best = i
                best_val = val
        for j in range(a, b):
            p = parts[indices[j]]
            if p >= 0:
                score[p] = 0.0
        parts[v] = best
        sizes[best] += 1


def _kernel():
    if "ldg" not in _KERNEL:
        try:
            import numba
        except ImportError as exc:
            raise BackendUnavailable(f"the ldg partitioner needs numba, which is not importable "
                                     f"({exc}); install it with: pip install numba") from None

        _KERNEL["ldg"] = numba.njit(cache=True, nogil=True)(_ldg_rows)
    return _KERNEL["ldg"]


def ldg_capacity(n: int, nparts: int, slack: float = LDG_SLACK) -> int:
    """The most vertices a part may hold: ``ceil(slack * n / nparts)`` (at least ``ceil(n / nparts)``)."""
    if not slack >= 1.0:
        raise ValueError(f"ldg: slack must be >= 1, but got {slack!r}")
    return max(math.ceil(slack * n / nparts), -(-n // nparts), 1)


def ldg_stream(n: int, nparts: int, row_chunks, *, passes: int = LDG_PASSES,
               slack: float = LDG_SLACK) -> np.ndarray:
    """LDG over a graph given as a stream of row chunks; the part of every vertex. Local.

    Parameters
    ----------
    n, nparts : int
    row_chunks : callable
        ``row_chunks()`` returns an iterable of ``(row0, indptr, indices)``:
        consecutive rows from ``row0``, ``indptr`` their CSR row pointers
        (any offset: ``indptr[0]`` need not be 0), ``indices`` their
        neighbours (the symmetric pattern, no self-loops needed).  Called
        once per pass; the chunks must cover rows ``0..n-1`` in order.
    passes, slack : see the module.

    Returns
    -------
    int32 array (n,), values in ``0..nparts-1``.
    """
    nparts = check_nparts(nparts, "ldg")
    if int(passes) < 1:
        raise ValueError(f"ldg: passes must be >= 1, but got {passes!r}")
    kernel = _kernel()
    parts = np.full(n, -1, dtype=np.int32)
    sizes = np.zeros(nparts, dtype=np.int64)
    score = np.zeros(nparts, dtype=np.float64)
    cap = ldg_capacity(n, nparts, slack)
    for _ in range(int(passes)):
        nxt = 0
        for row0, indptr, indices in row_chunks():
            if row0 != nxt:
                raise ValueError(f"ldg: row chunks must be consecutive; expected row {nxt}, "
                                 f"got {row0}")
            indptr = np.ascontiguousarray(indptr, dtype=np.int64)
            kernel(indptr, np.ascontiguousarray(indices), int(row0), parts, sizes, cap, score)
            nxt = row0 + indptr.size - 1
        if nxt != n:
            raise ValueError(f"ldg: the row chunks covered {nxt} of {n} rows")
    return parts


def ldg_partition(A, nparts: int, *, seed: int = 0, passes: int = LDG_PASSES,
                  slack: float = LDG_SLACK, chunk_rows: int = 1 << 16) -> Partition:
    """LDG of the in-memory pattern ``A`` (the same parts the streaming path computes). Local.

    ``A`` is symmetrised first (the stream of an undirected graph lists
    each edge at both ends).  ``seed`` is ignored (see the module).
    """
    nparts = check_nparts(nparts, "ldg_partition")
    A = as_pattern(A, "ldg_partition")
    S = (A + A.T).tocsr() if (A != A.T).nnz else A
    S.sort_indices()
    n = S.shape[0]

    def chunks():
        for r0 in range(0, n, chunk_rows):
            r1 = min(r0 + chunk_rows, n)
            yield r0, S.indptr[r0:r1 + 1], S.indices[S.indptr[r0]:S.indptr[r1]]

    parts = ldg_stream(n, nparts, chunks, passes=passes, slack=slack)
    return make_partition(A, parts.astype(np.int64), nparts, "ldg",
                          {"passes": int(passes), "slack": float(slack)})
