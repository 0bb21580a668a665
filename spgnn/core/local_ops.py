"""Local (single-rank) sparse operations dispatched to a backend.

Thin wrappers so that user code can call ``spgnn.local_ops.spmm(A, X)`` on
:class:`LocalCSR` blocks (or scipy matrices) without naming a backend.  No
communication.
"""

import scipy.sparse as sp

from ..backends import get_backend
from ..local.csr import LocalCSR
from ..local.semiring import get_semiring, plus_times

__all__ = ["spmm", "spgemm", "sddmm", "extract_rows", "extract_cols", "transpose"]


def _csr(a):
    return LocalCSR.from_scipy(a) if sp.issparse(a) else a


def spmm(a, x, semiring=plus_times, *, backend=None):
    """Dense ``a (+).(x) x``; see :class:`spgnn.backends.base.Backend`."""
    return get_backend(backend).spmm(_csr(a), x, get_semiring(semiring))


def spgemm(a, b, semiring=plus_times, *, backend=None):
    """Sparse ``a (+).(x) b`` (symbolic then numeric pass)."""
    return get_backend(backend).spgemm(_csr(a), _csr(b), get_semiring(semiring))


def sddmm(a, x, y, semiring=plus_times, *, backend=None):
    """``a`` sampled at its pattern by ``x @ y.T`` under the semiring."""
    return get_backend(backend).sddmm(_csr(a), x, y, get_semiring(semiring))


def extract_rows(a, rows, *, backend=None):
    """``a[rows, :]`` (any order, repeats, negative and boolean selectors as scipy). Local."""
    return get_backend(backend).extract_rows(_csr(a), rows)


def extract_cols(a, cols, *, backend=None):
    """``a[:, cols]``, columns renumbered to their position in ``cols``. Local."""
    return get_backend(backend).extract_cols(_csr(a), cols)


def transpose(a, *, backend=None):
    """``a.T`` in CSR: indices sorted, duplicates kept in storage order. Local."""
    return get_backend(backend).transpose(_csr(a))
