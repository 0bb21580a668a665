"""Device buffers in the communicator: how a CuPy (or any CUDA) array crosses ranks.

A *device array* is any object exposing ``__cuda_array_interface__`` that is
not a plain numpy array (CuPy, a torch CUDA tensor, the CPU stand-in of the
tests, :mod:`spgnn.testing.fake_device`).  :class:`~spgnn.comm.Communicator`
collectives accept one wherever they accept a numpy array and return a
device array of the same kind, moving it in one of two modes:

``staged`` (default)
    Copy the send buffer to the host, run the MPI call on numpy arrays, copy
    the result back to the device.  Works with every MPI library.  The
    copies are counted in the ledger, on the call's event, in
    ``CommEvent.staged_bytes`` (device-to-host plus host-to-device bytes);
    ``bytes_sent``/``bytes_recv`` stay the logical payload, identical to a
    CPU run.
``cuda-aware``
    Hand the device buffers to MPI (mpi4py passes ``__cuda_array_interface__``
    pointers through); receive buffers are allocated on the device; no host
    copy (``staged_bytes = 0``).  Needs an MPI library built with CUDA
    support; with one that is not, the job crashes in MPI (segmentation
    fault) rather than raising.  The current CUDA stream is synchronised
    before each call, since MPI reads the buffer at once.

The mode is chosen by the ``SPGNN_GPU_COMM`` environment variable
(``staged`` | ``cuda-aware``) read when a communicator is created, or by
setting :attr:`Communicator.gpu_comm` (``spgnn train/spmm --gpu-comm``); splits
inherit it.  It is never guessed: whether an MPI library can read device
memory is not reliably detectable (MPICH >= 4 and Open MPI answer
``MPIX_Query_cuda_support``, which only says how the library was *built*,
not whether this run's transport handles device pointers; other libraries
do not answer at all).  :func:`mpi_cuda_support` reports that answer for
``spgnn info`` as a hint.  Every event a device-array call records carries
the mode in ``CommEvent.device``; host calls leave it ``""``.
"""

from __future__ import annotations

import importlib
import os

import numpy as np

__all__ = ["MODES", "ENV", "default_mode", "check_mode", "is_device", "array_module", "to_host",
           "to_device", "empty_like_module", "copy", "synchronize", "mpi_cuda_support"]

#: The two ways device buffers move (module docs).
MODES = ("staged", "cuda-aware")
#: Environment variable that picks the mode for new communicators.
ENV = "SPGNN_GPU_COMM"


def check_mode(mode) -> str:
    if mode not in MODES:
        raise ValueError(f"gpu_comm must be one of {MODES}, but got {mode!r} "
                         f"(from the argument or ${ENV})")
    return mode


def default_mode() -> str:
    """``$SPGNN_GPU_COMM`` or ``"staged"``; an unknown value raises ``ValueError``."""
    return check_mode(os.environ.get(ENV) or "staged")


def is_device(x) -> bool:
    """A device array: exposes ``__cuda_array_interface__`` and is not a plain numpy array."""
    return type(x) is not np.ndarray and hasattr(x, "__cuda_array_interface__")


def array_module(x):
    """The array module of device array ``x`` (``cupy`` for a CuPy array)."""
    root = type(x).__module__.partition(".")[0]
    if root == "cupy":       # not __array_namespace__: older CuPy answers its array_api module
        return importlib.import_module("cupy")
    ns = getattr(x, "__array_namespace__", None)
    if ns is not None:
        try:
            return ns()
        except Exception:  # an old namespace hook: fall back to the defining package
            pass
    return importlib.import_module(root)


def to_host(x) -> np.ndarray:
    """A numpy copy of device array ``x`` (CuPy's ``get``; synchronises)."""
    get = getattr(x, "get", None)
    if get is not None:
        return np.ascontiguousarray(get())
    return np.ascontiguousarray(x.copy_to_host())       # numba device arrays


def to_device(h, like):
    """Host array ``h`` copied into the array module of device array ``like``."""
    return array_module(like).asarray(h)


def empty_like_module(like, shape, dtype):
    """An uninitialised array in ``like``'s module (numpy for host arrays)."""
    if is_device(like):
        return array_module(like).empty(shape, dtype=dtype)
    from spgnn.local.alloc import empty

    return empty(shape, dtype)


def copy(x):
    """A C-contiguous copy of ``x`` in its own module."""
    if is_device(x):
        return array_module(x).array(x, copy=True, order="C")
    return np.array(x, copy=True, order="C")


def synchronize(x) -> None:
    """Wait for the current stream of ``x``'s device (no-op without a ``cuda`` submodule)."""
    cuda = getattr(array_module(x), "cuda", None)
    if cuda is not None and hasattr(cuda, "get_current_stream"):
        cuda.get_current_stream().synchronize()


def mpi_cuda_support() -> str:
    """What the MPI library says about CUDA buffers: ``"yes"``, ``"no"`` or ``"unknown"``.

    ``MPIX_Query_cuda_support`` through mpi4py (``MPI.Query_cuda_support``)
    when the library and mpi4py expose it.  Build-time support only (module
    docs), so this never chooses the mode.  Local; imports mpi4py.
    """
    try:
        from mpi4py import MPI
    except ImportError:
        return "unknown"
    query = getattr(MPI, "Query_cuda_support", None)
    if query is None:
        return "unknown"
    try:
        return "yes" if query() else "no"
    except Exception:  # the library does not implement the MPIX extension
        return "unknown"
