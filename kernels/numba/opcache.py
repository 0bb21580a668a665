"""On-disk cache of kernels specialised on user operators.

Why: a kernel specialised on a scalar function (a registered semiring's
``add``/``mul``, an ``apply`` function) cannot simply be
``njit(cache=True)`` inside a factory: numba keys a cached closure by its
pickled closure variables, and a pickled dispatcher carries a fresh UUID in
every process, so the cache never hits and every process recompiles (5-10 s
per kernel, about 90 s per rank on a loaded 2-core machine).

How: a *template* is an ordinary kernel module whose functions call the
operators as module globals (e.g. ``ADD``, ``MUL``) and are
``njit(cache=True)``.  :func:`specialise` copies the template's source into a
cache directory as ``<template>_<key>.py``, where ``key`` hashes the
template's source, the sources of its package (the helpers it calls are
compiled into it), every bound operator's :func:`fingerprint` (its code,
constants, closure values and the globals it reads, recursively), and the
Python and numba versions; imports that copy as a new module; and binds the
operators (numba-compiled, inlined) as its globals.  Numba's cache keys a
function by its source file, which is now one file per (template,
operators): the next process importing the same file finds the compiled
kernels on disk.  Numba does not re-check globals on a cache hit, which is
exactly why the key must cover everything the operators compute with; an
operator whose globals cannot be fingerprinted (arbitrary objects) gets a
per-process module in a temporary directory (compiled, not reused).

The directory is ``$SPGNN_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/spgnn/kernels``
or ``~/.cache/spgnn/kernels``; when it cannot be written, a temporary
directory (no reuse across processes).  Files are created atomically
(written aside, then hard-linked into place, never replaced), so concurrent
ranks may race to create one.  Pure Python + numba; no spgnn imports.
"""

import hashlib
import importlib.util
import inspect
import os
import sys
import tempfile
import threading
import types

import numba
import numpy as np

__all__ = ["specialise", "fingerprint", "cache_dir", "Uncacheable"]

_LOCK = threading.Lock()
_MODULES = {}          # (template name, id of every bound function) -> module
_FALLBACK = []


class Uncacheable(Exception):
    """An operator reads something :func:`fingerprint` cannot describe."""


def cache_dir():
    """The directory kernels are cached in (created), or a per-process temporary one."""
    path = os.environ.get("SPGNN_KERNEL_CACHE")
    if not path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "spgnn", "kernels")
    try:
        os.makedirs(path, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    return _temporary_dir()


def _temporary_dir():
    if not _FALLBACK:
        _FALLBACK.append(tempfile.mkdtemp(prefix="spgnn-kernels-"))
    return _FALLBACK[0]


def _py_func(f):
    return getattr(f, "py_func", f)


def fingerprint(func) -> str:
    """A hex digest of what ``func`` computes: bytecode, constants, names, closure values and
    the globals it reads (modules by name, functions recursively, plain values by type and
    repr).  Raises :class:`Uncacheable` for any other global or closure value."""
    h = hashlib.sha256()
    _feed_function(h, _py_func(func), set())
    return h.hexdigest()


def _feed_code(h, code):
    h.update(code.co_code)
    h.update(repr((code.co_argcount, code.co_names, code.co_varnames, code.co_freevars)).encode())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _feed_code(h, c)
        else:
            h.update(repr((type(c).__name__, c)).encode())


def _names(code):
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


def _feed_function(h, f, seen):
    if id(f) in seen:
        h.update(b"<recursive>")
        return
    seen.add(id(f))
    code = getattr(f, "__code__", None)
    if code is None:
        raise Uncacheable(f"{f!r} has no Python code")
    _feed_code(h, code)
    for cell in f.__closure__ or ():
        _feed_value(h, cell.cell_contents, seen)
    g = getattr(f, "__globals__", {})
    for name in sorted(_names(code)):
        if name in g:
            h.update(name.encode())
            _feed_value(h, g[name], seen)


def _feed_value(h, v, seen):
    if isinstance(v, types.ModuleType):
        h.update(f"module:{v.__name__}".encode())
    elif isinstance(v, (bool, int, float, complex, str, bytes, type(None), np.number, np.bool_)):
        h.update(repr((type(v).__name__, v)).encode())
    elif isinstance(v, tuple):
        h.update(b"(")
        for x in v:
            _feed_value(h, x, seen)
        h.update(b")")
    elif isinstance(v, np.ndarray):
        h.update(repr((v.dtype.str, v.shape)).encode())
        h.update(np.ascontiguousarray(v).tobytes())
    elif isinstance(v, (types.BuiltinFunctionType, np.ufunc)):
        h.update(f"builtin:{getattr(v, '__module__', '')}.{v.__name__}".encode())
    elif inspect.isfunction(v) or hasattr(v, "py_func"):
        _feed_function(h, _py_func(v), seen)
    else:
        raise Uncacheable(f"cannot fingerprint a global or closure value of type "
                          f"{type(v).__name__}")


def _template_source(template):
    """The template's source with its package-relative imports made absolute."""
    with open(template.__file__, encoding="utf-8") as fh:
        src = fh.read()
    pkg = template.__name__.rpartition(".")[0]
    lines = [f"from {pkg}." + ln[len("from ."):] if ln.startswith("from .") else ln
             for ln in src.splitlines(keepends=True)]
    return "".join(lines)


_PACKAGE_DIGESTS = {}


def _package_digest(template):
    """A digest of every module of the template's package: the kernels it imports (``_ops``
    helpers, ...) are compiled into the cached code, and numba would not notice them change."""
    folder = os.path.dirname(os.path.abspath(template.__file__))
    got = _PACKAGE_DIGESTS.get(folder)
    if got is None:
        h = hashlib.sha256()
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                h.update(name.encode())
                with open(os.path.join(folder, name), "rb") as fh:
                    h.update(fh.read())
        got = _PACKAGE_DIGESTS[folder] = h.digest()
    return got


def _write_once(path, text):
    """Create ``path`` holding ``text`` unless it exists (atomic: a racing writer's file wins)."""
    if os.path.exists(path):
        return
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


def specialise(template, **ops):
    """``template`` (a kernel module) with the globals ``ops`` (scalar Python functions or
    numba dispatchers) bound: a module whose ``njit(cache=True)`` kernels are cached on disk
    per (template, operators).  Memoised per process by the functions' identities."""
    ident = (template.__name__,) + tuple(sorted((k, id(_py_func(v))) for k, v in ops.items()))
    with _LOCK:
        got = _MODULES.get(ident)
        if got is not None:
            return got[0]
        src = _template_source(template)
        h = hashlib.sha256(src.encode())
        h.update(_package_digest(template))
        h.update(repr((sys.version_info[:3], numba.__version__, np.__version__)).encode())
        try:
            for k in sorted(ops):
                h.update(k.encode())
                h.update(fingerprint(ops[k]).encode())
            directory = cache_dir()
        except Uncacheable:
            # a per-process name: nothing is shared with other processes
            h.update(f"{os.getpid()}:{id(ops)}".encode())
            directory = _temporary_dir()
        short = template.__name__.rpartition(".")[2]
        name = f"spgnn_opk_{short}_{h.hexdigest()[:24]}"
        path = os.path.join(directory, name + ".py")
        _write_once(path, src)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        for k, v in ops.items():
            f = v if hasattr(v, "py_func") else numba.njit(nogil=True, inline="always")(v)
            setattr(mod, k, f)
        # keep the functions alive: their ids are part of the memo key
        _MODULES[ident] = (mod, tuple(ops.values()))
        return mod
