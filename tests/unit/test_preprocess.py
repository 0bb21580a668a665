"""spgnn.io.preprocess: every graph transformation, checked against dense references.

(During issue 21 each function was also checked bit for bit against the
private copy it replaced in spgnn.gnn, before those copies were deleted.)
"""

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.io import (Graph, load_adjacency, mean_adjacency, neighbour_pattern,
                      normalized_adjacency, random_projection, row_normalize_features,
                      symmetric_pattern, symmetrize, without_self_loops)
from spgnn.io import preprocess

SEEDS = range(6)


def random_adjacency(seed, n=40, density=0.08, *, negative=False, dtype=np.float32):
    """A directed weighted graph with self-loops, duplicates, explicit zeros and empty rows."""
    rng = np.random.default_rng(seed)
    m = int(density * n * n)
    rows = rng.integers(0, n, m)
    cols = rng.integers(0, n, m)
    rows[: n // 8] = cols[: n // 8]                      # some self-loops
    vals = rng.integers(1, 4, m).astype(dtype)
    vals[::7] = 0                                        # explicit zeros
    if negative:
        vals[::5] *= -1
    rows[rows == n - 1] = 0                              # last row empty
    order = np.argsort(rows, kind="stable")
    rows, cols, vals = rows[order], cols[order], vals[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
    # built from raw arrays: duplicates and unsorted indices are kept
    return sp.csr_array((vals, cols.astype(np.int32), indptr.astype(np.int32)), shape=(n, n))


def canonical_input(seed, **kw):
    a = random_adjacency(seed, **kw)
    a.sum_duplicates()
    return a


def dense(a):
    return np.asarray(a.todense())


def assert_same_csr(got, want):
    """Bit-identical CSR arrays: dtypes, shape, indptr, indices and data bytes."""
    assert type(got) is type(want)
    assert got.shape == want.shape
    for field in ("indptr", "indices", "data"):
        g, w = getattr(got, field), getattr(want, field)
        assert g.dtype == w.dtype, field
        assert g.tobytes() == w.tobytes(), field


def assert_same_array(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def snapshot(a):
    if sp.issparse(a):
        return [x.copy() for x in (a.indptr, a.indices, a.data)]
    return [np.array(a, copy=True)]


def unchanged(a, before):
    return all(np.array_equal(x, y) for x, y in zip(snapshot(a), before))


# --------------------------------------------------------------------------- #
# Documented results, against dense references
# --------------------------------------------------------------------------- #

@pytest.mark.parametrize("seed", SEEDS)
def test_symmetrize_and_without_self_loops(seed):
    a = canonical_input(seed, negative=True)
    d = dense(a)
    s = symmetrize(a)
    assert isinstance(s, sp.csr_array) and s.dtype == a.dtype
    np.testing.assert_array_equal(dense(s), np.maximum(d, d.T))
    assert np.all(s.data != 0)                           # the maximum stores no zero
    w = without_self_loops(a)
    assert w.dtype == a.dtype and w.has_sorted_indices
    np.testing.assert_array_equal(dense(w), d - np.diag(np.diag(d)))


@pytest.mark.parametrize("seed", SEEDS)
def test_normalized_adjacency_is_kipf(seed):
    a = canonical_input(seed)
    d = dense(a).astype(np.float64)
    ap = np.maximum(d, d.T)
    np.fill_diagonal(ap, 1.0)                            # exactly one unit self-loop each
    scale = 1 / np.sqrt(ap.sum(axis=1))
    want = scale[:, None] * ap * scale[None, :]
    got = normalized_adjacency(a, np.float64)
    assert got.dtype == np.float64 and got.has_canonical_format
    np.testing.assert_allclose(dense(got), want, rtol=1e-14, atol=0)
    assert normalized_adjacency(a).dtype == np.float32


@pytest.mark.parametrize("seed", SEEDS)
def test_neighbour_pattern_and_mean_adjacency(seed):
    a = canonical_input(seed, negative=True)
    d = dense(a)
    s = np.maximum(d, d.T)
    np.fill_diagonal(s, 0)
    p = neighbour_pattern(a)
    assert p.dtype == np.float64 and p.has_canonical_format
    np.testing.assert_array_equal(dense(p), (s != 0).astype(np.float64))
    m = mean_adjacency(p, np.float32)
    deg = (s != 0).sum(axis=1)
    want = (s != 0) / np.maximum(deg, 1)[:, None]
    assert m.dtype == np.float32
    np.testing.assert_array_equal(dense(m), want.astype(np.float32))


@pytest.mark.parametrize("seed", SEEDS)
def test_symmetric_pattern_sums_both_directions(seed):
    a = canonical_input(seed, negative=True)
    d = dense(a)
    want = (d + d.T) != 0
    np.fill_diagonal(want, False)
    g = symmetric_pattern(a)
    assert g.dtype == np.int8 and g.has_sorted_indices and np.all(g.data == 1)
    np.testing.assert_array_equal(dense(g) != 0, want)
    # equal to the neighbour pattern when no weight is negative
    b = canonical_input(seed)
    np.testing.assert_array_equal(dense(symmetric_pattern(b)), dense(neighbour_pattern(b)))


def test_row_normalize_features_sparse_and_dense():
    x = np.array([[1, 0, 3, 0], [0, 0, 0, 0], [2, 2, 0, 0]], dtype=np.float32)
    want = np.array([[0.25, 0, 0.75, 0], [0, 0, 0, 0], [0.5, 0.5, 0, 0]])
    for inp in (x, sp.csr_array(x), sp.csr_matrix(x)):
        out = row_normalize_features(inp, np.float64)
        assert isinstance(out, np.ndarray) and out.dtype == np.float64
        np.testing.assert_array_equal(out, want)
    assert row_normalize_features(x).dtype == np.float32


def test_random_projection_is_seeded_gaussian():
    x = np.eye(5)
    r = random_projection(x, 3, seed=4)
    want = np.random.default_rng([4, 7]).normal(size=(5, 3)) / np.sqrt(3)
    assert r.dtype == np.float64
    np.testing.assert_array_equal(r, want)
    np.testing.assert_array_equal(random_projection(sp.csr_array(x), 3, seed=4), r)


def test_functions_do_not_write_their_inputs():
    a = random_adjacency(1, dtype=np.float64)            # float64, duplicates: no copy on entry
    x = sp.csr_array((np.array([1.0, 2.0, 3.0]), np.array([0, 0, 1]), np.array([0, 2, 3])),
                     shape=(2, 2))                       # a duplicate (0, 0)
    before_a, before_x = snapshot(a), snapshot(x)
    for f in (symmetrize, without_self_loops, normalized_adjacency, neighbour_pattern,
              symmetric_pattern, mean_adjacency):
        f(a)
    row_normalize_features(x, np.float64)
    assert unchanged(a, before_a) and unchanged(x, before_x)


def test_load_adjacency(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("0 1\n1 1\n2 0\n")                   # a self-loop, stored once per edge
    adj, name = load_adjacency(path)
    assert name == "g" and isinstance(adj, sp.csr_array) and adj.dtype == np.float32
    np.testing.assert_array_equal(dense(adj), [[0, 1, 1], [1, 0, 0], [1, 0, 0]])
    adj, name = load_adjacency("rmat:5:4:1")
    assert name == "rmat:5:4:1" and adj.diagonal().sum() == 0 and (adj != adj.T).nnz == 0


def feature_cases():
    """(name, features as a Graph stores them (float32), non-negative?)."""
    rng = np.random.default_rng(3)
    n, d = 60, 50
    binary = (rng.random((n, d)) < 0.05).astype(np.float32)      # Cora-like, CSR form
    binary[4] = 0                                                # an all-zero row
    counts = binary * rng.integers(1, 9, (n, d)).astype(np.float32)
    uniform = binary * rng.random((n, d)).astype(np.float32)     # non-integer, CSR form
    gauss = rng.normal(size=(n, d)).astype(np.float32)           # sbm-like, dense form
    gauss_sparse = binary * gauss                                # negative sums, CSR form
    half = (rng.random((n, d)) < 0.5).astype(np.float32)         # binary, dense form
    return [("binary", binary, True), ("binary-csr", sp.csr_array(binary), True),
            ("counts-csr", sp.csr_array(counts), True), ("uniform", uniform, True),
            ("gauss", gauss, False), ("half", half, True), ("gauss-sparse", gauss_sparse, False),
            ("gauss-sparse-csr", sp.csr_array(gauss_sparse), False)]


@pytest.mark.parametrize("name,x,nonnegative", feature_cases())
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_normalize_features_equals_the_dense_formula(name, x, nonnegative, dtype):
    """Whichever form the function works in (CSR or dense), the values are the dense formula's
    ``x / sum(|x|)`` (the row sum for non-negative rows, issue 38: the L1 norm for signed ones).

    Densifying sums whole rows where the CSR form sums stored entries; sums of a few
    float32 values are exact in float64, so the values agree bit for bit (but for the
    sign of zeros where the input holds -0.0, which CSR form does not store)."""
    n = x.shape[0]
    g = Graph(adj=sp.eye_array(n, format="csr"), features=x, labels=np.zeros(n, np.int64))
    dense = g.features.toarray() if sp.issparse(g.features) else np.asarray(g.features)
    dense = dense.astype(np.float64)
    s = np.abs(dense).sum(axis=1, keepdims=True)
    if nonnegative:
        assert np.array_equal(s, dense.sum(axis=1, keepdims=True))
    mb = np.where(s != 0, dense / np.where(s != 0, s, 1.0), 0.0)
    got = row_normalize_features(g.features, np.float64)
    if not np.signbit(dense[dense == 0]).any():
        assert_same_array(got, mb)
        assert_same_array(row_normalize_features(g.features, dtype),
                          np.ascontiguousarray(mb, dtype=dtype))
    else:   # CSR form does not store the input's -0.0 entries: they come out +0.0
        np.testing.assert_array_equal(got, mb)
        np.testing.assert_array_equal(row_normalize_features(g.features, dtype), mb.astype(dtype))
    assert np.all(np.abs(got) <= 1)


