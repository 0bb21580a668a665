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
    method, (rows, cum) = nb.choose_spgemm_method(kern, masked, a, b, mask, False)
    assert method == want
    if want == "dot":
        assert rows is None
        np.testing.assert_array_equal(cum, dot)
    else:       # the saxpy chunks' costs are the row costs summed between their bounds
        assert rows[0] == 0 and rows[-1] == m and np.all(np.diff(rows) >= 0)
        np.testing.assert_array_equal(cum, sax[rows])
    for limit in (0, 1, int(dot[-1]), int(dot[-1]) + 1):
        for segs in (1, 3, 16):
            assert masked.dot_cost_reaches(a.indptr, bt_len, mask.indptr, mask.indices,
                                           limit, segs) == (dot[-1] >= limit)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 30), st.integers(1, 30), st.integers(1, 30),
       st.sampled_from([0.05, 0.3, 0.9]), st.sampled_from([0.05, 0.5, 1.0]),
       st.integers(1, 40), st.integers(1, 2), st.integers(0, 2**20))
def test_optimistic_saxpy_stops_past_its_budget_and_resumes(m, k, n, density, dm, nchunks,
                                                            nworkers, seed):
    """The masked saxpy run with a budget: within it (exactly the row costs' total) it
    finishes; one step less and it stops after a prefix of its chunks, having counted
    their steps exactly, and a second call from there completes the same product."""
    from spgnn._kernels.numba import _ops, masked
    from spgnn.backends import _validate as V
    from spgnn.backends import get_backend

    a, b = _sorted_block(m, k, density, seed), _sorted_block(k, n, density, seed + 1)
    mask = _sorted_block(m, n, dm, seed + 2)
    sax = np.empty(m + 1, np.int64)
    masked.saxpy_row_costs(a.indptr, a.indices, b.indptr, mask.indptr, sax)
    bounds = _ops.row_partition(a.indptr, max(1, min(nchunks, m)))
    kern = masked.masked_saxpy_kernel(*get_backend("numba")._semiring_funcs(
        V.check_semiring("plus_times")))
    keep = np.ones(mask.nnz, np.uint8)

    def run(first, budget, out):
        return kern(a.indptr, a.indices, a.data, b.indptr, b.indices, b.data, mask.indptr,
                    mask.indices, keep, True, n, bounds, first, nworkers, budget, *out)

    def fresh():
        return (np.full(mask.nnz, -1, mask.indices.dtype), np.zeros(mask.nnz),
                np.full(m, -1, mask.indices.dtype), np.full(bounds.size - 1, -1, np.int64))

    full = fresh()
    assert run(0, int(sax[-1]), full) == (bounds.size - 1, sax[-1])
    if m == 0:
        return          # no steps to go over (a budget of -1 means none)
    part = fresh()
    budget = int(sax[-1]) - 1
    end, spent = run(0, budget, part)
    assert spent == sax[bounds[end]]                    # the finished prefix, exactly
    assert end < bounds.size - 1 or spent > budget      # and it says it went over
    if nworkers == 1:       # one worker stops right after the chunk that went over
        assert sax[bounds[end - 1]] <= budget < spent and np.all(part[2][bounds[end]:] == -1)
    assert run(end, -1, part) == (bounds.size - 1, sax[-1] - spent)
    for got, want in zip(part, full):
        np.testing.assert_array_equal(got, want)
