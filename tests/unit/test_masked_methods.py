"""The masked SpGEMM methods of the numba backend: one-pass saxpy and the dot-product ("dot3")
kernel, each forced by ``method=`` and chosen by the heuristic, against the numpy backend's
filter-after reference and scipy.

Shapes include empty rows and columns, empty operands and masks; masks are structural or
value masks (explicit zeros); a complemented mask keeps using the two-pass Gustavson kernel
(``method="dot"`` refuses it, as it refuses operands with unsorted or repeated columns).
"""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from spgnn.backends import get_backend
from spgnn.local.csr import LocalCSR
from spgnn.testing.strategies_dist import random_sparse

METHODS = [None, "gustavson", "dot"]
#: (semiring, value dtype) pairs drawn; plus_times and min_plus are order-independent folds
#: (up to rounding).  Each pair is a fresh numba compile of the saxpy and
#: dot kernels (the kernels are specialised on the semiring's operators, and on the dtype):
#: every semiring runs on float64 and every dtype on plus_times, which exercises each
#: operator and each dtype in both kernels; min_plus on float32 would compile both kernels
#: again (about a quarter of this test's time) for no path the other pairs miss (the kernel
#: templates do not branch on the operators or the dtype, kernels/numba/masked.py).
SEMIRING_DTYPES = [("plus_times", "float32"), ("plus_times", "float64"), ("min_plus", "float64")]


def _pattern(m):
    return sp.csr_array((np.ones(m.nnz), m.indices, m.indptr), shape=m.shape)


def _with_empty_rows(m, rng):
    """Zero out about a third of the rows and columns (empty rows/columns in every operand)."""
    d = m.toarray()
    if d.size:
        d[rng.random(d.shape[0]) < 0.3, :] = 0
        d[:, rng.random(d.shape[1]) < 0.3] = 0
    return sp.csr_array(d)


@st.composite
def cases(draw):
    m, k, n = (draw(st.integers(0, 12)) for _ in range(3))
    return dict(m=m, k=k, n=n, da=draw(st.sampled_from([0.0, 0.2, 0.7, 1.0])),
                db=draw(st.sampled_from([0.0, 0.3, 0.8, 1.0])),
                dm=draw(st.sampled_from([0.0, 0.1, 0.4, 1.0])), seed=draw(st.integers(0, 2**20)),
                structure=draw(st.booleans()),
                **dict(zip(("semiring", "dtype"), draw(st.sampled_from(SEMIRING_DTYPES)))))


@settings(max_examples=40, deadline=None)
@given(cases())
def test_methods_equal_reference_and_scipy(c):
    dt = np.dtype(c["dtype"])
    rng = np.random.default_rng(c["seed"])
    a = _with_empty_rows(random_sparse((c["m"], c["k"]), c["da"], c["seed"], dt), rng)
    b = _with_empty_rows(random_sparse((c["k"], c["n"]), c["db"], c["seed"] + 1, dt), rng)
    mask = random_sparse((c["m"], c["n"]), c["dm"], c["seed"] + 2, dt)
    if mask.nnz:
        mask.data[::2] = 0.0                     # explicit zeros: value vs structural mask
    A, B, M = (LocalCSR.from_scipy(x) for x in (a, b, mask))
    ref = get_backend("numpy").spgemm_masked(A, B, c["semiring"], M, structure=c["structure"])
    allowed = _pattern(mask).toarray() > 0 if c["structure"] else mask.toarray() != 0
    structural = ((_pattern(a) @ _pattern(b)).toarray() > 0) & allowed
    for method in METHODS:
        got = get_backend("numba").spgemm_masked(A, B, c["semiring"], M,
                                                 structure=c["structure"], method=method)
        np.testing.assert_array_equal(got.indptr, ref.indptr)
        np.testing.assert_array_equal(got.indices, ref.indices)
        np.testing.assert_allclose(got.data, ref.data, rtol=1e-5)
        g = got.to_scipy()
        np.testing.assert_array_equal(_pattern(g).toarray() > 0, structural)
        if c["semiring"] == "plus_times" and c["k"]:
            np.testing.assert_allclose(g.toarray(), (a @ b).toarray() * structural, rtol=1e-4,
                                       atol=1e-5)


def test_dot_refuses_complement_and_unsorted_rows():
    be = get_backend("numba")
    a = LocalCSR.from_scipy(random_sparse((5, 5), 0.5, 1))
    with pytest.raises(ValueError, match="without complement"):
        be.spgemm_masked(a, a, "plus_times", a, structure=True, complement=True, method="dot")
    with pytest.raises(ValueError, match="without complement"):
        be.spgemm_masked(a, a, "plus_times", None, method="dot")
    # a repeated column in a row of B (allowed by the Gustavson kernels: products are folded)
    b = LocalCSR(np.array([0, 2, 2, 2, 2, 2]), np.array([1, 1]), np.array([1.0, 2.0]), (5, 5),
                 check=None)
    with pytest.raises(ValueError, match="strictly increasing"):
        be.spgemm_masked(a, b, "plus_times", a, structure=True, method="dot")
    got = be.spgemm_masked(a, b, "plus_times", a, structure=True)          # auto: saxpy
    ref = get_backend("numpy").spgemm_masked(a, b, "plus_times", a, structure=True)
    np.testing.assert_allclose(got.toarray(), ref.toarray())
    with pytest.raises(ValueError, match="unknown method"):
        be.spgemm_masked(a, a, "plus_times", a, method="hash")
    with pytest.raises(ValueError, match="unknown method"):
        get_backend("numpy").spgemm_masked(a, a, "plus_times", a, method="hash")


def test_heuristic_chooses_dot_for_a_sparse_mask_over_dense_operands():
    """Dense rows, a mask of one entry per row: saxpy scans whole rows of B, dot does one
    intersection per allowed entry.  A complemented mask always takes Gustavson."""
    from spgnn.backends import numba_backend as nb
    from spgnn._kernels.numba import masked

    k = nb._kernels()
    n = 300
    a = LocalCSR.from_scipy(random_sparse((n, n), 0.5, 3))
    mask = LocalCSR.from_scipy(sp.csr_array(sp.eye_array(n)))
    assert nb.choose_spgemm_method(k, masked, a, a, mask, False)[0] == "dot"
    assert nb.choose_spgemm_method(k, masked, a, a, mask, True)[0] == "gustavson"
    assert nb.choose_spgemm_method(k, masked, mask, mask, a, False)[0] == "gustavson"
    got = get_backend("numba").spgemm_masked(a, a, "plus_times", mask, structure=True)
    d = a.toarray()
    np.testing.assert_allclose(got.toarray(), np.diag(np.diag(d @ d)), rtol=1e-10)


def test_mxm_method_argument_on_one_rank():
    from spgnn import DistSparseMatrix, Layout, grid_1d, mxm
    from spgnn.comm import Communicator

    grid = grid_1d(Communicator.world())
    a = random_sparse((30, 30), 0.2, 5)
    A = DistSparseMatrix.from_global(a, grid, Layout("row"), backend="numba")
    want = (a @ a).toarray() * (_pattern(a).toarray() > 0)
    for method in METHODS:
        C = mxm(A, A, "plus_times", mask=A.S, method=method)
        np.testing.assert_allclose(C.to_global().toarray(), want, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="unknown method"):
        mxm(A, A, mask=A.S, method="nope")
