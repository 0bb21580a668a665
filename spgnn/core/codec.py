"""Quantized row exchanges: an alltoallv whose rows travel as ``b``-bit codes (paper 004 §2.6).

A :class:`Codec` wraps the backend's message codec
(:meth:`~spgnn.backends.base.Backend.quantize_rows`) around two alltoallv
calls on a :class:`~spgnn.comm.Communicator`: first the per-row parameters
``(Z, S)`` (label ``<label>:params``), then the packed codes
(``<label>:data``), so the ledger holds the bytes that actually moved,
data and parameters apart:

* data to peer ``p``: ``ceil(n_p·F·b/8)`` bytes (feature-axis packing, the
  default: a segment's codes row-major, padded to a whole byte), or
  ``ceil(n_p·b/8)·F`` (``pack_axis="node"``, the authors' layout: each peer
  segment padded to a multiple of ``8/b`` rows);
* parameters: ``4·n_p`` (bf16) or ``8·n_p`` (fp32) bytes.

With int2 and bf16 parameters the reduction against fp32 rows is
``4·n·F / (n·F/4 + 4·n) = 16F/(F+16)`` whenever ``n_p·F`` is a multiple of
4 (any even ``F`` with even ``n_p``, any ``F`` that is a multiple of 4);
node-axis packing reaches it only when every ``n_p`` is a multiple of 4.

Stochastic rounding draws one keyed counter-based 16-bit uniform per
element, four from each SplitMix64 draw of counter ``row_key·ceil(F/4) +
column // 4`` (``row_key`` the global id of the node the row stands for;
exact formula: ``kernels/numba/quant.py``) and the key mixes the codec's seed, a caller key (the
epoch) and a call counter, so every exchange of every epoch draws afresh
and the draws do not depend on the rank count.  All ranks make the same
exchanges in the same order (SPMD), so their counters agree.
"""

import numpy as np

from ..backends import _quant
from ..counter_rng import mix64

__all__ = ["Codec", "make_codec", "wire_bytes", "QUANTIZE_CHOICES"]

#: The quantized exchanges a command or an :class:`~spgnn.gnn.placement.Exchange` may ask for.
QUANTIZE_CHOICES = ("none", "int8", "int4", "int2")


def wire_bytes(seg_counts, width, bits=None, param_dtype="bf16", itemsize=4,
               pack_axis="feature"):
    """``(data, params)`` bytes to every peer: the wire-format formula. Pure.

    ``bits=None`` is an uncoded exchange: ``itemsize·n_p·F`` data bytes,
    no parameters.
    """
    n = np.asarray(seg_counts, dtype=np.int64)
    if bits is None:
        return n * int(width) * int(itemsize), np.zeros_like(n)
    return (_quant.code_bytes(n, bits, width, pack_axis),
            n * (4 if param_dtype == "bf16" else 8))


class Codec:
    """``bits``-bit per-row min/max quantization of exchanged rows.

    Parameters
    ----------
    bits : {8, 4, 2}
    rounding : {"stochastic", "nearest"}
        Stochastic (unbiased, the paper's theory) by default; nearest is
        what the authors' code does.
    param_dtype : {"bf16", "fp32"}
        How ``(Z, S)`` travel (2 or 4 bytes each); bf16 parameters are
        rounded before quantizing, so both sides use the same values.
    seed : int
        Key of the stochastic draws.
    pack_axis : {"feature", "node"}
        How ``8/b`` codes share a byte: row-major within a peer segment
        (``ceil(n_p·F·b/8)`` bytes, the default) or ``8/b`` rows per column
        (``ceil(n_p·b/8)·F``, the authors' layout; kept for comparison).
    """

    def __init__(self, bits, rounding="stochastic", param_dtype="bf16", seed=0,
                 pack_axis="feature"):
        self.bits = _quant.check_codec(bits, rounding, param_dtype, pack_axis)
        self.rounding, self.param_dtype, self.seed = rounding, param_dtype, int(seed)
        self.pack_axis = pack_axis
        self.key = 0
        self.calls = 0

    def __repr__(self):
        return (f"Codec(int{self.bits}, rounding={self.rounding!r}, "
                f"param_dtype={self.param_dtype!r}, seed={self.seed}, "
                f"pack_axis={self.pack_axis!r})")

    def rekey(self, key):
        """Start a new stream of draws (e.g. per epoch): ``key`` and a zero call counter. Local."""
        self.key, self.calls = int(key), 0

    def _base(self):
        self.calls += 1
        k = (np.uint64(self.seed & (2**64 - 1)) * np.uint64(0x9E3779B1)
             ^ np.uint64(self.key & (2**64 - 1)) * np.uint64(0x85EBCA77)
             ^ np.uint64(self.calls) * np.uint64(0xC2B2AE3D))
        return np.uint64(mix64(np.uint64(k)))

    def encode(self, backend, x, seg_counts, row_keys):
        """``(codes, params)`` of ``x`` (one draw key per call). Local."""
        return backend.quantize_rows(x, seg_counts, self.bits, self.rounding, self.param_dtype,
                                     self._base(), row_keys, self.pack_axis)

    def alltoallv(self, comm, backend, x, send_counts, recv_counts, row_keys, *, label,
                  dtype=None, split=False):
        """Send the rows of ``x`` coded; return the received rows decoded. Collective.

        ``send_counts``/``recv_counts`` are rows per peer (both known, as in
        an exchange plan); ``row_keys`` one int per sent row.  Two alltoallv
        over ``comm``: ``<label>:params`` and ``<label>:data``.
        """
        x = np.ascontiguousarray(backend.to_host(x))
        width = int(np.prod(x.shape[1:], dtype=np.int64))
        with comm.clock("quantize"):             # the epoch phase "quantize" (comm.Ledger)
            codes, params = self.encode(backend, x.reshape(x.shape[0], width), send_counts,
                                        row_keys)
        recv_counts = np.asarray(recv_counts, dtype=np.int64)
        got_p = comm.alltoallv(params, send_counts, recv_counts, label=f"{label}:params",
                               split=split)
        got_c = comm.alltoallv(codes,
                               _quant.code_bytes(send_counts, self.bits, width, self.pack_axis),
                               _quant.code_bytes(recv_counts, self.bits, width, self.pack_axis),
                               label=f"{label}:data", split=split)
        with comm.clock("quantize"):
            out = backend.dequantize_rows(got_c, got_p, recv_counts, self.bits, width,
                                          dtype or x.dtype, self.pack_axis)
        return out.reshape((out.shape[0],) + x.shape[1:])


def make_codec(quantize, rounding="stochastic", param_dtype="bf16", seed=0, pack_axis="feature"):
    """A :class:`Codec` from a name ``"none" | "int8" | "int4" | "int2"`` (``None`` for none). Pure."""
    if quantize in (None, "none", "fp32"):
        return None
    if quantize not in QUANTIZE_CHOICES:
        raise ValueError(f"quantize must be one of {QUANTIZE_CHOICES}, but got {quantize!r}")
    return Codec(int(quantize[3:]), rounding, param_dtype, seed, pack_axis)
