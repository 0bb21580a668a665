"""Backend registry: ``numpy`` (scipy reference), ``numba`` (CPU kernels), ``cupy`` (GPU).

``get_backend(None)`` returns the configured default (``SPGNN_BACKEND`` or
:func:`spgnn.set_default_backend`, else ``numba`` when importable, else
``numpy``).  An unavailable backend raises :class:`BackendUnavailable` whose
message says why and how to fix it.
"""

import importlib
import os
import threading

from ..errors import BackendUnavailable
from ..local.alloc import cached_bytes as output_cache_bytes
from ..local.alloc import empty as empty_output
from ..local.alloc import release_cached as release_output_cache
from .base import Backend

__all__ = ["Backend", "BUILTIN_BACKENDS", "register_backend", "get_backend", "available_backends",
           "backend_status", "set_default_backend", "empty_output", "release_output_cache",
           "output_cache_bytes"]

#: The built-in backends, reference first: name -> (module, class).  The
#: registry imports a module only when a backend is first asked for, and the
#: backend modules never import the registry (they subclass
#: :class:`~spgnn.backends.base.Backend`, nothing else), so the import graph
#: stays a tree.  Importing them is cheap: each defers its own heavy
#: dependency (numba, cupy) to first use.
BUILTIN_BACKENDS = {
    "numpy": ("spgnn.backends.numpy_backend", "NumpyBackend"),
    "numba": ("spgnn.backends.numba_backend", "NumbaBackend"),
    "cupy": ("spgnn.backends.cupy_backend", "CupyBackend"),
}

_BACKENDS = {}     # name -> class: the built-ins once loaded, then registered ones
_REGISTERED = {}   # name -> class given to register_backend (wins over a built-in)
_INSTANCES = {}
_DEFAULT = [None]
_LOCK = threading.Lock()


def register_backend(cls):
    """Class decorator adding a third-party backend under ``cls.name``.

    ``cls`` subclasses :class:`Backend`.  A name already taken by a built-in
    backend replaces it (the built-in list is in :data:`BUILTIN_BACKENDS`).
    """
    with _LOCK:
        _REGISTERED[cls.name] = cls
        if _BACKENDS:              # the built-ins are loaded already
            _BACKENDS[cls.name] = cls
        _INSTANCES.pop(cls.name, None)
    return cls


def _ensure_registered():
    if _BACKENDS:
        return
    # Threads (loopback ranks) may ask at once: fill a new dict and publish it
    # whole, so that no thread ever sees some built-ins but not all.
    with _LOCK:
        if not _BACKENDS:
            found = {name: getattr(importlib.import_module(module), cls)
                     for name, (module, cls) in BUILTIN_BACKENDS.items()}
            found.update(_REGISTERED)
            _BACKENDS.update(found)


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
