"""The ``cupy`` backend slot: GPU arrays, kernels not implemented yet.

Registered so that :func:`spgnn.backends.backend_status` can report why it
is unusable.  :meth:`CupyBackend.unavailable_reason` never raises and never
imports cupy unless it is installed (importing cupy succeeds on machines
without a GPU, hence the ``cupy.is_available()`` gate).
"""

import importlib.util

from .base import Backend

__all__ = ["CupyBackend"]

_NOT_IMPLEMENTED = "GPU kernels are not implemented yet (tracked in the GPU backend issue)"


class CupyBackend(Backend):
    """CuPy (CUDA) backend placeholder; every kernel raises :class:`NotImplementedError`."""

    name = "cupy"

    @classmethod
    def unavailable_reason(cls):
        if importlib.util.find_spec("cupy") is None:
            return "cupy is not installed (pip install -e '.[gpu]')"
        try:
            import cupy

            usable = bool(cupy.is_available())
        except Exception as exc:  # a broken CUDA install must not break backend_status()
            return f"cupy is installed but failed to initialise ({type(exc).__name__}: {exc})"
        if not usable:
            return ("cupy is installed but no CUDA GPU/driver is usable "
                    "(cupy.is_available() is False)")
        return _NOT_IMPLEMENTED

    @property
    def xp(self):
        import cupy

        return cupy

    def to_host(self, x):
        return x.get() if hasattr(x, "get") else x

    def _missing(self, op):
        raise NotImplementedError(f"cupy backend: {op} is not implemented: {_NOT_IMPLEMENTED}")

    def spmm(self, a, x, semiring, out=None):
        self._missing("spmm")

    def spgemm_symbolic(self, a, b):
        self._missing("spgemm_symbolic")

    def spgemm_numeric(self, a, b, indptr, semiring):
        self._missing("spgemm_numeric")

    def sddmm(self, a, x, y, semiring):
        self._missing("sddmm")

    def extract_rows(self, a, rows):
        self._missing("extract_rows")

    def extract_cols(self, a, cols):
        self._missing("extract_cols")

    def transpose(self, a):
        self._missing("transpose")

    def sample_rows(self, indptr, indices, data, rows, keys, s, method, weighted):
        self._missing("sample_rows")

    def first_appearance(self, a, a_ptr, b, b_ptr, n):
        self._missing("first_appearance")

    def sort_rows_by_column(self, indptr, indices, data):
        self._missing("sort_rows_by_column")

    def relu(self, x):
        self._missing("relu")

    def relu_backward(self, dy, mask):
        self._missing("relu_backward")

    def dropout(self, x, p, base, rows, col0, ncols, out=None):
        self._missing("dropout")

    def dropout_csr(self, indptr, indices, data, p, base, rows, col0, ncols):
        self._missing("dropout_csr")
