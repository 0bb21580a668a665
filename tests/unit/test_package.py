"""Packaging promises: cheap import, the kernels subpackage, the info command, errors' bases."""

import subprocess
import sys

import pytest

from spgnn import errors


def test_import_is_fast_and_starts_neither_mpi_nor_numba():
    code = ("import time, sys; t = time.perf_counter(); import spgnn; "
            "print(time.perf_counter() - t); "
            "print('numba' in sys.modules, 'mpi4py.MPI' in sys.modules)")
    best = None
    for _ in range(3):  # best of three: the first run may pay for cold disk caches
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        secs, flags = out.stdout.split("\n")[:2]
        best = min(best or 1e9, float(secs))
        assert flags == "False False", f"import spgnn loaded numba or MPI: {flags}"
    assert best < 1.0, f"import spgnn took {best:.2f} s"


def test_kernels_installed_as_subpackage():
    import importlib.resources

    import spgnn._kernels.numba.spmm as k

    assert hasattr(k, "csr_spmm_plus_times")
    assert (importlib.resources.files("spgnn._kernels") / "README.md").is_file()


@pytest.mark.parametrize("name", ["DimensionMismatch", "LayoutMismatch", "GridError", "GridMismatch",
                                  "InvalidSparseStructure"])
def test_value_errors_subclass_valueerror(name):
    assert issubclass(getattr(errors, name), ValueError)
    assert issubclass(getattr(errors, name), errors.SpgnnError)


def test_other_error_bases():
    assert issubclass(errors.BackendUnavailable, ImportError)
    assert issubclass(errors.BackendMismatch, TypeError)
    assert issubclass(errors.DTypeError, TypeError)


def test_unavailable_backend_says_why():
    from spgnn.backends import backend_status, get_backend

    status = backend_status()
    assert status["numpy"] is None
    if status["cupy"] is not None:
        with pytest.raises(errors.BackendUnavailable, match="cupy"):
            get_backend("cupy")
    with pytest.raises(ValueError, match="unknown backend"):
        get_backend("fortran")


def test_builtin_backends_by_module_and_third_party_registration(monkeypatch):
    import spgnn.backends as B
    from spgnn.backends.numpy_backend import NumpyBackend

    assert list(B.backend_status())[:3] == ["numpy", "numba", "cupy"]   # reference first
    monkeypatch.setattr(B, "_REGISTERED", dict(B._REGISTERED))
    monkeypatch.setattr(B, "_BACKENDS", {})        # as in a fresh process: none loaded yet
    monkeypatch.setattr(B, "_INSTANCES", dict(B._INSTANCES))

    @B.register_backend
    class Mine(NumpyBackend):
        name = "mine"

    assert list(B.backend_status()) == ["numpy", "numba", "cupy", "mine"]
    assert "mine" in B.available_backends()
    assert isinstance(B.get_backend("mine"), Mine)
    assert B.get_backend("mine") is B.get_backend("mine")


def test_info_lists_backends_and_reasons():
    out = subprocess.run([sys.executable, "-m", "spgnn", "info"], capture_output=True, text=True,
                         check=True).stdout
    for word in ("spgnn", "numpy", "scipy", "numba", "mpi4py", "mpi_library", "backends", "cupy"):
        assert word in out
    assert "cupy           unavailable: " in out or "cupy           available" in out


def test_cli_help_lists_commands():
    out = subprocess.run([sys.executable, "-m", "spgnn", "--help"], capture_output=True, text=True,
                         check=True).stdout
    assert "demo" in out and "info" in out
