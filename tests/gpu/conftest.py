"""GPU tests proper: they need a usable CUDA device and CuPy.

Without one every test here skips, saying why (``cupy`` missing, no driver,
...).  ``SPGNN_REQUIRE_GPU=1`` (set by ``tests/gpu/run_on_device.sh`` and on
GPU CI) turns those skips into failures, so a GPU job cannot pass by
silently skipping.
"""

import os

import pytest


@pytest.fixture(scope="session")
def gpu():
    from spgnn.backends.cupy_backend import CupyBackend

    why = CupyBackend.unavailable_reason()
    if why is not None:
        if os.environ.get("SPGNN_REQUIRE_GPU") == "1":
            pytest.fail(f"SPGNN_REQUIRE_GPU=1 but the cupy backend is unavailable: {why}")
        pytest.skip(f"no usable GPU: {why}")
    return CupyBackend()


@pytest.fixture(scope="session")
def reference():
    from spgnn.backends import get_backend

    return get_backend("numba")
