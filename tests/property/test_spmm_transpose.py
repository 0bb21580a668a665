"""Backward-pass SpMM with Aᵀ: right result, plans built once for A and once for Aᵀ."""

import numpy as np
from hypothesis import given, strategies as st

from spgnn import DistDenseMatrix, DistSparseMatrix, Layout, ProcessGrid, run_loopback, spmm
from spgnn.core.spmm_15d import layouts_15d
from spgnn.testing.asserts import assert_dist_allclose, collective_assert
from spgnn.testing.strategies_dist import random_sparse, splits_for


@given(st.sampled_from([1, 2, 3, 4]), st.integers(0, 16), st.integers(1, 3),
       st.sampled_from(["1d", "1d-aware", "15d-aware"]), st.integers(0, 2**31 - 1), st.data())
def test_transposed_spmm_and_plan_reuse(p, n, f, algo, seed, data):
    c = 2 if algo == "15d-aware" and p % 2 == 0 else 1
    if algo == "15d-aware" and c == 1:
        algo = "1d-aware"
    offsets = data.draw(splits_for(n, p // c))
    a = random_sparse((n, n), 0.3, seed)          # not symmetric
    x = np.random.default_rng(seed).standard_normal((n, f))
    want = a.T @ x

    def body(comm):
        if c > 1:
            grid = ProcessGrid(comm, (p // c, c), ("row", "layer"))
            la, lx = layouts_15d(grid, n, row_splits=offsets)
        else:
            grid = ProcessGrid(comm, (p,), ("row",))
            la = lx = Layout("row", row_splits=offsets)
        A = DistSparseMatrix.from_global(a, grid, la, backend="numpy")
        X = DistDenseMatrix.from_global(x, grid, lx, backend="numpy")
        spmm(A, X, algorithm=algo)                     # plan for A
        Y = spmm(A, X, algorithm=algo, transpose_a=True)  # transpose + its plan
        (r0, r1), _ = Y.layout.bounds(grid, Y.shape)
        assert_dist_allclose(comm, Y.local, want[r0:r1], what="A^T X")
        with comm.track("again") as again:
            spmm(A, X, algorithm=algo)
            spmm(A, X, algorithm=algo, transpose_a=True)
        labels = {e.label for e in again.events}
        collective_assert(comm, not any("plan" in l or "redistribute" in l for l in labels),
                          f"plans rebuilt: {sorted(labels)}")

    run_loopback(p, body, timeout=15)
