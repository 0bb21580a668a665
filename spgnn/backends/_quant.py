"""Host side of the message codec: per-row min/max integer quantization (paper 004 §2.6).

Every backend reaches :mod:`spgnn._kernels.numba.quant` through these two
functions (:meth:`Backend.quantize_rows <spgnn.backends.base.Backend.quantize_rows>`
and ``dequantize_rows``): the codec runs on host buffers, just before and
after the alltoallv that carries them.  Local.

Wire format of one coded block of ``n = Σ n_p`` rows of width ``F`` in ``P``
peer segments:

* ``codes``: uint8, ``8/b`` codes to a byte, each segment padded to a
  whole byte so it decodes on its own.  ``pack_axis="feature"`` (the
  default): a segment's codes in row-major order, ``ceil(n_p·F·b/8)``
  bytes; ``pack_axis="node"`` (the authors' layout, paper 004 §2.6): ``8/b``
  rows share a byte per column, ``ceil(n_p·b/8)·F`` bytes (a segment padded
  to a multiple of ``8/b`` rows, up to 25 % more for short segments at int2);
* ``params``: ``(n, 2)`` rows ``(Z, S)`` as ``uint16`` (the top half of the
  bfloat16-rounded float32) or ``float32``: ``4·n_p`` or ``8·n_p`` bytes.
"""

import numpy as np

from ..errors import BackendUnavailable, DTypeError

__all__ = ["BITS", "ROUNDINGS", "PARAM_DTYPES", "PACK_AXES", "segment_groups", "code_bytes",
           "encode", "decode", "params_to_float"]

BITS = (8, 4, 2)
ROUNDINGS = ("stochastic", "nearest")
PARAM_DTYPES = ("bf16", "fp32")
PACK_AXES = ("feature", "node")

_K = {}


def _kernels():
    if not _K:
        try:
            from .._kernels.numba import quant
        except ImportError:
            raise BackendUnavailable("quantize_rows: the message codec is a Numba kernel, and "
                                     "numba is not installed (pip install numba)") from None
        _K["quant"] = quant
    return _K["quant"]


def check_codec(bits, rounding, param_dtype, pack_axis="feature"):
    """Validate the codec settings (what every rank knows); ValueError naming the choices."""
    if pack_axis not in PACK_AXES:
        raise ValueError(f"quantize: pack_axis must be one of {PACK_AXES}, but got "
                         f"{pack_axis!r}")
    if int(bits) not in BITS:
        raise ValueError(f"quantize: bits must be one of {BITS}, but got {bits!r}")
    if rounding not in ROUNDINGS:
        raise ValueError(f"quantize: rounding must be one of {ROUNDINGS}, but got {rounding!r}")
    if param_dtype not in PARAM_DTYPES:
        raise ValueError(f"quantize: param_dtype must be one of {PARAM_DTYPES}, but got "
                         f"{param_dtype!r}")
    return int(bits)


def code_bytes(seg_counts, bits, width, pack_axis="feature"):
    """Code bytes per segment (int64 array). Pure.

    ``ceil(n_p·F·b/8)`` along the feature axis, ``ceil(n_p·b/8)·F`` along the
    node axis.
    """
    per = 8 // int(bits)
    n = np.asarray(seg_counts, dtype=np.int64)
    if pack_axis == "node":
        return -(-n // per) * int(width)
    return -(-(n * int(width)) // per)


def segment_groups(seg_counts, bits, width, pack_axis="feature"):
    """``(group_row, group_len, group_off)``: the packing groups of every segment, in order. Pure.

    A group is ``8/b`` consecutive rows of one segment (the last may be
    short); ``group_off`` is its first code byte: a segment's groups start
    at the segment's first byte and every whole group takes ``width`` bytes
    in both layouts.
    """
    per = 8 // int(bits)
    n = np.asarray(seg_counts, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)
    ng = -(-n // per)
    seg_of = np.repeat(np.arange(n.size), ng)
    first_group = np.concatenate([[0], np.cumsum(ng)[:-1]]).astype(np.int64)
    k = np.arange(int(ng.sum()), dtype=np.int64) - first_group[seg_of]
    row = starts[seg_of] + k * per
    length = np.minimum(per, n[seg_of] - k * per)
    nbytes = code_bytes(n, bits, width, pack_axis)
    first_byte = np.concatenate([[0], np.cumsum(nbytes)[:-1]]).astype(np.int64)
    off = first_byte[seg_of] + k * int(width)
    return np.ascontiguousarray(row), np.ascontiguousarray(length), np.ascontiguousarray(off)


def encode(x, seg_counts, bits, rounding, param_dtype, base, row_keys, pack_axis="feature"):
    """``(codes, params)`` of the rows of ``x``; see the module docstring. Local.

    Raises :class:`~spgnn.errors.DTypeError` when a row holds a NaN or an
    infinity (its range, hence its scale, is undefined).
    """
    bits = check_codec(bits, rounding, param_dtype, pack_axis)
    x = np.ascontiguousarray(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    if x.ndim != 2:
        x = x.reshape(x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64)))
    n, width = x.shape
    gr, gl, go = segment_groups(seg_counts, bits, width, pack_axis)
    if int(np.sum(seg_counts)) != n:
        raise ValueError(f"quantize: segment counts sum to {int(np.sum(seg_counts))}, but x has "
                         f"{n} rows")
    lo = np.empty(n, dtype=np.float32)
    scale = np.empty(n, dtype=np.float32)
    codes = np.empty(int(code_bytes(seg_counts, bits, width, pack_axis).sum()), dtype=np.uint8)
    bad = np.empty(gr.size, dtype=np.int64)
    keys = np.ascontiguousarray(row_keys, dtype=np.int64)
    if keys.shape != (n,):
        raise ValueError(f"quantize: row_keys must have one key per row ({n}), got {keys.shape}")
    k = _kernels()
    ks, km, ke = k.draw_key(x.dtype)
    xb = x.view(np.int32 if x.dtype == np.float32 else np.int64)
    k.encode_rows(x, xb, ks, km, ke, gr, gl, go, bits, pack_axis == "feature",
                  rounding == "stochastic", np.uint64(base), keys, param_dtype == "bf16", lo, scale,
                  codes, bad)
    if bad.any():
        g = int(np.flatnonzero(bad)[0])
        raise DTypeError(f"quantize: message rows {int(gr[g])}..{int(gr[g] + gl[g]) - 1} hold a "
                         f"NaN or an infinity; a row's range (its quantization scale) must be "
                         f"finite")
    if param_dtype == "bf16":
        params = np.stack([lo.view(np.uint32) >> 16, scale.view(np.uint32) >> 16],
                          axis=1).astype(np.uint16)
    else:
        params = np.stack([lo, scale], axis=1)
    return codes, params


def params_to_float(params):
    """``(Z, S)`` as float32 arrays from wire parameters (uint16 bf16 or float32). Pure."""
    params = np.asarray(params).reshape(-1, 2)
    if params.dtype == np.uint16:
        f = (params.astype(np.uint32) << 16).view(np.float32)
    else:
        f = params.astype(np.float32)
    return np.ascontiguousarray(f[:, 0]), np.ascontiguousarray(f[:, 1])


def decode(codes, params, seg_counts, bits, width, dtype=np.float32, pack_axis="feature"):
    """The ``(n, width)`` rows that :func:`encode` coded. Local."""
    bits = int(bits)
    check_codec(bits, ROUNDINGS[0], PARAM_DTYPES[0], pack_axis)
    gr, gl, go = segment_groups(seg_counts, bits, width, pack_axis)
    n = int(np.sum(seg_counts))
    lo, scale = params_to_float(params)
    out = np.empty((n, int(width)), dtype=dtype)
    want = int(code_bytes(seg_counts, bits, width, pack_axis).sum())
    if codes.size != want:
        raise ValueError(f"dequantize: expected {want} code bytes, got {codes.size}")
    _kernels().decode_rows(np.ascontiguousarray(codes, dtype=np.uint8), lo, scale, gr, gl, go,
                           bits, pack_axis == "feature", out)
    return out
