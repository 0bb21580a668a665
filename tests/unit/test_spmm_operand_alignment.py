"""Distributed SpMM hands its local kernel a dense operand that starts on a cache line.

The X a kernel reads is whatever the algorithm assembled from communication
(1D all-gather, the sparsity-aware exchange, the 1.5D slab, the 3D depth
all-gather).  numpy aligns to 16 bytes only, so a row of 16 float32 would
straddle two cache lines; kernels/README.md measures what that costs.  The
user's X here starts 16 bytes past a line on purpose.
"""

import threading

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn import (DistDenseMatrix, DistSparseMatrix, grid_1d, grid_3d, grid_15d, run_loopback,
                   spmm)
from spgnn.backends import get_backend
from spgnn.core.spmm_15d import layouts_15d
from spgnn.core.spmm_3d import layouts_3d
from spgnn.grid import roles_for_layer

N, F = 24, 16


def ring(n):
    i = np.arange(n)
    rows, cols = np.r_[i, i], np.r_[(i + 1) % n, (i - 1) % n]
    return sp.csr_array((np.ones(2 * n, np.float32), (rows, cols)), shape=(n, n))


def off_line(x):
    """A copy of ``x`` that starts 16 bytes past a 64-byte boundary."""
    raw = np.empty(x.nbytes + 128, np.uint8)
    start = (16 - raw.ctypes.data) % 64
    out = raw[start:start + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


def layouts(algo, grid):
    if algo.startswith("1d"):
        return {}
    if algo.startswith("15d"):
        la, lx = layouts_15d(grid, N, N)
        return {"A": la, "X": lx}
    lay = layouts_3d(grid, roles_for_layer(0), N, F, F, shard_input=True)
    return {"A": lay["A"], "X": lay["X"]}


GRIDS = {"1d": lambda comm: grid_1d(comm), "1d-aware": lambda comm: grid_1d(comm),
         "15d": lambda comm: grid_15d(2, comm), "15d-aware": lambda comm: grid_15d(2, comm),
         "3d": lambda comm: grid_3d(1, 1, 2, comm=comm)}


@pytest.mark.parametrize("algo,p", [("1d", 1), ("1d", 3), ("1d-aware", 2), ("1d-aware", 3),
                                    ("15d", 4), ("15d-aware", 4), ("3d", 2)])
def test_distributed_spmm_gives_the_kernel_an_aligned_x(monkeypatch, algo, p):
    be = get_backend()
    seen, lock = [], threading.Lock()
    kernel = type(be).spmm

    def spy(self, a, x, *args, **kwargs):
        with lock:
            seen.append((x.shape, x.ctypes.data % 64))
        return kernel(self, a, x, *args, **kwargs)

    monkeypatch.setattr(type(be), "spmm", spy)
    a = ring(N)
    x = off_line(np.random.default_rng(0).random((N, F), dtype=np.float32))
    want = a @ x

    def body(comm):
        grid = GRIDS[algo](comm)
        lay = layouts(algo, grid)
        A = DistSparseMatrix.from_global(a, grid, *([lay["A"]] if lay else []), backend=be)
        X = DistDenseMatrix.from_global(x, grid, *([lay["X"]] if lay else []), backend=be)
        return spmm(A, X, algorithm=algo).to_global()

    for y in run_loopback(p, body, timeout=30):
        np.testing.assert_allclose(y, want, rtol=1e-6)
    assert len(seen) >= p and all(s[0] > 0 for s, _ in seen), seen
    assert [off for _, off in seen] == [0] * len(seen), seen
