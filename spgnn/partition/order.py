"""Vertex orders as the command lines use them: from part ids, applied to A, in files."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._common import perm_offsets

__all__ = ["order_from_parts", "permute", "read_partition_file", "write_partition_file"]


def order_from_parts(parts, nparts):
    """``(perm, offsets)`` from a part id per vertex: vertices sorted by part, stably."""
    parts = np.asarray(parts, dtype=np.int64)
    if parts.size and (parts.min() < 0 or parts.max() >= nparts):
        raise ValueError(f"partition ids must lie in [0, {nparts}), but got "
                         f"[{parts.min()}, {parts.max()}]")
    return perm_offsets(parts, nparts)


def permute(adj, perm):
    """``P A Pᵀ`` for a new order ``perm`` (new vertex i is old vertex perm[i]); ``adj`` itself
    when ``perm`` is None."""
    if perm is None:
        return adj
    return sp.csr_array(adj[perm][:, perm])


def read_partition_file(path, n):
    """Part ids, one integer per line (as ``plan --save-partition`` writes them)."""
    parts = np.loadtxt(path, dtype=np.int64, ndmin=1)
    if parts.size != n:
        raise ValueError(f"{path}: expected {n} part ids (one per vertex), but got {parts.size}")
    return parts


def write_partition_file(path, parts):
    """Write one part id per line (what :func:`read_partition_file` reads)."""
    np.savetxt(path, np.asarray(parts, dtype=np.int64), fmt="%d")
