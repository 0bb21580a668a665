"""Local GraphBLAS pieces: the operator registry, masks, the mask-driven masked SpGEMM.

The numba kernel (mask-driven: never forms a masked-out entry) is checked
against the numpy backend's filter-after reference and against scipy, over
shapes with empty rows/columns, densities, value/structural and complemented
masks, built-in and user-registered semirings.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from spgnn.backends import get_backend
from spgnn.local.csr import LocalCSR
from spgnn.local.ops import BINARY_OPS, Mask, binary_op, register_binary_op
from spgnn.local.semiring import (ALL_SEMIRINGS, SEMIRINGS, get_semiring, register_monoid,
                                  register_semiring)
from spgnn.testing.strategies_dist import random_sparse

SEMIRING_NAMES = ["plus_times", "lor_land", "any_pair"]   # each compiles the kernel once (~5 s)
#: (semiring, value dtype) pairs drawn: each is its own numba compile of the masked kernels
#: (specialised on the operators and the dtype).  Every semiring runs on float64 and every
#: dtype on plus_times: each operator and each dtype is exercised; the kernel templates do not
#: branch on the pair (kernels/numba/masked.py), so lor_land and any_pair on float32 would
#: only compile them twice more.
SEMIRING_DTYPES = [("plus_times", "float32")] + [(s, "float64") for s in SEMIRING_NAMES]


def _pattern(m):
    return sp.csr_array((np.ones(m.nnz), m.indices, m.indptr), shape=m.shape)


def _dense_masked(a, b, mask, structure, complement):
    """(allowed pattern, plus_times product) as dense arrays (an independent reference)."""
    pat = (_pattern(a) @ _pattern(b)).toarray() > 0          # the structural product
    full = (a @ b).toarray() if a.shape[1] else np.zeros((a.shape[0], b.shape[1]))
    if mask is None:
        return pat, full
    m = mask.toarray() != 0 if not structure else _pattern(mask).toarray() > 0
    return pat & (~m if complement else m), full


@st.composite
def cases(draw):
    m, k, n = (draw(st.integers(0, 9)) for _ in range(3))
    return dict(m=m, k=k, n=n, da=draw(st.sampled_from([0.0, 0.2, 0.6])),
                db=draw(st.sampled_from([0.0, 0.3, 0.7])), dm=draw(st.sampled_from([0.0, 0.3, 1.0])),
                seed=draw(st.integers(0, 2**20)), masked=draw(st.booleans()),
                structure=draw(st.booleans()), complement=draw(st.booleans()),
                **dict(zip(("semiring", "dtype"), draw(st.sampled_from(SEMIRING_DTYPES)))))


@settings(max_examples=40, deadline=None)
@given(cases())
def test_masked_spgemm_numba_equals_reference(c):
    dt = np.dtype(c["dtype"])
    a = random_sparse((c["m"], c["k"]), c["da"], c["seed"], dt)
    b = random_sparse((c["k"], c["n"]), c["db"], c["seed"] + 1, dt)
    mask = random_sparse((c["m"], c["n"]), c["dm"], c["seed"] + 2, dt)
    if mask.nnz:
        mask.data[::2] = 0.0                                 # explicit zeros: value vs structure
    ml = LocalCSR.from_scipy(mask) if c["masked"] else None
    A, B = LocalCSR.from_scipy(a), LocalCSR.from_scipy(b)
    kw = dict(structure=c["structure"], complement=c["complement"])
    got = get_backend("numba").spgemm_masked(A, B, c["semiring"], ml, **kw)
    ref = get_backend("numpy").spgemm_masked(A, B, c["semiring"], ml, **kw)
    np.testing.assert_array_equal(got.indptr, ref.indptr)
    np.testing.assert_array_equal(got.indices, ref.indices)
    np.testing.assert_allclose(got.data, ref.data, rtol=1e-5)
    # and the pattern (plus_times: the values too) against scipy
    allowed, full = _dense_masked(a, b, mask if c["masked"] else None, c["structure"],
                                  c["complement"])
    g = got.to_scipy()
    np.testing.assert_array_equal(_pattern(g).toarray() > 0, allowed)
    if c["semiring"] == "plus_times":
        np.testing.assert_allclose(g.toarray(), full * allowed, rtol=1e-5, atol=1e-6)
    if c["semiring"] in ("lor_land", "any_pair"):
        assert np.all(g.data >= 1)


def test_user_semiring_registered_once_runs_everywhere():
    def absdiff(x, y):
        return abs(x - y)

    register_binary_op("absdiff_t", absdiff)
    register_monoid("absmax_t", "max", float("-inf"))
    s = register_semiring("max_absdiff_t", "absmax_t", "absdiff_t")
    assert get_semiring("max_absdiff_t") is s and "max_absdiff_t" not in SEMIRINGS
    a = random_sparse((6, 5), 0.5, 3)
    b = random_sparse((5, 4), 0.5, 4)
    A, B = LocalCSR.from_scipy(a), LocalCSR.from_scipy(b)
    got = get_backend("numba").spgemm_masked(A, B, "max_absdiff_t")
    ref = get_backend("numpy").spgemm_masked(A, B, "max_absdiff_t")
    np.testing.assert_allclose(got.data, ref.data)
    # brute force for one entry
    ad, bd = a.toarray(), b.toarray()
    g = got.to_scipy().toarray()
    for i, j in zip(*np.nonzero(_pattern(got.to_scipy()).toarray())):
        ks = [k for k in range(5) if ad[i, k] != 0 and bd[k, j] != 0]
        assert g[i, j] == pytest.approx(max(abs(ad[i, k] - bd[k, j]) for k in ks))
    # the same operator in the element-wise map kernels
    x, y = np.array([1.0, -2.0]), np.array([3.0, 5.0])
    np.testing.assert_array_equal(get_backend("numba").map_binary("absdiff_t", x, y), [2.0, 7.0])


def test_registry_errors_and_masks():
    with pytest.raises(ValueError, match="unknown binary operator"):
        binary_op("nope")
    with pytest.raises(ValueError, match="unknown semiring"):
        get_semiring("nope_semiring")
    with pytest.raises(TypeError):
        register_binary_op("bad", 3)
    with pytest.raises(ValueError, match="registered"):
        register_semiring("bad_s", "plus", binary_op("plus").__class__("unregistered", lambda x, y: x))
    m = Mask("M")
    assert (~m).complement and not m.complement and m.S.structure and not m.S.V.structure
    for name in ("lor_land", "any_pair", "plus_first", "plus_second"):
        assert name in ALL_SEMIRINGS
    assert {"lor", "land", "any", "pair", "first", "second"} <= set(BINARY_OPS)


def test_spmm_kernels_take_graphblas_semirings():
    # the generic kernels (tests/unit/test_semiring_generic.py checks them in depth)
    a = LocalCSR.from_scipy(random_sparse((4, 4), 0.5, 1))
    x = np.arange(8.0).reshape(4, 2)
    np.testing.assert_array_equal(get_backend("numba").spmm(a, x, "lor_land"),
                                  get_backend("numpy").spmm(a, x, "lor_land"))
