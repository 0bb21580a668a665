"""Graph preparation shared by the ``spmm`` and ``plan`` commands and the benchmarks."""

import numpy as np
import scipy.sparse as sp

PARTITIONERS = ("none", "random", "metis", "balanced")


def load_adjacency(spec):
    """The graph of a path or generator spec, symmetrised, without self-loops, float32 CSR."""
    from spgnn.io import load_graph

    g = load_graph(spec).symmetrize().without_self_loops()
    return sp.csr_array(g.adj, dtype=np.float32), g.name


def partition_order(adj, method, nparts, seed=0):
    """``(perm, offsets, stats)`` for a row partition into ``nparts`` blocks.

    ``perm`` is ``None`` for ``"none"`` (contiguous blocks of the given
    order); otherwise vertices are renumbered part by part and ``offsets``
    are the block boundaries in the new order.
    """
    from spgnn import partition as part

    if method == "none":
        p = part.block_partition(adj, nparts)
    elif method == "random":
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
