"""The CUDA message codec (``kernels/cuda/quant.cu``), host-built, equals the Numba codec bit for bit.

Runs the ``cupy`` backend's ``quantize_rows``/``dequantize_rows`` with numpy
arrays and the g++ build of the same source (:meth:`CupyBackend.host_emulated`):
codes, parameters and decoded rows must be byte-identical to the Numba
backend's for both roundings, bf16/fp32 parameters, float32/float64 rows,
empty segments, F not a multiple of 8/b, constant rows and ``-0.0``, in both
packing layouts (feature axis, the default, and node axis).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spgnn.errors import DTypeError


@settings(max_examples=20, deadline=None)
@given(segs=st.lists(st.integers(0, 9), min_size=1, max_size=4), width=st.integers(0, 37),
       bits=st.sampled_from([8, 4, 2]), seed=st.integers(0, 2**31),
       rounding=st.sampled_from(["stochastic", "nearest"]),
       param_dtype=st.sampled_from(["bf16", "fp32"]), base=st.integers(0, 2**64 - 1),
       dtype=st.sampled_from([np.float32, np.float64]),
       axis=st.sampled_from(["feature", "node"]))
def test_codec_bit_identical(emulated, reference, segs, width, bits, seed, rounding,
                             param_dtype, base, dtype, axis):
    n = sum(segs)
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(n, width)) * 10.0 ** rng.integers(-3, 4)).astype(dtype)
    if n and width:
        x[0] = 1.5                       # a constant row
        x[-1, 0] = -0.0
    keys = rng.integers(0, 2**40, size=n)
    want = reference.quantize_rows(x, segs, bits, rounding, param_dtype, base, keys, axis)
    got = emulated.quantize_rows(x, segs, bits, rounding, param_dtype, base, keys, axis)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes()
    for out_dt in (np.float32, np.float64):
        dw = reference.dequantize_rows(*want, segs, bits, width, out_dt, axis)
        dg = emulated.dequantize_rows(*want, segs, bits, width, out_dt, axis)
        assert dg.dtype == dw.dtype and dg.tobytes() == dw.tobytes()


def test_nonfinite_rows_refused_alike(emulated, reference):
    x = np.ones((6, 5), np.float32)
    x[4, 2] = np.inf
    for be in (emulated, reference):
        with pytest.raises(DTypeError, match=r"rows 2\.\.5 hold a NaN or an infinity"):
            be.quantize_rows(x, [2, 4], 2, "nearest", "bf16", 0, np.arange(6))


def test_wide_rows_and_many_groups(emulated, reference):
    """More columns than a warp's lanes and more code bytes than one grid-stride pass."""
    x = np.random.default_rng(2).standard_normal((23, 333)).astype(np.float32)
    for bits in (2, 4, 8):
        for axis in ("feature", "node"):
            want = reference.quantize_rows(x, [10, 13], bits, "stochastic", "bf16", 99,
                                           np.arange(23) * 3, axis)
            got = emulated.quantize_rows(x, [10, 13], bits, "stochastic", "bf16", 99,
                                         np.arange(23) * 3, axis)
            assert got[0].tobytes() == want[0].tobytes()
            assert got[1].tobytes() == want[1].tobytes()
            dw = reference.dequantize_rows(*want, [10, 13], bits, 333, np.float32, axis)
            dg = emulated.dequantize_rows(*want, [10, 13], bits, 333, np.float32, axis)
            assert dg.tobytes() == dw.tobytes()
