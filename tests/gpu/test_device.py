"""The ``cupy`` backend on a real GPU equals the numba backend (skips without a device).

The same checks as ``tests/cuda_host`` with ``cupy.RawModule`` kernels,
device arrays and cuSPARSE; run them with ``tests/gpu/run_on_device.sh``.
Passed on an H100 on 2026-11-26 (205/205; docs/gpu.md keeps the record).
"""

import numpy as np
import pytest

from spgnn.backends import _cuda_source as S
from spgnn.local.csr import LocalCSR
from spgnn.local.semiring import SEMIRINGS
from spgnn.testing.strategies import build_csr, build_dense


def _dev(gpu, a):
    return LocalCSR(gpu.from_host(a.indptr), gpu.from_host(a.indices), gpu.from_host(a.data),
                    a.shape, check=None)


def _close(got, want, dtype):
    tol = 2e-4 if np.dtype(dtype) == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


def test_every_source_builds_for_this_device(gpu):
    for src in S.SOURCES:
        for name in S.signatures(S.assemble(src)):
            gpu._kernel(src, name)


CASES = [((0, 0), 0.0, 3), ((1, 1), 1.0, 1), ((50, 70), 0.0, 33), ((300, 200), 0.05, 64),
         ((40, 500), 0.5, 129)]


@pytest.mark.parametrize("idt", [np.int32, np.int64])
@pytest.mark.parametrize("vdt", [np.float32, np.float64])
@pytest.mark.parametrize("semiring", sorted(SEMIRINGS))
@pytest.mark.parametrize("shape, density, n", CASES)
def test_spmm_sddmm(gpu, reference, idt, vdt, semiring, shape, density, n):
    a, _ = build_csr(shape, density, 7, index_dtype=idt, value_dtype=vdt, duplicates=True,
                     unsorted=True)
    x = build_dense((shape[1], n), 8, dtype=vdt)
    _close(gpu.to_host(gpu.spmm(_dev(gpu, a), gpu.from_host(x), semiring)),
           reference.spmm(a, x, semiring), vdt)
    xr = build_dense((shape[0], n), 9, dtype=vdt)
    try:
        want = reference.sddmm(a, xr, x, semiring).data
    except ValueError:
        return
    got = gpu.sddmm(_dev(gpu, a), gpu.from_host(xr), gpu.from_host(x), semiring).data
    _close(gpu.to_host(got), want, vdt)


def test_cusparse_alternative(gpu, reference):
    from spgnn.backends.cupy_backend import CupyBackend

    alt = CupyBackend(spmm_impl="cusparse")
    a, _ = build_csr((300, 200), 0.05, 3)
    x = build_dense((200, 64), 4)
    _close(alt.to_host(alt.spmm(_dev(alt, a), alt.from_host(x), "plus_times")),
           reference.spmm(a, x, "plus_times"), np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_elementwise_bit_identical(gpu, reference, dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1000, 37)).astype(dtype)
    x[0, 0], x[0, 1] = np.nan, -0.0
    out, mask = gpu.relu(gpu.from_host(x))
    rout, rmask = reference.relu(x)
    assert gpu.to_host(out).tobytes() == rout.tobytes()
    assert np.array_equal(gpu.to_host(mask), rmask)
    args = (0.3, np.uint64(12345), np.arange(1000) * 7, 5, 64)
    got = gpu.dropout(gpu.from_host(x), *args[:2], gpu.from_host(args[2]), *args[3:])
    assert gpu.to_host(got).tobytes() == reference.dropout(x, *args).tobytes()
    a, _ = build_csr((1000, 64), 0.1, 2, value_dtype=dtype)
    d = _dev(gpu, a)
    got = gpu.dropout_csr(d.indptr, d.indices, d.data, *args[:2], gpu.from_host(args[2]),
                          *args[3:])
    assert gpu.to_host(got).tobytes() == reference.dropout_csr(a.indptr, a.indices, a.data,
                                                               *args).tobytes()


def test_extract_rows_and_transpose(gpu, reference):
    a, _ = build_csr((60, 50), 0.1, 5)
    for got, want in ((gpu.transpose(_dev(gpu, a)), reference.transpose(a)),
                      (gpu.extract_rows(_dev(gpu, a), gpu.from_host(np.array([5, 0, 5, 59]))),
                       reference.extract_rows(a, [5, 0, 5, 59]))):
        for f in ("indptr", "indices", "data"):
            assert np.array_equal(gpu.to_host(getattr(got, f)), getattr(want, f)), f


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bits", [8, 4, 2])
@pytest.mark.parametrize("rounding", ["stochastic", "nearest"])
@pytest.mark.parametrize("param_dtype", ["bf16", "fp32"])
def test_codec_bit_identical(gpu, reference, dtype, bits, rounding, param_dtype):
    """quant.cu on the device: codes, parameters and decoded rows equal the Numba codec's bytes."""
    rng = np.random.default_rng(bits)
    segs = [37, 0, 1000, 5]
    x = (rng.standard_normal((sum(segs), 131)) * 30).astype(dtype)
    x[3] = 2.0
    x[7, 5] = -0.0
    keys = rng.integers(0, 2**40, size=sum(segs))
    want = reference.quantize_rows(x, segs, bits, rounding, param_dtype, 77, keys)
    for xin in (x, gpu.from_host(x)):                       # host and device rows
        got = [gpu.to_host(a) for a in gpu.quantize_rows(xin, segs, bits, rounding,
                                                         param_dtype, 77, keys)]
        assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
    dw = reference.dequantize_rows(*want, segs, bits, 131, dtype)
    dg = gpu.dequantize_rows(gpu.from_host(want[0]), gpu.from_host(want[1]), segs, bits, 131,
                             dtype)
    assert gpu.to_host(dg).tobytes() == dw.tobytes()
