"""Per-row min/max integer quantization of message rows, packed along the feature or node axis.

SuperGCN's wire format (paper 004 §2.6): each row ``x`` of a message block
gets ``Z = min(x)`` and ``S = (max(x) - Z) / (2^b - 1)`` (``S = 1`` for a
constant row); with ``v = (x - Z) · (1/S)`` (float32) its codes are
``q = clip(rint(v), 0, 2^b - 1)`` (nearest) or, stochastic and unbiased,
``q = clip(floor(v) + [u < v - floor(v)], 0, 2^b - 1)`` with ``u`` the
element's keyed counter-based uniform (below).  ``8 / b`` codes share a
byte, the first in the most significant bits (shift ``(per - 1 - k) * b``):

* **feature axis** (the default): the codes of a peer segment in row-major
  order, ``8 / b`` consecutive elements per byte, so segment ``p`` with
  ``n_p`` rows takes exactly ``ceil(n_p · F · b / 8)`` bytes (the segment,
  not each row, is padded to a whole byte);
* **node axis** (the authors' layout): ``8 / b`` consecutive rows of one
  segment share a byte per column, so segment ``p`` takes
  ``ceil(n_p / per) * F`` bytes (padded to whole groups of rows).

Either way a segment decodes on its own.

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
made by one vectorised loop into a ``ceil(F/4)``-word scratch right before
the row is quantized, which reads them back as uint16 lanes (with vector
loads this does not stall; drawing a whole block of rows first, as an
earlier version did, streamed the draws through a larger buffer and was
15-25 % slower).

A *group* is ``per`` consecutive rows of one segment (the last one of a
segment may be short); ``group_row[g]`` is its first row, ``group_len[g]``
its row count and ``group_off[g]`` its first code byte.  A whole group
takes ``F`` bytes in both layouts (so group boundaries are byte
boundaries and groups pack independently); a short last group takes
``ceil(len · F / per)`` (feature) or ``F`` (node) bytes.  The codes of a
group are computed into a one-byte-per-element scratch first and packed
from there with whole-word loads.  The parallel loops run over blocks of
groups.

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


@numba.njit(cache=True, nogil=True, inline="always")
def _pack(qs, q16, q32, cg, nb, F, per, feature):
    """Pack the group's codes ``qs`` (``per`` rows of ``F``, rows past the group zero) into ``cg``.

    Feature axis: byte ``m`` holds elements ``m·per .. m·per + per - 1`` of the
    group's row-major codes, the first in the high bits; the loads are whole
    16/32-bit words (``q16``/``q32`` alias ``qs``, little-endian: element
    ``m·per`` is the low byte), so the loops vectorise.  Node axis: byte ``c``
    holds column ``c`` of the ``per`` rows, row 0 in the high bits.
    """
    if per == 1:
        for m in range(nb):
            cg[m] = qs[m]
    elif per == 2:
        if feature:
            for m in range(nb):
                w = q16[m]
                # (e0 << 4) | e1 with e0 the low byte, e1 the high byte (codes <= 15)
                cg[m] = np.uint8(np.bitwise_or(np.left_shift(w, np.uint16(4)),
                                               np.right_shift(w, np.uint16(8))) & np.uint16(0xFF))
        else:
            for c in range(F):
                cg[c] = np.uint8(np.bitwise_or(np.left_shift(qs[c], np.uint8(4)), qs[F + c]))
    else:
        if feature:
            for m in range(nb):
                w = q32[m]
                # e0..e3 (codes <= 3) at bits 0, 8, 16, 24 -> (e0<<6)|(e1<<4)|(e2<<2)|e3
                t = np.bitwise_or(np.bitwise_or(np.left_shift(w, np.uint32(6)),
                                                np.right_shift(w, np.uint32(4))),
                                  np.bitwise_or(np.right_shift(w, np.uint32(14)),
                                                np.right_shift(w, np.uint32(24))))
                cg[m] = np.uint8(t & np.uint32(0xFF))
        else:
            for c in range(F):
                cg[c] = np.uint8(np.bitwise_or(
                    np.bitwise_or(np.left_shift(qs[c], np.uint8(6)),
                                  np.left_shift(qs[F + c], np.uint8(4))),
                    np.bitwise_or(np.left_shift(qs[2 * F + c], np.uint8(2)), qs[3 * F + c])))


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_rows(x, xb, kshift, kmask, kexp, group_row, group_len, group_off, bits, feature,
                stochastic, base, row_keys, bf16, out_lo, out_scale, out_codes, out_bad):
    """Quantize and pack the rows of ``x``; see the module docstring.

    Parameters
    ----------
    x : float32 or float64 array ``(n, F)``, C-contiguous
    xb : ``x`` viewed as int32 / int64 (same shape)
    kshift, kmask, kexp : :func:`draw_key` of ``x.dtype`` (typed like ``xb``)
    group_row, group_len, group_off : int64 arrays ``(G,)``: first row, row
        count and first code byte of every group
    bits : 8, 4 or 2
    feature : bool, feature-axis (row-major) packing; else node-axis
    stochastic : bool
    base : uint64, the key of the stochastic draws
    row_keys : int64 array ``(n,)``, the rows' draw keys (module docstring)
    bf16 : bool, round the parameters to bfloat16
    out_lo, out_scale : float32 arrays ``(n,)``, overwritten
    out_codes : uint8 array (all the groups' bytes), overwritten
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
        # The group's codes, one byte each, before packing (rows past the group stay 0).
        qs = np.zeros(per * F, dtype=np.uint8)
        q16 = qs[:(per * F) // 2 * 2].view(np.uint16)
        q32 = qs[:(per * F) // 4 * 4].view(np.uint32)
        # One row's draws, made right before the row is quantized (they stay in L1).
        rowd = np.empty(W if stochastic else 0, dtype=np.uint64)
        r16 = rowd.view(np.uint16)
        g0 = blk * GROUPS_PER_BLOCK
        g1 = min(G, g0 + GROUPS_PER_BLOCK)
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
            # Row by row, x's row and its F codes contiguous: the loops
            # vectorise; float32 arithmetic loses nothing at <= 8 bits.
            for k in range(nr):
                i = r0 + k
                xi = x[i]
                qk = qs[k * F:(k + 1) * F]
                z = out_lo[i]
                inv = np.float32(1.0) / out_scale[i]
                if stochastic:
                    c0 = np.uint64(row_keys[i]) * nW
                    for w in range(W):
                        rowd[w] = mix64(((c0 + np.uint64(w)) ^ base) + GOLDEN)
                    for c in range(F):
                        v = (np.float32(xi[c]) - z) * inv
                        fl = np.floor(v)
                        u = np.float32(r16[c]) * U16 + H17
                        q = fl + np.float32(1.0) if u < v - fl else fl
                        # Clamp: fp error can give qmax + 1 (or -1 with rounded
                        # params), which would spill into the neighbour's bits.
                        q = min(max(q, fzero), fq)
                        qk[c] = np.uint8(np.int32(q))
                else:
                    for c in range(F):
                        v = (np.float32(xi[c]) - z) * inv
                        q = min(max(np.rint(v), fzero), fq)
                        qk[c] = np.uint8(np.int32(q))
            if nr < per:
                qs[nr * F:] = 0
            nb = (nr * F + per - 1) // per if feature else F
            # A slice, not off + c: a loop-variant index that may be negative
            # (numba's wraparound) does not vectorise.
            off = group_off[g]
            _pack(qs, q16, q32, out_codes[off:off + nb], nb, F, per, feature)


@numba.njit(cache=True, nogil=True, parallel=True)
def decode_rows(codes, lo, scale, group_row, group_len, group_off, bits, feature, out):
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
        qs = np.zeros(per * F, dtype=np.uint8)
        q16 = qs[:(per * F) // 2 * 2].view(np.uint16)
        q32 = qs[:(per * F) // 4 * 4].view(np.uint32)
        for g in range(blk * GROUPS_PER_BLOCK, min(G, (blk + 1) * GROUPS_PER_BLOCK)):
            r0 = group_row[g]
            nr = group_len[g]
            off = group_off[g]
            if feature:
                # Unpack to one byte per element (whole words, see _pack), then scale.
                nb = (nr * F + per - 1) // per
                cg = codes[off:off + nb]
                if per == 1:
                    for m in range(nb):
                        qs[m] = cg[m]
                elif per == 2:
                    for m in range(nb):
                        b = np.uint16(cg[m])
                        q16[m] = np.bitwise_or(np.right_shift(b, np.uint16(4)),
                                               np.left_shift(b & np.uint16(15), np.uint16(8)))
                else:
                    for m in range(nb):
                        b = np.uint32(cg[m])
                        q32[m] = np.bitwise_or(
                            np.bitwise_or(np.right_shift(b, np.uint32(6)),
                                          np.left_shift(np.right_shift(b, np.uint32(4)) &
                                                        np.uint32(3), np.uint32(8))),
                            np.bitwise_or(np.left_shift(np.right_shift(b, np.uint32(2)) &
                                                        np.uint32(3), np.uint32(16)),
                                          np.left_shift(b & np.uint32(3), np.uint32(24))))
                for k in range(nr):
                    i = r0 + k
                    oi = out[i]
                    qk = qs[k * F:(k + 1) * F]
                    z = lo[i]
                    s = scale[i]
                    for c in range(F):
                        oi[c] = np.float32(qk[c]) * s + z
            else:
                cg = codes[off:off + F]
                for k in range(nr):
                    i = r0 + k
                    oi = out[i]
                    z = lo[i]
                    s = scale[i]
                    sh = np.uint8((per - 1 - k) * bits)
                    for c in range(F):
                        q = np.bitwise_and(np.right_shift(cg[c], sh), mask)
                        oi[c] = np.float32(q) * s + z
