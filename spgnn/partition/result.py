"""The result of every partitioner: :class:`Partition`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import DimensionMismatch
from ..layout import Layout
from ._common import inverse, perm_offsets
from .stats import PartitionStats, stats_of_pattern

__all__ = ["Partition"]


@dataclass
class Partition:
    """A k-way vertex partition with its contiguous-block permutation.

    Attributes
    ----------
    parts : ndarray of int64, shape (n,)
        Part id of every (original) vertex.
    nparts : int
    perm : ndarray of int64, shape (n,)
        New order: ``perm[new] = old``, vertices sorted by part (stable, so
        each block keeps the original relative order).
    offsets : ndarray of int64, shape (nparts + 1,)
        Block boundaries in the permuted order: part ``i`` is
        ``perm[offsets[i]:offsets[i+1]]``.  ``Layout("row",
        row_splits=offsets)`` places the permuted matrix.
    stats : PartitionStats
        Statistics for ``Y = A X`` with this partition.
    method : str
        Which partitioner made it.
    info : dict
        Partitioner-specific details (time, passes, moves, ...).
    """

    parts: np.ndarray
    nparts: int
    perm: np.ndarray
    offsets: np.ndarray
    stats: PartitionStats
    method: str = ""
    info: dict = None

    @property
    def inverse_perm(self) -> np.ndarray:
        """``inverse_perm[old] = new`` (undoes :meth:`permute_rows`: ``Y[inverse_perm]``)."""
        return inverse(self.perm)

    def apply(self, A) -> sp.csr_array:
        """``P A Pᵀ`` as a CSR array: rows and columns in the partition order."""
        n = self.perm.size
        if len(A.shape) != 2 or A.shape != (n, n):
            raise DimensionMismatch(f"Partition.apply: A must have shape ({n}, {n}), "
                                    f"but got A.shape={A.shape}")
        A = sp.csr_array(A)
        return A[self.perm][:, self.perm].tocsr()

    def permute_rows(self, X):
        """``P X = X[perm]``: rows of a dense (or sparse) operand in partition order."""
        n = self.perm.size
        if X.shape[0] != n:
            raise DimensionMismatch(f"Partition.permute_rows: X must have {n} rows, "
                                    f"but got X.shape={X.shape}")
        return X[self.perm]

    def unpermute_rows(self, Y):
        """``Pᵀ Y``: back to the original vertex order."""
        n = self.perm.size
        if Y.shape[0] != n:
            raise DimensionMismatch(f"Partition.unpermute_rows: Y must have {n} rows, "
                                    f"but got Y.shape={Y.shape}")
        return Y[self.inverse_perm]

    def layout(self, axis: str = "row"):
        """``Layout(axis, row_splits=offsets)`` for the permuted matrix."""
        return Layout(axis, row_splits=tuple(int(o) for o in self.offsets))


def make_partition(A: sp.csr_array, parts: np.ndarray, nparts: int, method: str,
                   info=None) -> Partition:
    """The :class:`Partition` of ``parts`` on the checked pattern ``A`` (statistics included)."""
    parts = np.ascontiguousarray(parts, dtype=np.int64)
    perm, offsets = perm_offsets(parts, nparts)
    return Partition(parts=parts, nparts=nparts, perm=perm, offsets=offsets,
                     stats=stats_of_pattern(A, parts, nparts), method=method,
                     info=dict(info or {}))
