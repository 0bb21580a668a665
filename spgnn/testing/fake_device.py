"""A CPU stand-in for CuPy: numpy memory that the code under test must treat as device memory.

Used with :meth:`spgnn.backends.cupy_backend.CupyBackend.host_emulated`
(``xp=fake_cupy``) so the cupy backend's *distributed* paths run in CI
without a GPU: the matrices hold :class:`FakeDeviceArray` blocks, the
communicator sees device arrays (they expose ``__cuda_array_interface__``)
and stages or passes them exactly as it would CuPy arrays, and the host
build of the CUDA kernels computes.

What it checks, like CuPy would refuse:

* an element-wise operation (ufunc) mixing a device array with a host numpy
  array of one or more dimensions raises ``TypeError`` (CuPy raises too);
* every explicit copy is counted (:data:`COPIES`: ``"d2h"`` for
  :meth:`FakeDeviceArray.get`, ``"h2d"`` for :func:`asarray` of a host
  array), so a test can prove a CUDA-aware exchange made no host copy and
  that results stayed on the "device" (their type).

What it cannot see: ``np.asarray(device_array)`` (numpy converts a subclass
silently where CuPy raises) and indexing a host array with a device array.
Thread-safe enough for the loopback transport: the counters are updated
under a lock.
"""

import threading
import types

import numpy as np

__all__ = ["FakeDeviceArray", "fake_cupy", "COPIES", "reset_copies"]

COPIES = {"d2h": 0, "h2d": 0, "d2h_bytes": 0, "h2d_bytes": 0}
_LOCK = threading.Lock()


def reset_copies():
    with _LOCK:
        for k in COPIES:
            COPIES[k] = 0


def _count(kind, nbytes):
    with _LOCK:
        COPIES[kind] += 1
        COPIES[kind + "_bytes"] += int(nbytes)


class FakeDeviceArray(np.ndarray):
    """A numpy array posing as a CUDA array (see the module docstring)."""

    @property
    def __cuda_array_interface__(self):
        # A host pointer: mpi4py hands it to MPI, which reads host memory, so
        # the CUDA-aware path runs for real on a CPU-only MPI.
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3,
                "data": (self.ctypes.data, not self.flags.writeable),
                "strides": None if self.flags.c_contiguous else self.strides}

    def get(self):
        """Device to host copy (CuPy's ``get``): a plain numpy array."""
        _count("d2h", self.nbytes)
        return np.array(self, copy=True, subok=False)

    def __array_namespace__(self, api_version=None):
        return fake_cupy

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        for x in inputs + tuple(kwargs.get("out", ())):
            if type(x) is np.ndarray and x.ndim > 0:
                raise TypeError(f"FakeDeviceArray: {ufunc.__name__} mixes a device array with a "
                                f"host numpy array of shape {x.shape} (CuPy refuses this)")
        args = [x.view(np.ndarray) if isinstance(x, FakeDeviceArray) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(x.view(np.ndarray) if isinstance(x, FakeDeviceArray) else x
                                  for x in kwargs["out"])
        res = getattr(ufunc, method)(*args, **kwargs)
        return _dev(res)


def _dev(res):
    if type(res) is np.ndarray:
        return res.view(FakeDeviceArray)
    if isinstance(res, tuple):
        return tuple(_dev(r) for r in res)
    if isinstance(res, list):
        return [_dev(r) for r in res]
    return res


def _asarray(x, dtype=None, order=None):
    if isinstance(x, FakeDeviceArray):
        return _dev(np.asarray(x.view(np.ndarray), dtype=dtype, order=order))
    h = np.asarray(x, dtype=dtype, order=order)
    _count("h2d", h.nbytes)
    return np.array(h, copy=True).view(FakeDeviceArray)


def _ascontiguousarray(x, dtype=None):
    if not isinstance(x, FakeDeviceArray):
        x = _asarray(x)
    return _dev(np.ascontiguousarray(x.view(np.ndarray), dtype=dtype))


class _FakeCupy(types.ModuleType):
    """``numpy`` whose array results are :class:`FakeDeviceArray` (a module-like object)."""

    ndarray = FakeDeviceArray

    def __init__(self):
        super().__init__("fake_cupy")
        self.asarray = _asarray
        self.ascontiguousarray = _ascontiguousarray

    def __getattr__(self, name):
        attr = getattr(np, name)
        if callable(attr) and not isinstance(attr, type) and not isinstance(attr, np.ufunc):
            def wrapped(*args, **kwargs):
                return _dev(attr(*args, **kwargs))

            wrapped.__name__ = name
            return wrapped
        return attr


#: The stand-in module: pass it as ``xp`` (``CupyBackend.host_emulated(xp=fake_cupy)``).
fake_cupy = _FakeCupy()
