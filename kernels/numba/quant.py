"""Per-row min/max integer quantization of message rows, packed along the node axis.

SuperGCN's wire format (paper 004 §2.6): each row ``x`` of a message block
gets ``Z = min(x)`` and ``S = (max(x) - Z) / (2^b - 1)`` (``S = 1`` for a
constant row); its codes are ``q = clip(round((x - Z) · (1/S)), 0, 2^b - 1)`` (float32)
with ``round`` either ``rint`` (nearest) or ``floor(v + u)``, ``u`` a keyed
counter-based uniform (stochastic, unbiased).  ``8 / b`` consecutive rows
of one peer segment share a byte per column (row ``k`` of the group in bits
``(per - 1 - k) * b``, the most significant first), so segment ``p`` with
``n_p`` rows takes ``ceil(n_p / per) * F`` bytes and decodes on its own.

A *group* is ``per`` consecutive rows of one segment (the last one of a
segment may be short); ``group_row[g]`` is its first row, ``group_len[g]``
its row count, and its bytes start at ``g * F`` (groups are numbered
segment by segment, so the padding is implicit).  Groups are independent:
the loops run over them in parallel, each group's rows stay in cache
between the min/max pass and the packing pass.

With ``bf16`` the parameters are rounded to bfloat16 (nearest even) *before*
quantizing, so sender and receiver use the same ``Z`` and ``S``.
"""

import numba
import numpy as np

from .splitmix import GOLDEN, INV53, S11, mix64

__all__ = ["encode_rows", "decode_rows"]


@numba.njit(cache=True, nogil=True, inline="always")
def _uniform(counter, base):
    return np.float64(mix64((counter ^ base) + GOLDEN) >> S11) * INV53


@numba.njit(cache=True, nogil=True, inline="always")
def _bf16(x, tmp, bits):
    """``x`` (float32) rounded to the nearest bfloat16, ties to even; ``tmp``/``bits`` alias."""
    tmp[0] = x
    b = bits[0]
    b = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    bits[0] = b
    return tmp[0]


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_rows(x, group_row, group_len, bits, stochastic, base, row_keys, bf16,
                out_lo, out_scale, out_codes, out_bad):
    """Quantize and pack the rows of ``x``; see the module docstring.

    Parameters
    ----------
    x : float32 or float64 array ``(n, F)``, C-contiguous
    group_row, group_len : int64 arrays ``(G,)``
    bits : 8, 4 or 2
    stochastic : bool
    base : uint64, the key of the stochastic draws
    row_keys : int64 array ``(n,)``: the counter of element ``(i, c)`` is
        ``row_keys[i] * F + c`` (the global id of the node the row stands for,
        so the draws do not depend on the rank count)
    bf16 : bool, round the parameters to bfloat16
    out_lo, out_scale : float32 arrays ``(n,)``, overwritten
    out_codes : uint8 array ``(G * F,)``, overwritten
    out_bad : int64 array ``(G,)``: 1 where a group holds a NaN or infinity
    """
    F = x.shape[1]
    per = 8 // bits
    qmax = (1 << bits) - 1
    fq = np.float32(qmax)
    fzero = np.float32(0.0)
    nF = np.uint64(F)
    for g in numba.prange(group_row.shape[0]):
        tmp = np.empty(1, dtype=np.float32)
        tb = tmp.view(np.uint32)
        r0 = group_row[g]
        nr = group_len[g]
        out_bad[g] = 0
        for k in range(nr):
            i = r0 + k
            lo = np.float64(x[i, 0]) if F > 0 else 0.0
            hi = lo
            # v * 0 is 0 for finite v and NaN for NaN or infinity: one pass
            # finds both the range and any non-finite entry.
            s = 0.0
            for c in range(F):
                v = np.float64(x[i, c])
                s += v * 0.0
                lo = min(lo, v)
                hi = max(hi, v)
            if s != 0.0:
                out_bad[g] = 1
            z32 = np.float32(lo)
            s32 = np.float32((hi - lo) / fq)
            if s32 == 0:
                s32 = np.float32(1.0)
            if bf16:
                z32 = _bf16(z32, tmp, tb)
                s32 = _bf16(s32, tmp, tb)
                if s32 == 0:
                    s32 = np.float32(1.0)
            out_lo[i] = z32
            out_scale[i] = s32
        base_byte = g * F
        for c in range(F):
            out_codes[base_byte + c] = 0
        # Row by row, both x's row and the group's bytes contiguous (SIMD for
        # nearest); float32 arithmetic: at <= 8 bits it loses nothing.
        for k in range(nr):
            i = r0 + k
            z = out_lo[i]
            inv = np.float32(1.0) / out_scale[i]
            sh = (per - 1 - k) * bits
            ctr = np.uint64(row_keys[i]) * nF
            for c in range(F):
                v = (np.float32(x[i, c]) - z) * inv
                if stochastic:
                    q = np.floor(v + np.float32(_uniform(ctr + np.uint64(c), base)))
                else:
                    q = np.rint(v)
                # Clamp: fp error can give qmax + 1 (or -1 with rounded params),
                # which would corrupt the neighbouring row's bits.
                q = min(max(q, fzero), fq)
                out_codes[base_byte + c] |= np.uint8(np.int32(q) << sh)


@numba.njit(cache=True, nogil=True, parallel=True)
def decode_rows(codes, lo, scale, group_row, group_len, bits, out):
    """``out[i, c] = q(i, c) * scale[i] + lo[i]``: the inverse of :func:`encode_rows`.

    ``out`` is a float array ``(n, F)``, overwritten; ``lo`` and ``scale``
    float32 ``(n,)``.
    """
    F = out.shape[1]
    per = 8 // bits
    mask = np.uint8((1 << bits) - 1)
    for g in numba.prange(group_row.shape[0]):
        r0 = group_row[g]
        nr = group_len[g]
        base_byte = g * F
        for k in range(nr):
            i = r0 + k
            z = lo[i]
            s = scale[i]
            sh = np.uint8((per - 1 - k) * bits)
            for c in range(F):
                q = (codes[base_byte + c] >> sh) & mask
                out[i, c] = np.float32(q) * s + z
