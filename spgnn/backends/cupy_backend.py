"""The ``cupy`` backend: CuPy arrays, CUDA C++ kernels from ``kernels/cuda`` via ``cupy.RawModule``.

Kernels (``kernels/cuda/*.cu``, one ``RawModule`` per source, compiled by
CuPy's NVRTC for the device's architecture with
:data:`spgnn.backends._cuda_source.NVRTC_OPTIONS`): SpMM (GE-SpMM-style warp
per row with coalesced row caching), SDDMM (warp per row, shuffle
reduction), row extraction, ReLU forward/backward, dense and CSR counter-based dropout
(bit-identical to the Numba kernels).  Every launch checks its arguments
against the entry point's parsed C signature (a wrong scalar width raises
:class:`~spgnn.errors.DTypeError` instead of shifting arguments).

Named alternative: ``spmm_impl="cusparse"`` runs plus-times SpMM through
``cupyx.scipy.sparse`` (cuSPARSE).  The remaining operations (SpGEMM,
column extraction, transpose, sampling, first-appearance de-duplication, row
sorting) have no CUDA kernel yet: they copy to the host, run the ``numba``
backend (``numpy`` without numba), and copy back (:data:`HOST_ROUND_TRIP`
lists them; ``host_round_trips`` counts the calls), so the contract is
complete but those operations are not GPU-fast.

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

#: Operations that run on the host (numba backend) with a copy each way.
HOST_ROUND_TRIP = ("spgemm_symbolic", "spgemm_numeric", "extract_cols",
                   "transpose", "sample_rows", "first_appearance", "sort_rows_by_column")

_MAX_WARPS = 8             # SPMM_MAX_WARPS / SDDMM_MAX_WARPS in the sources


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
        self.host_round_trips = 0

    @classmethod
    def host_emulated(cls, **kw):
        """The backend on numpy + scipy + the g++ host build of the kernels (tests, no GPU)."""
        import scipy.sparse

        from ._cuda_host import HostModule

        kw = {"warps": 1, "ew_block": 32, "ew_max_blocks": 4, **kw}
        return cls(xp=np, sparse=scipy.sparse, module=HostModule, **kw)

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

    def to_host(self, x):
        return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else x

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
            y = xp.asarray(self._host_backend().spmm(self._host_csr(a), self.to_host(x), semiring))
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

    def sddmm(self, a, x, y, semiring):
        """``C.data[e] = a.data[e] (x) ((+)_k x[i, k] (x) y[j, k])`` on ``a``'s pattern. Local."""
        xp = self._xp
        x, y, semiring, dt = V.check_sddmm(a, x, y, semiring, xp=xp)
        if not semiring.builtin:      # no CUDA kernel: the host backend computes it
            got = self._host_backend().sddmm(self._host_csr(a), self.to_host(x), self.to_host(y),
                                             semiring)
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

    # -- sparse-module operations (cuSPARSE on a GPU) ---------------------------------
    def _host_backend(self):
        from . import numba_backend, numpy_backend

        cls = (numba_backend.NumbaBackend if numba_backend.NumbaBackend.is_available()
               else numpy_backend.NumpyBackend)
        return cls()

    def _host_csr(self, a):
        h = self.to_host
        return LocalCSR(h(a.indptr), h(a.indices), h(a.data), a.shape, check=None)

    def _dev_csr(self, a):
        d = self.from_host
        return LocalCSR(d(a.indptr), d(a.indices), d(a.data), a.shape, check=None)

    def spgemm_symbolic(self, a, b):
        self.host_round_trips += 1
        return self.from_host(self._host_backend().spgemm_symbolic(self._host_csr(a),
                                                                     self._host_csr(b)))

    def spgemm_numeric(self, a, b, indptr, semiring):
        self.host_round_trips += 1
        c = self._host_backend().spgemm_numeric(self._host_csr(a), self._host_csr(b),
                                                self.to_host(indptr), semiring)
        return self._dev_csr(c)

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

    def extract_cols(self, a, cols):
        """``a[:, cols]`` (scipy's semantics). Local."""
        V.check_csr(a, "extract_cols")
        self.host_round_trips += 1
        return self._dev_csr(self._host_backend().extract_cols(self._host_csr(a),
                                                               self.to_host(cols)))

    def transpose(self, a):
        """``a.T`` in CSR with sorted indices. Local."""
        V.check_csr(a, "transpose")
        self.host_round_trips += 1
        return self._dev_csr(self._host_backend().transpose(self._host_csr(a)))

    # -- sampling (host round trip) ---------------------------------------------------
    def sample_rows(self, indptr, indices, data, rows, keys, s, method, weighted):
        self.host_round_trips += 1
        h = self.to_host
        ptr, pos = self._host_backend().sample_rows(h(indptr), h(indices), h(data), h(rows),
                                                    h(keys), s, method, weighted)
        return self.from_host(ptr), self.from_host(pos)

    def first_appearance(self, a, a_ptr, b, b_ptr, n):
        self.host_round_trips += 1
        h = self.to_host
        res = self._host_backend().first_appearance(h(a), h(a_ptr), h(b), h(b_ptr), n)
        return tuple(self.from_host(r) for r in res)

    def sort_rows_by_column(self, indptr, indices, data):
        self.host_round_trips += 1
        h = self.to_host
        hi, hd = h(indices), h(data)
        if hi is not indices:
            hi, hd = hi.copy(), hd.copy()
        self._host_backend().sort_rows_by_column(h(indptr), hi, hd)
        if hi is not indices:           # device arrays: copy the sorted rows back in place
            indices[...] = self.from_host(hi)
            data[...] = self.from_host(hd)

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
