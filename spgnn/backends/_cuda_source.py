"""The CUDA sources in ``kernels/cuda``: assembly, compile options, entry-point signatures.

Shared by the ``cupy`` backend (run time), the host build used by the tests
(:mod:`spgnn.backends._cuda_host`) and the NVRTC compile check, so the three
see the same text and the same options.  numpy only; imports no cupy.

Why signatures are parsed: ``cupy.RawKernel`` does not know the C signature
of a kernel, and a scalar of the wrong width (a Python ``int`` as ``int``
where ``long long`` is declared, or the reverse) silently shifts every
following argument.  :func:`check_args` refuses such a call before launch.
"""

import hashlib
import re
from pathlib import Path

import numpy as np

from ..errors import DTypeError

__all__ = ["SOURCES", "NVRTC_OPTIONS", "source_dir", "assemble", "source_hash", "signatures",
           "check_args", "CTYPE_DTYPES", "ADD_CODES", "MUL_CODES",
           "semiring_codes"]

#: The compiled sources (one ``cupy.RawModule`` each).
SOURCES = ("spmm.cu", "sddmm.cu", "gnn.cu", "extract.cu", "spgemm.cu",
           "extract_cols.cu", "sample.cu", "dedup.cu", "quant.cu")

#: NVRTC options used at run time by the backend AND by the CI compile check
#: (CuPy adds ``--device-as-default-execution-space`` and its include
#: directory itself; the check adds the former too).  C++17: NVRTC's default
#: dialect differs between CUDA 12 and 13.
NVRTC_OPTIONS = ("--std=c++17",)

#: Semiring codes, the integers of ``kernels/cuda/ops.cuh`` and ``kernels/numba/_ops.py``
#: (a test checks the three agree).
ADD_CODES = {"plus": 0, "min": 1, "max": 2, "times": 3}
MUL_CODES = {"times": 0, "plus": 1, "first": 2, "second": 3, "pair": 4}


def semiring_codes(semiring):
    """``(add code, mul code)`` of a :class:`~spgnn.local.semiring.Semiring`."""
    return ADD_CODES[semiring.add.name], MUL_CODES[semiring.multiply]


#: C type of a kernel parameter -> numpy dtype.
CTYPE_DTYPES = {
    "int": np.dtype(np.int32),
    "long long": np.dtype(np.int64),
    "unsigned long long": np.dtype(np.uint64),
    "float": np.dtype(np.float32),
    "double": np.dtype(np.float64),
    "unsigned char": np.dtype(np.uint8),
}

_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$', re.M)
_ENTRY = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)', re.S)
_PARAM = re.compile(r"^(const\s+)?(unsigned\s+long\s+long|long\s+long|unsigned\s+char|int|float|"
                    r"double)\s*(\*?)\s*(\w+)$")


def source_dir():
    """The folder holding the ``.cu``/``.cuh`` files.

    ``spgnn/_kernels/cuda`` in an installed wheel, ``kernels/cuda`` beside the
    ``spgnn`` package in a source checkout (looked up by path, not by importing
    ``spgnn._kernels``, which an editable install may map to another checkout).
    """
    pkg = Path(__file__).resolve().parent.parent
    for folder in (pkg / "_kernels" / "cuda", pkg.parent / "kernels" / "cuda"):
        if (folder / SOURCES[0]).is_file():
            return folder
    raise FileNotFoundError(f"the CUDA sources are missing (looked in {pkg / '_kernels' / 'cuda'} "
                            f"and {pkg.parent / 'kernels' / 'cuda'})")


def assemble(name, plant=None):
    """The text of source ``name`` with its local ``#include "x.cuh"`` lines inlined.

    One self-contained string: CuPy and NVRTC then need no include path.
    ``plant`` (tests only) is ``(old, new)``: replace the first ``old`` by
    ``new`` in the assembled text, to prove the sanitizers catch a bug.
    """
    folder = source_dir()
    seen = set()

    def expand(fname):
        if fname in seen:
            return ""
        seen.add(fname)
        text = (folder / fname).read_text()
        return _INCLUDE.sub(lambda m: expand(m.group(1)), text)

    text = expand(name)
    if plant is not None:
        old, new = plant
        if old not in text:
            raise ValueError(f"plant: {old!r} not found in {name}")
        text = text.replace(old, new, 1)
    return text


def source_hash(text, *extra):
    h = hashlib.sha256(text.encode())
    for e in extra:
        h.update(repr(e).encode())
    return h.hexdigest()[:16]


def signatures(text):
    """``{entry point: [(param name, ctype, is_pointer), ...]}`` of the ``extern "C"`` kernels."""
    out = {}
    for name, params in _ENTRY.findall(text):
        plist = []
        for p in params.split(","):
            p = " ".join(p.replace("*", " * ").split())    # "const int * indptr"
            m = _PARAM.match(p)
            if m is None:
                raise ValueError(f"{name}: cannot parse parameter {p!r} (built-in types only)")
            plist.append((m.group(4), " ".join(m.group(2).split()), bool(m.group(3))))
        out[name] = plist
    return out


def check_args(kernel, params, args):
    """Raise :class:`~spgnn.errors.DTypeError` unless ``args`` match ``params`` exactly.

    Pointers take an array (numpy or CuPy) of the declared element type,
    C-contiguous; scalars take a numpy scalar of exactly the declared type
    (no Python ``int``/``float``: their width is a guess).
    """
    if len(args) != len(params):
        raise DTypeError(f"{kernel}: {len(args)} arguments for {len(params)} parameters")
    for (pname, ctype, pointer), a in zip(params, args):
        want = CTYPE_DTYPES[ctype]
        if pointer:
            dt = getattr(a, "dtype", None)
            if dt is None or getattr(a, "ndim", 0) == 0 or isinstance(a, np.generic):
                raise DTypeError(f"{kernel}: parameter {pname} ({ctype}*) needs an array, "
                                 f"got {type(a).__name__}")
            if np.dtype(dt) != want and not (want == np.uint8 and np.dtype(dt) == np.bool_):
                raise DTypeError(f"{kernel}: parameter {pname} ({ctype}*) needs {want}, "
                                 f"got an array of {np.dtype(dt)}")
            if not a.flags.c_contiguous:
                raise DTypeError(f"{kernel}: parameter {pname} needs a C-contiguous array")
        else:
            if not isinstance(a, np.generic) or a.dtype != want:
                got = a.dtype if isinstance(a, np.generic) else type(a).__name__
                raise DTypeError(f"{kernel}: parameter {pname} ({ctype}) needs a numpy {want} "
                                 f"scalar, got {got} (a wrong width would shift every "
                                 "following argument)")
