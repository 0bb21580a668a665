"""The ``cupy`` backend: CuPy arrays, CUDA C++ kernels from ``kernels/cuda`` via ``cupy.RawModule``.

Kernels (``kernels/cuda/*.cu``, one ``RawModule`` per source, compiled by
CuPy's NVRTC for the device's architecture with
:data:`spgnn.backends._cuda_source.NVRTC_OPTIONS`): SpMM (GE-SpMM-style warp
per row with coalesced row caching), SDDMM (warp per row, shuffle
reduction), SpGEMM (hash table per output row, symbolic then numeric),
row and column extraction, ReLU forward/backward, dense and CSR
counter-based dropout, keyed sampling and per-row sorting, first-appearance
de-duplication and the message codec's encode/decode (``quant.cu``)
(bit-identical to the Numba kernels).  Transposition is a
stable sort on the array module (CUB's radix sort in CuPy).  Every launch
checks its arguments against the entry point's parsed C signature (a wrong
scalar width raises :class:`~spgnn.errors.DTypeError` instead of shifting
arguments).  No operation copies to the host any more
(:data:`HOST_ROUND_TRIP` is empty).

Named alternative: ``spmm_impl="cusparse"`` runs plus-times SpMM through
``cupyx.scipy.sparse`` (cuSPARSE).

The seam that lets CI test this class without a GPU: ``CupyBackend(xp=numpy,
sparse=scipy.sparse, module=HostModule)`` runs the same orchestration with
numpy arrays, scipy in place of cupyx and the g++ host build of the very same
``.cu`` sources (:mod:`spgnn.backends._cuda_host`) in place of ``RawModule``;
only the kernel launch differs from a GPU run.
:meth:`unavailable_reason` gates on a usable device, never on ``import cupy``.
"""

import importlib.util

import numpy as np

from ..local.csr import LocalCSR
from . import _cuda_source as S
from . import _validate as V
from .base import Backend

__all__ = ["CupyBackend", "HOST_ROUND_TRIP"]

#: Operations that run on the host with a copy each way: none any more (the
#: last ones, SpGEMM, column extraction, transpose, sampling and
#: de-duplication, got their kernels; kept so callers can check).
HOST_ROUND_TRIP = ()

_MAX_WARPS = 8             # SPMM_MAX_WARPS / SDDMM_MAX_WARPS / SPGEMM_MAX_WARPS in the sources
_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)     # SPGEMM_EMPTY: an unused hash slot


def _histogram(xp, values, n):
    """``bincount(values, minlength=n)`` as int64 (an empty ``values`` gives ``n`` zeros)."""
    if values.shape[0] == 0:
        return xp.zeros(n, dtype=np.int64)
    return xp.bincount(values, minlength=n).astype(np.int64)


def _offsets(xp, counts):
    """``[0, cumsum(counts)]`` as int64 (CSR-style offsets of ``counts``)."""
    out = xp.zeros(counts.shape[0] + 1, dtype=np.int64)
    if counts.shape[0]:
        xp.cumsum(counts, out=out[1:])
    return out


def _idx(*arrays):
    """``("i32", int32)`` unless an operand is int64 (one index type per launch)."""
    if any(np.dtype(a.dtype) == np.int64 for a in arrays):
        return "i64", np.dtype(np.int64)
    return "i32", np.dtype(np.int32)


def _val(dt):
    return "f32" if np.dtype(dt) == np.float32 else "f64"


class CupyBackend(Backend):
    """CuPy (CUDA) backend; see the module docstring for what runs where."""

    name = "cupy"

    def __init__(self, xp=None, sparse=None, module=None, spmm_impl="kernel", warps=4,
                 ew_block=256, ew_max_blocks=4096):
        # Launch geometry: warps per block of the warp-per-row kernels; threads
        # per block and block cap of the grid-stride element-wise kernels.  The
        # kernels are correct for any geometry; the host build uses a small one
        # (each emulated thread is an OS thread).
        if not 1 <= warps <= _MAX_WARPS:
            raise ValueError(f"CupyBackend: warps must be in [1, {_MAX_WARPS}], not {warps}")
        self.warps, self.ew_block, self.ew_max_blocks = int(warps), int(ew_block), int(ew_max_blocks)
        if spmm_impl not in ("kernel", "cusparse"):
            raise ValueError(f"CupyBackend: spmm_impl must be 'kernel' or 'cusparse', "
                             f"not {spmm_impl!r}")
        if xp is None:
            import cupy
            import cupyx.scipy.sparse

            xp, sparse = cupy, cupyx.scipy.sparse
            module = module or self._raw_module
        self._xp = xp
        self._sparse = sparse
        self._make_module = module
        self._modules = {}
        self._kernels = {}
        self.spmm_impl = spmm_impl

    @classmethod
    def host_emulated(cls, **kw):
        """The backend on numpy + scipy + the g++ host build of the kernels (tests, no GPU).

        ``xp=spgnn.testing.fake_device.fake_cupy`` (with
        ``sparse=fake_cupyx_sparse``) makes its arrays pose as device arrays,
        as strict as CuPy's, so the distributed paths (communicator staging,
        CUDA-aware buffers) run as they would with CuPy.
        """
        import scipy.sparse

        from ._cuda_host import HostModule

        kw = {"xp": np, "sparse": scipy.sparse, "warps": 1, "ew_block": 32, "ew_max_blocks": 4,
              **kw}
        return cls(module=HostModule, **kw)

    @staticmethod
    def _raw_module(source):
        import cupy

        return cupy.RawModule(code=S.assemble(source), options=S.NVRTC_OPTIONS)

    @classmethod
    def unavailable_reason(cls):
        if importlib.util.find_spec("cupy") is None:
            return "cupy is not installed (pip install -e '.[gpu]' or '.[gpu-cu12]')"
        try:
            import cupy

            usable = bool(cupy.is_available())
        except Exception as exc:  # a broken CUDA install must not break backend_status()
            return f"cupy is installed but failed to initialise ({type(exc).__name__}: {exc})"
        if not usable:
            return ("cupy is installed but no CUDA GPU/driver is usable "
                    "(cupy.is_available() is False)")
        return None

    @classmethod
    def device_info(cls):
        """``{"device", "compute_capability", "driver", "runtime", "cupy", "nvrtc"}`` of device 0,
        or ``{"unavailable": reason}``.  Local; never raises (``spgnn info`` prints it)."""
        why = cls.unavailable_reason()
        if why is not None:
            return {"unavailable": why}
        try:
            import cupy

            rt = cupy.cuda.runtime
            props = rt.getDeviceProperties(0)
            return {"device": props["name"].decode(errors="replace"),
                    "compute_capability": f"{props['major']}.{props['minor']}",
                    "driver": rt.driverGetVersion(), "runtime": rt.runtimeGetVersion(),
                    "cupy": cupy.__version__,
                    "nvrtc": ".".join(map(str, cupy.cuda.nvrtc.getVersion()))}
        except Exception as exc:  # report, never crash info
            return {"unavailable": f"{type(exc).__name__}: {exc}"}

    @property
    def xp(self):
        return self._xp

    def synchronize(self):
        """Wait for the current CUDA stream (kernel launches are asynchronous). Local."""
        cuda = getattr(self._xp, "cuda", None)
        if cuda is not None:
            cuda.get_current_stream().synchronize()

    def select_device(self, local_rank):
        """Use device ``local_rank % device count`` in this process; returns its index. Local.

        Called by the commands before any allocation, so ranks sharing a node
        spread over its GPUs (``spgnn.cli._backend_options``).  ``None`` (and
        nothing done) on the host emulation.
        """
        cuda = getattr(self._xp, "cuda", None)
        if cuda is None:
            return None
        index = int(local_rank) % max(1, cuda.runtime.getDeviceCount())
        cuda.Device(index).use()
        return index

    def to_host(self, x):
        # type(), not isinstance: the CPU stand-in of CuPy arrays subclasses ndarray
        return x.get() if hasattr(x, "get") and type(x) is not np.ndarray else x

    def from_host(self, x):
        return self._xp.asarray(x)

    def matmul(self, a, b):
        return self._xp.matmul(a, b)

    # -- launching --------------------------------------------------------------
    def _kernel(self, source, name):
        k = self._kernels.get(name)
        if k is None:
            mod = self._modules.get(source)
            if mod is None:
                mod = self._modules[source] = self._make_module(source)
            k = self._kernels[name] = mod.get_function(name)
            self._sigs = getattr(self, "_sigs", {})
            self._sigs.update(S.signatures(S.assemble(source)))
        return k

    def launch(self, source, name, grid, block, args):
        """Launch entry point ``name`` of ``source`` after checking ``args`` against its C signature."""
        k = self._kernel(source, name)
        S.check_args(name, self._sigs[name], args)
        k(grid, block, tuple(args))

    def _ew_grid(self, size):
        return (max(1, min(self.ew_max_blocks, -(-size // self.ew_block))),), (self.ew_block,)

    def _csr_arrays(self, a, dt):
        tag, idt = _idx(a.indptr, a.indices)
        xp = self._xp
        return (tag, xp.ascontiguousarray(xp.asarray(a.indptr), dtype=idt),
                xp.ascontiguousarray(xp.asarray(a.indices), dtype=idt),
                xp.ascontiguousarray(xp.asarray(a.data), dtype=dt))

    # -- SpMM / SDDMM ---------------------------------------------------------------
    def spmm(self, a, x, semiring, out=None):
        """``Y = A (+).(x) X`` (semantics: :mod:`spgnn.backends.base`). Local."""
        xp = self._xp
        x, semiring, dt = V.check_spmm(a, x, semiring, xp=xp)
        m, n = a.shape[0], x.shape[1]
        if out is not None:
            V.check_out(out, (m, n), dt, "spmm", xp=xp)
        if not semiring.builtin:
            # GraphBLAS and user semirings have no CUDA kernel: the host backend computes them
            host, ha = self._on_host(a)
            y = xp.asarray(host.spmm(ha, self.to_host(x), semiring))
            if out is not None:
                out[...] = y
                return out
            return y
        x = xp.ascontiguousarray(x, dtype=dt)
        plus_times = semiring.add.name == "plus" and semiring.multiply == "times"
        if self.spmm_impl == "cusparse" and plus_times and m and n:
            tag, ip, ix, data = self._csr_arrays(a, dt)
            y = self._sparse.csr_matrix((data, ix, ip), shape=a.shape) @ x
            y = xp.ascontiguousarray(xp.asarray(y), dtype=dt)
        else:
            y = xp.empty((m, n), dtype=dt)
            if m and n:
                tag, ip, ix, data = self._csr_arrays(a, dt)
                add, mul = S.semiring_codes(semiring)
                self.launch("spmm.cu", f"spmm_{tag}_{_val(dt)}", (-(-m // self.warps),), (32 * self.warps,),
                            (ip, ix, data, x, np.int64(m), np.int64(n), np.int32(add),
                             np.int32(mul), dt.type(semiring.add.identity), y))
        if semiring.row_mean:
            y /= xp.maximum(xp.diff(xp.asarray(a.indptr)), 1).astype(dt)[:, None]
        if out is not None:
            out[...] = y
            return out
        return y

    def _on_host(self, a):
        """``(host backend, a on the host)`` for semirings without a CUDA kernel."""
        from . import numba_backend, numpy_backend

        cls = (numba_backend.NumbaBackend if numba_backend.NumbaBackend.is_available()
               else numpy_backend.NumpyBackend)
        h = self.to_host
        return cls(), LocalCSR(h(a.indptr), h(a.indices), h(a.data), a.shape, check=None)

    def sddmm(self, a, x, y, semiring):
        """``C.data[e] = a.data[e] (x) ((+)_k x[i, k] (x) y[j, k])`` on ``a``'s pattern. Local."""
        xp = self._xp
        x, y, semiring, dt = V.check_sddmm(a, x, y, semiring, xp=xp)
        if not semiring.builtin:      # no CUDA kernel: the host backend computes it
            host, ha = self._on_host(a)
            got = host.sddmm(ha, self.to_host(x), self.to_host(y), semiring)
            return LocalCSR(a.indptr, a.indices, xp.asarray(got.data), a.shape, check=None)
        out = xp.empty(a.nnz, dtype=dt)
        m = a.shape[0]
        if m and a.nnz:
            tag, ip, ix, data = self._csr_arrays(a, dt)
            add, mul = S.semiring_codes(semiring)
            self.launch("sddmm.cu", f"sddmm_{tag}_{_val(dt)}", (-(-m // self.warps),), (32 * self.warps,),
                        (ip, ix, data, xp.ascontiguousarray(x, dtype=dt),
                         xp.ascontiguousarray(y, dtype=dt), np.int64(m), np.int64(x.shape[1]),
                         np.int32(add), np.int32(mul), dt.type(semiring.add.identity), out))
        return LocalCSR(a.indptr, a.indices, out, a.shape, check=None)

    # -- SpGEMM (kernels/cuda/spgemm.cu: hash table per output row) --------------------
    def _row_grid(self, m):
        """Grid and block of the warp-per-row kernels that stride over rows."""
        return (max(1, min(65535, -(-m // self.warps))),), (32 * self.warps,)

    def _spgemm_operands(self, a, b):
        """``(tag, a.indptr, a.indices, b.indptr, b.indices)`` in one index type."""
        xp = self._xp
        tag, idt = _idx(a.indptr, a.indices, b.indptr, b.indices)
        return (tag,) + tuple(xp.ascontiguousarray(xp.asarray(v), dtype=idt)
                              for v in (a.indptr, a.indices, b.indptr, b.indices))

    def spgemm_symbolic(self, a, b):
        """Output ``indptr`` (int64, ``a.shape[0] + 1``) of ``A @ B``'s structural pattern. Local.

        Per row a hash table of ``2 min(flops, n)`` slots (flops: the row's
        scalar products, from ``B``'s row lengths on the array module).
        """
        V.check_spgemm(a, b, "spgemm_symbolic")
        xp = self._xp
        m, n = a.shape[0], b.shape[1]
        tag, aip, aix, bip, bix = self._spgemm_operands(a, b)
        per_entry = xp.diff(bip).astype(np.int64)[aix]
        cum = _offsets(xp, per_entry)
        flops = cum[aip[1:].astype(np.int64)] - cum[aip[:-1].astype(np.int64)]
        table_ptr = _offsets(xp, 2 * xp.minimum(flops, n))
        counts = xp.zeros(m, dtype=np.int64)
        if m and int(table_ptr[-1]):
            keys = xp.full(int(table_ptr[-1]), _EMPTY, dtype=np.uint64)
            self.launch("spgemm.cu", f"spgemm_count_{tag}", *self._row_grid(m),
                        (aip, aix, bip, bix, np.int64(m), table_ptr, keys, counts))
        return _offsets(xp, counts)

    def spgemm_numeric(self, a, b, indptr, semiring):
        """``C = A (+).(x) B`` on the pattern counted by :meth:`spgemm_symbolic`. Local.

        Sorted, duplicate-free indices; structural zeros kept; equal columns
        reduced in storage order.  Raises
        :class:`~spgnn.errors.InvalidSparseStructure` when ``indptr`` is not
        the symbolic product's.
        """
        V.check_spgemm(a, b, "spgemm_numeric")
        semiring = V.check_semiring(semiring)
        xp = self._xp
        indptr = xp.array(V.check_spgemm_indptr(indptr, a, xp=xp), dtype=np.int64)  # our own copy
        m, n = a.shape[0], b.shape[1]
        nnz = int(indptr[-1])
        dt = V.result_dtype(a.data, b.data)
        idt = V.index_dtype_for(nnz, (m, n), a.index_dtype, b.index_dtype)
        tag, aip, aix, bip, bix = self._spgemm_operands(a, b)
        counts = xp.diff(indptr)
        table_ptr = _offsets(xp, 2 * counts)
        total = int(table_ptr[-1])
        out_indices = xp.empty(nnz, dtype=np.int64)
        out_data = xp.empty(nnz, dtype=dt)
        if m:
            got = xp.zeros(m, dtype=np.uint64)
            add, mul = S.semiring_codes(semiring)
            self.launch("spgemm.cu", f"spgemm_fill_{tag}_{_val(dt)}", *self._row_grid(m),
                        (aip, aix, xp.ascontiguousarray(xp.asarray(a.data), dtype=dt), bip, bix,
                         xp.ascontiguousarray(xp.asarray(b.data), dtype=dt), np.int64(m),
                         np.int32(add), np.int32(mul), indptr, table_ptr,
                         xp.full(total, _EMPTY, dtype=np.uint64), xp.empty(total, dtype=dt),
                         out_indices, out_data, got))
            bad = int(xp.count_nonzero(got != counts.astype(np.uint64)))
            if bad:
                raise V.indptr_mismatch(bad)
        if nnz:
            rows = self._row_ids(indptr, nnz)
            order = self._row_major_order(rows, out_indices, n)
            out_indices, out_data = out_indices[order], out_data[order]
            if semiring.row_mean:
                out_data /= xp.maximum(xp.diff(xp.asarray(a.indptr)), 1).astype(dt)[rows]
        return LocalCSR(indptr.astype(idt, copy=False), out_indices.astype(idt, copy=False),
                        out_data, (m, n), check=None)

    def _row_ids(self, indptr, nnz):
        """The row of every stored entry (int64), by binary search in ``indptr``."""
        xp = self._xp
        return xp.searchsorted(xp.asarray(indptr), xp.arange(nnz, dtype=np.int64),
                               side="right").astype(np.int64) - 1

    def _row_major_order(self, rows, cols, ncols):
        """The permutation sorting entries by ``(row, column)``; pairs must be distinct.

        One sort of the key ``row * ncols + column`` (a radix sort in CuPy);
        ``lexsort`` where that key could overflow int64.  Keys are distinct,
        so the permutation does not depend on the sort's stability.
        """
        xp = self._xp
        nrows = int(rows[-1]) + 1 if rows.size else 0
        if nrows * max(int(ncols), 1) < 2**62:
            return xp.argsort(rows * np.int64(ncols) + cols.astype(np.int64, copy=False))
        return xp.lexsort(xp.stack([cols.astype(np.int64, copy=False), rows]))

    def extract_rows(self, a, rows):
        """``a[rows, :]`` (scipy's semantics): prefix sum on the array module, then a warp per row copies. Local."""
        xp = self._xp
        V.check_csr(a, "extract_rows")
        rows = V.normalize_index(rows, a.shape[0], "extract_rows", "rows", xp=xp)
        rows = xp.ascontiguousarray(xp.asarray(rows), dtype=np.int64)
        tag, idt_in = _idx(a.indptr, a.indices)
        vdt = np.dtype(a.data.dtype)
        ip = xp.ascontiguousarray(xp.asarray(a.indptr), dtype=idt_in)
        nr = int(rows.shape[0])
        out_indptr = xp.zeros(nr + 1, dtype=np.int64)
        if nr:
            xp.cumsum((ip[rows + 1] - ip[rows]).astype(np.int64), out=out_indptr[1:])
        nnz = int(out_indptr[-1])
        out_indices = xp.empty(nnz, dtype=idt_in)
        out_data = xp.empty(nnz, dtype=vdt)
        if nnz:
            self.launch("extract.cu", f"extract_rows_{tag}_{_val(vdt)}",
                        (max(1, min(65535, -(-nr // self.warps))),), (32 * self.warps,),
                        (ip, xp.ascontiguousarray(xp.asarray(a.indices), dtype=idt_in),
                         xp.ascontiguousarray(xp.asarray(a.data)), rows, np.int64(nr),
                         out_indptr, out_indices, out_data))
        idt = V.index_dtype_for(nnz, (nr, a.shape[1]), a.index_dtype)
        return LocalCSR(out_indptr.astype(idt), out_indices.astype(idt, copy=False), out_data,
                        (nr, a.shape[1]), check=None)

    def _stable_order(self, keys, nkeys):
        """Positions of ``keys`` (int64 in ``[0, nkeys)``) sorted by key, ties in position order.

        One sort of the distinct key ``key * len + position`` (a radix sort
        in CuPy), ``lexsort`` where that could overflow int64: the result is
        the stable order whatever the sort's own stability.
        """
        xp = self._xp
        size = int(keys.shape[0])
        pos = xp.arange(size, dtype=np.int64)
        if max(int(nkeys), 1) * max(size, 1) < 2**62:
            return xp.argsort(keys * np.int64(size) + pos)
        return xp.lexsort(xp.stack([pos, keys]))

    def extract_cols(self, a, cols):
        """``a[:, cols]`` (scipy's semantics and entry order). Local.

        The inverse map column -> positions of ``cols`` (a stable sort and a
        histogram) on the array module, then ``extract_cols.cu``: count per
        row, prefix sum, fill (a thread per row).
        """
        xp = self._xp
        V.check_csr(a, "extract_cols")
        cols = V.normalize_index(cols, a.shape[1], "extract_cols", "cols", xp=xp)
        cols = xp.ascontiguousarray(xp.asarray(cols), dtype=np.int64)
        m, n, nc = a.shape[0], a.shape[1], int(cols.shape[0])
        vdt = np.dtype(a.data.dtype)
        tag, ip, ix, data = self._csr_arrays(a, vdt)
        col_order = xp.ascontiguousarray(self._stable_order(cols, n), dtype=np.int64)
        col_offsets = _offsets(xp, _histogram(xp, cols, n))
        counts = xp.zeros(m, dtype=np.int64)
        if m and a.nnz and nc:
            self.launch("extract_cols.cu", f"extract_cols_count_{tag}", *self._ew_grid(m),
                        (ip, ix, col_offsets, np.int64(m), counts))
        out_indptr = _offsets(xp, counts)
        nnz = int(out_indptr[-1])
        out_indices = xp.empty(nnz, dtype=np.int64)
        out_data = xp.empty(nnz, dtype=vdt)
        if nnz:
            self.launch("extract_cols.cu", f"extract_cols_fill_{tag}_{_val(vdt)}",
                        *self._ew_grid(m), (ip, ix, data, col_offsets, col_order, np.int64(m),
                                            out_indptr, out_indices, out_data))
        idt = V.index_dtype_for(nnz, (m, nc), a.index_dtype)
        return LocalCSR(out_indptr.astype(idt), out_indices.astype(idt, copy=False), out_data,
                        (m, nc), check=None)

    def transpose(self, a):
        """``a.T`` in CSR: indices sorted, duplicates kept in storage order (scipy's csr_tocsc). Local.

        A stable sort of the entries by column (CUB's radix sort in CuPy: a
        stable counting sort per digit, i.e. count + scan + scatter done
        right on a GPU) and a histogram for ``indptr``; no own kernel
        (docs/gpu.md says why).
        """
        xp = self._xp
        V.check_csr(a, "transpose")
        m, n = a.shape
        nnz = a.nnz
        idt = V.index_dtype_for(nnz, (n, m), a.index_dtype)
        cols = xp.asarray(a.indices)[:nnz].astype(np.int64)
        order = self._stable_order(cols, n)
        rows = self._row_ids(a.indptr, nnz)
        out_indptr = _offsets(xp, _histogram(xp, cols, n))
        return LocalCSR(out_indptr.astype(idt), rows[order].astype(idt),
                        xp.asarray(a.data)[:nnz][order], (n, m), check=None)

    # -- sampling and de-duplication (sample.cu, dedup.cu) ------------------------------
    def sample_rows(self, indptr, indices, data, rows, keys, s, method, weighted):
        """Keyed sampling (:mod:`spgnn.backends.base`), bit-identical to the CPU backends. Local.

        ``sample.cu``: counts (a thread per row), prefix sum, fill (a thread
        per row, per-row scratch sized on the array module).
        """
        xp = self._xp
        code = V.check_sample_method(method)

        def c(v, dt):
            return xp.ascontiguousarray(xp.asarray(v), dtype=dt)

        indptr, indices = c(indptr, np.int64), c(indices, np.int64)
        data, rows, keys = c(data, np.float64), c(rows, np.int64), c(keys, np.uint64)
        nr = int(rows.shape[0])
        counts = xp.zeros(nr, dtype=np.int64)
        if nr:
            self.launch("sample.cu", "sample_counts", *self._ew_grid(nr),
                        (indptr, data, rows, np.int64(nr), np.int64(s), np.int32(bool(weighted)),
                         counts))
        out_indptr = _offsets(xp, counts)
        pos = xp.empty(int(out_indptr[-1]), dtype=np.int64)
        if pos.size:
            # scratch per row: the kept keys (ES, <= s) or the row's weights (ITS)
            if code == V.SAMPLE_METHOD_CODES["es"]:
                need = counts
            elif code == V.SAMPLE_METHOD_CODES["its"]:
                need = indptr[rows + 1] - indptr[rows]
            else:
                need = xp.zeros(nr, dtype=np.int64)
            scratch_ptr = _offsets(xp, need)
            self.launch("sample.cu", "sample_fill", *self._ew_grid(nr),
                        (indptr, indices, data, rows, keys, np.int64(nr), np.int32(code),
                         np.int32(bool(weighted)), out_indptr, scratch_ptr,
                         xp.empty(max(int(scratch_ptr[-1]), 1), dtype=np.float64), pos))
        return out_indptr, pos

    def first_appearance(self, a, a_ptr, b, b_ptr, n):
        """Per-minibatch first-appearance columns (:mod:`spgnn.backends.base`), bit-identical. Local.

        Items concatenated minibatch-major on the array module, ``dedup.cu``
        (a hash table per minibatch, atomic minimum of each vertex's first
        position), then one prefix sum numbers the first appearances.
        """
        xp = self._xp

        def c(v):
            return xp.ascontiguousarray(xp.asarray(v), dtype=np.int64)

        a, a_ptr, b, b_ptr = c(a), c(a_ptr), c(b), c(b_ptr)
        na, nb = int(a.shape[0]), int(b.shape[0])
        mb_a = xp.searchsorted(a_ptr, xp.arange(na, dtype=np.int64), side="right") - 1
        mb_b = xp.searchsorted(b_ptr, xp.arange(nb, dtype=np.int64), side="right") - 1
        pa = xp.arange(na, dtype=np.int64) + b_ptr[mb_a]          # a-items of minibatch i,
        pb = xp.arange(nb, dtype=np.int64) + a_ptr[mb_b + 1]      # then its b-items
        items = xp.empty(na + nb, dtype=np.int64)
        mb_of = xp.empty(na + nb, dtype=np.int64)
        items[pa] = a
        items[pb] = b
        mb_of[pa] = mb_a
        mb_of[pb] = mb_b
        starts = a_ptr + b_ptr                                    # minibatch i's first item
        table_ptr = _offsets(xp, 2 * xp.diff(starts))
        first_of = xp.empty(na + nb, dtype=np.int64)
        if na + nb:
            keys = xp.full(int(table_ptr[-1]), _EMPTY, dtype=np.uint64)
            first = xp.full(int(table_ptr[-1]), _EMPTY, dtype=np.uint64)
            g = self._ew_grid(na + nb)
            self.launch("dedup.cu", "dedup_insert", *g,
                        (items, mb_of, np.int64(na + nb), table_ptr, keys, first))
            self.launch("dedup.cu", "dedup_first", *g,
                        (items, mb_of, np.int64(na + nb), table_ptr, keys, first, first_of))
        is_first = first_of == xp.arange(na + nb, dtype=np.int64)
        number = _offsets(xp, is_first.astype(np.int64))          # first appearances before
        col = number[first_of]
        return col[pa], col[pb], items[is_first], number[starts]

    def sort_rows_by_column(self, indptr, indices, data):
        """Sort each row's ``(indices, data)`` by column in place (``sample.cu``, a thread per row). Local."""
        xp = self._xp
        nrows = len(indptr) - 1
        dt, idt = np.dtype(data.dtype), np.dtype(indices.dtype)
        if not (dt in (np.float32, np.float64) and idt in (np.int32, np.int64)
                and indices.flags.c_contiguous and data.flags.c_contiguous):
            # not the kernel's types or layout: sort copies, write them back
            ci = xp.ascontiguousarray(indices, dtype=np.int64)
            cd = xp.ascontiguousarray(data, dtype=np.float64)
            self.sort_rows_by_column(indptr, ci, cd)
            indices[...] = ci
            data[...] = cd
            return
        if nrows > 0 and indices.size:
            self.launch("sample.cu", f"sort_rows_{'i32' if idt == np.int32 else 'i64'}_{_val(dt)}",
                        *self._ew_grid(nrows),
                        (xp.ascontiguousarray(xp.asarray(indptr), dtype=np.int64), np.int64(nrows),
                         indices, data))

    # -- element-wise GNN kernels -------------------------------------------------------
    def relu(self, x):
        """``(max(x, 0), x > 0)`` (semantics: :mod:`spgnn.backends.base`). Local."""
        xp = self._xp
        if x.dtype.kind != "f" or x.dtype.itemsize not in (4, 8):
            mask = x > 0
            return xp.where(mask, x, 0).astype(x.dtype, copy=False), mask
        x = xp.ascontiguousarray(x)
        out = xp.empty_like(x)
        mask = xp.empty(x.shape, dtype=xp.bool_)
        if x.size:
            g, b = self._ew_grid(x.size)
            self.launch("gnn.cu", f"relu_{_val(x.dtype)}", g, b,
                        (x, np.int64(x.size), out, mask.view(xp.uint8)))
        return out, mask

    def relu_backward(self, dy, mask):
        """``dy`` where ``mask``, else 0. Local."""
        xp = self._xp
        if dy.dtype.kind != "f" or dy.dtype.itemsize not in (4, 8) or dy.shape != mask.shape:
            return xp.where(mask, dy, 0).astype(dy.dtype, copy=False)
        dy = xp.ascontiguousarray(dy)
        mask = xp.ascontiguousarray(mask, dtype=xp.bool_)
        out = xp.empty_like(dy)
        if dy.size:
            g, b = self._ew_grid(dy.size)
            self.launch("gnn.cu", f"relu_backward_{_val(dy.dtype)}", g, b,
                        (dy, mask.view(xp.uint8), np.int64(dy.size), out))
        return out

    def dropout(self, x, p, base, rows, col0, ncols, out=None):
        """Counter-based inverted dropout of a dense block, bit-identical to the CPU backends. Local."""
        xp = self._xp
        p = V.check_drop_probability(p, "dropout")
        x = xp.ascontiguousarray(x)
        if x.dtype.kind != "f":
            x = x.astype(np.float64)
        if x.ndim == 1:
            x = x[:, None]
        rows = xp.ascontiguousarray(xp.asarray(rows), dtype=np.int64)
        res = out if (out is not None and out.flags.c_contiguous) else xp.empty_like(x)
        m, k = x.shape
        if x.size:
            g, b = self._ew_grid(x.size)
            self.launch("gnn.cu", f"dropout_{_val(x.dtype)}", g, b,
                        (x, rows, np.int64(m), np.int64(k), np.int64(col0), np.int64(ncols),
                         np.uint64(base), np.float64(p), x.dtype.type(1.0 / (1.0 - p)), res))
        if out is not None and res is not out:
            out[...] = res
            return out
        return res

    def dropout_csr(self, indptr, indices, data, p, base, rows, col0, ncols):
        """Counter-based dropout of a CSR block's stored entries: the new ``data``. Local."""
        xp = self._xp
        p = V.check_drop_probability(p, "dropout_csr")
        tag, idt = _idx(indptr, indices)
        data = xp.ascontiguousarray(data)
        out = xp.empty_like(data)
        m = len(indptr) - 1
        if m > 0 and data.size:
            g, b = self._ew_grid(m)
            self.launch("gnn.cu", f"dropout_csr_{tag}_{_val(data.dtype)}", g, b,
                        (xp.ascontiguousarray(indptr, dtype=idt),
                         xp.ascontiguousarray(indices, dtype=idt), data,
                         xp.ascontiguousarray(xp.asarray(rows), dtype=np.int64), np.int64(m),
                         np.int64(col0), np.int64(ncols), np.uint64(base), np.float64(p),
                         data.dtype.type(1.0 / (1.0 - p)), out))
        return out

    # -- message codec (quant.cu; semantics: spgnn/backends/_quant.py) ------------------
    def _as_host(self, like, arr):
        """``arr`` on the host when ``like`` is a host (numpy) array, else as is."""
        return self.to_host(arr) if isinstance(like, np.ndarray) else arr

    def quantize_rows(self, x, seg_counts, bits, rounding, param_dtype, base, row_keys,
                      pack_axis="feature"):
        """``(codes, params)`` on the device, bit-identical to the Numba codec. Local.

        The outputs live where ``x`` lives: a host ``x`` (what the codec's
        alltoallv passes) gets host codes, a device ``x`` device codes.
        Raises DTypeError on a NaN or infinite row (the Numba codec's message).
        """
        from . import _quant
        from ..errors import DTypeError

        xp = self._xp
        bits = _quant.check_codec(bits, rounding, param_dtype, pack_axis)
        xd = xp.ascontiguousarray(xp.asarray(x))
        if xd.dtype not in (np.float32, np.float64):
            xd = xd.astype(np.float64)
        if xd.ndim != 2:
            xd = xd.reshape(xd.shape[0], int(np.prod(xd.shape[1:], dtype=np.int64)))
        n, width = xd.shape
        gr, gl, go = _quant.segment_groups(seg_counts, bits, width, pack_axis)
        if int(np.sum(seg_counts)) != n:
            raise ValueError(f"quantize: segment counts sum to {int(np.sum(seg_counts))}, but x "
                             f"has {n} rows")
        keys = np.ascontiguousarray(self.to_host(row_keys), dtype=np.int64)
        if keys.shape != (n,):
            raise ValueError(f"quantize: row_keys must have one key per row ({n}), got "
                             f"{keys.shape}")
        lo = xp.empty(n, dtype=np.float32)
        scale = xp.empty(n, dtype=np.float32)
        bad = xp.zeros(n, dtype=np.int32)
        codes = xp.empty(int(_quant.code_bytes(seg_counts, bits, width, pack_axis).sum()),
                         dtype=np.uint8)
        v = _val(xd.dtype)
        if n:
            self.launch("quant.cu", f"quant_params_{v}", (max(1, min(65535, -(-n // self.warps))),),
                        (32 * self.warps,), (xd, np.int64(n), np.int64(width), np.int32(bits),
                                             np.int32(param_dtype == "bf16"), lo, scale, bad))
            nb = np.asarray(self.to_host(bad))
            if nb.any():
                g = int(np.searchsorted(gr, int(np.flatnonzero(nb)[0]), side="right")) - 1
                raise DTypeError(f"quantize: message rows {int(gr[g])}..{int(gr[g] + gl[g]) - 1} "
                                 f"hold a NaN or an infinity; a row's range (its quantization "
                                 f"scale) must be finite")
        if codes.size:
            g_, b_ = self._ew_grid(gr.size * width)      # a thread per byte slot of each group
            self.launch("quant.cu", f"quant_pack_{v}", g_, b_,
                        (xd, lo, scale, self.from_host(gr), self.from_host(gl),
                         self.from_host(go), np.int64(gr.size), np.int64(width), np.int32(bits),
                         np.int32(pack_axis == "feature"), np.int32(rounding == "stochastic"),
                         np.uint64(base),
                         self.from_host(keys), codes))
        if param_dtype == "bf16":
            params = xp.stack([lo.view(np.uint32) >> 16, scale.view(np.uint32) >> 16],
                              axis=1).astype(np.uint16)
        else:
            params = xp.stack([lo, scale], axis=1)
        return self._as_host(x, codes), self._as_host(x, params)

    def dequantize_rows(self, codes, params, seg_counts, bits, width, dtype=np.float32,
                        pack_axis="feature"):
        """The rows :meth:`quantize_rows` coded, decoded on the device. Local.

        The output lives where ``codes`` lives (host codes from the wire give
        a host array, as the base contract says).
        """
        from . import _quant

        xp = self._xp
        bits = int(bits)
        _quant.check_codec(bits, _quant.ROUNDINGS[0], _quant.PARAM_DTYPES[0], pack_axis)
        n, width = int(np.sum(seg_counts)), int(width)
        gr, gl, go = _quant.segment_groups(seg_counts, bits, width, pack_axis)
        want = int(_quant.code_bytes(seg_counts, bits, width, pack_axis).sum())
        if codes.size != want:
            raise ValueError(f"dequantize: expected {want} code bytes, got {codes.size}")
        p = xp.asarray(params).reshape(-1, 2)
        if p.dtype == np.uint16:
            f = (p.astype(np.uint32) << 16).view(np.float32)
        else:
            f = p.astype(np.float32)
        lo, scale = xp.ascontiguousarray(f[:, 0]), xp.ascontiguousarray(f[:, 1])
        dt = np.dtype(dtype)
        out = xp.empty((n, width), dtype=dt if dt in (np.float32, np.float64) else np.float64)
        if codes.size:
            g_, b_ = self._ew_grid(gr.size * width)
            self.launch("quant.cu", f"quant_unpack_{_val(out.dtype)}", g_, b_,
                        (xp.ascontiguousarray(xp.asarray(codes), dtype=np.uint8), lo, scale,
                         self.from_host(gr), self.from_host(gl), self.from_host(go),
                         np.int64(gr.size), np.int64(width), np.int32(bits),
                         np.int32(pack_axis == "feature"), out))
        out = out.astype(dt, copy=False)
        return self._as_host(codes, out)
