"""``LocalCSR``: one rank's sparse block in compressed sparse row form.

The arrays belong to one backend (numpy arrays for ``numpy``/``numba``, CuPy
arrays for ``cupy``).  Indices are *local* to the block.  Column indices may
be unsorted and may contain duplicates; every kernel treats duplicates as
separate terms of the semiring sum, as scipy does for ``plus_times``.

Validation is split like scipy's ``check_format``: ``check(full=False)`` costs
O(1) (shapes, dtypes, lengths, end points), ``check(full=True)`` adds the
O(nnz) checks (indptr monotone, indices in range).
"""

import numpy as np

from ..errors import DTypeError, InvalidSparseStructure

__all__ = ["LocalCSR", "INDEX_DTYPES", "VALUE_DTYPES"]

INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
VALUE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class LocalCSR:
    """A CSR block: ``indptr`` (nrows+1), ``indices`` (nnz), ``data`` (nnz), ``shape``.

    Parameters
    ----------
    indptr, indices, data : arrays of one backend
        ``indptr`` and ``indices`` share one dtype, int32 or int64; ``data``
        is float32 or float64.
    shape : (int, int)
    check : {"cheap", "full", None}
        ``"cheap"`` (default) runs :meth:`check` with ``full=False``;
        ``None`` trusts the caller (kernels building outputs use it).
    """

    __slots__ = ("indptr", "indices", "data", "shape")

    def __init__(self, indptr, indices, data, shape, *, check="cheap"):
        self.indptr = indptr
        self.indices = indices
        self.data = data
        try:
            self.shape = (int(shape[0]), int(shape[1]))
        except (TypeError, IndexError, ValueError):
            raise InvalidSparseStructure(
                f"LocalCSR: shape must be a pair of ints, but got {shape!r}") from None
        if len(shape) != 2:
            raise InvalidSparseStructure(f"LocalCSR: shape must have 2 entries, but got {shape!r}")
        if check == "full":
            self.check(full=True)
        elif check == "cheap":
            self.check(full=False)
        elif check is not None:
            raise ValueError(f"LocalCSR: check must be 'cheap', 'full' or None, but got {check!r}")

    # -- construction -----------------------------------------------------
    @classmethod
    def from_scipy(cls, m, *, index_dtype=None, check="cheap"):
        """Wrap a scipy sparse matrix or array (converted to CSR, copied only when needed)."""
        import scipy.sparse as sp

        if not sp.issparse(m):
            raise TypeError(f"LocalCSR.from_scipy: expected a scipy sparse matrix, "
                            f"but got {type(m).__name__}")
        m = m.tocsr()
        idt = np.dtype(index_dtype) if index_dtype is not None else m.indices.dtype
        data = m.data
        if data.dtype not in VALUE_DTYPES:
            data = data.astype(np.float64)
        return cls(m.indptr.astype(idt, copy=False), m.indices.astype(idt, copy=False),
                   data, m.shape, check=check)

    @classmethod
    def empty(cls, shape, dtype=np.float64, index_dtype=np.int64):
        """An all-zero block of ``shape``."""
        return cls(np.zeros(int(shape[0]) + 1, dtype=index_dtype),
                   np.zeros(0, dtype=index_dtype), np.zeros(0, dtype=dtype), shape)

    # -- properties (never communicate) ----------------------------------
    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def index_dtype(self):
        return self.indices.dtype

    def __repr__(self):
        return (f"LocalCSR(shape={self.shape}, nnz={self.nnz}, dtype={self.dtype}, "
                f"index_dtype={self.index_dtype})")

    # -- validation --------------------------------------------------------
    def check(self, full: bool = False) -> "LocalCSR":
        """Raise :class:`InvalidSparseStructure` or :class:`DTypeError` if malformed.

        ``full=False`` is O(1); ``full=True`` adds the O(nnz) checks.  Local:
        no communication (distributed constructors agree on the result).
        """
        nrows, ncols = self.shape
        if nrows < 0 or ncols < 0:
            raise InvalidSparseStructure(f"LocalCSR: shape must be non-negative, but got {self.shape}")
        for name in ("indptr", "indices", "data"):
            arr = getattr(self, name)
            if getattr(arr, "ndim", None) != 1:
                raise InvalidSparseStructure(
                    f"LocalCSR: {name} must be a 1-D array, but got "
                    f"{type(arr).__name__} with ndim={getattr(arr, 'ndim', None)}")
        if self.indptr.dtype not in INDEX_DTYPES or self.indices.dtype not in INDEX_DTYPES:
            raise DTypeError(f"LocalCSR: indptr and indices must be int32 or int64, but got "
                             f"indptr {self.indptr.dtype} and indices {self.indices.dtype}")
        if self.indptr.dtype != self.indices.dtype:
            raise DTypeError(f"LocalCSR: indptr and indices must share one dtype, but got "
                             f"{self.indptr.dtype} and {self.indices.dtype}")
        if self.data.dtype not in VALUE_DTYPES:
            raise DTypeError(f"LocalCSR: data must be float32 or float64, but got {self.data.dtype}")
        if self.indptr.shape[0] != nrows + 1:
            raise InvalidSparseStructure(
                f"LocalCSR: indptr must have nrows+1={nrows + 1} entries, but got {self.indptr.shape[0]}")
        if self.indices.shape[0] != self.data.shape[0]:
            raise InvalidSparseStructure(
                f"LocalCSR: indices and data must have equal lengths, but got "
                f"{self.indices.shape[0]} and {self.data.shape[0]}")
        first, last = int(self.indptr[0]), int(self.indptr[-1])
        if first != 0:
            raise InvalidSparseStructure(f"LocalCSR: indptr[0] must be 0, but got {first}")
        if last != self.indices.shape[0]:
            raise InvalidSparseStructure(
                f"LocalCSR: indptr[-1] must equal nnz={self.indices.shape[0]}, but got {last}")
        if full:
            xp = _xp(self.indptr)
            if nrows and bool(xp.any(self.indptr[1:] < self.indptr[:-1])):
                row = int(xp.argmax(self.indptr[1:] < self.indptr[:-1]))
                raise InvalidSparseStructure(
                    f"LocalCSR: indptr must be non-decreasing, but indptr[{row + 1}]="
                    f"{int(self.indptr[row + 1])} < indptr[{row}]={int(self.indptr[row])}")
            if self.nnz:
                lo, hi = int(self.indices.min()), int(self.indices.max())
                if lo < 0 or hi >= ncols:
                    bad = lo if lo < 0 else hi
                    raise InvalidSparseStructure(
                        f"LocalCSR: column indices must lie in [0, {ncols}), but got {bad}")
        return self

    # -- conversion ----------------------------------------------------------
    def to_scipy(self):
        """Return a ``scipy.sparse.csr_array`` sharing host memory (copies from a GPU)."""
        import scipy.sparse as sp

        host = [_to_host(a) for a in (self.data, self.indices, self.indptr)]
        return sp.csr_array(tuple(host), shape=self.shape)

    def toarray(self, fill=0.0):
        """Dense host array; duplicates are summed (plus_times semantics)."""
        return self.to_scipy().toarray()

    def astype(self, dtype=None, index_dtype=None) -> "LocalCSR":
        """Copy with other value and/or index dtypes."""
        idt = index_dtype or self.index_dtype
        return LocalCSR(self.indptr.astype(idt), self.indices.astype(idt),
                        self.data.astype(dtype or self.dtype), self.shape)

    def copy(self) -> "LocalCSR":
        return LocalCSR(self.indptr.copy(), self.indices.copy(), self.data.copy(), self.shape,
                        check=None)


def _xp(arr):
    mod = type(arr).__module__
    if mod.startswith("cupy"):
        import cupy

        return cupy
    return np


def _to_host(arr):
    return arr.get() if hasattr(arr, "get") and not isinstance(arr, np.ndarray) else np.asarray(arr)
