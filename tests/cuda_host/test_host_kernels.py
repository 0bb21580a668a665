"""The CUDA kernels, built for the host from the same ``.cu`` text, equal the Numba backend.

Each test runs the ``cupy`` backend's code (validation, casts, launch
geometry, argument marshalling, row_mean, host round trips) with numpy
arrays and the host build in place of ``cupy.RawModule``
(:meth:`CupyBackend.host_emulated`); only the kernel launch differs from a
GPU run.  Floats are compared with tolerances (different summation order in
SDDMM's shuffle reduction, FMA contraction on a GPU); ReLU and dropout are
bit-identical by contract, so they are compared exactly.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spgnn.errors import DimensionMismatch
from spgnn.local.semiring import SEMIRINGS
from spgnn.testing.strategies import build_csr, build_dense, csr_params

SEMIRING_NAMES = sorted(SEMIRINGS)


def _close(got, want, dtype):
    tol = 2e-4 if np.dtype(dtype) == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


@settings(max_examples=15)
@given(params=csr_params(max_dim=45), n=st.sampled_from([0, 1, 5, 33, 70]),
       semiring=st.sampled_from(SEMIRING_NAMES))
def test_spmm_equals_numba(emulated, reference, params, n, semiring):
    a, _ = build_csr(**params)
    x = build_dense((a.shape[1], n), params["seed"] + 1, dtype=params["value_dtype"])
    want = reference.spmm(a, x, semiring)
    got = emulated.spmm(a, x, semiring)
    assert got.dtype == want.dtype and got.shape == want.shape
    _close(got, want, want.dtype)


def test_spmm_long_rows_and_scipy(emulated):
    """Rows longer than one 32-entry chunk and more than one column tile, against scipy."""
    for idt in (np.int32, np.int64):
        for vdt in (np.float32, np.float64):
            a, s = build_csr((9, 150), 0.7, 3, index_dtype=idt, value_dtype=vdt,
                             duplicates=True, unsorted=True)
            x = build_dense((150, 65), 4, dtype=vdt)
            _close(emulated.spmm(a, x, "plus_times"), s @ x, vdt)


def test_multi_warp_blocks(reference):
    """Blocks of 3 warps (the shared chunk buffers are per warp) give the same results."""
    from spgnn.backends.cupy_backend import CupyBackend

    three = CupyBackend.host_emulated(warps=3)
    a, _ = build_csr((10, 40), 0.8, 9, duplicates=True)
    x = build_dense((40, 35), 10)
    _close(three.spmm(a, x, "max_plus"), reference.spmm(a, x, "max_plus"), np.float64)
    y = build_dense((10, 35), 11)
    _close(three.sddmm(a, y, x, "plus_times").data, reference.sddmm(a, y, x, "plus_times").data,
           np.float64)
    with pytest.raises(ValueError, match="warps"):
        CupyBackend.host_emulated(warps=9)


def test_spmm_cusparse_alternative(emulated):
    from spgnn.backends.cupy_backend import CupyBackend

    alt = CupyBackend.host_emulated(spmm_impl="cusparse")
    a, s = build_csr((20, 30), 0.3, 5)
    x = build_dense((30, 7), 6)
    _close(alt.spmm(a, x, "plus_times"), s @ x, np.float64)
    _close(alt.spmm(a, x, "min_plus"), emulated.spmm(a, x, "min_plus"), np.float64)
    with pytest.raises(ValueError, match="spmm_impl"):
        CupyBackend.host_emulated(spmm_impl="magic")


def test_spmm_out_and_errors(emulated):
    a, s = build_csr((6, 4), 0.5, 1)
    x = build_dense((4, 3), 2)
    out = np.empty((6, 3))
    assert emulated.spmm(a, x, "plus_times", out=out) is out
    _close(out, s @ x, np.float64)
    with pytest.raises(DimensionMismatch):
        emulated.spmm(a, build_dense((5, 3), 2), "plus_times")


@settings(max_examples=12)
@given(params=csr_params(max_dim=40), d=st.sampled_from([0, 1, 31, 40]),
       semiring=st.sampled_from(SEMIRING_NAMES))
def test_sddmm_equals_numba(emulated, reference, params, d, semiring):
    a, _ = build_csr(**params)
    dt = params["value_dtype"]
    x = build_dense((a.shape[0], d), params["seed"] + 1, dtype=dt)
    y = build_dense((a.shape[1], d), params["seed"] + 2, dtype=dt)
    try:
        want = reference.sddmm(a, x, y, semiring)
    except ValueError as exc:          # e.g. row_mean semirings: refused alike
        with pytest.raises(type(exc)):
            emulated.sddmm(a, x, y, semiring)
        return
    got = emulated.sddmm(a, x, y, semiring)
    assert got.data.dtype == want.data.dtype
    assert got.indices is a.indices or np.array_equal(got.indices, a.indices)
    _close(got.data, want.data, want.data.dtype)


@settings(max_examples=10)
@given(m=st.integers(0, 40), k=st.integers(0, 9), dtype=st.sampled_from([np.float32, np.float64]),
       p=st.sampled_from([0.0, 0.1, 0.5, 0.9]), base=st.integers(0, 2**64 - 1),
       seed=st.integers(0, 1000))
def test_elementwise_bit_identical(emulated, reference, m, k, dtype, p, base, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(dtype)
    if x.size:
        x.flat[0] = np.nan
        x.flat[-1] = -0.0
    out, mask = emulated.relu(x)
    rout, rmask = reference.relu(x)
    assert out.tobytes() == rout.tobytes() and np.array_equal(mask, rmask)
    dy = rng.standard_normal((m, k)).astype(dtype)
    assert emulated.relu_backward(dy, mask).tobytes() == reference.relu_backward(dy, mask).tobytes()
    rows = rng.integers(0, 10**12, m)
    args = (p, np.uint64(base), rows, 3, k + 7)
    assert emulated.dropout(x, *args).tobytes() == reference.dropout(x, *args).tobytes()
    a, _ = build_csr((m, k + 3), 0.4, seed, index_dtype=[np.int32, np.int64][seed % 2],
                     value_dtype=dtype)
    got = emulated.dropout_csr(a.indptr, a.indices, a.data, *args)
    want = reference.dropout_csr(a.indptr, a.indices, a.data, *args)
    assert got.tobytes() == want.tobytes()


@settings(max_examples=12)
@given(params=csr_params(max_dim=40), rows=st.lists(st.integers(-40, 39), max_size=12))
def test_extract_rows_equals_numba(emulated, reference, params, rows):
    a, _ = build_csr(**params)
    rows = [r for r in rows if -a.shape[0] <= r < a.shape[0]]
    got, want = emulated.extract_rows(a, rows), reference.extract_rows(a, rows)
    assert got.shape == want.shape
    for f in ("indptr", "indices", "data"):
        g, w = getattr(got, f), getattr(want, f)
        assert g.dtype == w.dtype and np.array_equal(g, w), f


def test_dropout_out_argument(emulated, reference):
    x = build_dense((5, 4), 1)
    out = np.empty_like(x)
    assert emulated.dropout(x, 0.3, np.uint64(7), np.arange(5), 0, 4, out=out) is out
    assert np.array_equal(out, reference.dropout(x, 0.3, np.uint64(7), np.arange(5), 0, 4))


def test_no_operation_round_trips_to_the_host():
    """Every operation of the contract has its CUDA kernel (or array-module code) now; their
    equality with numba is tested in test_host_ported.py."""
    from spgnn.backends.cupy_backend import HOST_ROUND_TRIP

    assert HOST_ROUND_TRIP == ()
