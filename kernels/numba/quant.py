"""Per-row min/max integer quantization of message rows, packed along the node axis.

SuperGCN's wire format (paper 004 §2.6): each row ``x`` of a message block
gets ``Z = min(x)`` and ``S = (max(x) - Z) / (2^b - 1)`` (``S = 1`` for a
constant row); with ``v = (x - Z) · (1/S)`` (float32) its codes are
``q = clip(rint(v), 0, 2^b - 1)`` (nearest) or, stochastic and unbiased,
``q = clip(floor(v) + [u < v - floor(v)], 0, 2^b - 1)`` with ``u`` the
element's keyed counter-based uniform (below).  ``8 / b`` consecutive rows
of one peer segment share a byte per column (row ``k`` of the group in bits
``(per - 1 - k) * b``, the most significant first), so segment ``p`` with
``n_p`` rows takes ``ceil(n_p / per) * F`` bytes and decodes on its own.

**The draws.** One SplitMix64 draw serves four consecutive columns of a
row: with ``W = ceil(F / 4)`` and ``key`` the row's key (the global id of
the node it stands for), element ``(i, c)`` uses

    d = mix64(((key[i] · W + c // 4) ^ base) + GOLDEN)      (uint64, wrapping)
    k = (d >> (16 · (c mod 4))) & 0xFFFF
    u = (k + 1/2) · 2^-16                                     (exact in float32)

so the draws depend on the node and the column only (the same for any rank
count).  ``u`` takes the 65,536 midpoints of a uniform grid, so
``E[q] = floor(v) + round(2^16 · frac(v)) / 2^16``: unbiased up to
``2^-17 · S`` per element, below float32's resolution of ``v`` at int8.
``v - floor(v)`` is exact, so the comparison is deterministic, and the CUDA
port (``kernels/cuda/quant.cuh``) gives the same codes bit for bit.

**Speed.** Encode and decode stream; per group of ``per`` rows the rows
stay in cache between the range pass and the packing pass.  The range pass
runs on the float bits as integers: ``s ^ ((s >> 31) & 0x7FFFFFFF)`` (``63``
for float64) orders like the floats, and the largest ``s & exponent_mask``
equals the mask exactly when a NaN or infinity is present, so one
vectorised integer min/max pass finds the range and any non-finite entry
(float comparisons with NaN semantics do not vectorise).  A row's draws are
made for a whole block of groups first (one vectorised loop per row) into a
scratch buffer read back as uint16 (reading 16-bit lanes right after the
64-bit stores would stall store-to-load forwarding).

A *group* is ``per`` consecutive rows of one segment (the last one of a
segment may be short); ``group_row[g]`` is its first row, ``group_len[g]``
its row count, and its bytes start at ``g * F`` (groups are numbered
segment by segment, so the padding is implicit).  The parallel loops run
over blocks of groups.

With ``bf16`` the parameters are rounded to bfloat16 (nearest even) *before*
quantizing, so sender and receiver use the same ``Z`` and ``S``.
"""

import sys

import numba
import numpy as np

from .splitmix import GOLDEN, mix64

__all__ = ["encode_rows", "decode_rows", "draw_key", "GROUPS_PER_BLOCK"]

assert sys.byteorder == "little", "the uint16 view of the draws assumes little-endian"

GROUPS_PER_BLOCK = 16          # groups per parallel work item (scratch allocated per block)
U16 = np.float32(1.0 / 65536.0)
H17 = np.float32(0.5 / 65536.0)


def draw_key(dtype):
    """``(shift, mask, exponent)`` of the integer view of float ``dtype`` (host helper)."""
    if np.dtype(dtype) == np.float32:
        return np.int32(31), np.int32(0x7FFFFFFF), np.int32(0x7F800000)
    return np.int64(63), np.int64(0x7FFFFFFFFFFFFFFF), np.int64(0x7FF0000000000000)


@numba.njit(cache=True, nogil=True, inline="always")
def _bf16(x, tmp, bits):
    """``x`` (float32) rounded to the nearest bfloat16, ties to even; ``tmp``/``bits`` alias."""
    tmp[0] = x
    b = bits[0]
    b = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    bits[0] = b
    return tmp[0]


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_rows(x, xb, kshift, kmask, kexp, group_row, group_len, bits, stochastic, base,
                row_keys, bf16, out_lo, out_scale, out_codes, out_bad):
    """Quantize and pack the rows of ``x``; see the module docstring.

    Parameters
    ----------
    x : float32 or float64 array ``(n, F)``, C-contiguous
    xb : ``x`` viewed as int32 / int64 (same shape)
    kshift, kmask, kexp : :func:`draw_key` of ``x.dtype`` (typed like ``xb``)
    group_row, group_len : int64 arrays ``(G,)``
    bits : 8, 4 or 2
    stochastic : bool
    base : uint64, the key of the stochastic draws
    row_keys : int64 array ``(n,)``, the rows' draw keys (module docstring)
    bf16 : bool, round the parameters to bfloat16
    out_lo, out_scale : float32 arrays ``(n,)``, overwritten
    out_codes : uint8 array ``(G * F,)``, overwritten
    out_bad : int64 array ``(G,)``: 1 where a group holds a NaN or infinity
    """
    F = x.shape[1]
    G = group_row.shape[0]
    per = 8 // bits
    fq = np.float32((1 << bits) - 1)
    fzero = np.float32(0.0)
    W = (F + 3) // 4
    nW = np.uint64(W)
    nblk = (G + GROUPS_PER_BLOCK - 1) // GROUPS_PER_BLOCK
    for blk in numba.prange(nblk):
        tmp = np.empty(1, dtype=np.float32)
        tb = tmp.view(np.uint32)
        kv = np.empty(2, dtype=xb.dtype)
        kf = kv.view(x.dtype)
        g0 = blk * GROUPS_PER_BLOCK
        g1 = min(G, g0 + GROUPS_PER_BLOCK)
        R0 = group_row[g0] if g0 < g1 else 0
        R1 = group_row[g1 - 1] + group_len[g1 - 1] if g0 < g1 else 0
        # The block's draws first, in one go: reading them back as uint16 right
        # after a row's 64-bit stores would stall store-to-load forwarding.
        draws = np.empty((R1 - R0) * W if stochastic else 0, dtype=np.uint64)
        d16 = draws.view(np.uint16)
        if stochastic:
            for i in range(R0, R1):
                c0 = np.uint64(row_keys[i]) * nW
                dr = draws[(i - R0) * W:(i - R0 + 1) * W]
                for w in range(W):
                    dr[w] = mix64(((c0 + np.uint64(w)) ^ base) + GOLDEN)
        for g in range(g0, g1):
            r0 = group_row[g]
            nr = group_len[g]
            bad = 0
            for k in range(nr):
                i = r0 + k
                # numpy's ufuncs keep int32 lanes (numba's operators widen to int64)
                lo = kmask
                hi = np.invert(kmask)
                e = np.bitwise_xor(kexp, kexp)
                xbi = xb[i]
                for c in range(F):
                    s = xbi[c]
                    o = np.bitwise_xor(s, np.bitwise_and(np.right_shift(s, kshift), kmask))
                    lo = min(lo, o)
                    hi = max(hi, o)
                    e = max(e, np.bitwise_and(s, kexp))
                if e == kexp:
                    bad = 1
                if F > 0:
                    kv[0] = np.bitwise_xor(lo, np.bitwise_and(np.right_shift(lo, kshift), kmask))
                    kv[1] = np.bitwise_xor(hi, np.bitwise_and(np.right_shift(hi, kshift), kmask))
                    flo = np.float64(kf[0])
                    fhi = np.float64(kf[1])
                else:
                    flo = 0.0
                    fhi = 0.0
                z32 = np.float32(flo)
                s32 = np.float32((fhi - flo) / np.float64(fq))
                if s32 == 0:
                    s32 = np.float32(1.0)
                if bf16:
                    z32 = _bf16(z32, tmp, tb)
                    s32 = _bf16(s32, tmp, tb)
                    if s32 == 0:
                        s32 = np.float32(1.0)
                out_lo[i] = z32
                out_scale[i] = s32
            out_bad[g] = bad
            # A slice, not g * F + c: a loop-variant index that may be negative
            # (numba's wraparound) does not vectorise.
            cg = out_codes[g * F:(g + 1) * F]
            for c in range(F):
                cg[c] = 0
            # Row by row, x's row and the group's F bytes contiguous: the
            # loops vectorise; float32 arithmetic loses nothing at <= 8 bits.
            for k in range(nr):
                i = r0 + k
                xi = x[i]
                z = out_lo[i]
                inv = np.float32(1.0) / out_scale[i]
                sh = np.int32((per - 1 - k) * bits)
                if stochastic:
                    ui = d16[(i - R0) * 4 * W:(i - R0 + 1) * 4 * W]
                    for c in range(F):
                        v = (np.float32(xi[c]) - z) * inv
                        fl = np.floor(v)
                        u = np.float32(ui[c]) * U16 + H17
                        q = fl + np.float32(1.0) if u < v - fl else fl
                        # Clamp: fp error can give qmax + 1 (or -1 with rounded
                        # params), which would spill into the next row's bits.
                        q = min(max(q, fzero), fq)
                        cg[c] = np.bitwise_or(cg[c], np.uint8(np.left_shift(np.int32(q), sh)))
                else:
                    for c in range(F):
                        v = (np.float32(xi[c]) - z) * inv
                        q = min(max(np.rint(v), fzero), fq)
                        cg[c] = np.bitwise_or(cg[c], np.uint8(np.left_shift(np.int32(q), sh)))


@numba.njit(cache=True, nogil=True, parallel=True)
def decode_rows(codes, lo, scale, group_row, group_len, bits, out):
    """``out[i, c] = q(i, c) * scale[i] + lo[i]`` (float32, no fused multiply-add).

    The inverse of :func:`encode_rows`; ``out`` is a float array ``(n, F)``,
    overwritten; ``lo`` and ``scale`` float32 ``(n,)``.
    """
    F = out.shape[1]
    G = group_row.shape[0]
    per = 8 // bits
    mask = np.uint8((1 << bits) - 1)
    nblk = (G + GROUPS_PER_BLOCK - 1) // GROUPS_PER_BLOCK
    for blk in numba.prange(nblk):
        for g in range(blk * GROUPS_PER_BLOCK, min(G, (blk + 1) * GROUPS_PER_BLOCK)):
            r0 = group_row[g]
            nr = group_len[g]
            cg = codes[g * F:(g + 1) * F]
            for k in range(nr):
                i = r0 + k
                oi = out[i]
                z = lo[i]
                s = scale[i]
                sh = np.uint8((per - 1 - k) * bits)
                for c in range(F):
                    q = np.bitwise_and(np.right_shift(cg[c], sh), mask)
                    oi[c] = np.float32(q) * s + z
