"""Packaging promises: cheap import, the kernels subpackage, the info command, errors' bases."""

import subprocess
import sys

import pytest

from spgnn import errors


# What `import spgnn` must not load: the JIT, MPI, optional dependencies and the download stack. A module
# list, not a stopwatch: it holds on any machine under any load (importing numba alone costs ~0.5 s, MPI
# initialises the transport, torch ~2 s), so the import stays cheap without a timing assertion.
HEAVY_MODULES = ("numba", "mpi4py.MPI", "torch", "torch_geometric", "networkx", "matplotlib", "pymetis",
                 "hypothesis", "tqdm", "cupy", "urllib.request", "http.client")


def test_import_loads_neither_mpi_nor_numba_nor_optional_dependencies():
    code = ("import sys, spgnn; "
            f"print(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"import spgnn loaded {out.stdout.strip()}"


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
