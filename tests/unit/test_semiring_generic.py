"""SpMM and SDDMM over every registered semiring (GraphBLAS and user-defined), local and
distributed, against a brute-force scalar reference; the on-disk cache of kernels specialised
on user operators (spgnn._kernels.numba.opcache)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from spgnn import run_loopback
from spgnn.backends import get_backend
from spgnn.local.csr import LocalCSR
from spgnn.testing.strategies_dist import random_sparse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mpi"))
from semiring_checks import ALL, check_semirings, ref_sddmm, ref_spmm  # noqa: E402

from spgnn._kernels.numba import opcache  # noqa: E402

#: the numba kernels compile once per (add, mul) pair and machine (then load from disk)
NUMBA_SEMIRINGS = ("max_absdiff_u", "plusu_absdiff_u", "lor_land", "any_pair")
#: (semiring, dtype) pairs drawn for numba: each is its own compile of the generic SpMM and
#: SDDMM kernels (specialised on the operators and the dtype).  Every semiring on float64 and
#: float32 on the all-user one exercise each operator and each dtype; the kernel templates do
#: not branch on the pair (kernels/numba/semiring_generic.py), so the other float32 pairs
#: compiled both kernels three more times.  The numpy reference still draws any pair.
NUMBA_PAIRS = [(s, "float64") for s in NUMBA_SEMIRINGS] + [("plusu_absdiff_u", "float32")]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 8), st.integers(0, 8), st.integers(0, 3), st.integers(0, 2**20),
       st.sampled_from([0.0, 0.3, 0.8]), st.sampled_from(["numpy", "numba"]), st.data())
def test_local_spmm_sddmm_any_semiring(m, k, f, seed, density, backend, data):
    if backend == "numba":
        name, dtype = data.draw(st.sampled_from(NUMBA_PAIRS))
    else:
        name, dtype = data.draw(st.sampled_from(ALL)), data.draw(st.sampled_from(["float32",
                                                                                   "float64"]))
    a = random_sparse((m, k), density, seed, dtype=np.dtype(dtype))
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (k, f)).astype(dtype)
    xs = rng.uniform(-1, 1, (m, f)).astype(dtype)
    be = get_backend(backend)
    A = LocalCSR.from_scipy(a)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(be.spmm(A, x, name), ref_spmm(a, x.astype(float), name), **tol)
    got = be.sddmm(A, xs, x, name)
    want = ref_sddmm(a, xs.astype(float), x.astype(float), name)
    c = a.tocoo()
    np.testing.assert_allclose(sp.csr_array((got.data, got.indices, got.indptr),
                                            shape=a.shape).tocoo().data, want[c.row, c.col], **tol)


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_distributed_spmm_sddmm_any_semiring_numpy(p):
    run_loopback(p, lambda comm: check_semirings(comm, "numpy"), timeout=120)


@pytest.mark.parametrize("p", [2, 4])
def test_distributed_spmm_sddmm_user_semiring_numba(p):
    run_loopback(p, lambda comm: check_semirings(comm, "numba", NUMBA_SEMIRINGS), timeout=600)


def test_fingerprint_follows_code_closures_and_globals():
    def make(c):
        return lambda x, y: x * c + y
    f1, f2, f3 = make(2.0), make(2.0), make(3.0)
    assert opcache.fingerprint(f1) == opcache.fingerprint(f2)
    assert opcache.fingerprint(f1) != opcache.fingerprint(f3)
    assert opcache.fingerprint(lambda x, y: x + y) != opcache.fingerprint(lambda x, y: x - y)
    g = {"K": 1.0}
    exec("def h(x, y):\n    return x * K", g)
    before = opcache.fingerprint(g["h"])
    g["K"] = 2.0                                      # a global it reads changed
    assert opcache.fingerprint(g["h"]) != before
    g["K"] = object()
    with pytest.raises(opcache.Uncacheable):
        opcache.fingerprint(g["h"])


def test_user_operator_kernels_are_cached_on_disk(tmp_path):
    """A second process loads the kernel specialised on a user operator from disk."""
    script = textwrap.dedent("""
        import numpy as np
        from spgnn import get_backend, register_binary_op
        register_binary_op("cached_op_t", lambda x, y: abs(x - y) * 0.5)
        be = get_backend("numba")
        out = be.map_binary("cached_op_t", np.array([1.0, 4.0]), np.array([3.0, 0.0]))
        assert out.tolist() == [1.0, 2.0], out
        from spgnn._kernels.numba import masked
        from spgnn.local.ops import binary_op
        k = masked.map_binary_kernel(be._compiled(binary_op("cached_op_t").func))
        print("HITS", sum(k.stats.cache_hits.values()), "MISSES", sum(k.stats.cache_misses.values()))
    """)
    env = dict(os.environ, SPGNN_KERNEL_CACHE=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                           timeout=600) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-3000:]
    assert "HITS 0 MISSES 1" in runs[0].stdout, runs[0].stdout
    assert "HITS 1 MISSES 0" in runs[1].stdout, runs[1].stdout
    assert any(n.startswith("spgnn_opk_masked_") for n in os.listdir(tmp_path))
