"""The masked SpGEMM's method choice takes shortcuts (a lower bound that skips costing the
dot method, a costing pass that stops once dot has lost); each must give exactly the
decision of costing every row of both methods (``dot`` iff its steps plus ``nnz(B)`` are
below ``DOT_RATIO`` times saxpy's)."""

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from spgnn.local.csr import LocalCSR


def _sorted_block(m, n, density, seed):
    a = sp.random(m, n, density=density, format="csr", random_state=seed)
    a.sort_indices()
    return LocalCSR.from_scipy(sp.csr_array(a))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 40),
       st.sampled_from([0.02, 0.1, 0.4, 0.9]), st.sampled_from([0.02, 0.1, 0.4, 0.9]),
       st.sampled_from([0.01, 0.05, 0.3, 1.0]), st.integers(0, 2**20))
def test_choice_equals_costing_every_row(m, k, n, da, db, dm, seed):
    from spgnn.backends import numba_backend as nb
    from spgnn._kernels.numba import masked

    kern = nb._kernels()
    a, b = _sorted_block(m, k, da, seed), _sorted_block(k, n, db, seed + 1)
    mask = _sorted_block(m, n, dm, seed + 2)
    sax = np.empty(m + 1, np.int64)
    masked.saxpy_row_costs(a.indptr, a.indices, b.indptr, mask.indptr, sax)
    bt_len = np.bincount(b.indices, minlength=n)
    dot = np.empty(m + 1, np.int64)
    masked.dot_row_costs(a.indptr, bt_len, mask.indptr, mask.indices, dot)
    want = "dot" if dot[-1] + b.nnz < nb.DOT_RATIO * sax[-1] else "gustavson"
    method, costs = nb.choose_spgemm_method(kern, masked, a, b, mask, False)
    assert method == want
    np.testing.assert_array_equal(costs, dot if want == "dot" else sax)
    for limit in (0, 1, int(dot[-1]), int(dot[-1]) + 1):
        for segs in (1, 3, 16):
            assert masked.dot_cost_reaches(a.indptr, bt_len, mask.indptr, mask.indices,
                                           limit, segs) == (dot[-1] >= limit)
