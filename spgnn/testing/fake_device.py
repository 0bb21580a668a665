"""A CPU stand-in for CuPy, as strict as CuPy about the host/device boundary.

Used with :meth:`spgnn.backends.cupy_backend.CupyBackend.host_emulated`
(``xp=fake_cupy``) so the cupy backend's paths run in CI without a GPU: the
matrices hold :class:`FakeDeviceArray` blocks, the communicator sees device
arrays (they expose ``__cuda_array_interface__``) and stages or passes them
exactly as it would CuPy arrays, and the host build of the CUDA kernels
computes (it receives the arrays' pointers, as ``cupy.RawKernel`` does).

:class:`FakeDeviceArray` is *not* an ``np.ndarray`` subclass: it wraps one
(the "device memory") and exposes what ``cupy.ndarray`` exposes.  What it
refuses, like CuPy 13/14 (``cupy/_core/core.pyx``, ``cupy/cuda/function.pyx``):

* implicit conversion to numpy: ``np.asarray(d)``, ``np.array(d)``, a host
  array indexed by a device array (``h[d]``), ``np.int64(d)``, a device array
  inside a host ``np.concatenate`` ... raise ``TypeError`` ("Implicit
  conversion to a NumPy array is not allowed"); there is no ``__index__``, so
  ``range(d)`` and ``h[d0]`` with a 0-d ``d0`` raise too;
* mixing: an element-wise operation (ufunc) or a numpy function (NEP-18
  ``__array_function__``, which CuPy routes to its own function) or a
  ``fake_cupy`` function given a device array *and* a host array of one or
  more dimensions raises ``TypeError``; 0-d host arrays and numpy scalars
  pass, as in CuPy;
* a host kernel launch (:class:`~spgnn.backends._cuda_host.HostKernel`) that
  mixes device arrays with host arrays for pointer parameters raises
  ``TypeError`` (``cupy.RawKernel`` refuses numpy arrays as pointers);
* ``.ctypes``, ``.tobytes``-style host-only attributes do not exist.

What CuPy allows and so does it: ``d.get()``, ``int(d)``, ``float(d)``,
``bool(d)``, ``d.item()``, ``d.tolist()`` (each a device-to-host copy that
waits for the stream, counted as ``"sync"``), ``xp.asarray(host)`` (a
counted host-to-device copy), host index arrays in ``d[h]`` and host values in
``d[...] = h`` (implicit uploads, counted).  Reductions and integer
indexing return 0-d device arrays, not numpy scalars, as CuPy does.

Every copy is counted in :data:`COPIES` (``"d2h"`` for ``get()``, ``"h2d"``,
``"sync"`` for values read by the host, and their bytes), so a test can
prove a CUDA-aware exchange made no host copy and that results stayed on
the "device" (their type).

What it still cannot see: stream ordering and asynchrony (everything runs
synchronously), device memory limits, CuPy functions that exist in numpy
but not in CuPy (or differ in signature or edge cases; the stand-in runs
numpy's), out-of-bounds index wrap-around (CuPy wraps, numpy raises), and
whether a real MPI reads device pointers.  Thread-safe enough for the
loopback transport: the counters are updated under a lock.
"""

import threading
import types

import numpy as np

__all__ = ["FakeDeviceArray", "fake_cupy", "fake_cupyx_sparse", "COPIES", "reset_copies"]

COPIES = {"d2h": 0, "h2d": 0, "sync": 0, "d2h_bytes": 0, "h2d_bytes": 0, "sync_bytes": 0}
_LOCK = threading.Lock()

_IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to "
             "construct a NumPy array explicitly.")


def reset_copies():
    with _LOCK:
        for k in COPIES:
            COPIES[k] = 0


def _count(kind, nbytes):
    with _LOCK:
        COPIES[kind] += 1
        COPIES[kind + "_bytes"] += int(nbytes)


def _refuse_host(x, what):
    """``TypeError`` for a host array of one or more dimensions (what CuPy refuses)."""
    if isinstance(x, np.ndarray) and x.ndim > 0:
        raise TypeError(f"FakeDeviceArray: {what} mixes a device array with a host numpy "
                        f"array of shape {x.shape} (CuPy refuses this)")


def _unwrap(x, what):
    """``x`` with every device array replaced by its memory; host arrays refused."""
    if type(x) is FakeDeviceArray:
        return x._a
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, what) for v in x)
    _refuse_host(x, what)
    return x


def _dev(res):
    """Wrap results as device arrays; numpy scalars become 0-d device arrays (as in CuPy)."""
    if type(res) is np.ndarray:
        return FakeDeviceArray(res)
    if isinstance(res, np.generic):
        return FakeDeviceArray(np.asarray(res))
    if isinstance(res, tuple):
        return tuple(_dev(r) for r in res)
    if isinstance(res, list):
        return [_dev(r) for r in res]
    return res


class _Flags:
    """``cupy.ndarray.flags``: ``c_contiguous``, ``f_contiguous``, ``owndata``."""

    def __init__(self, a):
        self.c_contiguous = a.flags.c_contiguous
        self.f_contiguous = a.flags.f_contiguous
        self.owndata = a.flags.owndata

    def __getitem__(self, key):
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous,
                "OWNDATA": self.owndata}[key]


def _delegate(name):
    """A ``cupy.ndarray`` method that numpy's ndarray also has: run it on the memory."""
    def method(self, *args, **kwargs):
        what = f"ndarray.{name}"
        return _dev(getattr(self._a, name)(*_unwrap(args, what),
                                           **{k: _unwrap(v, what) for k, v in kwargs.items()}))

    method.__name__ = name
    return method


def _binary(ufunc, reflected=False):
    if reflected:
        return lambda self, other: ufunc(other, self)
    return lambda self, other: ufunc(self, other)


def _inplace(ufunc):
    def op(self, other):
        ufunc(self, other, out=(self,))
        return self

    return op


class FakeDeviceArray:
    """A numpy array posing as a CuPy array (see the module docstring)."""

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 100          # host_array + device: numpy defers to __array_ufunc__
    __hash__ = None

    def __init__(self, memory):
        if type(memory) is not np.ndarray:
            raise TypeError("FakeDeviceArray wraps a numpy array (use fake_cupy.asarray)")
        self._a = memory

    # -- what CuPy refuses -----------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError(_IMPLICIT)

    # -- the CUDA array interface and explicit copies ----------------------------------
    @property
    def __cuda_array_interface__(self):
        # A host pointer: mpi4py hands it to MPI, which reads host memory, so
        # the CUDA-aware path runs for real on a CPU-only MPI; the host build
        # of the kernels reads it too.
        a = self._a
        return {"shape": a.shape, "typestr": a.dtype.str, "version": 3,
                "data": (a.ctypes.data, not a.flags.writeable),
                "strides": None if a.flags.c_contiguous else a.strides}

    def get(self):
        """Device to host copy (CuPy's ``get``): a plain numpy array."""
        _count("d2h", self._a.nbytes)
        return np.array(self._a, copy=True)

    def set(self, host):
        """Host to device copy into this array (CuPy's ``set``)."""
        h = np.asarray(host)
        _count("h2d", h.nbytes)
        self._a[...] = h

    def _scalar(self):
        # a value read by the host (int(), bool(), item()): a copy that also waits for the
        # stream, counted apart from the bulk copies
        _count("sync", self._a.nbytes)
        return self._a

    def __int__(self):
        return int(self._scalar())

    def __float__(self):
        return float(self._scalar())

    def __complex__(self):
        return complex(self._scalar())

    def __bool__(self):
        return bool(self._scalar())

    def item(self):
        return self._scalar().item()

    def tolist(self):
        return self._scalar().tolist()

    def __repr__(self):
        return f"FakeDeviceArray({self._a!r})"

    def __format__(self, spec):
        return format(self._a, spec)

    __str__ = __repr__

    def __array_namespace__(self, api_version=None):
        return fake_cupy

    # -- attributes --------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: _Flags(self._a))
    T = property(lambda self: FakeDeviceArray(self._a.T))
    real = property(lambda self: _dev(self._a.real))
    imag = property(lambda self: _dev(self._a.imag))

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self._a.shape[0]))

    # -- indexing ------------------------------------------------------------------
    @staticmethod
    def _key(key):
        """An index: device arrays unwrapped, host index arrays uploaded (CuPy copies them)."""
        if type(key) is FakeDeviceArray:
            return key._a
        if isinstance(key, np.ndarray):
            _count("h2d", key.nbytes)
            return key
        if isinstance(key, tuple):
            return tuple(FakeDeviceArray._key(k) for k in key)
        if isinstance(key, list):
            return FakeDeviceArray._key(np.asarray(key))
        return key

    def __getitem__(self, key):
        return _dev(self._a[self._key(key)])

    def __setitem__(self, key, value):
        if type(value) is FakeDeviceArray:
            value = value._a
        elif isinstance(value, np.ndarray) and value.ndim > 0:
            _count("h2d", value.nbytes)          # CuPy uploads it (core.array(value))
        self._a[self._key(key)] = value

    # -- NEP 13 / NEP 18: what CuPy's __array_ufunc__ / __array_function__ do ------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        what = ufunc.__name__
        args = _unwrap(inputs, what)
        out = kwargs.get("out")
        kwargs = {k: _unwrap(tuple(v) if k == "out" else v, what) for k, v in kwargs.items()}
        res = getattr(ufunc, method)(*args, **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else tuple(out)
        return _dev(res)

    def __array_function__(self, func, types_, args, kwargs):
        what = f"numpy.{func.__name__}"
        out = kwargs.get("out")
        res = func(*_unwrap(args, what), **{k: _unwrap(v, what) for k, v in kwargs.items()})
        if out is not None and type(out) is FakeDeviceArray:
            return out
        return _dev(res)

    # -- methods cupy.ndarray has (run on the memory) ----------------------------------
    for _name in ("all", "any", "argmax", "argmin", "argsort", "clip", "conj", "copy",
                  "cumprod", "cumsum", "diagonal", "dot", "fill", "flatten", "max", "mean", "min",
                  "nonzero", "prod", "ravel", "repeat", "reshape", "round", "sort", "squeeze",
                  "std", "sum", "swapaxes", "take", "trace", "transpose", "var", "view"):
        locals()[_name] = _delegate(_name)
    del _name

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        return FakeDeviceArray(self._a.astype(dtype, order=order, copy=copy))

    # -- operators (through the ufuncs, so the mixing check applies) ---------------------
    for _name, _ufunc in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                          ("truediv", np.true_divide), ("floordiv", np.floor_divide),
                          ("mod", np.remainder), ("pow", np.power), ("and", np.bitwise_and),
                          ("or", np.bitwise_or), ("xor", np.bitwise_xor),
                          ("lshift", np.left_shift), ("rshift", np.right_shift)):
        locals()[f"__{_name}__"] = _binary(_ufunc)
        locals()[f"__r{_name}__"] = _binary(_ufunc, True)
        locals()[f"__i{_name}__"] = _inplace(_ufunc)
    del _name, _ufunc
    __matmul__, __rmatmul__ = _binary(np.matmul), _binary(np.matmul, True)
    __lt__, __le__, __gt__, __ge__ = (_binary(np.less), _binary(np.less_equal),
                                      _binary(np.greater), _binary(np.greater_equal))
    __eq__, __ne__ = _binary(np.equal), _binary(np.not_equal)

    def __neg__(self):
        return np.negative(self)

    def __pos__(self):
        return np.positive(self)

    def __abs__(self):
        return np.absolute(self)

    def __invert__(self):
        return np.invert(self)


def _upload(x, dtype=None, order=None, copy=True):
    """``x`` (host data or a device array) as a device array; a host source is a counted copy."""
    if type(x) is FakeDeviceArray:
        a = np.array(x._a, dtype=dtype, order=order or "K", copy=copy)
        return x if a is x._a else FakeDeviceArray(a)
    h = np.asarray(x, dtype=dtype, order=order)
    _count("h2d", h.nbytes)
    return FakeDeviceArray(np.array(h, copy=True, order=order or "K"))


def _asarray(x, dtype=None, order=None):
    return _upload(x, dtype, order, copy=None)


def _array(x, dtype=None, copy=True, order="K", ndmin=0):
    res = _upload(x, dtype, order, copy=True if copy is None else copy)
    if ndmin > res.ndim:
        res = FakeDeviceArray(res._a.reshape((1,) * (ndmin - res.ndim) + res.shape))
    return res


def _ascontiguousarray(x, dtype=None):
    x = _asarray(x)
    return FakeDeviceArray(np.ascontiguousarray(x._a, dtype=dtype))


class _Ufunc:
    """``cupy.<ufunc>``: refuses host arrays, returns device arrays; methods as numpy's."""

    def __init__(self, ufunc):
        self._u = ufunc
        self.__name__ = ufunc.__name__

    def __call__(self, *args, **kwargs):
        for a in args:
            _refuse_host(a, f"fake_cupy.{self.__name__}")
        return _dev(self._u(*args, **kwargs))

    def __getattr__(self, name):
        return getattr(self._u, name)


class _FakeCupy(types.ModuleType):
    """``numpy`` as CuPy: array results are :class:`FakeDeviceArray`, host arrays refused."""

    ndarray = FakeDeviceArray

    def __init__(self):
        super().__init__("fake_cupy")
        self.asarray = _asarray
        self.array = _array
        self.ascontiguousarray = _ascontiguousarray

    def asnumpy(self, x):
        """``cupy.asnumpy``: a host copy of a device array (host data as is)."""
        return x.get() if type(x) is FakeDeviceArray else np.asarray(x)

    def __getattr__(self, name):
        attr = getattr(np, name)
        if isinstance(attr, np.ufunc):
            return _Ufunc(attr)
        if callable(attr) and not isinstance(attr, type):
            def wrapped(*args, **kwargs):
                what = f"fake_cupy.{name}"
                return _dev(attr(*_unwrap(args, what),
                                 **{k: _unwrap(v, what) for k, v in kwargs.items()}))

            wrapped.__name__ = name
            return wrapped
        return attr


#: The stand-in module: pass it as ``xp`` (``CupyBackend.host_emulated(xp=fake_cupy)``).
fake_cupy = _FakeCupy()


class _FakeCSR:
    """``cupyx.scipy.sparse.csr_matrix`` on device arrays (a scipy matrix underneath)."""

    def __init__(self, arg, shape=None, dtype=None, copy=False):
        import scipy.sparse

        if isinstance(arg, tuple):
            arg = tuple(_unwrap(v, "cupyx.scipy.sparse.csr_matrix") for v in arg)
        self._m = arg if scipy.sparse.issparse(arg) and not isinstance(arg, tuple) else \
            scipy.sparse.csr_matrix(arg, shape=shape, dtype=dtype, copy=copy)

    shape = property(lambda self: self._m.shape)
    nnz = property(lambda self: self._m.nnz)
    dtype = property(lambda self: self._m.dtype)
    indptr = property(lambda self: FakeDeviceArray(self._m.indptr))
    indices = property(lambda self: FakeDeviceArray(self._m.indices))
    data = property(lambda self: FakeDeviceArray(self._m.data))
    T = property(lambda self: _FakeCSR(self._m.T))

    def tocsr(self):
        return _FakeCSR(self._m.tocsr())

    def __matmul__(self, other):
        if isinstance(other, _FakeCSR):
            return _FakeCSR(self._m @ other._m)
        return FakeDeviceArray(np.asarray(self._m @ _unwrap(other, "csr_matrix @")))


#: The stand-in of ``cupyx.scipy.sparse`` (only ``csr_matrix``): pass it as ``sparse``.
fake_cupyx_sparse = types.SimpleNamespace(csr_matrix=_FakeCSR)
