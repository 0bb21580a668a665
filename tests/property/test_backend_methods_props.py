"""Property tests: the sampling, de-duplication and element-wise GNN methods of every
compiled backend equal the numpy reference bit for bit.

The contract is in :mod:`spgnn.backends.base`.  Element-wise kernels are drawn
with IEEE specials (NaN, +-0, +-inf) and run both below and above the numba
backend's ``PARALLEL_MIN`` (the threaded and the single-threaded kernels);
de-duplication runs both kernel paths (dense stamp array and hash table).
"""

import contextlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spgnn.backends import available_backends, get_backend
from spgnn.backends import numba_backend
from spgnn.counter_rng import counter_uniform
from spgnn.testing.strategies import local_csr

REF = "numpy"
COMPILED = [b for b in available_backends() if b != REF]

pytestmark = pytest.mark.skipif(not COMPILED, reason="no compiled backend available")

SPECIALS = np.array([np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 1e-30, -1e30])


@pytest.fixture(scope="module", params=COMPILED)
def be(request):
    return get_backend(request.param)


@pytest.fixture(scope="module")
def ref():
    return get_backend(REF)


def same_bits(a, b):
    """Equal dtype, shape and bytes (so -0.0 != +0.0 and NaN == NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and \
        np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


@contextlib.contextmanager
def parallel_min(value):
    """Set the numba backend's element-wise threading threshold for one example."""
    saved = numba_backend.PARALLEL_MIN
    numba_backend.PARALLEL_MIN = value
    try:
        yield
    finally:
        numba_backend.PARALLEL_MIN = saved


@st.composite
def float_blocks(draw, max_rows=12, max_cols=9):
    m = draw(st.integers(0, max_rows))
    k = draw(st.integers(0, max_cols))
    dt = draw(st.sampled_from([np.float32, np.float64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((m, k))
    special = rng.random((m, k)) < 0.2
    x[special] = rng.choice(SPECIALS, size=int(special.sum()))
    return x.astype(dt)


@given(x=float_blocks(), threaded=st.booleans())
def test_relu_and_backward_equal_reference(be, ref, x, threaded):
    with parallel_min(0 if threaded else 1 << 62):
        out, mask = be.relu(x)
        dy = x[::-1].copy()
        back = be.relu_backward(dy, mask)
    want, want_mask = ref.relu(x)
    assert same_bits(out, want) and same_bits(mask, want_mask)
    assert same_bits(back, ref.relu_backward(dy, want_mask))
    assert same_bits(want, np.where(x > 0, x, 0).astype(x.dtype))


@st.composite
def dropout_cases(draw):
    x = draw(float_blocks())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rows = rng.integers(0, 2**40, x.shape[0])
    col0 = draw(st.integers(0, 1000))
    ncols = col0 + x.shape[1] + draw(st.integers(0, 5))
    p = draw(st.sampled_from([0.0, 0.1, 0.5, 0.9]))
    base = np.uint64(draw(st.integers(0, 2**64 - 1)))
    return x, p, base, rows, col0, ncols


@given(case=dropout_cases(), threaded=st.booleans(), in_place=st.booleans())
def test_dropout_equals_reference_and_the_mask_formula(be, ref, case, threaded, in_place):
    x, p, base, rows, col0, ncols = case
    want = ref.dropout(x, p, base, rows, col0, ncols)
    with parallel_min(0 if threaded else 1 << 62):
        if in_place:
            got = x.copy()
            assert be.dropout(got, p, base, rows, col0, ncols, out=got) is got
        else:
            got = be.dropout(x, p, base, rows, col0, ncols)
    assert same_bits(got, want)
    # the contract's formula, written out
    counters = (rows.astype(np.uint64)[:, None] * np.uint64(ncols)
                + np.uint64(col0) + np.arange(x.shape[1], dtype=np.uint64)[None, :])
    scale = np.where(counter_uniform(counters, base) >= p, x.dtype.type(1 / (1 - p)),
                     x.dtype.type(0))
    with np.errstate(invalid="ignore"):        # inf * 0 is NaN, as in the kernels
        assert same_bits(want, x * scale)


@given(a=local_csr(), seed=st.integers(0, 2**32 - 1), threaded=st.booleans(),
       p=st.sampled_from([0.0, 0.3, 0.75]))
def test_dropout_csr_equals_reference_and_dense_dropout(be, ref, a, seed, threaded, p):
    a, _ = a
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 2**40, a.shape[0])
    base = np.uint64(rng.integers(0, 2**63))
    col0, ncols = 7, a.shape[1] + 9
    want = ref.dropout_csr(a.indptr, a.indices, a.data, p, base, rows, col0, ncols)
    with parallel_min(0 if threaded else 1 << 62):
        got = be.dropout_csr(a.indptr, a.indices, a.data, p, base, rows, col0, ncols)
    assert same_bits(got, want)
    # entry (i, j) is scaled exactly as in the dense dropout of the same block
    r = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
    ones = np.ones(a.shape, dtype=a.data.dtype)
    dense = ref.dropout(ones, p, base, rows, col0, ncols)
    assert same_bits(want, a.data * dense[r, a.indices])


def test_dropout_rejects_bad_p(be, ref):
    for backend in (be, ref):
        with pytest.raises(ValueError, match=r"p must lie in \[0, 1\)"):
            backend.dropout(np.ones((2, 2)), 1.0, 0, np.arange(2), 0, 2)


@st.composite
def sampling_cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, 30))
    deg = rng.integers(0, 12, n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    indices = np.concatenate([np.sort(rng.choice(50, d, replace=False)) for d in deg]
                             ).astype(np.int64)
    data = rng.random(indices.size)
    data[rng.random(indices.size) < 0.2] = 0.0          # weights that are never chosen
    rows = rng.integers(0, n, draw(st.integers(0, 20)))
    keys = rng.integers(0, 2**63, rows.size).astype(np.uint64)
    method = draw(st.sampled_from(["floyd", "es", "its"]))
    weighted = method != "floyd" and draw(st.booleans())
    return indptr, indices, data, rows, keys, draw(st.integers(0, 8)), method, weighted


@given(case=sampling_cases())
def test_sample_rows_equals_reference(be, ref, case):
    indptr, indices, data, rows, keys, s, method, weighted = case
    ip, pos = be.sample_rows(*case)
    want_ip, want_pos = ref.sample_rows(*case)
    assert same_bits(ip, want_ip) and same_bits(pos, want_pos)
    for r, row in enumerate(rows):
        got = pos[ip[r]:ip[r + 1]]
        lo, hi = indptr[row], indptr[row + 1]
        eligible = hi - lo if not weighted else int(np.count_nonzero(data[lo:hi] > 0))
        assert got.size == min(s, eligible)
        assert np.all((got >= lo) & (got < hi)) and np.all(np.diff(got) > 0)


@st.composite
def segment_cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    k = draw(st.integers(0, 6))
    n = draw(st.sampled_from([1, 5, 40, 10**6]))          # small n: stamp array; large: hash
    a_len = rng.integers(0, 8, k)
    b_len = rng.integers(0, 15, k)
    a_ptr = np.concatenate([[0], np.cumsum(a_len)]).astype(np.int64)
    b_ptr = np.concatenate([[0], np.cumsum(b_len)]).astype(np.int64)
    a = rng.integers(0, n, int(a_ptr[-1])).astype(np.int64)
    b = rng.integers(0, n, int(b_ptr[-1])).astype(np.int64)
    return a, a_ptr, b, b_ptr, n


@given(case=segment_cases())
def test_first_appearance_equals_reference(be, ref, case):
    a, a_ptr, b, b_ptr, n = case
    got = be.first_appearance(*case)
    want = ref.first_appearance(*case)
    assert all(same_bits(g, w) for g, w in zip(got, want))
    col_a, col_b, src, col_ptr = want
    for i in range(a_ptr.size - 1):                     # the definition, minibatch by minibatch
        items = np.concatenate([a[a_ptr[i]:a_ptr[i + 1]], b[b_ptr[i]:b_ptr[i + 1]]])
        order = list(dict.fromkeys(items.tolist()))
        assert src[col_ptr[i]:col_ptr[i + 1]].tolist() == order
        cols = np.concatenate([col_a[a_ptr[i]:a_ptr[i + 1]], col_b[b_ptr[i]:b_ptr[i + 1]]])
        assert (cols - col_ptr[i]).tolist() == [order.index(v) for v in items.tolist()]


@given(case=segment_cases())
def test_sort_rows_by_column_equals_reference(be, ref, case):
    _, _, b, b_ptr, _ = case
    rng = np.random.default_rng(len(b))
    # distinct columns within each row, in random order
    cols = np.concatenate([np.zeros(0, np.int64)]
                          + [rng.permutation(100)[:d] for d in np.diff(b_ptr)]).astype(np.int64)
    vals = rng.standard_normal(cols.size)
    got_c, got_v, want_c, want_v = cols.copy(), vals.copy(), cols.copy(), vals.copy()
    assert be.sort_rows_by_column(b_ptr, got_c, got_v) is None
    ref.sort_rows_by_column(b_ptr, want_c, want_v)
    assert same_bits(got_c, want_c) and same_bits(got_v, want_v)
    for i in range(b_ptr.size - 1):
        lo, hi = b_ptr[i], b_ptr[i + 1]
        assert np.all(np.diff(want_c[lo:hi]) > 0)
        assert sorted(zip(cols[lo:hi], vals[lo:hi])) == list(zip(want_c[lo:hi], want_v[lo:hi]))
