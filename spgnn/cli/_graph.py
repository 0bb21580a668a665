"""Graph preparation shared by the ``spmm`` and ``plan`` commands and the benchmarks."""

import numpy as np
import scipy.sparse as sp

PARTITIONERS = ("none", "random", "metis", "balanced")


def partition_order(adj, method, nparts, seed=0):
    """``(perm, offsets, stats)`` for a row partition into ``nparts`` blocks.

    ``perm`` is ``None`` for ``"none"`` (contiguous blocks of the given
    order); otherwise vertices are renumbered part by part and ``offsets``
    are the block boundaries in the new order.
    """
    if method == "none":
        from spgnn.layout import block_offsets

        return None, np.asarray(block_offsets(adj.shape[0], nparts), dtype=np.int64), None
    from spgnn import partition as part

    if method == "random":
        p = part.random_partition(adj, nparts, seed=seed)
    elif method == "metis":
        p = part.metis_partition(adj, nparts, seed=seed)
    elif method == "balanced":
        p = part.balanced_partition(adj, nparts, seed=seed)
    else:
        raise ValueError(f"unknown partitioner {method!r}; expected one of {PARTITIONERS}")
    perm = None if method == "none" else p.perm
    return perm, np.asarray(p.offsets, dtype=np.int64), p.stats


def permute(adj, perm):
    """``P A Pᵀ`` for a new order ``perm`` (new vertex i is old vertex perm[i])."""
    if perm is None:
        return adj
    return sp.csr_array(adj[perm][:, perm])


def order_from_parts(parts, nparts):
    """``(perm, offsets)`` from a part id per vertex: vertices sorted by part, stably."""
    parts = np.asarray(parts, dtype=np.int64)
    if parts.size and (parts.min() < 0 or parts.max() >= nparts):
        raise ValueError(f"partition ids must lie in [0, {nparts}), but got "
                         f"[{parts.min()}, {parts.max()}]")
    perm = np.argsort(parts, kind="stable")
    offsets = np.concatenate([[0], np.cumsum(np.bincount(parts, minlength=nparts))])
    return perm, offsets.astype(np.int64)


def read_partition_file(path, n):
    """Part ids, one integer per line (as ``plan --save-partition`` writes them)."""
    parts = np.loadtxt(path, dtype=np.int64, ndmin=1)
    if parts.size != n:
        raise ValueError(f"{path}: expected {n} part ids (one per vertex), but got {parts.size}")
    return parts


def write_partition_file(path, parts):
    np.savetxt(path, np.asarray(parts, dtype=np.int64), fmt="%d")
