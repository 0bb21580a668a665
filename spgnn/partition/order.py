"""Vertex orders as the command lines use them: from part ids, applied to A or a graph, in files."""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from ._common import perm_offsets

__all__ = ["order_from_parts", "permute", "permute_graph", "local_view", "read_partition_file",
           "write_partition_file"]


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


def permute_graph(graph, perm):
    """The same :class:`spgnn.io.Graph` with new vertex ``i`` = old vertex ``perm[i]``. Local, pure.

    :func:`permute` for the adjacency; features, labels, masks and node ids
    follow the vertices.
    """
    def take(x):
        return None if x is None else x[perm]
    return dataclasses.replace(graph, adj=permute(graph.adj, perm), features=take(graph.features),
                               labels=take(graph.labels), train_mask=take(graph.train_mask),
                               val_mask=take(graph.val_mask), test_mask=take(graph.test_mask),
                               node_ids=perm if graph.node_ids is None else graph.node_ids[perm])


def local_view(a, lo, hi):
    """``A`` with only rows ``lo:hi`` kept (same shape): a rank's one-hop view. Local, pure."""
    a = sp.csr_array(a)
    indptr = np.asarray(a.indptr, dtype=np.int64)
    n = a.shape[0]
    new_ptr = np.zeros(n + 1, dtype=np.int64)
    new_ptr[lo + 1:hi + 1] = indptr[lo + 1:hi + 1] - indptr[lo]
    new_ptr[hi + 1:] = new_ptr[hi]
    s, e = indptr[lo], indptr[hi]
    return sp.csr_array((a.data[s:e], a.indices[s:e], new_ptr), shape=a.shape)


def read_partition_file(path, n):
    """Part ids, one integer per line (as ``plan --save-partition`` writes them)."""
    parts = np.loadtxt(path, dtype=np.int64, ndmin=1)
    if parts.size != n:
        raise ValueError(f"{path}: expected {n} part ids (one per vertex), but got {parts.size}")
    return parts


def write_partition_file(path, parts):
    """Write one part id per line (what :func:`read_partition_file` reads)."""
    np.savetxt(path, np.asarray(parts, dtype=np.int64), fmt="%d")
