"""The message codec (paper 004 §2.6): wire format, error bounds, unbiasedness, bytes."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from spgnn.backends import _quant, get_backend
from spgnn.comm import run_loopback
from spgnn.core.codec import Codec, make_codec, wire_bytes
from spgnn.counter_rng import GOLDEN, mix64
from spgnn.errors import DTypeError

BE = get_backend("numba")


def _bf16(a):
    """float32 -> nearest bfloat16 (ties to even), as float32."""
    b = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def reference_uniforms(row_keys, width, base):
    """The documented draws: one mix64 per 4 columns, 16-bit midpoints ``(k + 1/2)·2^-16``."""
    W = -(-width // 4)
    c = np.arange(width, dtype=np.uint64)
    with np.errstate(over="ignore"):
        ctr = np.asarray(row_keys, np.uint64)[:, None] * np.uint64(W) + c[None, :] // np.uint64(4)
        d = mix64((ctr ^ np.uint64(base)) + GOLDEN)
    k = (d >> (np.uint64(16) * (c[None, :] % np.uint64(4)))) & np.uint64(0xFFFF)
    return (k.astype(np.float32) + np.float32(0.5)) * np.float32(2.0**-16)


def reference_encode(x, seg_counts, bits, rounding="nearest", param_dtype="fp32", base=0,
                     row_keys=None, pack_axis="feature"):
    """The codec in numpy: the codes as an (n, F) array, Z, S and the packed bytes.

    Feature axis: a segment's codes row-major, 8/b to a byte (first in the
    high bits), the segment padded to a whole byte; node axis: 8/b rows per
    byte and column, the segment padded to a multiple of 8/b rows.
    """
    x = np.asarray(x, dtype=np.float32)
    lo = x.min(1) if x.shape[1] else np.zeros(x.shape[0], np.float32)
    hi = x.max(1) if x.shape[1] else np.zeros(x.shape[0], np.float32)
    S = ((hi.astype(np.float64) - lo) / (2**bits - 1)).astype(np.float32)
    S[S == 0] = 1
    if param_dtype == "bf16":
        lo, S = _bf16(lo), _bf16(S)
        S[S == 0] = 1
    inv = (np.float32(1) / S).astype(np.float32)
    v = (x - lo[:, None]) * inv[:, None]
    if rounding == "nearest":
        q = np.rint(v)
    else:
        fl = np.floor(v)
        u = reference_uniforms(np.arange(x.shape[0]) if row_keys is None else row_keys,
                               x.shape[1], base)
        q = fl + (u < v - fl)
    q = np.clip(q, 0, 2**bits - 1).astype(np.uint8)
    per = 8 // bits
    out, start = [], 0
    shifts = (per - 1 - np.arange(per)) * bits
    for n in seg_counts:
        seg = q[start:start + n]
        start += n
        if pack_axis == "feature":
            flat = np.zeros(-(-seg.size // per) * per, np.int64)
            flat[:seg.size] = seg.ravel()
            out.append((flat.reshape(-1, per) << shifts[None, :]).sum(1).astype(np.uint8))
            continue
        pad = np.zeros((-(-n // per) * per, x.shape[1]), np.uint8)
        pad[:n] = seg
        g = pad.reshape(pad.shape[0] // per, per, x.shape[1]).astype(np.int64)
        out.append((g << shifts[None, :, None]).sum(1).astype(np.uint8).ravel())
    return q, lo, S, (np.concatenate(out) if out else np.zeros(0, np.uint8))


segs = st.lists(st.integers(0, 9), min_size=1, max_size=5)


axes = st.sampled_from(["feature", "node"])


@settings(max_examples=40, deadline=None)
@given(segs=segs, width=st.integers(0, 11), bits=st.sampled_from([8, 4, 2]),
       seed=st.integers(0, 2**31), shift=st.sampled_from([0.0, 3.0]), axis=axes)
def test_nearest_matches_reference_and_bound(segs, width, bits, seed, shift, axis):
    n = sum(segs)
    x = (np.random.default_rng(seed).normal(size=(n, width)) + shift).astype(np.float32)
    codes, params = BE.quantize_rows(x, segs, bits, "nearest", "fp32", 0, np.arange(n), axis)
    _, lo, S, ref = reference_encode(x, segs, bits, pack_axis=axis)
    np.testing.assert_array_equal(codes, ref)
    np.testing.assert_array_equal(params[:, 0], lo)
    np.testing.assert_array_equal(params[:, 1], S)
    # Bytes: exactly ceil(n_p*F*b/8) (feature) or ceil(n_p*b/8)*F (node) per segment.
    want = [-(-p * width * bits // 8) if axis == "feature" else -(-p * bits // 8) * width
            for p in segs]
    assert codes.size == sum(want)
    np.testing.assert_array_equal(wire_bytes(segs, width, bits, pack_axis=axis)[0], want)
    y = BE.dequantize_rows(codes, params, segs, bits, width, pack_axis=axis)
    if n and width:
        err = np.abs(y.astype(np.float64) - x)
        assert np.all(err <= S[:, None] / 2 * (1 + 1e-4))
        # The row minimum is reconstructed exactly with fp32 parameters.
        np.testing.assert_array_equal(y.min(1), x.min(1))


@settings(max_examples=40, deadline=None)
@given(segs=segs, width=st.integers(0, 13), bits=st.sampled_from([8, 4, 2]),
       seed=st.integers(0, 2**31), rounding=st.sampled_from(["stochastic", "nearest"]),
       param_dtype=st.sampled_from(["bf16", "fp32"]), base=st.integers(0, 2**64 - 1),
       f64=st.booleans(), axis=axes)
def test_codes_equal_numpy_reference(segs, width, bits, seed, rounding, param_dtype, base, f64,
                                     axis):
    """Every code bit and parameter equals the documented formulas (draws included)."""
    n = sum(segs)
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(n, width)) * 10.0 ** rng.integers(-3, 4)).astype(np.float32)
    keys = rng.integers(0, 2**40, size=n)
    xin = x.astype(np.float64) if f64 else x
    codes, params = BE.quantize_rows(xin, segs, bits, rounding, param_dtype, base, keys, axis)
    q, lo, S, ref = reference_encode(x, segs, bits, rounding, param_dtype, base, keys, axis)
    np.testing.assert_array_equal(codes, ref)
    zl, zs = _quant.params_to_float(params)
    np.testing.assert_array_equal(zl, lo)
    np.testing.assert_array_equal(zs, S)
    # Decoding gives q * S + Z exactly (float32 multiply, then add), in either layout.
    y = BE.dequantize_rows(codes, params, segs, bits, width, pack_axis=axis)
    np.testing.assert_array_equal(y, q.astype(np.float32) * S[:, None] + lo[:, None])


@settings(max_examples=25, deadline=None)
@given(segs=segs, width=st.integers(1, 9), bits=st.sampled_from([8, 4, 2]),
       seed=st.integers(0, 2**31), shift=st.sampled_from([0.0, 50.0]))
def test_bf16_params_bound(segs, width, bits, seed, shift):
    n = sum(segs)
    x = (np.random.default_rng(seed).normal(size=(n, width)) + shift).astype(np.float32)
    codes, params = BE.quantize_rows(x, segs, bits, "nearest", "bf16", 0, np.arange(n))
    assert params.dtype == np.uint16 and params.nbytes == 4 * n
    y = BE.dequantize_rows(codes, params, segs, bits, width)
    if n:
        Z = x.min(1).astype(np.float64)
        S = (x.max(1).astype(np.float64) - Z) / (2**bits - 1)
        bound = S / 2 + 2.0**-8 * (np.abs(Z) + (2**bits - 1) * S) + 1e-6 * (1 + np.abs(Z))
        assert np.all(np.abs(y - x).max(1) <= bound)


def test_stochastic_bound_and_unbiased():
    """Mean of D independent draws vs x; Hoeffding with a union bound over N elements.

    Each decoded value lies in [floor, floor + S] (range S), so
    P(|mean - x| >= t) <= 2 exp(-2 D t^2 / S^2); with t chosen for a total
    false-alarm rate alpha = 1e-6 over the N elements this test fails by
    chance with probability below 1e-6 (and deterministically, seeds fixed).
    """
    rng = np.random.default_rng(3)
    n, width, D, alpha = 12, 10, 400, 1e-6
    x = rng.normal(size=(n, width)).astype(np.float32)
    for bits in (2, 4):
        codec = Codec(bits, "stochastic", "fp32", seed=11)
        S = (x.max(1).astype(np.float64) - x.min(1)) / (2**bits - 1)
        acc = np.zeros((n, width))
        for d in range(D):
            codes, params = codec.encode(BE, x, [5, 0, 7], np.arange(n))
            y = BE.dequantize_rows(codes, params, [5, 0, 7], bits, width).astype(np.float64)
            assert np.all(np.abs(y - x) < S[:, None] * (1 + 1e-5))
            acc += y
        t = S * np.sqrt(np.log(2 * n * width / alpha) / (2 * D))
        assert np.all(np.abs(acc / D - x) <= t[:, None])
        # Not nearest rounding in disguise: the error of one draw is larger.
        assert np.abs(acc / D - x).mean() < np.abs(y - x).mean()


def test_determinism_and_keys():
    x = np.random.default_rng(0).normal(size=(8, 6))
    a = Codec(2, seed=5).encode(BE, x, [8], np.arange(8))
    b = Codec(2, seed=5).encode(BE, x, [8], np.arange(8))
    np.testing.assert_array_equal(a[0], b[0])
    c = Codec(2, seed=6).encode(BE, x, [8], np.arange(8))
    assert not np.array_equal(a[0], c[0])
    # Draws follow the row keys, not positions or segments: same rows split differently agree.
    d = Codec(2, seed=5).encode(BE, x[4:], [4], np.arange(4, 8))
    np.testing.assert_array_equal(a[0][6:], d[0])
    n1 = Codec(2, "nearest", seed=1).encode(BE, x, [8], np.arange(8))
    n2 = Codec(2, "nearest", seed=2).encode(BE, x, [3, 5], np.arange(8) + 100)
    np.testing.assert_array_equal(BE.dequantize_rows(*n1, [8], 2, 6),
                                  BE.dequantize_rows(*n2, [3, 5], 2, 6))


def test_constant_rows_exact_and_nonfinite_refused():
    x = np.full((5, 7), 2.5, np.float32)
    x[1] = -1.0
    codes, params = BE.quantize_rows(x, [2, 3], 2, "stochastic", "fp32", 9, np.arange(5))
    np.testing.assert_array_equal(BE.dequantize_rows(codes, params, [2, 3], 2, 7), x)
    for bad in (np.nan, np.inf, -np.inf):
        y = x.copy()
        y[3, 4] = bad
        with pytest.raises(DTypeError, match="NaN or an infinity"):
            BE.quantize_rows(y, [2, 3], 2, "nearest", "bf16", 0, np.arange(5))
    with pytest.raises(ValueError, match="quantize must be one of"):
        make_codec("int3")
    with pytest.raises(ValueError, match="bits"):
        Codec(3)
    with pytest.raises(ValueError, match="rounding"):
        Codec(2, "up")


@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("bits", [8, 4, 2])
@pytest.mark.parametrize("axis,short", [("node", False), ("feature", False), ("feature", True)])
def test_alltoallv_bytes_exact(p, bits, axis, short):
    """Ledger bytes equal the wire formula; int2 + bf16 gives 16F/(F+16) at n_p % 4 == 0
    (node axis) and at any n_p with F % 4 == 0 (feature axis: ``short`` segments of 1-3 rows)."""
    F = 64
    C = (np.arange(p * p).reshape(p, p) % 3) * (1 if short else 4) + (1 if short else 4)
    np.fill_diagonal(C, 0)

    def fn(comm):
        r = comm.rank
        x = np.random.default_rng(r).normal(size=(C[r].sum(), F)).astype(np.float32)
        codec = Codec(bits, "nearest", "bf16", pack_axis=axis)
        y = codec.alltoallv(comm, BE, x, C[r], C[:, r], np.arange(C[r].sum()), label="x")
        ref = comm.alltoallv(x, C[r], C[:, r], label="fp32", split=False)
        S = (ref.max(1).astype(np.float64) - ref.min(1)) / (2**bits - 1)
        Z = ref.min(1)
        assert np.all(np.abs(y - ref).max(1) <= S / 2 + 2.0**-8 * (np.abs(Z) + 3 * S) + 1e-6)
        st_ = comm.ledger.stats
        data, par = wire_bytes(C[r], F, bits, "bf16", pack_axis=axis)
        others = np.arange(p) != r
        assert st_.total(label="x:data") == data[others].sum()
        assert st_.total(label="x:params") == par[others].sum()
        fp = st_.total(label="fp32")
        assert fp == wire_bytes(C[r], F)[0][others].sum()
        if bits == 2 and fp:
            assert fp * (F + 16) == 16 * F * (data[others].sum() + par[others].sum())
        return True

    assert all(run_loopback(p, fn))
