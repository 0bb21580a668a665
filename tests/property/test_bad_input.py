"""Bad input raises the same typed error on every rank, never a hang (loopback ranks).

The real-MPI version is tests/mpi/error_checks.py.
"""

import re

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn import (BackendMismatch, DimensionMismatch, DistDenseMatrix, DistSparseMatrix, DTypeError,
                   GridMismatch, InvalidSparseStructure, Layout, LayoutMismatch, LocalCSR,
                   ProcessGrid, run_loopback, spmm)

P = 3
A_GLOBAL = sp.random_array((10, 10), density=0.3, rng=np.random.default_rng(0), format="csr")


def _raised_everywhere(body, exc_type):
    """Run ``body(comm)`` on P ranks; every rank must raise ``exc_type`` (returns the messages)."""

    def wrapped(comm):
        try:
            body(comm)
        except exc_type as exc:
            return type(exc).__name__, str(exc)
        return "no error", ""

    out = run_loopback(P, wrapped, timeout=15)
    assert [name for name, _ in out] == [exc_type.__name__] * P, out
    return [msg for _, msg in out]


def _grid(comm):
    return ProcessGrid(comm, (P,), ("row",))


def _my_block(grid):
    (r0, r1), _ = Layout("row").bounds(grid, A_GLOBAL.shape)
    return LocalCSR.from_scipy(sp.csr_array(A_GLOBAL[r0:r1]))


@pytest.mark.parametrize("corrupt, match", [
    ("indptr_not_monotone", "non-decreasing"),
    ("index_out_of_range", r"must lie in \[0, 10\)"),
    ("lengths_disagree", "equal lengths"),
])
def test_malformed_csr_on_one_rank(corrupt, match):
    def body(comm):
        grid = _grid(comm)
        blk = _my_block(grid)
        if comm.rank == 1:
            if corrupt == "indptr_not_monotone":
                blk.indptr[1], blk.indptr[2] = blk.indptr[2] + 1, blk.indptr[1]
            elif corrupt == "index_out_of_range":
                blk.indices[-1] = 10
            else:
                blk.data = blk.data[:-1]
        DistSparseMatrix.from_local(blk, A_GLOBAL.shape, grid, Layout("row"))

    msgs = _raised_everywhere(body, InvalidSparseStructure)
    assert all(re.search(match, m) for m in msgs), msgs
    assert "rank 1" in msgs[0] and "rank 1" in msgs[2], msgs  # peers name the failing rank


def test_wrong_index_dtype_is_a_dtype_error():
    def body(comm):
        grid = _grid(comm)
        blk = _my_block(grid)
        if comm.rank == 2:
            blk.indices = blk.indices.astype(np.float64)
        DistSparseMatrix.from_local(blk, A_GLOBAL.shape, grid, Layout("row"))

    _raised_everywhere(body, DTypeError)


def test_shape_grid_backend_and_layout_mismatches():
    def inner_dim(comm):
        grid = _grid(comm)
        A = DistSparseMatrix.from_global(A_GLOBAL, grid, backend="numpy")
        X = DistDenseMatrix.from_global(np.ones((9, 2)), grid, backend="numpy")
        spmm(A, X)

    msgs = _raised_everywhere(inner_dim, DimensionMismatch)
    assert "A.shape=(10, 10), X.shape=(9, 2)" in msgs[0]

    def two_grids(comm):
        g1, g2 = _grid(comm), _grid(comm)
        A = DistSparseMatrix.from_global(A_GLOBAL, g1, backend="numpy")
        X = DistDenseMatrix.from_global(np.ones((10, 2)), g2, backend="numpy")
        spmm(A, X)

    _raised_everywhere(two_grids, GridMismatch)

    def backends(comm):
        grid = _grid(comm)
        A = DistSparseMatrix.from_global(A_GLOBAL, grid, backend="numpy")
        X = DistDenseMatrix.from_global(np.ones((10, 2)), grid, backend="numba")
        spmm(A, X)

    _raised_everywhere(backends, BackendMismatch)

    def layout(comm):
        DistDenseMatrix.from_global(np.ones((10, 2)), _grid(comm), Layout("col"))

    msgs = _raised_everywhere(layout, LayoutMismatch)
    assert "uses axis 'col'" in msgs[0]

    def no_algorithm(comm):
        grid = _grid(comm)
        A = DistSparseMatrix.from_global(A_GLOBAL, grid, Layout(None, "row"), backend="numpy")
        X = DistDenseMatrix.from_global(np.ones((10, 2)), grid, Layout("row"), backend="numpy")
        spmm(A, X)

    _raised_everywhere(no_algorithm, LayoutMismatch)


def test_wrong_block_shape_on_one_rank():
    def body(comm):
        grid = _grid(comm)
        (r0, r1), _ = Layout("row").bounds(grid, (10, 2))
        rows = r1 - r0 + (1 if comm.rank == 0 else 0)
        DistDenseMatrix.from_local(np.ones((rows, 2)), (10, 2), grid, Layout("row"))

    msgs = _raised_everywhere(body, DimensionMismatch)
    assert all("rank 0" in m for m in msgs), msgs
