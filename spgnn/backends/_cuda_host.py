"""Host build of the CUDA sources: the same ``.cu`` text compiled by g++ and run on OS threads.

For tests only (the ``cupy`` backend runs on a GPU through ``cupy.RawModule``).
``kernels/cuda/host_shim.h`` maps the CUDA constructs the kernels use onto
C++20 threads and barriers; this module generates one ``host_launch_<name>``
wrapper per ``extern "C" __global__`` entry point, builds a shared library
(cached by the hash of source, shim and flags) and loads it with ctypes
behind the call form of ``cupy.RawKernel``: ``kernel(grid, block, args)``.

``variant`` ``"tsan"``/``"asan"`` builds with ThreadSanitizer/AddressSanitizer;
such a library only loads into a process started with the sanitizer runtime
in ``LD_PRELOAD`` (:func:`sanitizer_env`), which the tests do in a separate
process.  numpy + ctypes only: importing this module imports no numba.
"""

import ctypes
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

from . import _cuda_source as S

__all__ = ["HostModule", "HostKernel", "build", "compiler_missing", "sanitizer_env", "FLAGS"]

#: g++ flags per variant (``-O1 -g``: sanitizer reports name source lines).
FLAGS = {
    "plain": ("-O1", "-g"),
    "tsan": ("-O1", "-g", "-fsanitize=thread"),
    "asan": ("-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer"),
}
_RUNTIME = {"tsan": "libtsan.so", "asan": "libasan.so"}
_LOCK = threading.Lock()      # the shim runs one launch at a time per process


def compiler_missing():
    """``None`` when g++ is on PATH, else the reason (tests skip with it)."""
    return None if shutil.which("g++") else "g++ is not installed (the host build needs it)"


def sanitizer_env(variant):
    """Environment for a child process that loads a ``variant`` library."""
    env = dict(os.environ)
    lib = subprocess.run(["g++", f"-print-file-name={_RUNTIME[variant]}"], capture_output=True,
                         text=True, check=True).stdout.strip()
    env["LD_PRELOAD"] = lib
    env["TSAN_OPTIONS"] = "halt_on_error=1 exitcode=66 report_signal_unsafe=0"
    env["ASAN_OPTIONS"] = "detect_leaks=0 halt_on_error=1 exitcode=67"
    return env


def _cache_dir():
    d = Path(os.environ.get("SPGNN_CUDA_HOST_CACHE")
             or Path(tempfile.gettempdir()) / f"spgnn-cuda-host-{os.getuid()}")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _wrappers(sigs):
    lines = []
    for name, params in sigs.items():
        casts = []
        for i, (_, ctype, pointer) in enumerate(params):
            t = ctype + ("*" if pointer else "")
            casts.append(f"*reinterpret_cast<{t}*>(args[{i}])")
        lines.append(
            f'extern "C" void host_launch_{name}(unsigned gx, unsigned gy, unsigned gz, '
            f"unsigned bx, unsigned by, unsigned bz, void** args) {{\n"
            f"    spgnn_host::launch(dim3{{gx, gy, gz}}, dim3{{bx, by, bz}}, "
            f"[&] {{ {name}({', '.join(casts)}); }});\n}}\n")
    return "\n".join(lines)


def build(name, variant="plain", plant=None):
    """Path of the shared library of source ``name`` (built once per content hash)."""
    text = S.assemble(name, plant)
    shim = (S.source_dir() / "host_shim.h").read_text()
    unit = shim + "\n#line 1 \"" + name + "\"\n" + text + "\n" + _wrappers(S.signatures(text))
    key = S.source_hash(unit, FLAGS[variant])
    out = _cache_dir() / f"{Path(name).stem}-{variant}-{key}.so"
    if out.exists():
        return out
    src = out.with_suffix(f".{os.getpid()}.cpp")
    src.write_text(unit)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    cmd = ["g++", "-std=c++20", *FLAGS[variant], "-fPIC", "-shared", "-pthread", str(src),
           "-o", str(tmp)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"host build of {name} failed:\n{' '.join(cmd)}\n{res.stderr}")
    os.replace(tmp, out)      # atomic: concurrent builders never load half a file
    src.unlink(missing_ok=True)
    return out


def _pointer(a):
    """The address of ``a``'s memory: a device array's ``__cuda_array_interface__`` pointer
    (the CPU stand-in's memory is host memory), else the numpy array's."""
    cai = getattr(a, "__cuda_array_interface__", None)
    return cai["data"][0] if cai is not None else a.ctypes.data


def _check_one_memory(name, params, args):
    """``TypeError`` when device arrays and host arrays share one launch's pointer parameters.

    ``cupy.RawKernel`` refuses a numpy array where a pointer is expected (or,
    worse, passes a size-one array by value), so a launch that works here
    only because a host array was handed over must fail here too.
    """
    arrays = [a for (_, _, pointer), a in zip(params, args) if pointer]
    device = [hasattr(a, "__cuda_array_interface__") for a in arrays]
    if any(device) and not all(device):
        pname = [p for (p, _, pointer), _ in zip(params, args) if pointer][device.index(False)]
        raise TypeError(f"{name}: parameter {pname} is a host numpy array while other "
                        f"arguments are device arrays (cupy.RawKernel needs device memory)")


class HostKernel:
    """One entry point; ``kernel(grid, block, args)`` like ``cupy.RawKernel``."""

    def __init__(self, lib, name, params):
        self.name = name
        self.params = params
        self._fn = getattr(lib, f"host_launch_{name}")
        self._fn.restype = None
        self._fn.argtypes = [ctypes.c_uint] * 6 + [ctypes.c_void_p]

    def __call__(self, grid, block, args):
        S.check_args(self.name, self.params, args)
        grid = tuple(grid) + (1,) * (3 - len(tuple(grid)))
        block = tuple(block) + (1,) * (3 - len(tuple(block)))
        _check_one_memory(self.name, self.params, args)
        keep = []
        ptrs = (ctypes.c_void_p * len(args))()
        for i, ((_, ctype, pointer), a) in enumerate(zip(self.params, args)):
            if pointer:
                cell = np.array([_pointer(a)], dtype=np.uintp)     # the pointer value
            else:
                cell = np.array([a], dtype=S.CTYPE_DTYPES[ctype])
            keep.append(cell)
            ptrs[i] = cell.ctypes.data
        with _LOCK:
            self._fn(*grid, *block, ptrs)


class HostModule:
    """The host build of one source; ``get_function(name)`` like ``cupy.RawModule``."""

    def __init__(self, name, variant="plain", plant=None):
        self.source = name
        text = S.assemble(name, plant)
        self._sigs = S.signatures(text)
        self._lib = ctypes.CDLL(str(build(name, variant, plant)))

    def get_function(self, name):
        return HostKernel(self._lib, name, self._sigs[name])
