"""SpGEMM, transpose, column extraction, sampling, de-duplication and row sorting on a real GPU.

The ``cupy`` backend's kernels (``spgemm.cu``, ``extract_cols.cu``,
``sample.cu``, ``dedup.cu``) on device arrays against the numba backend:
patterns, positions and ids exactly, SpGEMM values to rounding (FMA) and
exactly for min/max semirings over integer values.  Skips, saying why,
without a usable GPU (``SPGNN_REQUIRE_GPU=1`` makes that a failure).
Not yet run on a device (docs/gpu.md keeps the record).
"""

import numpy as np
import pytest

from spgnn.local.csr import LocalCSR
from spgnn.testing.strategies import build_csr


def _dev(gpu, a):
    return LocalCSR(gpu.from_host(a.indptr), gpu.from_host(a.indices), gpu.from_host(a.data),
                    a.shape, check=None)


def _same(gpu, got, want, exact=True):
    h = gpu.to_host
    assert got.shape == want.shape
    for f in ("indptr", "indices"):
        g = h(getattr(got, f))
        assert g.dtype == getattr(want, f).dtype and np.array_equal(g, getattr(want, f)), f
    gd = h(got.data)
    if exact:
        assert gd.tobytes() == want.data.tobytes()
    else:
        tol = 2e-4 if gd.dtype == np.float32 else 1e-10
        np.testing.assert_allclose(gd, want.data, rtol=tol, atol=tol)


SHAPES = [((0, 0), (0, 3)), ((1, 1), (1, 1)), ((70, 50), (50, 90)), ((300, 200), (200, 300))]


@pytest.mark.parametrize("idt", [np.int32, np.int64])
@pytest.mark.parametrize("vdt", [np.float32, np.float64])
@pytest.mark.parametrize("semiring", ["plus_times", "min_plus", "max_times", "plus_pair", "mean"])
@pytest.mark.parametrize("sa, sb", SHAPES)
def test_spgemm(gpu, reference, idt, vdt, semiring, sa, sb):
    a, _ = build_csr(sa, 0.1, 1, index_dtype=idt, value_dtype=vdt, duplicates=True,
                     unsorted=True)
    b, _ = build_csr(sb, 0.1, 2, index_dtype=idt, value_dtype=vdt, duplicates=True,
                     unsorted=True)
    want = reference.spgemm(a, b, semiring)
    _same(gpu, gpu.spgemm(_dev(gpu, a), _dev(gpu, b), semiring), want, exact=False)


def test_spgemm_exact_min_max(gpu, reference):
    a, _ = build_csr((200, 150), 0.2, 3, duplicates=True, unsorted=True, integer_values=True)
    b, _ = build_csr((150, 400), 0.3, 4, duplicates=True, unsorted=True, integer_values=True)
    for semiring in ("min_plus", "max_plus", "min_second", "max_second", "plus_pair"):
        _same(gpu, gpu.spgemm(_dev(gpu, a), _dev(gpu, b), semiring),
              reference.spgemm(a, b, semiring))


@pytest.mark.parametrize("idt", [np.int32, np.int64])
@pytest.mark.parametrize("vdt", [np.float32, np.float64])
def test_transpose_and_extract_cols(gpu, reference, idt, vdt):
    for shape in ((0, 5), (5, 0), (300, 200)):
        a, _ = build_csr(shape, 0.1, 5, index_dtype=idt, value_dtype=vdt, duplicates=True,
                         unsorted=True)
        _same(gpu, gpu.transpose(_dev(gpu, a)), reference.transpose(a))
        cols = np.array([0, shape[1] - 1, 0, -1] if shape[1] else [], dtype=np.int64)
        _same(gpu, gpu.extract_cols(_dev(gpu, a), gpu.from_host(cols)),
              reference.extract_cols(a, cols))


@pytest.mark.parametrize("method, weighted", [("floyd", False), ("es", False), ("es", True),
                                              ("its", False), ("its", True)])
def test_sampling_bit_identical(gpu, reference, method, weighted):
    a, _ = build_csr((2000, 300), 0.05, 6)
    a.data[:] = np.abs(a.data)
    a.data[::7] = 0.0
    rows = np.random.default_rng(7).integers(0, 2000, 5000)
    keys = np.random.default_rng(8).integers(0, 2**63, 5000, dtype=np.uint64)
    d = _dev(gpu, a)
    got = gpu.sample_rows(d.indptr, d.indices, d.data, gpu.from_host(rows), gpu.from_host(keys),
                          10, method, weighted)
    want = reference.sample_rows(a.indptr, a.indices, a.data, rows, keys, 10, method, weighted)
    for g, w in zip(got, want):
        assert np.array_equal(gpu.to_host(g), w)


def test_first_appearance_and_sort_rows(gpu, reference):
    rng = np.random.default_rng(9)
    a_ptr = np.concatenate([[0], np.cumsum(rng.integers(0, 50, 40))])
    b_ptr = np.concatenate([[0], np.cumsum(rng.integers(0, 500, 40))])
    a = rng.integers(0, 3000, int(a_ptr[-1]))
    b = rng.integers(0, 3000, int(b_ptr[-1]))
    got = gpu.first_appearance(*(gpu.from_host(v) for v in (a, a_ptr, b, b_ptr)), 3000)
    for g, w in zip(got, reference.first_appearance(a, a_ptr, b, b_ptr, 3000)):
        assert np.array_equal(gpu.to_host(g), w)
    indptr = np.arange(0, 4001, 10, dtype=np.int64)
    cols = np.concatenate([rng.permutation(100)[:10] for _ in range(400)]).astype(np.int64)
    vals = rng.standard_normal(cols.size)
    dc, dv = gpu.from_host(cols), gpu.from_host(vals)
    gpu.sort_rows_by_column(gpu.from_host(indptr), dc, dv)
    reference.sort_rows_by_column(indptr, cols, vals)
    assert np.array_equal(gpu.to_host(dc), cols) and np.array_equal(gpu.to_host(dv), vals)
