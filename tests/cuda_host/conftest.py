"""Fixtures of the CPU-side GPU tests: the ``cupy`` backend on the g++ host build of the kernels."""

import pytest

from spgnn.backends._cuda_host import compiler_missing


@pytest.fixture(scope="session")
def emulated():
    """``CupyBackend`` on numpy + scipy + host-built kernels (built once per session, cached)."""
    why = compiler_missing()
    if why:
        pytest.skip(why)
    from spgnn.backends.cupy_backend import CupyBackend

    return CupyBackend.host_emulated()


@pytest.fixture(scope="session")
def reference():
    from spgnn.backends import get_backend

    return get_backend("numba")
