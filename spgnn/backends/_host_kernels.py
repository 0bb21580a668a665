"""Host kernels without a numpy/scipy reference, shared by the ``numpy`` and ``numba`` backends.

Keyed sampling without replacement (Floyd, Efraimidis-Spirakis, successive
inverse transform; :mod:`spgnn._kernels.numba.sample`) has no numpy or scipy
counterpart: a second, vectorised implementation would be a second
algorithm to keep bit-identical, not a reference.  Both CPU backends
therefore run these Numba kernels (importing numba on first use); a device
backend implements its own.  Results do not depend on the thread count.
"""

import numpy as np

from ..errors import BackendUnavailable
from . import _validate as V

__all__ = ["sample_rows"]

_K = {}


def _kernels():
    if not _K:
        try:
            import numba
        except ImportError:
            raise BackendUnavailable("sample_rows: the CPU backends sample with Numba kernels, "
                                     "and numba is not installed (pip install numba)") from None
        from .._kernels.numba import sample

        _K.update(numba=numba, sample=sample)
    return _K


def sample_rows(indptr, indices, data, rows, keys, s, method, weighted):
    """``Backend.sample_rows`` (semantics: :mod:`spgnn.backends.base`) on host arrays. Local."""
    code = V.check_sample_method(method)
    K = _kernels()
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    data = np.ascontiguousarray(data, dtype=np.float64)
    nr = rows.shape[0]
    counts = np.empty(nr, dtype=np.int64)
    K["sample"].sample_counts(indptr, data, rows, int(s), bool(weighted), counts)
    out_indptr = np.zeros(nr + 1, dtype=np.int64)
    np.cumsum(counts, out=out_indptr[1:])
    pos = np.empty(int(out_indptr[-1]), dtype=np.int64)
    nparts = max(1, min(nr, 4 * K["numba"].get_num_threads()))
    K["sample"].sample_fill(indptr, indices, data, rows, keys, int(s), code, bool(weighted),
                            nparts, out_indptr, pos)
    return out_indptr, pos
