"""Partition a graph and write it as shards (:mod:`spgnn.io.shards`): ``spgnn partition``'s library side."""

from __future__ import annotations

from ..io.shards import write_shards
from .registry import PARTITIONERS, partition_graph

__all__ = ["partition_to_shards"]


def partition_to_shards(graph, directory, parts, method="none", seed=0, *, source=None,
                        progress=None) -> dict:
    """Partition ``graph`` into ``parts`` parts with ``method`` and write the shards. Local, one process.

    The order is :func:`partition_graph` of the pattern
    :class:`spgnn.gnn.DistGraph` partitions (:func:`spgnn.io.shards.partition_pattern`),
    so ``DistGraph.from_shards`` on ``parts`` ranks equals
    ``DistGraph.from_graph(graph, ..., partition=method, seed=seed)`` bit for
    bit.  An interrupted write resumes (the saved order is reused); complete
    shards of the same graph and partition are returned unchanged.  Returns
    the manifest.

    Raises ValueError for an unknown ``method``, a bad ``parts``; ShardError
    for a ``directory`` that holds something else.
    """
    if method not in PARTITIONERS:
        raise ValueError(f"partition: unknown method {method!r}; expected one of "
                         f"{tuple(PARTITIONERS)}")

    def order(pattern):
        perm, offsets, _ = partition_graph(pattern, method, int(parts), seed)
        return perm, offsets

    return write_shards(graph, directory, parts, order, method=method, seed=seed, source=source,
                        progress=progress)
