"""Plexus's double permutation (independent row and column orders) and its block balance."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import DimensionMismatch
from ..layout import block_offsets
from ._common import inverse

__all__ = ["DoublePermutation", "double_permutation", "block_nnz_imbalance"]


@dataclass
class DoublePermutation:
    """Independent row and column permutations ``P_r``, ``P_c`` (Plexus §4.1).

    Layers alternate between ``A1 = P_r A P_cᵀ`` and ``A2 = P_c A P_rᵀ``:
    ``F1 = σ(A1 (P_c F0) W0)`` is in ``P_r`` order, ``F2 = σ(A2 F1 W1)`` in
    ``P_c`` order, and so on (period 2).  With ``P X = X[perm]``:
    ``A1 = A[row_perm][:, col_perm]``, ``A2 = A[col_perm][:, row_perm]``.
    A symmetric permutation keeps the diagonal (self-loops) in the diagonal
    blocks; independent permutations spread every entry uniformly, so each
    of the ``p × p`` blocks gets ``≈ nnz / p²`` entries.

    Attributes
    ----------
    row_perm, col_perm : ndarray of int64
        ``P_r`` and ``P_c`` (new -> old).
    """

    row_perm: np.ndarray
    col_perm: np.ndarray

    def _check(self, A, what):
        n = self.row_perm.size
        if len(A.shape) != 2 or A.shape != (n, n):
            raise DimensionMismatch(f"DoublePermutation.{what}: A must have shape ({n}, {n}), "
                                    f"but got A.shape={A.shape}")
        return sp.csr_array(A)

    def apply_rc(self, A) -> sp.csr_array:
        """``P_r A P_cᵀ`` (odd layers: input in ``P_c`` order, output in ``P_r`` order)."""
        A = self._check(A, "apply_rc")
        return A[self.row_perm][:, self.col_perm].tocsr()

    def apply_cr(self, A) -> sp.csr_array:
        """``P_c A P_rᵀ`` (even layers: input in ``P_r`` order, output in ``P_c`` order)."""
        A = self._check(A, "apply_cr")
        return A[self.col_perm][:, self.row_perm].tocsr()

    def matrices(self, A) -> tuple:
        """``(P_r A P_cᵀ, P_c A P_rᵀ)``; layer ``l`` (from 0) uses element ``l % 2``."""
        return self.apply_rc(A), self.apply_cr(A)

    def permute_input(self, X):
        """``P_c X``: the first layer's input features."""
        return X[self.col_perm]

    def output_perm(self, num_layers: int) -> np.ndarray:
        """Order of the output after ``num_layers`` layers: ``P_r`` if odd, ``P_c`` if even."""
        return self.row_perm if num_layers % 2 else self.col_perm

    def unpermute_output(self, Y, num_layers: int):
        """Back to the original order after ``num_layers`` alternating layers."""
        return Y[inverse(self.output_perm(num_layers))]


def double_permutation(A, seed: int = 0) -> DoublePermutation:
    """Plexus's double permutation: independent random ``P_r`` and ``P_c``.

    Parameters
    ----------
    A : (n, n) sparse matrix
        Only its size is used (the permutations do not depend on the graph,
        so one serves every process count).
    seed : int
        ``numpy.random.default_rng(seed)`` draws ``P_r`` then ``P_c``.

    Returns
    -------
    DoublePermutation
    """
    if len(A.shape) != 2 or A.shape[0] != A.shape[1]:
        raise DimensionMismatch(f"double_permutation: A must be square (n, n), "
                                f"but got A.shape={A.shape}")
    n = A.shape[0]
    rng = np.random.default_rng(seed)
    row = rng.permutation(n).astype(np.int64)
    col = rng.permutation(n).astype(np.int64)
    if n > 1 and np.array_equal(row, col):
        # a coincidence for tiny n; equal permutations would be a single (symmetric) one
        col = np.roll(col, 1)
    return DoublePermutation(row, col)


def block_nnz_imbalance(A, p: int, q: int | None = None) -> float:
    """``max / mean`` of the stored entries over a ``p × q`` grid of equal blocks.

    The load-balance measure of Plexus Table 5.1 (1.0 is perfect balance).
    """
    q = p if q is None else q
    A = sp.coo_array(A)
    m, n = A.shape
    if p < 1 or q < 1:
        raise ValueError(f"block_nnz_imbalance: p and q must be >= 1, but got p={p}, q={q}")
    # block of row i is the one whose block_bounds range holds it
    ri = np.searchsorted(np.array(block_offsets(m, p)[:-1]), A.row, side="right") - 1
    ci = np.searchsorted(np.array(block_offsets(n, q)[:-1]), A.col, side="right") - 1
    counts = np.bincount(ri * q + ci, minlength=p * q)
    mean = counts.mean()
    return float(counts.max() / mean) if mean > 0 else 1.0
