"""SpGEMM, transpose, column extraction, sampling and de-duplication CUDA kernels on the host build.

The ``cupy`` backend's own code (:meth:`CupyBackend.host_emulated`: numpy
arrays, the g++ build of the same ``.cu`` text) against scipy and the numba
backend, under Hypothesis: 0-sized and empty rows/columns, duplicates,
unsorted indices, int32/int64, float32/float64.  Patterns, positions and ids
must be equal exactly; SpGEMM values to rounding (FMA contraction on a GPU),
and exactly for the semirings without rounding (min/max with first/second/
pair).  Sampling and de-duplication are bit for bit.  Examples are few (each
emulated CUDA thread is an OS thread); libraries are built once and cached.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from spgnn.errors import InvalidSparseStructure
from spgnn.local.semiring import SEMIRINGS
from spgnn.testing.strategies import build_csr, csr_params


def _close(got, want, dtype):
    tol = 2e-4 if np.dtype(dtype) == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


def _same_csr(got, want, exact=True):
    assert got.shape == want.shape
    assert got.indptr.dtype == want.indptr.dtype and got.indices.dtype == want.indices.dtype
    assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
    assert got.data.dtype == want.data.dtype
    if exact:
        assert got.data.tobytes() == want.data.tobytes()
    else:
        _close(got.data, want.data, want.data.dtype)


@settings(max_examples=6, deadline=None)
@given(pa=csr_params(max_dim=14), nb=st.integers(0, 14), sb=st.integers(0, 2**32 - 1),
       density=st.sampled_from([0.0, 0.2, 0.7]), semiring=st.sampled_from(sorted(SEMIRINGS)))
def test_spgemm_equals_numba(emulated, reference, pa, nb, sb, density, semiring):
    a, s = build_csr(**pa)
    b, t = build_csr((a.shape[1], nb), density, sb, index_dtype=pa["index_dtype"],
                     value_dtype=pa["value_dtype"], unsorted=True, duplicates=True)
    got = emulated.spgemm(a, b, semiring)
    want = reference.spgemm(a, b, semiring)
    _same_csr(got, want, exact=False)
    assert np.array_equal(np.asarray(emulated.spgemm_symbolic(a, b)), want.indptr)
    if semiring == "plus_times":
        _close(sp.csr_array((got.data, got.indices, got.indptr), shape=got.shape).toarray(),
               (s @ t).toarray(), got.data.dtype)


def test_spgemm_exact_semirings_and_long_rows(emulated, reference):
    """Rows of B longer than one 32-entry chunk, duplicates inside a chunk; bit-equal where
    no rounding can differ (min/max over first/second/pair/plus of integer values)."""
    for idt in (np.int32, np.int64):
        a, _ = build_csr((5, 6), 0.8, 3, index_dtype=idt, duplicates=True, unsorted=True,
                         integer_values=True)
        b, _ = build_csr((6, 90), 0.9, 4, index_dtype=idt, duplicates=True, unsorted=True,
                         integer_values=True)
        for semiring in ("min_plus", "max_plus", "min_second", "max_second", "plus_pair"):
            _same_csr(emulated.spgemm(a, b, semiring), reference.spgemm(a, b, semiring))


def test_spgemm_numeric_refuses_a_wrong_indptr(emulated):
    a, _ = build_csr((6, 5), 0.5, 1)
    b, _ = build_csr((5, 7), 0.5, 2)
    good = np.asarray(emulated.spgemm_symbolic(a, b))
    for delta in (-1, 1):
        bad = good.copy()
        row = int(np.argmax(np.diff(good) > 0))
        bad[row + 1:] += delta
        with pytest.raises(InvalidSparseStructure, match="spgemm_symbolic"):
            emulated.spgemm_numeric(a, b, bad, "plus_times")
    with pytest.raises(InvalidSparseStructure):       # terms but no room at all
        emulated.spgemm_numeric(a, b, np.zeros(7, np.int64), "plus_times")
