"""The ``numba`` backend: compiled, multi-threaded CPU kernels.

Array module numpy; the kernels live in :mod:`spgnn._kernels.numba` and are
imported (hence numba imported, and the kernels loaded from numba's on-disk
cache or compiled) on first use, so that ``import spgnn`` stays fast and
:meth:`NumbaBackend.unavailable_reason` costs a ``find_spec``.

The Python side validates arguments (the same checks as the numpy reference,
in :mod:`spgnn.backends._validate`), converts the semiring to integer op
codes, casts operands to one value dtype and one index dtype (so only
(index dtype) x (value dtype) kernel signatures exist), allocates outputs
and applies ``row_mean`` division.
"""

import importlib.util
import math

import numpy as np

from ..local.alloc import empty, empty_arrays
from ..local.csr import LocalCSR
from . import _host_kernels
from . import _validate as V
from . import numpy_backend as _reference
from .base import Backend

__all__ = ["NumbaBackend"]

_K = {}
_JIT = {}   # scalar operator function -> its numba-compiled version


def _mul_func(semiring):
    from ..local.ops import binary_op
    return binary_op(semiring.multiply).func


def _kernels():
    """The kernel modules, imported on first use (this is what imports numba)."""
    if not _K:
        import numba

        from .._kernels.numba import _ops, dedup, extract, gnn, hec, sddmm, spgemm, spmm

        _K.update(numba=numba, ops=_ops, spmm=spmm, spgemm=spgemm, sddmm=sddmm,
                  extract=extract, dedup=dedup, gnn=gnn, hec=hec)
    return _K


def _generic():
    """The kernels specialised on a semiring's operators (SpMM/SDDMM beyond the op codes)."""
    from .._kernels.numba import semiring_generic
    return semiring_generic


def _nparts(k):
    """Row chunks per parallel kernel: a few per thread, for load balance."""
    return 4 * k["numba"].get_num_threads()


#: Below this many scalar operations (nnz * n for SpMM/SDDMM, flops for
#: SpGEMM; about 0.5 ms of one core) a kernel runs on the calling thread
#: alone: waking the thread pool costs ~10 us on an idle machine but whole
#: scheduler time slices (ms) when other jobs occupy the cores, which made
#: small calls (sampling-sized Q @ A, tiny SpMMs) 5-10x slower than serial.
SERIAL_WORK = 1_000_000

#: Element-wise GNN kernels (ReLU, dropout) on blocks of fewer entries run
#: single-threaded (dropout) or as numpy expressions (ReLU): waking a thread
#: pool costs more than hashing a few ten thousand entries (and far more on
#: an oversubscribed machine).  Results do not depend on it.
PARALLEL_MIN = 1 << 17


class _threads:
    """Context manager: ``numba.set_num_threads(1)`` when ``work`` is small, restored on exit.

    ``set_num_threads`` is thread-local and cheap; with one thread numba's
    OpenMP region does not wake the pool.  Results do not depend on it.
    """

    def __init__(self, k, work):
        self.numba = k["numba"]
        self.serial = work < SERIAL_WORK
        self.saved = None

    def __enter__(self):
        if self.serial:
            self.saved = self.numba.get_num_threads()
            if self.saved != 1:
                self.numba.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        if self.saved is not None and self.saved != 1:
            self.numba.set_num_threads(self.saved)
        return False


def _codes(k, semiring):
    ops = k["ops"]
    if not semiring.builtin:
        raise ValueError(f"semiring {semiring.name!r}: this kernel implements only "
                         f"{sorted(ops.ADD_CODES)} with {sorted(ops.MUL_CODES)}; the caller "
                         f"routes other semirings to the generic kernels")
    return ops.ADD_CODES[semiring.add.name], ops.MUL_CODES[semiring.multiply]


def _common_index(*arrays):
    """int64 if any operand uses it, else int32: one index dtype per kernel call."""
    return np.dtype(np.int64) if any(a.dtype == np.int64 for a in arrays) else np.dtype(np.int32)


def _spgemm_work(k, a, b):
    """Work estimate of ``A @ B`` for :class:`_threads`, capped at :data:`SERIAL_WORK`:
    the scalar products plus 8 per output row.  Each output row walks a chain
    of dependent loads (``A``'s entry, ``B``'s row pointer, ``B``'s row)
    whatever its length, so a road network's ``A @ A`` (2-3 nonzeros per row,
    5 products) is worth both threads long before its flop count says so.
    Counted by an early-exit kernel: only "below the threshold or not" matters."""
    return int(k["spgemm"].spgemm_work_at_least(a.indptr, a.indices, b.indptr, 8, SERIAL_WORK))


def _canonical(k, b):
    """Every row of ``B`` strictly increasing: enables the SpGEMM merge path.

    Serial, O(nnz + rows).
    """
    return bool(k["spgemm"].rows_strictly_increasing(b.indptr, b.indices))


class NumbaBackend(Backend):
    """Numba CPU backend: row-parallel kernels, numpy arrays."""

    name = "numba"

    @classmethod
    def unavailable_reason(cls):
        # find_spec, not import: importing numba costs about half a second
        if importlib.util.find_spec("numba") is None:
            return "numba is not installed (pip install numba)"
        return None

    @property
    def xp(self):
        return np

    # -- SpMM ---------------------------------------------------------------
    def spmm(self, a, x, semiring, out=None):
        """``Y = A (+).(x) X``; see :mod:`spgnn.backends.base` for the semantics.

        Parameters
        ----------
        a : LocalCSR ``(m, k)``
        x : ndarray ``(k, n)``, float32 or float64 (any layout; copied to
            C order in the result dtype when needed)
        semiring : Semiring or name
        out : ndarray ``(m, n)`` of the result dtype, optional; filled and returned

        Returns
        -------
        ndarray ``(m, n)`` of ``np.result_type(a.data, x)``
        """
        x, semiring, dt = V.check_spmm(a, x, semiring)
        m, n = a.shape[0], x.shape[1]
        if out is not None:
            V.check_out(out, (m, n), dt, "spmm")
        k = _kernels()
        data = a.data.astype(dt, copy=False)
        x = np.ascontiguousarray(x, dtype=dt)
        # write straight into `out` unless the kernel cannot (layout) or must
        # not (it aliases an input it reads while writing)
        direct = (out is not None and out.flags.c_contiguous
                  and not np.may_share_memory(out, x) and not np.may_share_memory(out, data))
        y = out if direct else empty((m, n), dt)
        if not semiring.builtin:
            # GraphBLAS and user semirings: the kernel specialised on the operators
            kern = _generic().spmm_kernel(*self._semiring_funcs(semiring))
            with _threads(k, a.nnz * n + m * n):
                kern(a.indptr, a.indices, data, x, dt.type(semiring.add.identity), _nparts(k), y)
            if out is not None and not direct:
                out[...] = y
                return out
            return y
        add, mul = _codes(k, semiring)
        ops = k["ops"]
        with _threads(k, a.nnz * n + m * n):
            if add == ops.ADD_PLUS and mul == ops.MUL_TIMES:
                k["spmm"].csr_spmm_plus_times(a.indptr, a.indices, data, x, _nparts(k), y)
            elif (add, mul) in k["spmm"].REGISTER_SEMIRINGS:
                k["spmm"].csr_spmm_semiring(a.indptr, a.indices, data, x, add, mul,
                                            _nparts(k), y)
            else:
                k["spmm"].csr_spmm_rowwise(a.indptr, a.indices, data, x, add, mul,
                                           dt.type(semiring.add.identity), _nparts(k), y)
        if semiring.row_mean:
            y /= np.maximum(np.diff(a.indptr), 1).astype(dt)[:, None]
        if out is not None and not direct:
            out[...] = y
            return out
        return y

    # -- SpGEMM --------------------------------------------------------------
    def spgemm(self, a, b, semiring):
        """``C = A (+).(x) B`` (sorted, duplicate-free output, structural zeros kept).

        When every row of ``A`` holds exactly one nonzero (a selection matrix:
        the sampling shape ``Q @ A``) and the selected rows of ``B`` are
        canonical, one streaming pass copies and scales them
        (:func:`csr_spgemm_onehot`); otherwise, or when that pass finds an
        unsorted row, the two-pass Gustavson product.  Same result either way.
        """
        V.check_spgemm(a, b, "spgemm")
        semiring = V.check_semiring(semiring)
        if not semiring.builtin:
            return self.spgemm_masked(a, b, semiring)
        m = a.shape[0]
        k = _kernels()
        indptr = np.empty(m + 1, dtype=np.int64)
        if m == 0 or not k["spgemm"].selection_indptr(a.indptr, a.indices, b.indptr, indptr):
            return self._spgemm_two_pass(k, a, b, semiring)
        n = b.shape[1]
        dt = V.result_dtype(a.data, b.data)
        nnz = int(indptr[-1])
        idt = V.index_dtype_for(nnz, (m, n), a.index_dtype, b.index_dtype)
        _, mul = _codes(k, semiring)
        out_indptr = indptr.astype(idt, copy=False)
        out_indices, out_data = empty_arrays((nnz, idt), (nnz, dt))
        # a vector row copy: ~8 ns per row and 1-2 ns per entry on one core
        # (0.5 ns per unit of SERIAL_WORK); a second thread paid for its
        # wake-up from ~0.25 ms of copying (measured, benchmarks' Q @ A)
        with _threads(k, 16 * m + 3 * nnz):
            unsorted = k["spgemm"].csr_spgemm_onehot(
                a.indices.astype(idt, copy=False), a.data.astype(dt, copy=False),
                b.indptr.astype(idt, copy=False), b.indices.astype(idt, copy=False),
                b.data.astype(dt, copy=False), mul, _nparts(k), out_indptr, out_indices,
                out_data)
        if unsorted:
            return self._spgemm_two_pass(k, a, b, semiring)
        # row_mean divides by the one term of each row: nothing to do
        return LocalCSR(out_indptr, out_indices, out_data, (m, n), check=None)

    def _spgemm_two_pass(self, k, a, b, semiring):
        """Gustavson's symbolic then numeric pass, the symbolic one writing the
        output ``indptr`` in its final dtype: no int64 ``indptr`` to convert,
        nothing to re-validate (a road network's ``A @ A`` spent 7-10 % of its
        time on those copies and checks, most of it first-touching the pages
        of the temporaries)."""
        work = _spgemm_work(k, a, b)
        canonical = _canonical(k, b)
        # int32 unless an operand or a dimension needs int64; the symbolic
        # pass reports a total that overflows int32 (> 2**31 - 1 entries)
        idt = V.index_dtype_for(0, (a.shape[0], b.shape[1]), a.index_dtype, b.index_dtype)
        indptr, nnz = self._spgemm_symbolic(k, a, b, idt, work, canonical)
        if nnz < 0:
            indptr, nnz = self._spgemm_symbolic(k, a, b, np.dtype(np.int64), work, canonical)
        return self._spgemm_numeric(k, a, b, indptr, nnz, semiring, work, canonical)

    def spgemm_symbolic(self, a, b):
        """Output ``indptr`` (int64, ``a.shape[0] + 1``) of ``A @ B``'s structural pattern."""
        V.check_spgemm(a, b, "spgemm_symbolic")
        k = _kernels()
        return self._spgemm_symbolic(k, a, b, np.dtype(np.int64), _spgemm_work(k, a, b),
                                     _canonical(k, b))[0]

    def _spgemm_symbolic(self, k, a, b, dtype, work, canonical):
        """``(indptr, nnz)``, ``indptr`` in ``dtype``; ``nnz`` is -1 if it overflows ``dtype``."""
        idt = _common_index(a.indices, b.indices)
        out_indptr = np.empty(a.shape[0] + 1, dtype=dtype)
        with _threads(k, work):
            nnz = k["spgemm"].csr_spgemm_symbolic(
                a.indptr.astype(idt, copy=False), a.indices.astype(idt, copy=False),
                b.indptr.astype(idt, copy=False), b.indices.astype(idt, copy=False),
                b.shape[1], canonical, _nparts(k), out_indptr)
        return out_indptr, int(nnz)

    def spgemm_numeric(self, a, b, indptr, semiring):
        """``C = A (+).(x) B`` on the pattern counted by :meth:`spgemm_symbolic`.

        Returns a :class:`LocalCSR` ``(a.shape[0], b.shape[1])`` with sorted,
        duplicate-free indices, keeping structural zeros.  Raises
        :class:`~spgnn.errors.InvalidSparseStructure` when ``indptr`` is not
        the symbolic product's.
        """
        V.check_spgemm(a, b, "spgemm_numeric")
        semiring = V.check_semiring(semiring)
        indptr = V.check_spgemm_indptr(indptr, a)
        nnz = int(indptr[-1])
        idt = V.index_dtype_for(nnz, (a.shape[0], b.shape[1]), a.index_dtype, b.index_dtype)
        k = _kernels()
        # a copy: the result must not share the caller's array
        return self._spgemm_numeric(k, a, b, indptr.astype(idt), nnz, semiring,
                                    _spgemm_work(k, a, b), _canonical(k, b))

    def _spgemm_numeric(self, k, a, b, out_indptr, nnz, semiring, work, canonical):
        """The numeric pass into ``out_indptr`` (the output index dtype, ``nnz``
        at its end), which becomes the result's ``indptr``."""
        m, n = a.shape[0], b.shape[1]
        dt = V.result_dtype(a.data, b.data)
        idt = out_indptr.dtype
        add, mul = _codes(k, semiring)
        out_indices, out_data = empty_arrays((nnz, idt), (nnz, dt))
        with _threads(k, work):
            bad = k["spgemm"].csr_spgemm_numeric(
                a.indptr.astype(idt, copy=False), a.indices.astype(idt, copy=False),
                a.data.astype(dt, copy=False),
                b.indptr.astype(idt, copy=False), b.indices.astype(idt, copy=False),
                b.data.astype(dt, copy=False), n, canonical, add, mul, _nparts(k),
                out_indptr, out_indices, out_data)
        if bad:
            raise V.indptr_mismatch(int(bad))
        if semiring.row_mean:
            counts = np.maximum(np.diff(a.indptr), 1).astype(dt)
            out_data /= np.repeat(counts, np.diff(out_indptr))
        return LocalCSR(out_indptr, out_indices, out_data, (m, n), check=None)

    # -- SDDMM ---------------------------------------------------------------
    # -- GraphBLAS: kernels specialised on the registry's operators -------------------
    def _compiled(self, func):
        """``func`` compiled by numba once per function object (user operators included)."""
        got = _JIT.get(func)
        if got is None:
            got = _JIT[func] = _kernels()["numba"].njit(nogil=True, inline="always")(func)
        return got

    def _semiring_funcs(self, semiring):
        """``(add, mul)``: the semiring's operators compiled (for the generic kernels)."""
        return self._compiled(semiring.add.op.func), self._compiled(_mul_func(semiring))

    def spgemm_masked(self, a, b, semiring, mask=None, *, structure=False, complement=False,
                      method=None):
        """Mask-driven masked SpGEMM (:mod:`spgnn._kernels.numba.masked`).

        ``method`` (see :data:`~spgnn.backends.base.SPGEMM_METHODS`):
        ``"gustavson"`` (saxpy: symbolic then numeric, any mask),
        ``"dot"`` (one sorted intersection per allowed mask entry, SuiteSparse's
        dot3: a mask without complement, operands with strictly increasing
        rows), or ``None``/``"auto"``: :func:`choose_spgemm_method`.
        """
        V.check_spgemm(a, b, "spgemm_masked")
        semiring = V.check_semiring(semiring)
        method = V.check_spgemm_method(method)
        if semiring.row_mean:
            raise ValueError("spgemm_masked: row_mean semirings are SpMM-only")
        if mask is None and semiring.builtin and method != "dot":
            return self.spgemm(a, b, semiring)     # the tuned unmasked kernel
        k = _kernels()
        from .._kernels.numba import masked
        add, mul = self._semiring_funcs(semiring)
        if mask is not None and not complement:
            return _spgemm_mask_bounded(self, k, masked, a, b, mask, structure, method, add, mul)
        if method == "dot":
            raise ValueError("spgemm_masked(method='dot') needs a mask without complement; use "
                             "method='gustavson' or None")
        sym, num = masked.masked_spgemm_kernels(add, mul)
        m, n = a.shape[0], b.shape[1]
        if mask is None:
            m_indptr, m_indices, keep, complement = np.zeros(m + 1, np.int64), np.zeros(0, np.int64), \
                np.zeros(0, np.uint8), True
        else:
            m_indptr, m_indices = mask.indptr, mask.indices
            keep = _mask_keep(mask, structure)
        dt = V.result_dtype(a.data, b.data)
        counts = np.empty(m, dtype=np.int64)
        work = _spgemm_work(k, a, b)
        nparts = max(1, min(k["numba"].get_num_threads(), m))
        with _threads(k, work):
            nparts_now = nparts if work >= SERIAL_WORK else 1
            sym(a.indptr, a.indices, b.indptr, b.indices, m_indptr, m_indices, keep,
                bool(complement), n, nparts_now, counts)
        indptr = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        nnz = int(indptr[-1])
        idt = V.index_dtype_for(nnz, (m, n), a.index_dtype, b.index_dtype)
        out_indptr = indptr.astype(idt, copy=False)
        out_indices, out_data = empty_arrays((nnz, idt), (nnz, dt))
        with _threads(k, work):
            num(a.indptr, a.indices, a.data.astype(dt, copy=False), b.indptr, b.indices,
                b.data.astype(dt, copy=False), m_indptr, m_indices, keep, bool(complement), n,
                nparts_now, out_indptr, out_indices, out_data)
        return LocalCSR(out_indptr, out_indices, out_data, (m, n), check=None)

    def map_binary(self, op, x, y):
        from .._kernels.numba import masked
        from ..local.ops import binary_op
        op = binary_op(op)
        if op.ufunc is not None and isinstance(op.ufunc, np.ufunc):
            return super().map_binary(op, x, y)
        x, y = np.asarray(x), np.asarray(y)
        out = np.empty(x.shape, dtype=np.result_type(x, y))
        masked.map_binary_kernel(self._compiled(op.func))(x, y, out)
        return out

    def map_unary(self, op, x, rows=None, cols=None):
        from .._kernels.numba import masked
        from ..local.ops import unary_op
        op = unary_op(op)
        x = np.asarray(x)
        out = np.empty_like(x)
        if op.indexed:
            masked.map_indexed_kernel(self._compiled(op.func))(x, np.asarray(rows, np.int64),
                                                               np.asarray(cols, np.int64), out)
        elif op.ufunc is not None:
            return super().map_unary(op, x)
        else:
            masked.map_unary_kernel(self._compiled(op.func))(x, out)
        return out

    def is_canonical(self, a):
        return _canonical(_kernels(), a)

    def select_band(self, a, kind, offset):
        k = _kernels()
        ex, m = k["extract"], a.shape[0]
        code = ex.BAND_KINDS[kind]
        bounds = k["ops"].row_partition(a.indptr, max(1, min(_nparts(k), m)))
        chunk_counts = np.empty(bounds.size - 1, dtype=np.int64)
        with _threads(k, STEP_FLOPS * (m + a.nnz)):
            ex.csr_band_counts(a.indptr, a.indices, code, np.int64(offset), bounds, chunk_counts)
            nnz = int(chunk_counts.sum())
            indptr = np.empty(m + 1, dtype=a.indptr.dtype)      # nnz <= a.nnz: it fits
            out_indices, out_data = empty_arrays((nnz, a.indices.dtype), (nnz, a.data.dtype))
            ex.csr_band(a.indptr, a.indices, a.data, code, np.int64(offset), bounds,
                        chunk_counts, indptr, out_indices, out_data)
        return LocalCSR(indptr, out_indices, out_data, a.shape, check=None)

    def reduce_rows(self, monoid, indptr, data, nrows):
        from .._kernels.numba import masked
        data = np.asarray(data)
        out = np.full(nrows, monoid.identity, dtype=data.dtype)
        has = np.zeros(nrows, dtype=np.uint8)
        masked.reduce_rows_kernel(self._compiled(monoid.op.func))(np.asarray(indptr), data, out, has)
        return out, has.astype(bool)

    def sddmm(self, a, x, y, semiring):
        """``C.data[e] = a.data[e] (x) ((+)_k x[i, k] (x) y[j, k])`` on ``a``'s pattern.

        ``x`` is ``(m, d)``, ``y`` is ``(n, d)``; the result shares ``a``'s
        ``indptr`` and ``indices`` arrays (same pattern and order).
        """
        x, y, semiring, dt = V.check_sddmm(a, x, y, semiring)
        k = _kernels()
        out_data = empty(a.nnz, dt)
        if not semiring.builtin:
            kern = _generic().sddmm_kernel(*self._semiring_funcs(semiring))
            with _threads(k, a.nnz * x.shape[1]):
                kern(a.indptr, a.indices, a.data.astype(dt, copy=False),
                     np.ascontiguousarray(x, dtype=dt), np.ascontiguousarray(y, dtype=dt),
                     dt.type(semiring.add.identity), _nparts(k), out_data)
            return LocalCSR(a.indptr, a.indices, out_data, a.shape, check=None)
        add, mul = _codes(k, semiring)
        with _threads(k, a.nnz * x.shape[1]):
            k["sddmm"].csr_sddmm(a.indptr, a.indices, a.data.astype(dt, copy=False),
                                 np.ascontiguousarray(x, dtype=dt),
                                 np.ascontiguousarray(y, dtype=dt),
                                 add, mul, dt.type(semiring.add.identity), _nparts(k), out_data)
        return LocalCSR(a.indptr, a.indices, out_data, a.shape, check=None)

    # -- extraction ----------------------------------------------------------
    def extract_rows(self, a, rows):
        """``a[rows, :]`` (any order, repeats, negative and boolean selectors as scipy)."""
        V.check_csr(a, "extract_rows")
        rows = V.normalize_index(rows, a.shape[0], "extract_rows", "rows")
        k = _kernels()
        ex = k["extract"]
        out_indptr = np.empty(rows.shape[0] + 1, dtype=np.int64)
        ex.csr_extract_rows_indptr(a.indptr, rows, out_indptr)
        nnz = int(out_indptr[-1])
        idt = V.index_dtype_for(nnz, (rows.shape[0], a.shape[1]), a.index_dtype)
        out_indices = np.empty(nnz, dtype=idt)
        out_data = np.empty(nnz, dtype=a.dtype)
        ex.csr_extract_rows(a.indptr, a.indices, a.data, rows, out_indptr, out_indices, out_data)
        return LocalCSR(out_indptr.astype(idt), out_indices, out_data,
                        (rows.shape[0], a.shape[1]), check=None)

    def extract_cols(self, a, cols):
        """``a[:, cols]`` with columns renumbered to their position in ``cols`` (scipy's order)."""
        V.check_csr(a, "extract_cols")
        cols = V.normalize_index(cols, a.shape[1], "extract_cols", "cols")
        m = a.shape[0]
        k = _kernels()
        ex = k["extract"]
        # inverse map column -> positions in cols, as CSR-style offsets
        col_order = np.argsort(cols, kind="stable").astype(np.int64, copy=False)
        col_offsets = np.zeros(a.shape[1] + 1, dtype=np.int64)
        np.cumsum(np.bincount(cols, minlength=a.shape[1]), out=col_offsets[1:])
        out_indptr = np.empty(m + 1, dtype=np.int64)
        ex.csr_extract_cols_indptr(a.indptr, a.indices, col_offsets, out_indptr)
        nnz = int(out_indptr[-1])
        idt = V.index_dtype_for(nnz, (m, cols.shape[0]), a.index_dtype)
        out_indices = np.empty(nnz, dtype=idt)
        out_data = np.empty(nnz, dtype=a.dtype)
        ex.csr_extract_cols(a.indptr, a.indices, a.data, col_offsets, col_order, out_indptr,
                            out_indices, out_data)
        return LocalCSR(out_indptr.astype(idt), out_indices, out_data, (m, cols.shape[0]),
                        check=None)

    def transpose(self, a):
        """``a.T`` in CSR: indices sorted, duplicates kept in storage order."""
        V.check_csr(a, "transpose")
        m, n = a.shape
        idt = V.index_dtype_for(a.nnz, (n, m), a.index_dtype)
        out_indptr = np.empty(n + 1, dtype=idt)
        out_indices = np.empty(a.nnz, dtype=idt)
        out_data = np.empty(a.nnz, dtype=a.dtype)
        _kernels()["extract"].csr_transpose(a.indptr, a.indices, a.data, n, out_indptr,
                                            out_indices, out_data)
        return LocalCSR(out_indptr, out_indices, out_data, (n, m), check=None)

    # -- sampling --------------------------------------------------------------
    def sample_rows(self, indptr, indices, data, rows, keys, s, method, weighted):
        """Keyed sampling of up to ``s`` entries per row ``rows[r]`` (:mod:`spgnn.backends.base`)."""
        return _host_kernels.sample_rows(indptr, indices, data, rows, keys, s, method, weighted)

    def first_appearance(self, a, a_ptr, b, b_ptr, n):
        """Per-minibatch first-appearance columns (:mod:`spgnn.backends.base`).

        :func:`~spgnn._kernels.numba.dedup.first_appearance` (a stamp array or a
        hash table per chunk of minibatches), then
        :func:`~spgnn._kernels.numba.dedup.compact_columns` to number the
        columns globally.
        """
        k = _kernels()
        a = np.ascontiguousarray(a, dtype=np.int64)
        b = np.ascontiguousarray(b, dtype=np.int64)
        a_ptr = np.ascontiguousarray(a_ptr, dtype=np.int64)
        b_ptr = np.ascontiguousarray(b_ptr, dtype=np.int64)
        nmb = a_ptr.size - 1
        col_a = np.empty(a.size, dtype=np.int64)
        col_b = np.empty(b.size, dtype=np.int64)
        tmp = np.empty(a.size + b.size, dtype=np.int64)
        counts = np.empty(nmb, dtype=np.int64)
        nparts = max(1, min(nmb, 4 * k["numba"].get_num_threads()))
        k["dedup"].first_appearance(a, a_ptr, b, b_ptr, int(n), nparts, col_a, col_b, tmp,
                                    counts)
        col_ptr = np.zeros(nmb + 1, dtype=np.int64)
        np.cumsum(counts, out=col_ptr[1:])
        src = np.empty(int(col_ptr[-1]), dtype=np.int64)
        k["dedup"].compact_columns(a_ptr, b_ptr, col_ptr, tmp, col_a, col_b, src)
        return col_a, col_b, src, col_ptr

    def sort_rows_by_column(self, indptr, indices, data):
        """Sort each row's ``(indices, data)`` by column, in place (columns distinct per row)."""
        k = _kernels()
        nrows = len(indptr) - 1
        k["dedup"].sort_rows_by_column(indptr, indices, data,
                                       max(1, min(nrows, 4 * k["numba"].get_num_threads())))

    # -- historical embedding cache --------------------------------------------
    def hec_store(self, cache, ptr, clock, keys, vals, born_iter):
        """Ring store (:func:`spgnn._kernels.numba.hec.store`); returns the new head."""
        tag2slot, slot2tag, stamp, born, buf = cache
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        vals = np.ascontiguousarray(vals, dtype=buf.dtype).reshape(keys.size, buf.shape[1])
        bi = np.ascontiguousarray(np.broadcast_to(np.asarray(born_iter, np.int64), keys.shape))
        return int(_kernels()["hec"].store(tag2slot, slot2tag, stamp, born, buf, np.int64(ptr),
                                           np.int64(clock), keys, vals, bi))

    def hec_search(self, cache, clock, keys, min_life, ls, check_age):
        """Valid hits (:func:`spgnn._kernels.numba.hec.search`): ``(positions, slots)``."""
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        pos = np.empty(keys.size, dtype=np.int64)
        slots = np.empty(keys.size, dtype=np.int64)
        h = _kernels()["hec"].search(cache[0], cache[2], np.int64(clock), keys,
                                     np.int64(min_life), np.int64(ls), bool(check_age), pos, slots)
        return pos[:h], slots[:h]

    def hec_load(self, cache, slots, rows, out):
        """``out[rows] = buf[slots]`` in place (:func:`spgnn._kernels.numba.hec.load`)."""
        buf = cache[4]
        if out.dtype != buf.dtype or not out.flags.c_contiguous:
            return super().hec_load(cache, slots, rows, out)
        _kernels()["hec"].load(buf, np.ascontiguousarray(slots, dtype=np.int64),
                               np.ascontiguousarray(rows, dtype=np.int64), out)

    # -- element-wise GNN kernels ----------------------------------------------
    def relu(self, x):
        """``(max(x, 0), x > 0)``: one fused threaded pass for large C-contiguous float blocks."""
        if x.size >= PARALLEL_MIN and x.ndim == 2 and x.flags.c_contiguous and x.dtype.kind == "f":
            out = np.empty_like(x)
            mask = np.empty(x.shape, dtype=bool)
            _kernels()["gnn"].relu_forward(x, out, mask)
            return out, mask
        return _reference.relu(x)

    def relu_backward(self, dy, mask):
        """``dy`` where ``mask``, else 0."""
        if (dy.size >= PARALLEL_MIN and dy.ndim == 2 and dy.flags.c_contiguous
                and dy.dtype.kind == "f" and mask.flags.c_contiguous):
            out = np.empty_like(dy)
            _kernels()["gnn"].relu_backward(dy, mask, out)
            return out
        return _reference.relu_backward(dy, mask)

    def dropout(self, x, p, base, rows, col0, ncols, out=None):
        """Counter-based inverted dropout of a dense block (:mod:`spgnn.backends.base`).

        One pass that hashes as it multiplies (no mask array), threaded from
        :data:`PARALLEL_MIN` entries.
        """
        p = V.check_drop_probability(p, "dropout")
        x = np.ascontiguousarray(x)
        if x.dtype.kind != "f":
            x = x.astype(np.float64)
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if out is None:
            out = np.empty_like(x)
        g = _kernels()["gnn"]
        fn = g.dropout_dense if x.size >= PARALLEL_MIN else g.dropout_dense_serial
        fn(x, rows, int(col0), int(ncols), np.uint64(base), p, x.dtype.type(1.0 / (1.0 - p)), out)
        return out

    def dropout_csr(self, indptr, indices, data, p, base, rows, col0, ncols):
        """Counter-based inverted dropout of a CSR block's stored entries: the new ``data``."""
        p = V.check_drop_probability(p, "dropout_csr")
        out = np.empty_like(data)
        g = _kernels()["gnn"]
        fn = g.dropout_csr if data.size >= PARALLEL_MIN else g.dropout_csr_serial
        fn(indptr, indices, data, np.ascontiguousarray(rows, dtype=np.int64), int(col0),
           int(ncols), np.uint64(base), p, data.dtype.type(1.0 / (1.0 - p)), out)
        return out


def _mask_keep(mask, structure):
    """uint8 per mask entry: does it allow its position (structure: every stored entry)."""
    return (np.ones(mask.nnz, np.uint8) if structure
            else (np.asarray(mask.data) != 0).astype(np.uint8))


#: The dot method is chosen when its estimated steps (plus ``nnz(B)`` for the
#: transpose) are below this multiple of the one-pass saxpy's: a saxpy step is a
#: scattered read-modify-write of a marker of ``B.shape[1]`` entries, a dot step a
#: sequential compare.  Calibrated on slashdot, ego-Twitter and luxembourg
#: (docs/graphblas.md: the dot method won only on the road network's triangles).
DOT_RATIO = 0.5


def choose_spgemm_method(k, masked, a, b, mask, complement):
    """``(method, costs)`` for ``C<M> = A B``: the heuristic of ``method=None``.

    Complemented masks (and no mask) use the two-pass Gustavson kernel:
    ``("gustavson", None)``.  Otherwise both one-pass methods are costed per
    row in O(nnz(A) + nnz(B) + nnz(M)): saxpy as the lengths of the rows of
    ``B`` it scans (or searches), dot per mask entry ``(i, j)`` from the
    lengths of ``A(i, :)`` and ``B(:, j)`` (merge: their sum; galloping: the
    shorter times a log) plus ``nnz(B)`` for ``Bᵀ``.  Dot needs operands with
    strictly increasing rows and is chosen when its estimate is below
    :data:`DOT_RATIO` times saxpy's.  ``costs`` is ``(rows, cum)``: cumulative
    costs ``cum`` at the row bounds ``rows`` (the saxpy's, at the chunks of
    :func:`_saxpy_chunks`; the dot method's, ``rows=None``, at every row).
    :func:`_spgemm_mask_bounded` reaches the same decision, mostly without
    costing anything (see there).
    """
    if mask is None or complement:
        return "gustavson", None
    rows = _saxpy_chunks(k, a)
    sax = _saxpy_costs(k, masked, a, b, mask, rows)
    method, dot = _choose_by_cost(k, masked, a, b, mask, int(sax[-1]), _canonical(k, b))
    return method, ((rows, sax) if dot is None else (None, dot))


def _choose_by_cost(k, masked, a, b, mask, sax_total, b_sorted):
    """``("gustavson", None)`` or ``("dot", its cumulative row costs)``, given the saxpy's
    estimated steps ``sax_total`` (:func:`choose_spgemm_method`)."""
    if not (b_sorted and (a is b or _canonical(k, a))):
        return "gustavson", None
    # dot's estimate is at least one step per row and per mask entry: when even that
    # bound loses, skip costing it (a road network's triangles: half the call's time)
    if a.shape[0] + mask.nnz + b.nnz >= DOT_RATIO * sax_total:
        return "gustavson", None
    bt_len = np.bincount(np.asarray(b.indices), minlength=b.shape[1])
    limit = math.ceil(DOT_RATIO * sax_total) - b.nnz    # dot wins below this
    with _threads(k, STEP_FLOPS * (a.shape[0] + mask.nnz)):
        # the same decision as costing every row, usually after a fraction of them
        if masked.dot_cost_reaches(a.indptr, bt_len, mask.indptr, mask.indices, limit, 16):
            return "gustavson", None
    return "dot", _cum_costs(k, masked.dot_row_costs, a.shape[0], mask.nnz, a.indptr, bt_len,
                             mask.indptr, mask.indices)


def _saxpy_budget(a, b, mask):
    """The largest saxpy cost at which :func:`_choose_by_cost` picks saxpy from its lower
    bound on dot's cost alone, without costing dot."""
    dot_lb = a.shape[0] + mask.nnz + b.nnz
    budget = math.floor(dot_lb / DOT_RATIO)
    while budget > 0 and not dot_lb >= DOT_RATIO * budget:      # float rounding, either way
        budget -= 1
    while dot_lb >= DOT_RATIO * (budget + 1):
        budget += 1
    return budget


#: Row chunks per thread of the masked saxpy (:func:`_saxpy_chunks`), taken dynamically:
#: the kernel runs before any costing, so chunks of equal ``nnz(A) + rows`` are balanced
#: by being many (power-law ``A @ A``: 1.15-1.2x over cost-balanced static chunks).
SAXPY_CHUNKS = 32


def _saxpy_chunks(k, a):
    """The masked saxpy's row chunks (``bounds``): about equal ``nnz(A) + rows``."""
    nchunks = max(1, min(SAXPY_CHUNKS * k["numba"].get_num_threads(), a.shape[0]))
    return k["ops"].row_partition(a.indptr, nchunks)


def _saxpy_costs(k, masked, a, b, mask, rows):
    """The saxpy's cumulative estimated steps at the chunk bounds ``rows``."""
    cum = np.empty(rows.size, dtype=np.int64)
    with _threads(k, STEP_FLOPS * (a.indptr[rows[-1]] - a.indptr[rows[0]] + rows[-1] - rows[0])):
        masked.saxpy_chunk_costs(a.indptr, a.indices, b.indptr, mask.indptr, rows, cum)
    return cum


#: A step of the masked kernels' cost model (a marker probe, an intersection step, a
#: cost-pass row entry) in units of :data:`SERIAL_WORK`'s flops: serial, luxembourg's
#: triangles take 4-6 ns per step, the tuned SpGEMM about 1 ns per flop.
STEP_FLOPS = 5


def _cum_costs(k, kernel, m, work, *args):
    """Cumulative row costs (``m + 1`` entries, starting at 0) from a row-cost kernel
    taking ``work`` steps (serial below :data:`SERIAL_WORK`)."""
    costs = np.empty(m + 1, dtype=np.int64)
    with _threads(k, STEP_FLOPS * (work + m)):
        kernel(*args, costs)
    return costs


def _balanced_bounds(cum, nparts):
    """Row bounds of ``nparts`` chunks of about equal cost (``cum``: cumulative row costs)."""
    m = cum.size - 1
    targets = cum[-1] * np.arange(1, nparts, dtype=np.float64) / nparts
    inner = np.searchsorted(cum, targets, side="left")
    return np.concatenate([[0], np.clip(inner, 0, m), [m]]).astype(np.int64)


def _spgemm_mask_bounded(be, k, masked, a, b, mask, structure, method, add, mul):
    """``C<M> = A B`` for a mask without complement, in one pass (the mask bounds the
    output): each row is written at its mask row's positions, then packed.

    With ``method=None`` the saxpy kernel runs first, optimistically, within the cost
    at which the method choice picks it without costing the dot method
    (:func:`_saxpy_budget`).  Only a product that exceeds it is costed, over the rows
    the kernel has not done, and then either finished by saxpy or redone by dot: the
    decision of :func:`choose_spgemm_method`, without its costing pass for most
    products.
    """
    m, n = a.shape[0], b.shape[1]
    dt = V.result_dtype(a.data, b.data)
    keep = _mask_keep(mask, structure)
    tmp_indices, tmp_data = empty_arrays((mask.nnz, mask.indices.dtype), (mask.nnz, dt))
    # the kernels write each row's count where its row pointer will be; the mask bounds
    # the output, so its index dtype holds the result (narrowed below if it can be)
    out_indptr = np.empty(m + 1, dtype=V.index_dtype_for(mask.nnz, (m, n), a.index_dtype,
                                                         b.index_dtype))
    out_indptr[0] = 0
    counts = out_indptr[1:]
    ad = a.data.astype(dt, copy=False)
    if method == "dot":
        if not (_canonical(k, b) and _canonical(k, a)):
            raise ValueError("spgemm_masked(method='dot') needs A and B with strictly increasing "
                             "column indices in every row; use method='gustavson' or None")
        bt_len = np.bincount(np.asarray(b.indices), minlength=b.shape[1])
        dot = _cum_costs(k, masked.dot_row_costs, a.shape[0], mask.nnz, a.indptr, bt_len,
                         mask.indptr, mask.indices)
    else:
        # the mask's rows are sorted by contract (``Backend.spgemm_masked``): a B with the
        # mask's structure (triangle counting's L L .* L) needs no check
        b_sorted = ((b.indptr is mask.indptr and b.indices is mask.indices)
                    or _canonical(k, b))
        bounds = _saxpy_chunks(k, a)
        chunk_counts = np.empty(bounds.size - 1, dtype=np.int64)
        saxpy = masked.masked_saxpy_kernel(add, mul)

        def run_saxpy(first, work, budget):
            nw = 1 if work < SERIAL_WORK else k["numba"].get_num_threads()
            with _threads(k, work):
                return saxpy(a.indptr, a.indices, ad, b.indptr, b.indices,
                             b.data.astype(dt, copy=False), mask.indptr, mask.indices, keep,
                             b_sorted, n, bounds, first, nw, budget, tmp_indices, tmp_data,
                             counts, chunk_counts)

        # an unsorted B rules the dot method out: no budget
        budget = _saxpy_budget(a, b, mask) if method is None and b_sorted else -1
        end, spent = run_saxpy(0, STEP_FLOPS * (m + mask.nnz + a.nnz), budget)
        dot = None
        if budget >= 0 and (end < bounds.size - 1 or spent > budget):
            # over the budget: cost the rows not done, then choose
            rest = _saxpy_costs(k, masked, a, b, mask, bounds[end:])
            _, dot = _choose_by_cost(k, masked, a, b, mask, spent + int(rest[-1]), b_sorted)
            if dot is None and end < bounds.size - 1:
                run_saxpy(end, STEP_FLOPS * int(rest[-1]), -1)
    if dot is not None:
        work = STEP_FLOPS * int(dot[-1])
        bounds = _balanced_bounds(dot, 1 if work < SERIAL_WORK else max(1, min(_nparts(k), m)))
        chunk_counts = np.empty(bounds.size - 1, dtype=np.int64)
        bt = be.transpose(b)
        with _threads(k, work):
            masked.masked_dot_kernel(add, mul)(
                a.indptr, a.indices, ad, bt.indptr, bt.indices, bt.data.astype(dt, copy=False),
                mask.indptr, mask.indices, keep, bounds, tmp_indices, tmp_data, counts,
                chunk_counts)
    nnz = int(chunk_counts.sum())
    idt = V.index_dtype_for(nnz, (m, n), a.index_dtype, b.index_dtype)
    if nnz == mask.nnz:         # every allowed entry got a value: already packed
        out_indptr[:] = mask.indptr
        return LocalCSR(out_indptr.astype(idt, copy=False), tmp_indices.astype(idt, copy=False),
                        tmp_data, (m, n), check=None)
    out_indices, out_data = empty_arrays((nnz, idt), (nnz, dt))
    with _threads(k, m + nnz):
        masked.pack_rows(mask.indptr, bounds, chunk_counts, tmp_indices, tmp_data, out_indptr,
                         out_indices, out_data)
    return LocalCSR(out_indptr.astype(idt, copy=False), out_indices, out_data, (m, n),
                    check=None)
