"""The backend contract: array module plus local kernels.

A backend owns one array type (numpy or CuPy) and implements every local
sparse operation on :class:`~spgnn.local.csr.LocalCSR` blocks.  It knows no
MPI and no distribution: :mod:`spgnn.core` composes these kernels with the
communicator.  ``numpy`` (scipy) is the reference the others must equal.

Semantics shared by all backends (tested against the numpy backend):

``spmm(a, x, semiring)``
    Dense ``y`` of shape ``(a.shape[0], x.shape[1])`` with
    ``y[i, j] = (+)_k a[i, k] (x) x[k, j]`` over the structural nonzeros of
    row ``i`` (duplicates are separate terms).  Rows with no nonzero hold the
    additive identity; ``row_mean`` semirings divide by the row's nonzero
    count (empty rows give 0).  ``y.dtype`` is the result type of ``a.data``
    and ``x``.
``spgemm(a, b, semiring)``
    ``LocalCSR`` of shape ``(a.shape[0], b.shape[1])`` whose pattern is the
    structural product (no numerical zeros dropped, GraphBLAS semantics),
    computed by :meth:`spgemm_symbolic` (row counts) then
    :meth:`spgemm_numeric`.  Output indices are sorted, without duplicates.
``sddmm(a, x, y, semiring)``
    ``LocalCSR`` with ``a``'s pattern (same order) and
    ``data[e] = a.data[e] (x) ((+)_k x[i, k] (x) y[j, k])`` for nonzero
    ``e = (i, j)``.
``extract_rows(a, rows)`` / ``extract_cols(a, cols)``
    ``a[rows, :]`` and ``a[:, cols]`` as scipy computes them: any order,
    repeats allowed; columns are renumbered to their position in ``cols``.
``transpose(a)``
    ``a.T`` in CSR with sorted indices.
``matmul(a, b)``
    Dense ``a @ b`` (2-D arrays of this backend), exactly numpy's product,
    in a new array laid out for the kernels that read it next.
"""

from abc import ABC, abstractmethod

import numpy as np

from ..local.alloc import empty
from . import _validate as V

__all__ = ["Backend"]


class Backend(ABC):
    """Abstract backend.

    The built-in subclasses are listed by module path in
    :data:`spgnn.backends.BUILTIN_BACKENDS`; a third-party subclass is added
    with :func:`spgnn.backends.register_backend`.
    """

    name: str = ""

    # -- availability ------------------------------------------------------
    @classmethod
    def unavailable_reason(cls):
        """``None`` when usable here, otherwise a one-line reason with a hint."""
        return None

    @classmethod
    def is_available(cls) -> bool:
        return cls.unavailable_reason() is None

    # -- arrays --------------------------------------------------------------
    @property
    @abstractmethod
    def xp(self):
        """The array module (numpy or cupy)."""

    def asarray(self, x, dtype=None):
        return self.xp.asarray(x, dtype=dtype)

    def to_host(self, x):
        return x

    def from_host(self, x):
        return self.xp.asarray(x)

    # -- dense ----------------------------------------------------------------
    def matmul(self, a, b):
        """Dense ``a @ b`` of two 2-D host arrays into a new 64-byte-aligned array. Local.

        Why not ``a @ b``: the product is usually the ``x`` of the next SpMM
        (a GCN layer's ``H W``), which gathers its rows, and numpy aligns
        only to 16 bytes, so a 64-byte row may span two cache lines (SpMM
        1.04-1.28x slower at f = 16 and 64, kernels/README.md).  Same
        values as ``a @ b`` (the same BLAS call, another output address).
        A device backend overrides it.
        """
        out = empty((a.shape[0], b.shape[1]), np.result_type(a, b))
        return np.matmul(a, b, out=out)

    # -- kernels --------------------------------------------------------------
    @abstractmethod
    def spmm(self, a, x, semiring, out=None): ...

    @abstractmethod
    def spgemm_symbolic(self, a, b):
        """Return the output ``indptr`` (int64, length ``a.shape[0] + 1``)."""

    @abstractmethod
    def spgemm_numeric(self, a, b, indptr, semiring): ...

    def spgemm(self, a, b, semiring):
        V.check_spgemm(a, b, "spgemm")      # errors name the call the user made
        return self.spgemm_numeric(a, b, self.spgemm_symbolic(a, b), semiring)

    @abstractmethod
    def sddmm(self, a, x, y, semiring): ...

    @abstractmethod
    def extract_rows(self, a, rows): ...

    @abstractmethod
    def extract_cols(self, a, cols): ...

    @abstractmethod
    def transpose(self, a): ...

    def __repr__(self):
        return f"<spgnn backend {self.name!r}>"
