"""Compile a CUDA source to machine code with NVRTC, no GPU or driver needed (CI check).

Uses the ``cuda-bindings`` + ``nvidia-cuda-nvrtc`` wheels (the ``test``
extra).  Options are the backend's run-time :data:`~._cuda_source.NVRTC_OPTIONS`
plus ``--device-as-default-execution-space``, which CuPy adds itself.
Compiles to a cubin (``sm_XX``), not only PTX: some errors (too much shared
memory) appear only at that stage.  NVRTC has no ``-Werror``, so a log that
mentions a warning counts as a failure.
"""

import importlib.util

from . import _cuda_source as S

__all__ = ["nvrtc_missing", "compile_cubin", "nvrtc_version", "ARCHES"]

#: Ampere, Hopper, Blackwell.
ARCHES = ("sm_80", "sm_90", "sm_100")


def nvrtc_missing():
    """``None`` when cuda-bindings' NVRTC loads, else why not."""
    if importlib.util.find_spec("cuda") is None or importlib.util.find_spec("cuda.bindings") is None:
        return "cuda-bindings is not installed (pip install 'cuda-bindings==13.*' 'nvidia-cuda-nvrtc==13.*')"
    try:
        nvrtc_version()
    except Exception as exc:      # the library is absent or broken
        return f"NVRTC cannot be loaded ({type(exc).__name__}: {exc})"
    return None


def _check(result, what):
    from cuda.bindings import nvrtc

    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"{what}: {err}")
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


def nvrtc_version():
    from cuda.bindings import nvrtc

    return _check(nvrtc.nvrtcVersion(), "nvrtcVersion")


def _out_buffer(size):
    """A fresh buffer NVRTC may write ``size`` bytes into.

    Never ``b" " * size``, the usual cuda-python idiom: for ``size == 1`` (an
    empty log is one NUL byte) that is CPython's shared one-byte ``b" "``
    object, and NVRTC's write turned every ``b" "`` in the process into
    ``b"\\x00"`` (edge lists stopped parsing after this check ran).
    """
    return bytearray(max(int(size), 1))


def compile_cubin(name, arch, text=None):
    """``(cubin bytes, log)`` of source ``name`` for ``arch``; raises with the log on failure."""
    from cuda.bindings import nvrtc

    text = S.assemble(name) if text is None else text
    prog = _check(nvrtc.nvrtcCreateProgram(text.encode(), name.encode(), 0, [], []),
                  "nvrtcCreateProgram")
    try:
        opts = [o.encode() for o in (*S.NVRTC_OPTIONS, "--device-as-default-execution-space",
                                     f"--gpu-architecture={arch}")]
        res = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
        buf = _out_buffer(size)
        _check(nvrtc.nvrtcGetProgramLog(prog, buf), "log")
        log = buf.decode(errors="replace").rstrip("\x00 \n")
        if res[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"NVRTC failed to compile {name} for {arch}:\n{log}")
        size = _check(nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
        cubin = _out_buffer(size)
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin), "cubin")
        return bytes(cubin[:size]), log
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
