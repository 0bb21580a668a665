"""The diagonal-band filter behind ``select(A, "tril"|"triu"|"diag"|"offdiag", k)``: the numba
kernel equals the numpy reference and a dense ``np.tril``-style construction, entry order
kept (unsorted rows, duplicates), over shapes with empty rows, offsets past the corners,
int32/int64 indices."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from spgnn.backends import get_backend
from spgnn.local.csr import LocalCSR

_DENSE = {"tril": lambda d, k: np.tril(d, k), "triu": lambda d, k: np.triu(d, k),
          "diag": lambda d, k: np.tril(np.triu(d, k), k),
          "offdiag": lambda d, k: d - np.tril(np.triu(d, k), k)}


def _block(m, n, density, seed, idx, shuffle):
    rng = np.random.default_rng(seed)
    a = sp.random(m, n, density=density, format="csr", random_state=rng, dtype=np.float64)
    a.data += 1.0                                      # no stored zeros
    indices, data = a.indices.copy(), a.data.copy()
    if shuffle:                                        # storage order is not sorted
        for i in range(m):
            lo, hi = a.indptr[i], a.indptr[i + 1]
            p = rng.permutation(hi - lo) + lo
            indices[lo:hi], data[lo:hi] = indices[p], data[p]
    return LocalCSR(a.indptr.astype(idx), indices.astype(idx), data, (m, n), check=None)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 12), st.integers(0, 12), st.sampled_from([0.0, 0.3, 0.9]),
       st.integers(0, 2**20), st.sampled_from(["tril", "triu", "diag", "offdiag"]),
       st.integers(-14, 14), st.sampled_from([np.int32, np.int64]), st.booleans())
def test_band_numba_equals_reference(m, n, density, seed, kind, k, idx, shuffle):
    a = _block(m, n, density, seed, idx, shuffle)
    ref = get_backend("numpy").select_band(a, kind, k)
    got = get_backend("numba").select_band(a, kind, k)
    for x, y in zip((got.indptr, got.indices, got.data), (ref.indptr, ref.indices, ref.data)):
        np.testing.assert_array_equal(x, y)             # same entries in the same order
        assert x.dtype == y.dtype
    dense = sp.csr_array((a.data, a.indices, a.indptr), shape=a.shape).toarray()
    np.testing.assert_array_equal(
        sp.csr_array((got.data, got.indices, got.indptr), shape=a.shape).toarray(),
        _DENSE[kind](dense, k))


def test_select_rejects_a_fractional_offset():
    from spgnn import DistSparseMatrix, Layout, grid_1d, select
    from spgnn.comm import Communicator
    A = DistSparseMatrix.from_global(sp.eye(4, format="csr"), grid_1d(Communicator.world()),
                                     Layout("row"), backend="numba")
    with pytest.raises(ValueError, match="integer diagonal offset"):
        select(A, "tril", 0.5)
    np.testing.assert_array_equal(select(A, "tril", -1.0).to_global().toarray(), np.zeros((4, 4)))


@pytest.mark.parametrize("grid_kind", ["row", "2d"])
def test_distributed_band_select_on_numba_equals_dense(grid_kind):
    """Blocks off the diagonal (row_start != col_start) shift the offset: 2D and uneven rows."""
    from spgnn import DistSparseMatrix, Layout, ProcessGrid, run_loopback, select
    a = sp.random(11, 11, density=0.5, format="csr", random_state=3) + sp.eye(11, format="csr")

    def body(comm):
        if grid_kind == "2d":
            grid, lay = ProcessGrid(comm, (2, 2), ("row", "col")), Layout("row", "col")
        else:
            grid, lay = ProcessGrid(comm, (4,), ("row",)), Layout("row", row_splits=[0, 1, 1, 7, 11])
        A = DistSparseMatrix.from_global(a, grid, lay, backend="numba")
        return {f"{kind}{k}": select(A, kind, k).to_global().toarray()
                for kind in _DENSE for k in (-2, 0, 3)}

    for res in run_loopback(4, body, timeout=60):
        for kind, f in _DENSE.items():
            for k in (-2, 0, 3):
                np.testing.assert_array_equal(res[f"{kind}{k}"], f(a.toarray(), k))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 9), st.integers(0, 9), st.sampled_from([0.0, 0.3, 0.9]),
       st.integers(0, 2**20), st.booleans(), st.booleans())
def test_is_canonical_equals_scipy(m, n, density, seed, shuffle, duplicate):
    a = _block(m, n, density, seed, np.int32, shuffle)
    if duplicate and a.nnz:
        i = int(np.flatnonzero(np.diff(a.indptr))[0])      # repeat a row's first column
        if a.indptr[i + 1] - a.indptr[i] > 1:
            a.indices[a.indptr[i] + 1] = a.indices[a.indptr[i]]
    s = sp.csr_array((a.data, a.indices, a.indptr), shape=a.shape)
    want = bool(s.has_canonical_format)
    assert get_backend("numpy").is_canonical(a) is want
    assert get_backend("numba").is_canonical(a) is want
