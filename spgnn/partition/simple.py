"""Partitioners that ignore the graph: contiguous blocks and balanced random parts."""

from __future__ import annotations

import numpy as np

from ._common import as_pattern, check_nparts
from .result import Partition, make_partition

__all__ = ["block_partition", "random_partition", "random_parts"]


def _even_sizes(n: int, nparts: int) -> np.ndarray:
    """Part sizes of :func:`spgnn.layout.block_bounds`: the first ``n % nparts`` get one more."""
    q, r = divmod(n, nparts)
    sizes = np.full(nparts, q, dtype=np.int64)
    sizes[:r] += 1
    return sizes


def block_partition(A, nparts: int, *, seed: int = 0) -> Partition:
    """Contiguous blocks of the natural order (:func:`spgnn.layout.block_bounds` sizes).

    The permutation is the identity; part sizes differ by at most one.
    ``seed`` is ignored: it is accepted so that every entry of
    :data:`~spgnn.partition.PARTITIONERS` takes the same arguments.
    """
    nparts = check_nparts(nparts, "block_partition")
    A = as_pattern(A, "block_partition")
    parts = np.repeat(np.arange(nparts, dtype=np.int64), _even_sizes(A.shape[0], nparts))
    return make_partition(A, parts, nparts, "block")


def random_partition(A, nparts: int, seed: int = 0) -> Partition:
    """Balanced random partition: a random permutation cut into equal blocks.

    Part sizes differ by at most one; deterministic given ``seed``.
    """
    nparts = check_nparts(nparts, "random_partition")
    A = as_pattern(A, "random_partition")
    return make_partition(A, random_parts(A.shape[0], nparts, seed), nparts, "random",
                          {"seed": seed})


def random_parts(n: int, nparts: int, seed: int = 0) -> np.ndarray:
    """The part ids of :func:`random_partition` for ``n`` vertices, without the graph. Local.

    What the streaming path of ``spgnn partition`` uses (it never holds the
    graph); int64 array (n,).
    """
    rng = np.random.default_rng(seed)
    parts = np.empty(n, dtype=np.int64)
    parts[rng.permutation(n)] = np.repeat(np.arange(nparts, dtype=np.int64),
                                          _even_sizes(n, nparts))
    return parts
