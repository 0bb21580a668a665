"""``python -m spgnn info``: versions, the MPI library and the backends (and why one is unavailable)."""

import importlib.metadata
import os
import platform
import shutil
import sys


def add_parser(sub):
    p = sub.add_parser("info", help="print versions, the MPI library and available backends")
    p.set_defaults(command="info")
    return p


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def collect():
    """A dict of everything ``info`` prints (local; initialises MPI)."""
    import spgnn
    from spgnn.backends import backend_status
    from spgnn.comm import mpi_library_info

    out = {
        "spgnn": spgnn.__version__,
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "packages": {d: _version(d) for d in ("numpy", "scipy", "numba", "mpi4py", "mpich",
                                               "cupy-cuda13x", "cupy-cuda12x", "cuda-bindings", "pymetis", "hypothesis", "pytest")},
        "mpiexec": shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec"),
    }
    try:
        mpi = mpi_library_info()
        out["mpi_library"] = mpi["library"]
        out["mpi_standard"] = mpi["standard"]
        out["mpi_world_size"] = mpi["world_size"]
    except Exception as exc:  # report any failure to load MPI, never crash info
        out["mpi_library"] = f"unavailable: {type(exc).__name__}: {exc}"
    out["backends"] = {name: ("available" if why is None else f"unavailable: {why}")
                       for name, why in backend_status().items()}
    from spgnn.backends.cupy_backend import CupyBackend

    out["gpu"] = CupyBackend.device_info()
    from spgnn.comm import device as gpu_comm

    # the mode device buffers move in, and the MPI library's own (build-time) claim
    try:
        mode = gpu_comm.default_mode()
    except ValueError as exc:
        mode = f"invalid: {exc}"
    out["gpu_comm"] = {"mode": mode, "mpi_cuda_support": gpu_comm.mpi_cuda_support()}
    out["numba_threads"] = os.environ.get("NUMBA_NUM_THREADS", f"default ({os.cpu_count()} cores)")
    return out


def run(args):
    info = collect()
    width = 16
    for key, val in info.items():
        if isinstance(val, dict):
            print(f"{key}:")
            for k, v in val.items():
                print(f"  {k:<{width - 2}} {v}")
        else:
            print(f"{key:<{width}} {val}")
    return 0
