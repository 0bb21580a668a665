"""Input checks and small array helpers shared by the partitioners (package-private)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import DimensionMismatch, InvalidSparseStructure


def as_pattern(A, what: str) -> sp.csr_array:
    """Square CSR pattern of ``A`` (int8 ones, no explicit zeros, no duplicates)."""
    if not (sp.issparse(A) or isinstance(A, np.ndarray)):
        raise InvalidSparseStructure(f"{what}: A must be a scipy sparse matrix/array or a 2-D "
                                     f"numpy array, but got {type(A).__name__}")
    if len(A.shape) != 2 or A.shape[0] != A.shape[1]:
        raise DimensionMismatch(f"{what}: A must be square (n, n), but got A.shape={A.shape}")
    A = sp.csr_array(A, copy=True)
    A.eliminate_zeros()          # explicit zeros move no data
    A.sum_duplicates()
    A.sort_indices()
    A.data = np.ones(A.nnz, dtype=np.int8)
    return A


def check_nparts(nparts, what: str) -> int:
    if isinstance(nparts, (bool, np.bool_)) or not isinstance(nparts, (int, np.integer)):
        raise TypeError(f"{what}: nparts must be an int, but got {type(nparts).__name__}")
    if nparts < 1:
        raise ValueError(f"{what}: nparts must be >= 1, but got nparts={nparts}")
    return int(nparts)


def check_parts(parts, n: int, nparts: int, what: str) -> np.ndarray:
    parts = np.asarray(parts)
    if parts.ndim != 1 or parts.shape[0] != n:
        raise DimensionMismatch(f"{what}: parts must have one entry per vertex, shape ({n},), "
                                f"but got shape {parts.shape}")
    if parts.size and not np.issubdtype(parts.dtype, np.integer):
        raise TypeError(f"{what}: parts must hold integers, but got dtype {parts.dtype}")
    parts = parts.astype(np.int64, copy=False)
    if parts.size and (parts.min() < 0 or parts.max() >= nparts):
        bad = int(parts.min()) if parts.min() < 0 else int(parts.max())
        raise ValueError(f"{what}: part ids must lie in [0, {nparts}), but got {bad}")
    return parts


def perm_offsets(parts: np.ndarray, nparts: int):
    """``(perm, offsets)``: vertices stably sorted by part, and the block boundaries."""
    perm = np.argsort(parts, kind="stable").astype(np.int64)
    offsets = np.zeros(nparts + 1, dtype=np.int64)
    np.cumsum(np.bincount(parts, minlength=nparts), out=offsets[1:])
    return perm, offsets


def inverse(perm: np.ndarray) -> np.ndarray:
    """``inv[perm[i]] = i``."""
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size, dtype=perm.dtype)
    return inv
