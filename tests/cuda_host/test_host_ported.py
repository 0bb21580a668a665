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
def test_spgemm_equals_reference(emulated, pa, nb, sb, density, semiring):
    # the numpy backend is the reference here: numba would compile a kernel for every
    # (semiring, index, value) type drawn, over a minute of a CI run; the numba kernels
    # are compared in test_spgemm_exact_semirings_and_long_rows and equal the numpy
    # backend in tests/property/test_kernels_props.py
    from spgnn.backends import get_backend

    a, s = build_csr(**pa)
    b, t = build_csr((a.shape[1], nb), density, sb, index_dtype=pa["index_dtype"],
                     value_dtype=pa["value_dtype"], unsorted=True, duplicates=True)
    got = emulated.spgemm(a, b, semiring)
    want = get_backend("numpy").spgemm(a, b, semiring)
    _same_csr(got, want, exact=False)
    assert np.array_equal(np.asarray(emulated.spgemm_symbolic(a, b)), want.indptr)
    if semiring == "plus_times":
        _close(sp.csr_array((got.data, got.indices, got.indptr), shape=got.shape).toarray(),
               (s @ t).toarray(), got.data.dtype)


def test_spgemm_exact_semirings_and_long_rows(emulated, reference):
    """Rows of B longer than one 32-entry chunk, duplicates inside a chunk; bit-equal where
    no rounding can differ (min/max over first/second/pair/plus of integer values)."""
    from spgnn.backends import get_backend

    numpy_be = get_backend("numpy")
    for idt in (np.int32, np.int64):
        a, _ = build_csr((5, 6), 0.8, 3, index_dtype=idt, duplicates=True, unsorted=True,
                         integer_values=True)
        b, _ = build_csr((6, 90), 0.9, 4, index_dtype=idt, duplicates=True, unsorted=True,
                         integer_values=True)
        for semiring in ("min_plus", "max_plus", "min_second", "max_second", "plus_pair"):
            _same_csr(emulated.spgemm(a, b, semiring), numpy_be.spgemm(a, b, semiring))
        # and the numba kernel itself (plus_times only: the suite compiles it anyway, every
        # other semiring would be a fresh compile); equal values, though a sum may start
        # from +0.0 on one side and -0.0 on the other, so not compared bit for bit
        if idt == np.int64:          # one index type: each is its own numba compile
            _same_csr(emulated.spgemm(a, b, "plus_times"), reference.spgemm(a, b, "plus_times"),
                      exact=False)


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


@settings(max_examples=6, deadline=None)
@given(params=csr_params(max_dim=16), data=st.data())
def test_transpose_and_extract_cols_equal_numba_and_scipy(emulated, reference, params, data):
    a, s = build_csr(**params)
    got, want = emulated.transpose(a), reference.transpose(a)
    _same_csr(got, want)
    assert np.array_equal(sp.csr_array((got.data, got.indices, got.indptr), shape=got.shape)
                          .toarray(), s.toarray().T)
    n = a.shape[1]
    cols = (np.asarray(data.draw(st.lists(st.integers(-n, n - 1), max_size=12)), dtype=np.int64)
            if n else np.zeros(0, np.int64))
    got, want = emulated.extract_cols(a, cols), reference.extract_cols(a, cols)
    _same_csr(got, want)
    assert np.array_equal(sp.csr_array((got.data, got.indices, got.indptr), shape=got.shape)
                          .toarray(), s.toarray()[:, cols])


@settings(max_examples=6, deadline=None)
@given(params=csr_params(max_dim=40, index_dtypes=(np.int64,), value_dtypes=(np.float64,)),
       s=st.integers(0, 6), method=st.sampled_from(["floyd", "es", "its"]),
       weighted=st.booleans(), data=st.data())
def test_sampling_is_bit_identical(emulated, reference, params, s, method, weighted, data):
    a, _ = build_csr(**{**params, "duplicates": False, "unsorted": False})
    weighted = weighted and method != "floyd"
    if weighted:                            # weights with zeros and negatives (never chosen)
        a.data[::4] = 0.0
    m = a.shape[0]
    rows = np.asarray(data.draw(st.lists(st.integers(0, max(m - 1, 0)), max_size=10)
                                if m else st.just([])), dtype=np.int64)
    keys = np.asarray(data.draw(st.lists(st.integers(0, 2**64 - 1), min_size=rows.size,
                                         max_size=rows.size)), dtype=np.uint64)
    got = emulated.sample_rows(a.indptr, a.indices, a.data, rows, keys, s, method, weighted)
    want = reference.sample_rows(a.indptr, a.indices, a.data, rows, keys, s, method, weighted)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w)


def test_sampling_rows_longer_than_s_every_method(emulated, reference):
    """Dense rows, so every method draws (not the take-all path), and repeated rows."""
    a, _ = build_csr((20, 60), 0.7, 5)
    a.data[:] = np.abs(a.data) + 0.1
    rows = np.array([0, 19, 0, 7, 7, 3])
    keys = np.arange(6, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    for method, weighted in (("floyd", False), ("es", False), ("es", True), ("its", False),
                             ("its", True)):
        got = emulated.sample_rows(a.indptr, a.indices, a.data, rows, keys, 9, method, weighted)
        want = reference.sample_rows(a.indptr, a.indices, a.data, rows, keys, 9, method, weighted)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), method


@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(0, 8), st.integers(0, 12)), min_size=0, max_size=5),
       n=st.integers(1, 20), seed=st.integers(0, 2**32 - 1))
def test_first_appearance_is_bit_identical(emulated, reference, sizes, n, seed):
    rng = np.random.default_rng(seed)
    a_ptr = np.concatenate([[0], np.cumsum([p for p, _ in sizes], dtype=np.int64)])
    b_ptr = np.concatenate([[0], np.cumsum([q for _, q in sizes], dtype=np.int64)])
    a = rng.integers(0, n, int(a_ptr[-1]))
    b = rng.integers(0, n, int(b_ptr[-1]))
    got = emulated.first_appearance(a, a_ptr, b, b_ptr, n)
    want = reference.first_appearance(a, a_ptr, b, b_ptr, n)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w)


@pytest.mark.parametrize("idt, vdt", [(np.int64, np.float64), (np.int32, np.float32),
                                      (np.int64, np.int64)])     # the last: no kernel types
def test_sort_rows_by_column_in_place(emulated, reference, idt, vdt):
    rng = np.random.default_rng(1)
    indptr = np.array([0, 0, 5, 6, 40], dtype=np.int64)
    cols = np.concatenate([rng.permutation(9)[:5], [3], rng.permutation(50)[:34]]).astype(idt)
    vals = rng.integers(-9, 9, cols.size).astype(vdt)
    c1, v1, c2, v2 = cols.copy(), vals.copy(), cols.copy(), vals.copy()
    assert emulated.sort_rows_by_column(indptr, c1, v1) is None
    reference.sort_rows_by_column(indptr, c2, v2)
    assert np.array_equal(c1, c2) and np.array_equal(v1, v2)


def test_entry_points_cover_every_type_combination():
    from spgnn.backends import _cuda_source as S

    sigs = {}
    for src in ("spgemm.cu", "extract_cols.cu", "sample.cu", "dedup.cu"):
        assert src in S.SOURCES
        sigs.update(S.signatures(S.assemble(src)))
    for i in ("i32", "i64"):
        assert {f"spgemm_count_{i}", f"extract_cols_count_{i}"} <= set(sigs)
        for f in ("f32", "f64"):
            assert {f"spgemm_fill_{i}_{f}", f"extract_cols_fill_{i}_{f}",
                    f"sort_rows_{i}_{f}"} <= set(sigs)
    assert {"sample_counts", "sample_fill", "dedup_insert", "dedup_first"} <= set(sigs)
