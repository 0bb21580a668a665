"""The backend contract: array module plus local kernels.

A backend owns one array type (numpy or CuPy) and implements every local
sparse operation on :class:`~spgnn.local.csr.LocalCSR` blocks.  It knows no
MPI and no distribution: :mod:`spgnn.core` composes these kernels with the
communicator.  ``numpy`` (scipy) is the reference the others must equal.

Semantics shared by all backends (tested against the numpy backend):

``spmm(a, x, semiring)``
    Dense ``y`` of shape ``(a.shape[0], x.shape[1])`` with
    ``y[i, j] = (+)_k a[i, k] (x) x[k, j]`` over the structural nonzeros of
    row ``i`` (duplicates are separate terms).  Rows with no nonzero hold the
    additive identity; ``row_mean`` semirings divide by the row's nonzero
    count (empty rows give 0).  ``y.dtype`` is the result type of ``a.data``
    and ``x``.
``spgemm(a, b, semiring)``
    ``LocalCSR`` of shape ``(a.shape[0], b.shape[1])`` whose pattern is the
    structural product (no numerical zeros dropped, GraphBLAS semantics),
    computed by :meth:`spgemm_symbolic` (row counts) then
    :meth:`spgemm_numeric`.  Output indices are sorted, without duplicates.
``sddmm(a, x, y, semiring)``
    ``LocalCSR`` with ``a``'s pattern (same order) and
    ``data[e] = a.data[e] (x) ((+)_k x[i, k] (x) y[j, k])`` for nonzero
    ``e = (i, j)``.
``extract_rows(a, rows)`` / ``extract_cols(a, cols)``
    ``a[rows, :]`` and ``a[:, cols]`` as scipy computes them: any order,
    repeats allowed; columns are renumbered to their position in ``cols``.
``transpose(a)``
    ``a.T`` in CSR with sorted indices.
``matmul(a, b)``
    Dense ``a @ b`` (2-D arrays of this backend), exactly numpy's product,
    in a new array laid out for the kernels that read it next.

Sampling and de-duplication (used by :mod:`spgnn.sampling`).  Results are
integer positions and ids, identical bit for bit on every backend and
independent of thread counts:

``sample_rows(indptr, indices, data, rows, keys, s, method, weighted)``
    Keyed sampling without replacement: output row ``r`` holds
    ``min(s, m+)`` distinct positions (into ``indices``/``data``) of CSR row
    ``rows[r]``, increasing (``m+``: the row's entries, or those with
    ``data > 0`` when ``weighted``).  ``method`` is ``"floyd"`` (uniform
    only), ``"es"`` (Efraimidis-Spirakis keys) or ``"its"`` (successive
    inverse transform); every random number is a pure function of
    ``keys[r]`` (uint64) and an integer (SplitMix64; the methods and their
    laws: :mod:`spgnn._kernels.numba.sample`).  Returns ``(out_indptr,
    positions)``, int64, ``out_indptr`` of length ``len(rows) + 1``.
``first_appearance(a, a_ptr, b, b_ptr, n)``
    Per-minibatch de-duplication in first-appearance order: minibatch ``i``'s
    items are ``a[a_ptr[i]:a_ptr[i+1]]`` followed by ``b[b_ptr[i]:b_ptr[i+1]]``
    (vertex ids in ``[0, n)``); each distinct vertex of a minibatch becomes
    one column, numbered by first appearance, minibatches one after the
    other.  Returns ``(col_a, col_b, src, col_ptr)``, int64: the column of
    every item of ``a`` and of ``b``, the vertex of every column, and the
    per-minibatch column offsets (length ``k + 1``).
``sort_rows_by_column(indptr, indices, data)``
    Sorts each CSR row's ``(indices, data)`` pairs by column, IN PLACE
    (columns distinct within a row, so the result is unique); returns
    ``None``.

Element-wise GNN kernels (used by :mod:`spgnn.gnn`).  Dense inputs are 2-D
float32 or float64 arrays; results have the input's dtype and are identical
bit for bit on every backend (same IEEE operations, including ``-0.0`` and
NaN propagation):

``relu(x)``
    ``(out, mask)``: ``out = x`` where ``x > 0``, else ``+0`` (NaN gives
    ``+0``); ``mask = x > 0`` (bool).  New arrays.
``relu_backward(dy, mask)``
    ``dy`` where ``mask``, else ``+0``.  A new array.
``dropout(x, p, base, rows, col0, ncols, out=None)``
    Counter-based inverted dropout of a dense block: ``out[i, j] = x[i, j] *
    (scale if u >= p else 0)`` with ``scale = x.dtype.type(1 / (1 - p))``
    and ``u = (mix64((c ^ base) + GOLDEN) >> 11) * 2**-53`` for the counter
    ``c = rows[i] * ncols + col0 + j`` (uint64, wrapping; ``mix64`` the
    SplitMix64 finaliser, :func:`spgnn.counter_rng.counter_uniform`).
    ``rows`` are global node ids, ``col0`` the global column of ``x[:, 0]``,
    ``ncols`` the global column count, ``base`` the uint64 that mixes the
    caller's keys (seed, epoch, layer).  ``p`` in ``[0, 1)``.  ``out`` may
    be ``x``; a non-float ``x`` is taken as float64.
``dropout_csr(indptr, indices, data, p, base, rows, col0, ncols)``
    The same on the stored entries of a CSR block (counter ``rows[i] *
    ncols + col0 + indices[e]``): a new ``data`` array; the pattern is kept
    (dropped entries become explicit zeros).

``spmm`` serves sparse x dense products of feature blocks too:
``spmm(LocalCSR(indptr, indices, data, shape, check=None), x, plus_times)``
with ``x`` cast to ``data``'s dtype is the numba backend's
``csr_spmm_plus_times`` kernel.
"""

from abc import ABC, abstractmethod

import numpy as np

from ..local.alloc import empty
from ..local.csr import LocalCSR
from . import _validate as V

__all__ = ["Backend"]


class Backend(ABC):
    """Abstract backend.

    The built-in subclasses are listed by module path in
    :data:`spgnn.backends.BUILTIN_BACKENDS`; a third-party subclass is added
    with :func:`spgnn.backends.register_backend`.
    """

    name: str = ""

    # -- availability ------------------------------------------------------
    @classmethod
    def unavailable_reason(cls):
        """``None`` when usable here, otherwise a one-line reason with a hint."""
        return None

    @classmethod
    def is_available(cls) -> bool:
        return cls.unavailable_reason() is None

    # -- arrays --------------------------------------------------------------
    @property
    @abstractmethod
    def xp(self):
        """The array module (numpy or cupy)."""

    def asarray(self, x, dtype=None):
        return self.xp.asarray(x, dtype=dtype)

    def to_host(self, x):
        return x

    def synchronize(self):
        """Wait for work queued on the device (timers call it). Local; a no-op on CPU backends."""

    def from_host(self, x):
        return self.xp.asarray(x)

    # -- dense ----------------------------------------------------------------
    def matmul(self, a, b):
        """Dense ``a @ b`` of two 2-D host arrays into a new 64-byte-aligned array. Local.

        Why not ``a @ b``: the product is usually the ``x`` of the next SpMM
        (a GCN layer's ``H W``), which gathers its rows, and numpy aligns
        only to 16 bytes, so a 64-byte row may span two cache lines (SpMM
        1.04-1.28x slower at f = 16 and 64, kernels/README.md).  Same
        values as ``a @ b`` (the same BLAS call, another output address).
        A device backend overrides it.
        """
        out = empty((a.shape[0], b.shape[1]), np.result_type(a, b))
        return np.matmul(a, b, out=out)

    # -- kernels --------------------------------------------------------------
    @abstractmethod
    def spmm(self, a, x, semiring, out=None): ...

    @abstractmethod
    def spgemm_symbolic(self, a, b):
        """Return the output ``indptr`` (int64, length ``a.shape[0] + 1``)."""

    @abstractmethod
    def spgemm_numeric(self, a, b, indptr, semiring): ...

    def spgemm(self, a, b, semiring):
        V.check_spgemm(a, b, "spgemm")      # errors name the call the user made
        return self.spgemm_numeric(a, b, self.spgemm_symbolic(a, b), semiring)

    def spgemm_masked(self, a, b, semiring, mask=None, *, structure=False, complement=False,
                      method=None):
        """``C<M> = A (+).(x) B`` for any semiring of the registry. Local.

        ``mask`` is a :class:`LocalCSR` of the output's shape with sorted,
        duplicate-free rows (or ``None``: no mask; the kernels rely on the order,
        and take a ``b`` sharing the mask's index arrays as sorted too); ``structure`` allows its
        stored entries, else its non-zero ones; ``complement`` inverts.  The
        result holds exactly the allowed entries of the structural product,
        sorted.  This default is the host reference (compute everything,
        keep the allowed); the numba backend's kernel never forms a
        masked-out entry.  ``method`` (None/"auto", "gustavson", "dot") picks
        the numba kernel; the reference checks and ignores it.
        """
        from . import _algebra_ref as R

        V.check_spgemm(a, b, "spgemm_masked")
        semiring = V.check_semiring(semiring)
        V.check_spgemm_method(method)
        if semiring.row_mean:
            raise ValueError("spgemm_masked: row_mean semirings are SpMM-only")

        def h(m):
            return LocalCSR(*(np.asarray(self.to_host(t)) for t in (m.indptr, m.indices, m.data)),
                            m.shape, check=None)

        c = R.spgemm_all(h(a), h(b), semiring)
        c = R.filter_by_mask(c, None if mask is None else h(mask), structure, complement)
        return LocalCSR(*(self.from_host(t) for t in (c.indptr, c.indices, c.data)), c.shape,
                        check=None)

    def map_binary(self, op, x, y):
        """``op(x[e], y[e])`` over two 1-D host arrays of equal length. Local."""
        from . import _algebra_ref as R
        return R.map_binary(op, x, y)

    def map_unary(self, op, x, rows=None, cols=None):
        """``op(x[e])``, or ``op(x[e], rows[e], cols[e])`` for an index-aware op. Local."""
        from . import _algebra_ref as R
        return R.map_unary(op, x, rows, cols)

    def is_canonical(self, a):
        """Every row of host block ``a`` strictly increasing (sorted, no duplicates). Local."""
        indptr, indices = np.asarray(a.indptr), np.asarray(a.indices)
        rising = np.diff(indices.astype(np.int64)) > 0
        first = indptr[1:-1]                    # a row's first entry may drop below the last
        rising[first[(first > 0) & (first < indices.size)] - 1] = True
        return bool(rising.all())

    def select_band(self, a, kind, offset):
        """The entries ``(i, j)`` of host block ``a`` whose ``j - i`` is ``<=`` (``"tril"``),
        ``>=`` (``"triu"``), ``==`` (``"diag"``) or ``!=`` (``"offdiag"``) ``offset``, in
        ``a``'s storage order (a filter). Local."""
        from . import _algebra_ref as R
        return R.select_band(a, kind, offset)

    def reduce_rows(self, monoid, indptr, data, nrows):
        """``(values, has)`` per row: the monoid's reduction and whether the row had entries."""
        from . import _algebra_ref as R
        return R.reduce_rows(monoid, indptr, data, nrows)

    @abstractmethod
    def sddmm(self, a, x, y, semiring): ...

    @abstractmethod
    def extract_rows(self, a, rows): ...

    @abstractmethod
    def extract_cols(self, a, cols): ...

    @abstractmethod
    def transpose(self, a): ...

    # -- sampling (semantics: module docstring) ---------------------------------
    @abstractmethod
    def sample_rows(self, indptr, indices, data, rows, keys, s, method, weighted):
        """``(out_indptr, positions)``: up to ``s`` keyed samples per row ``rows[r]``. Local."""

    @abstractmethod
    def first_appearance(self, a, a_ptr, b, b_ptr, n):
        """``(col_a, col_b, src, col_ptr)``: per-minibatch first-appearance columns. Local."""

    @abstractmethod
    def sort_rows_by_column(self, indptr, indices, data):
        """Sort each row's ``(indices, data)`` by column in place. Local."""

    # -- element-wise GNN kernels (semantics: module docstring) -----------------
    @abstractmethod
    def relu(self, x):
        """``(max(x, 0), x > 0)``. Local."""

    @abstractmethod
    def relu_backward(self, dy, mask):
        """``dy`` where ``mask``, else 0. Local."""

    @abstractmethod
    def dropout(self, x, p, base, rows, col0, ncols, out=None):
        """Counter-based inverted dropout of a dense block. Local."""

    @abstractmethod
    def dropout_csr(self, indptr, indices, data, p, base, rows, col0, ncols):
        """Counter-based inverted dropout of a CSR block's stored entries: new ``data``. Local."""

    # -- message codec (paper 004 §2.6; host buffers, see spgnn/backends/_quant.py)
    def quantize_rows(self, x, seg_counts, bits, rounding, param_dtype, base, row_keys,
                      pack_axis="feature"):
        """``(codes, params)``: per-row min/max ``bits``-bit codes, packed along ``pack_axis``. Local.

        Runs on host arrays (the codec sits next to the alltoallv); a device
        backend inherits it.  Raises DTypeError on a NaN or infinite row.
        """
        from . import _quant

        return _quant.encode(self.to_host(x), seg_counts, bits, rounding, param_dtype, base,
                             row_keys, pack_axis)

    def dequantize_rows(self, codes, params, seg_counts, bits, width, dtype=np.float32,
                        pack_axis="feature"):
        """The rows :meth:`quantize_rows` coded, as a host array. Local."""
        from . import _quant

        return _quant.decode(codes, params, seg_counts, bits, width, dtype, pack_axis)

    # -- historical embedding cache (spgnn.gnn.hec; kernels/numba/hec.py) --------
    # Not abstract: the numpy versions below are the reference; the numba
    # backend runs the compiled kernels.  Arrays are host arrays.
    def hec_store(self, cache, ptr, clock, keys, vals, born_iter):
        """Store ``(keys, vals)`` in the ring ``cache`` in order; returns the new head. Local.

        ``cache = (tag2slot, slot2tag, stamp, born, buf)``, updated in place
        (semantics: ``kernels/numba/hec.py``).
        """
        return _reference_hec_store(cache, ptr, clock, keys, vals, born_iter)

    def hec_search(self, cache, clock, keys, min_life, ls, check_age):
        """``(positions, slots)`` of the valid hits among ``keys``. Local."""
        tag2slot, _, stamp, _, _ = cache
        keys = np.asarray(keys, dtype=np.int64)
        sl = tag2slot[keys]
        ok = sl >= 0
        if check_age:
            age = clock - stamp[np.maximum(sl, 0)]
            ok &= (age >= min_life) & (age <= ls)
        pos = np.flatnonzero(ok).astype(np.int64)
        return pos, sl[pos].astype(np.int64)

    def hec_load(self, cache, slots, rows, out):
        """``out[rows] = buf[slots]`` (in place). Local."""
        out[np.asarray(rows, dtype=np.int64)] = cache[4][np.asarray(slots, dtype=np.int64)]

    def __repr__(self):
        return f"<spgnn backend {self.name!r}>"


def _reference_hec_store(cache, ptr, clock, keys, vals, born_iter):
    """The ring store vectorised: exact when keys are distinct and fewer than ``cs``."""
    tag2slot, slot2tag, stamp, born, buf = cache
    keys = np.asarray(keys, dtype=np.int64)
    cs = slot2tag.shape[0]
    if keys.size == 0:
        return int(ptr)
    if keys.size > cs or np.unique(keys).size != keys.size:
        # rare (callers push distinct keys, at most cs): one pair at a time
        for i in range(keys.size):
            ptr = _reference_hec_store(cache, ptr, clock, keys[i:i + 1], vals[i:i + 1],
                                       np.asarray(born_iter)[i:i + 1])
        return int(ptr)
    old = tag2slot[keys]
    slot2tag[old[old >= 0]] = -1
    slots = (int(ptr) + np.arange(keys.size)) % cs
    ev = slot2tag[slots]
    tag2slot[ev[ev >= 0]] = -1
    slot2tag[slots] = keys
    tag2slot[keys] = slots
    stamp[slots] = clock
    born[slots] = born_iter
    buf[slots] = vals
    return int((int(ptr) + keys.size) % cs)
