"""METIS k-way partitions through pymetis (an optional dependency, imported on first use)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import BackendUnavailable
from ..io.preprocess import symmetric_pattern
from ._common import as_pattern, check_nparts
from .result import Partition, make_partition

__all__ = ["metis_partition"]

_INSTALL_HINT = "install it with: pip install -e '.[partition]' (or pip install pymetis)"


def _pymetis():
    # imported here, not at module import: pymetis is optional
    try:
        import pymetis
    except ImportError as exc:
        raise BackendUnavailable(f"metis partitioning needs the pymetis package, which is not "
                                 f"importable ({exc}); {_INSTALL_HINT}") from None
    return pymetis


def metis_parts(A: sp.csr_array, nparts: int, balance: str, seed: int, ufactor=None,
                objective: str = "cut") -> np.ndarray:
    """METIS's part id per vertex of the checked pattern ``A`` (arguments unchecked)."""
    n = A.shape[0]
    if nparts == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    if nparts >= n:
        # METIS rejects (or misbehaves on) more parts than vertices: one vertex
        # per part, the remaining parts empty.
        return np.arange(n, dtype=np.int64)
    pymetis = _pymetis()
    G = symmetric_pattern(A)
    vweights = None
    if balance == "nnz":
        # SpMM work of a row is its stored entries; +1 keeps empty rows weighted
        # (METIS needs positive totals) and counts the row's own output.
        vweights = (np.diff(A.indptr) + 1).astype(np.int64)
    opts = pymetis.Options(seed=int(seed))
    if ufactor is not None:
        opts.ufactor = int(ufactor)
    if objective == "vol":
        opts.objtype = 1      # METIS_OBJTYPE_VOL; needs k-way (recursive=False)
    # k-way for every nparts: recursive bisection (pymetis's default for <= 8 parts)
    # rejects objtype=vol and balances worse.
    _, membership = pymetis.part_graph(
        nparts, adjacency=pymetis.CSRAdjacency(G.indptr.astype(np.int64),
                                               G.indices.astype(np.int64)),
        vweights=vweights, recursive=False, options=opts)
    return np.asarray(membership, dtype=np.int64)


def metis_partition(A, nparts: int, *, balance: str = "vertices", seed: int = 0,
                    ufactor: int | None = None, objective: str = "cut",
                    train_mask=None) -> Partition:
    """METIS k-way partition (through pymetis) of the symmetrised graph of A.

    Parameters
    ----------
    A : (n, n) sparse matrix
        Its pattern is symmetrised and self-loops are dropped for METIS.
    nparts : int
        ``1`` gives one part; ``nparts >= n`` gives one vertex per part
        (parts ``n..nparts-1`` empty) without calling METIS.
    balance : {"vertices", "nnz"}
        Balance vertex counts, or stored entries per block row (vertex
        weight = row nnz + 1: the SpMM work).
    seed : int
        METIS's random seed (deterministic for a given seed).
    ufactor : int, optional
        METIS load imbalance in 1/1000 (default 30, i.e. 3 %).
    objective : {"cut", "vol"}
        Minimise the edge cut (default) or the total communication volume.
    train_mask : bool (n,), optional
        Balance training vertices too: two balance constraints, vertices
        and training vertices (DistGNN-MB's partition, paper 001 §3.1, after
        DistDGL), so the ranks' minibatch counts stay close.  Only with the
        default ``balance``, ``ufactor`` and ``objective``; one constraint
        when there is no training vertex (METIS needs positive totals per
        constraint).

    Raises
    ------
    BackendUnavailable
        When pymetis is not installed.
    """
    nparts = check_nparts(nparts, "metis_partition")
    if balance not in ("vertices", "nnz"):
        raise ValueError(f"metis_partition: balance must be 'vertices' or 'nnz', "
                         f"but got {balance!r}")
    if objective not in ("cut", "vol"):
        raise ValueError(f"metis_partition: objective must be 'cut' or 'vol', "
                         f"but got {objective!r}")
    A = as_pattern(A, "metis_partition")
    if train_mask is not None:
        if (balance, ufactor, objective) != ("vertices", None, "cut"):
            raise ValueError("metis_partition: train_mask takes the default balance, ufactor "
                             "and objective")
        return _metis_train(A, nparts, train_mask, seed)
    parts = metis_parts(A, nparts, balance, seed, ufactor, objective)
    return make_partition(A, parts, nparts, f"metis-{balance}",
                          {"seed": seed, "balance": balance, "objective": objective})


def _metis_train(A, nparts, train_mask, seed):
    """METIS k-way balanced on vertices and training vertices (``train_mask``), checked ``A``."""
    n = A.shape[0]
    tm = np.asarray(train_mask, dtype=bool).reshape(-1)
    if tm.size != n:
        raise ValueError(f"metis_partition: train_mask has {tm.size} entries for {n} "
                         f"vertices")
    if nparts == 1 or n == 0 or nparts >= n or not tm.any():
        parts = metis_parts(A, nparts, "vertices", seed)
    else:
        G = symmetric_pattern(A)
        vw = np.stack([np.ones(n, dtype=np.int64), tm.astype(np.int64)], axis=1).reshape(-1)
        _, membership = _pymetis().part_graph(
            nparts, adjacency=_pymetis().CSRAdjacency(G.indptr.astype(np.int64),
                                                      G.indices.astype(np.int64)),
            vweights=vw, recursive=False, options=_pymetis().Options(seed=int(seed)))
        parts = np.asarray(membership, dtype=np.int64)
        # METIS's multi-constraint k-way can miss its balance by 40 % and more on
        # small clustered graphs (an SBM of 240-1000 vertices): restore it greedily
        G = symmetric_pattern(A)
        parts = _rebalance(G, parts, nparts, tm)          # training vertices first,
        parts = _rebalance(G, parts, nparts, ~tm)         # then the others
    return make_partition(A, parts, nparts, "metis-train", {"seed": seed, "constraints": 2})


def _rebalance(G, parts, nparts, movable, slack=1.10):
    """Move ``movable`` vertices from the fullest part to the emptiest until no part holds
    more than ``slack`` times its share of them (rounded up). Local, pure.

    Each round moves from the fullest part ``p`` to the emptiest ``q`` the
    vertices with the most neighbours in ``q`` less those in ``p`` (the cut
    grows least), as many as fit; the load gap shrinks every round.
    """
    parts = parts.copy()
    cap = int(np.ceil(slack * movable.sum() / nparts))
    for _ in range(4 * nparts):
        load = np.bincount(parts[movable], minlength=nparts)
        p, q = int(load.argmax()), int(load.argmin())
        if load[p] <= cap:
            break
        cand = np.flatnonzero(movable & (parts == p))
        rows = G[cand]
        gain = rows @ (parts == q).astype(np.int64) - rows @ (parts == p).astype(np.int64)
        k = int(min(load[p] - cap, cap - load[q])) or 1
        parts[cand[np.argsort(-gain, kind="stable")[:k]]] = q
    return parts
