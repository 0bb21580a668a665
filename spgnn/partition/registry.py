"""The one list of partitioner names, :data:`PARTITIONERS`, and the one entry point."""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from ..layout import block_offsets
from .balanced import balanced_partition
from .ldg import ldg_partition
from .metis import metis_partition
from .result import Partition
from .simple import block_partition, random_partition
from .stats import PartitionStats

__all__ = ["PARTITIONERS", "BALANCES_TRAINING", "PartitionOrder", "partition_graph"]

#: Every partitioner a command line or :class:`spgnn.gnn.DistGraph` accepts, by
#: name.  Each is called as ``function(A, nparts, seed=seed)`` and returns a
#: :class:`Partition`.  ``"none"`` keeps the input order in even contiguous
#: blocks (:func:`block_partition`).  Adding a partitioner is adding it here:
#: the ``--partition`` choices and :func:`partition_graph` follow.  A
#: partitioner named in :data:`BALANCES_TRAINING` also takes ``train_mask=``.
PARTITIONERS: dict[str, Callable[..., Partition]] = {
    "none": block_partition,
    "random": random_partition,
    "metis": metis_partition,
    "balanced": balanced_partition,
    "ldg": ldg_partition,
}

#: The partitioners that also balance training vertices when :func:`partition_graph`
#: is given a ``train_mask`` (``"metis"``: two balance constraints, DistGNN-MB's
#: partition for partitioned minibatch training); the others ignore the mask.
BALANCES_TRAINING = frozenset({"metis"})


class PartitionOrder(NamedTuple):
    """What :func:`partition_graph` returns; unpacks as ``perm, offsets, stats``.

    Attributes
    ----------
    perm : ndarray of int64, shape (n,), or None
        The new order, ``perm[new] = old`` (vertices sorted by part); None
        for ``"none"``: keep the input order.
    offsets : ndarray of int64, shape (nparts + 1,)
        Block boundaries in the new order (``Layout("row",
        row_splits=offsets)``).
    stats : PartitionStats or None
        The partition's exact statistics; None for ``"none"``, which looks
        at nothing but the vertex count (:func:`block_partition` computes them).
    """

    perm: np.ndarray | None
    offsets: np.ndarray
    stats: PartitionStats | None


def partition_graph(adj, method: str, nparts: int, seed: int = 0, *,
                    train_mask=None) -> PartitionOrder:
    """Partition the rows of ``adj`` into ``nparts`` blocks with the partitioner ``method``.

    Parameters
    ----------
    adj : (n, n) sparse matrix
        Only its pattern matters (see each partitioner).
    method : str
        A key of :data:`PARTITIONERS`.
    nparts : int
    seed : int
        Passed to the partitioner (``"none"`` ignores it).
    train_mask : bool (n,), optional
        Training vertices, balanced over the parts too by the partitioners
        of :data:`BALANCES_TRAINING` (ignored by the others).

    Returns
    -------
    PartitionOrder
        ``(perm, offsets, stats)``.  ``"none"`` costs nothing: no
        permutation (``perm`` None), the even blocks of
        :func:`spgnn.layout.block_offsets`, no statistics.

    Raises
    ------
    ValueError
        For a name not in :data:`PARTITIONERS`.
    """
    if method not in PARTITIONERS:
        raise ValueError(f"unknown partitioner {method!r}; expected one of {tuple(PARTITIONERS)}")
    if method == "none":
        return PartitionOrder(None, np.asarray(block_offsets(adj.shape[0], nparts), dtype=np.int64),
                              None)
    extra = {} if train_mask is None or method not in BALANCES_TRAINING else \
        {"train_mask": train_mask}
    p = PARTITIONERS[method](adj, nparts, seed=seed, **extra)
    return PartitionOrder(p.perm, np.asarray(p.offsets, dtype=np.int64), p.stats)
