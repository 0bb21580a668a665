"""Backend registry: ``numpy`` (scipy reference), ``numba`` (CPU kernels), ``cupy`` (GPU).

``get_backend(None)`` returns the configured default (``SPGNN_BACKEND`` or
:func:`spgnn.set_default_backend`, else ``numba`` when importable, else
``numpy``).  An unavailable backend raises :class:`BackendUnavailable` whose
message says why and how to fix it.
"""

import os

from ..errors import BackendUnavailable
from ..local.alloc import cached_bytes as output_cache_bytes
from ..local.alloc import empty as empty_output
from ..local.alloc import release_cached as release_output_cache
from .base import Backend

__all__ = ["Backend", "register_backend", "get_backend", "available_backends",
           "backend_status", "set_default_backend", "empty_output", "release_output_cache",
           "output_cache_bytes"]

_BACKENDS = {}
_INSTANCES = {}
_DEFAULT = [None]


def register_backend(cls):
    """Class decorator adding a backend under ``cls.name``."""
    _BACKENDS[cls.name] = cls
    return cls


def _ensure_registered():
    if not _BACKENDS:
        from . import numpy_backend, numba_backend, cupy_backend  # noqa: F401  (reference first)


def backend_status():
    """``{name: None or reason}`` for every registered backend (local, cheap)."""
    _ensure_registered()
    return {name: cls.unavailable_reason() for name, cls in _BACKENDS.items()}


def available_backends():
    """Names of the backends usable here, reference first."""
    return [n for n, why in backend_status().items() if why is None]


def set_default_backend(name):
    """Make ``name`` the default for operations that are not given one."""
    get_backend(name)
    _DEFAULT[0] = name


def _default_name():
    if _DEFAULT[0]:
        return _DEFAULT[0]
    env = os.environ.get("SPGNN_BACKEND")
    if env:
        return env
    return "numba" if _BACKENDS["numba"].is_available() else "numpy"


def get_backend(name=None) -> Backend:
    """Return the backend instance for ``name`` (or a Backend, passed through)."""
    if isinstance(name, Backend):
        return name
    _ensure_registered()
    if name is None:
        name = _default_name()
    if name not in _BACKENDS:
        raise ValueError(f"get_backend: unknown backend {name!r}; expected one of {sorted(_BACKENDS)}")
    inst = _INSTANCES.get(name)
    if inst is None:
        why = _BACKENDS[name].unavailable_reason()
        if why is not None:
            raise BackendUnavailable(f"backend {name!r} is unavailable: {why}")
        inst = _INSTANCES[name] = _BACKENDS[name]()
    return inst
