"""The cupy backend's SpMM and SDDMM over GraphBLAS and user semirings (no CUDA kernel: the
host backend computes them), on the host-emulated backend, against the numpy reference."""

import numpy as np
import pytest

from spgnn import register_binary_op, register_semiring
from spgnn.backends import get_backend
from spgnn.local.csr import LocalCSR
from spgnn.testing.strategies_dist import random_sparse

register_binary_op("absdiff_cuda_t", lambda x, y: abs(x - y))
register_semiring("max_absdiff_cuda_t", "max", "absdiff_cuda_t")


@pytest.mark.parametrize("name", ["max_absdiff_cuda_t", "lor_land"])
def test_cupy_spmm_sddmm_generic_semirings(emulated, name):
    a = LocalCSR.from_scipy(random_sparse((7, 6), 0.4, 5))
    rng = np.random.default_rng(0)
    x, xs = rng.uniform(-1, 1, (6, 3)), rng.uniform(-1, 1, (7, 3))
    ref = get_backend("numpy")
    ea = LocalCSR(*(emulated.from_host(t) for t in (a.indptr, a.indices, a.data)), a.shape,
                  check=None)
    got = emulated.to_host(emulated.spmm(ea, emulated.from_host(x), name))
    np.testing.assert_allclose(got, ref.spmm(a, x, name))
    got = emulated.sddmm(ea, emulated.from_host(xs), emulated.from_host(x), name)
    np.testing.assert_allclose(emulated.to_host(got.data), ref.sddmm(a, xs, x, name).data)
