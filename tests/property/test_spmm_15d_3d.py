"""1.5D and 3D SpMM on the loopback transport: results, layouts and exact bytes.

Hypothesis draws the world size (1, 2, 3, 4, 8), the replication factor c or
the X x Y x Z grid shape and the layer's roles, shapes (including n < P and
empty blocks), uneven splits, semirings, dtypes and densities
(tests/mpi/spmm_checks.py holds the checks, shared with the mpiexec runs).
The deterministic tests assert the report's worked examples byte for byte:
the 1.5D ring (000_sparsity_aware.md §3.2), Σλ_v for the 1.5D row exchange,
and the 3D per-axis volumes of 002_plexus.md §2.7 including its 65,536-row
test vector.
"""

import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings

from spgnn import (DimensionMismatch, DistDenseMatrix, DistSparseMatrix, Layout, LayoutMismatch,
                   grid_3d, grid_15d, run_loopback, spmm)
from spgnn.core.dense_ops import matmul
from spgnn.core.spmm import SPMM_ALGORITHMS
from spgnn.core.spmm_15d import layouts_15d
from spgnn.core.spmm_3d import layouts_3d
from spgnn.grid import roles_for_layer, rotate
from spgnn.plan.events import comm_terms_3d, comm_volume_3d
from spgnn.testing.strategies_dist import random_sparse

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "mpi"))
from dist_cases import lambda_volume  # noqa: E402
from spmm_checks import case_3d, case_15d, check_spmm_3d, check_spmm_15d  # noqa: E402

TIMEOUT = 15


def ring(n, dtype=np.float32):
    i = np.arange(n)
    rows, cols = np.r_[i, i], np.r_[(i + 1) % n, (i - 1) % n]
    return sp.csr_array((np.ones(2 * n, dtype=dtype), (rows, cols)), shape=(n, n))


# ----------------------------------------------------------------------- Hypothesis


@settings(max_examples=150)
@given(case_15d())
def test_spmm_15d_matches_reference(case):
    run_loopback(case["p"], check_spmm_15d, case, timeout=TIMEOUT)


@settings(max_examples=150)
@given(case_3d())
def test_spmm_3d_matches_reference(case):
    run_loopback(case["p"], check_spmm_3d, case, timeout=TIMEOUT)


def test_algorithms_registered():
    assert {"local", "1d", "1d-aware", "15d", "15d-aware", "3d"} <= set(SPMM_ALGORITHMS)


# ----------------------------------------------------------------------- 1.5D bytes


def _run_15d(a, p, c, f, algo, rows=None):
    n = a.shape[0]
    x = np.ones((a.shape[1], f), dtype=a.dtype)

    def body(comm):
        grid = grid_15d(c, comm)
        la, lx = layouts_15d(grid, n, a.shape[1], row_splits=rows)
        A = DistSparseMatrix.from_global(a, grid, la)
        X = DistDenseMatrix.from_global(x, grid, lx)
        spmm(A, X, algorithm=algo)                        # plan (cached on A)
        with comm.track("x") as stats:
            Y = spmm(A, X, algorithm=algo)
        assert Y.layout == X.layout                       # chains without redistribution
        op = "alltoallv" if algo == "15d-aware" else "bcast"
        return dict(coords=grid.coords, sent=stats.total("bytes_sent", op=op),
                    recv=stats.total("bytes_recv", op=op),
                    ar=stats.total("bytes_sent", op="allreduce", axis="layer"),
                    y=np.abs(Y.to_global() - a @ x).max(initial=0.0))

    return run_loopback(p, body, timeout=TIMEOUT)


def test_15d_ring_example_exact_bytes():
    """Report §3.2: 8-cycle, P=8, c=2 (k=4, s=2), f=3, fp32."""
    res = _run_15d(ring(8), 8, 2, 3, "15d-aware")
    row = 3 * 4
    assert all(r["recv"] == row for r in res)                        # every P(i,j): 1 row
    senders = {r["coords"] for r in res if r["sent"]}
    assert senders == {(0, 0), (1, 0), (2, 1), (3, 1)}
    assert all(r["sent"] == 2 * row for r in res if r["sent"])        # 2 rows each
    assert sum(r["sent"] for r in res) == 8 * row                    # = Σλ_v for k=4
    assert sum(r["ar"] for r in res) == 192                          # 2(c-1)·n·f·4 B
    assert max(r["y"] for r in res) == 0


def test_15d_oblivious_ring_bytes():
    """Oblivious 1.5D (§3.2): P(i,j) receives Σ_{q∈Q_j, q≠i} n_q rows, (k−1)·n in total."""
    res = _run_15d(ring(8), 8, 2, 3, "15d")
    row = 3 * 4
    for r in res:
        i, j = r["coords"]
        in_slab = i in (2 * j, 2 * j + 1)                 # Q_j = {2j, 2j+1}, n_q = 2
        assert r["recv"] == (2 if in_slab else 4) * row
    assert sum(r["recv"] for r in res) == (4 - 1) * 8 * row
    assert sum(r["ar"] for r in res) == 192
    assert max(r["y"] for r in res) == 0


@pytest.mark.parametrize("p,c", [(4, 2), (8, 2), (8, 4), (6, 3)])
def test_15d_aware_exchange_is_lambda_volume(p, c):
    """The 1.5D row exchange equals the 1D volume Σλ_v of the k = P/c way partition."""
    n, k, f = 40, p // c, 3
    a = sp.csr_array(random_sparse((n, n), 0.08, 7), dtype=np.float32)
    cuts = np.sort(np.random.default_rng(p + c).integers(0, n + 1, k - 1))
    rows = (0, *cuts.tolist(), n)                         # uneven, possibly empty parts
    res = _run_15d(a, p, c, f, "15d-aware", rows=rows)
    want = lambda_volume(a, np.asarray(rows)) * f * 4
    assert sum(r["sent"] for r in res) == want
    assert sum(r["recv"] for r in res) == want
    # plus the replica all-reduce, ring model: 2(c−1)·n·f elements in total
    assert sum(r["ar"] for r in res) == 2 * (c - 1) * n * f * 4
    assert max(r["y"] for r in res) < 1e-5


# ----------------------------------------------------------------------- 3D closed form


PLEXUS_TABLE = {  # report §2.7: N=65,536, dims [128,128,128,32], G=8, elements/rank/epoch
    (2, 2, 2): (8_390_144, 8_394_752, 6_821_888, 23_606_784),
    (2, 1, 4): (8_390_144, 0, 20_465_664, 28_855_808),
    (1, 2, 4): (0, 8_394_752, 20_465_664, 28_860_416),
    (4, 1, 2): (25_170_432, 0, 6_821_888, 31_992_320),
    (1, 4, 2): (0, 25_184_256, 6_821_888, 32_006_144),
    (4, 2, 1): (25_170_432, 8_394_752, 0, 33_565_184),
    (2, 4, 1): (8_390_144, 25_184_256, 0, 33_574_400),
    (1, 1, 8): (0, 0, 47_753_216, 47_753_216),
    (8, 1, 1): (58_731_008, 0, 0, 58_731_008),
    (1, 8, 1): (0, 58_763_264, 0, 58_763_264),
}


def test_plexus_test_vector():
    for shape, (x, y, z, total) in PLEXUS_TABLE.items():
        v = comm_volume_3d(65536, [128, 128, 128, 32], shape)
        assert (v["x"], v["y"], v["z"], v["total"]) == (x, y, z, total), shape
    best = min(PLEXUS_TABLE, key=lambda s: comm_volume_3d(65536, [128, 128, 128, 32], s)["total"])
    assert best == (2, 2, 2)


def _closed_form_forward(N, dims, shape, shard_weights):
    """§2.7's forward rows written out independently of spmm_3d (per rank, elements)."""
    G = dict(zip("xyz", shape))
    out = {a: Fraction(0) for a in "xyz"}
    roles = ("x", "y", "z")
    for layer in range(len(dims) - 1):
        o, i, d = roles
        D, Dp = dims[layer], dims[layer + 1]
        if layer == 0:
            out[d] += Fraction(G[d] - 1, G[d]) * N * D / (G[o] * G[i])
        out[o] += 2 * Fraction(G[o] - 1, G[o]) * N * D / (G[d] * G[i])
        if shard_weights:
            out[d] += Fraction(G[d] - 1, G[d]) * D * Dp / (G[i] * G[o])
        out[i] += 2 * Fraction(G[i] - 1, G[i]) * N * Dp / (G[d] * G[o])
        roles = (d, o, i)
    return out


def test_comm_terms_forward_match_independent_formula():
    for shape in PLEXUS_TABLE:
        for sw in (False, True):
            v = comm_volume_3d(65536, [128, 128, 128, 32], shape, backward=False, shard_weights=sw)
            ref = _closed_form_forward(65536, [128, 128, 128, 32], shape, sw)
            assert all(v[a] == ref[a] for a in "xyz"), (shape, sw)
    steps = comm_terms_3d(48, [12, 8, 8, 4], (2, 2, 2))
    assert len(steps) == 3 * 3 + 1 + 3 * 4     # 3 fwd (+ AG F on layer 0), 4 bwd per layer


def test_roles_rotation():
    assert [roles_for_layer(l) for l in range(4)] == [("x", "y", "z"), ("z", "x", "y"),
                                                      ("y", "z", "x"), ("x", "y", "z")]
    assert rotate(("x", "y", "z")) == ("z", "x", "y")


# ----------------------------------------------------------------------- 3D chain + ledger


def _chain(shape, N, dims, shard_weights, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    a = sp.csr_array(random_sparse((N, N), 0.2, seed, dtype=dtype))
    x = rng.standard_normal((N, dims[0])).astype(dtype)
    ws = [rng.standard_normal((dims[l], dims[l + 1])).astype(dtype) for l in range(len(dims) - 1)]
    ref = x
    for w in ws:
        ref = (a @ ref) @ w

    def body(comm):
        grid = grid_3d(*shape, comm=comm)
        roles = roles_for_layer(0)
        lay = layouts_3d(grid, roles, N, dims[0], dims[1], shard_input=True,
                         shard_weights=shard_weights)
        X = DistDenseMatrix.from_global(x, grid, lay["X"])
        setup_ids = set()
        with comm.track("chain") as stats:
            for layer, w in enumerate(ws):
                assert roles == roles_for_layer(layer)
                lay = layouts_3d(grid, roles, N, dims[layer], dims[layer + 1],
                                 shard_input=(layer == 0), shard_weights=shard_weights)
                assert X.layout == lay["X"]               # no redistribution needed
                with comm.track("setup") as setup:        # placing A and W is not the algorithm
                    A = DistSparseMatrix.from_global(a, grid, lay["A"])
                    W = DistDenseMatrix.from_global(w, grid, lay["W"])
                setup_ids |= {id(e) for e in setup}
                H = spmm(A, X)                            # chosen by layout: 3d
                assert H.layout == lay["H"]
                X = matmul(H, W)
                assert X.layout == lay["Q"]
                roles = rotate(roles)
                if layer + 1 < len(ws):                   # the next layer's input layout
                    nxt = layouts_3d(grid, roles, N, dims[layer + 1], dims[layer + 1])
                    assert X.layout == nxt["X"]
        algo = [e for e in stats if id(e) not in setup_ids]
        assert not [e for e in algo if e.op.startswith("alltoall")]   # no redistribute()
        payload = {ax: sum(e.bytes_sent for e in algo if e.axis == (ax,)
                           and e.op in ("allgatherv", "allreduce")) for ax in "xyz"}
        return payload, X.to_global()

    res = run_loopback(int(np.prod(shape)), body, timeout=TIMEOUT)
    return ref, res


@pytest.mark.parametrize("shape,N,dims,sw", [
    ((2, 2, 2), 16, [4, 4, 4, 2], True),
    ((2, 2, 2), 16, [4, 6, 4, 2], False),
    ((1, 2, 4), 16, [8, 8, 8, 4], True),
    ((2, 1, 2), 8, [4, 2, 4, 2], False),
])
def test_3d_chain_three_layers_no_redistribution_ledger_matches_closed_form(shape, N, dims, sw):
    ref, res = _chain(shape, N, dims, sw)
    want = comm_volume_3d(N, dims, shape, backward=False, shard_weights=sw, itemsize=8)
    for payload, y in res:
        np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-10)
        assert payload == {ax: want[ax] for ax in "xyz"}


def test_3d_chain_uneven_sizes_matches_reference():
    ref, res = _chain((2, 1, 2), 7, [3, 5, 2, 3], True)
    for _, y in res:
        np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-10)


# ----------------------------------------------------------------------- errors


def _errors(comm):
    grid = grid_15d(2, comm)
    a = random_sparse((6, 6), 0.3, 1)
    A = DistSparseMatrix.from_global(a, grid, Layout("row", "layer"))
    X = DistDenseMatrix.from_global(np.ones((6, 2)), grid, Layout("layer"))
    with pytest.raises(LayoutMismatch, match="supported"):
        spmm(A, X)
    with pytest.raises(LayoutMismatch, match="15d"):
        spmm(A, X, algorithm="15d-aware")
    with pytest.raises(LayoutMismatch, match="3d"):
        spmm(A, X, algorithm="3d")
    X2 = DistDenseMatrix.from_global(np.ones((5, 2)), grid, Layout("row"))
    with pytest.raises(DimensionMismatch):
        spmm(A, X2, algorithm="15d")
    g3 = grid_3d(1, 2, 1, comm=comm)
    H = DistDenseMatrix.from_global(np.ones((4, 4)), g3, Layout("z", "y"))
    W = DistDenseMatrix.from_global(np.ones((4, 3)), g3, Layout("x", "y"))
    with pytest.raises(LayoutMismatch, match="supported"):
        matmul(H, W)
    W2 = DistDenseMatrix.from_global(np.ones((5, 3)), g3, Layout("y", "x"))
    with pytest.raises(DimensionMismatch):
        matmul(H, W2)
    # X's row blocks over o must line up with A's column blocks
    A3 = DistSparseMatrix.from_global(random_sparse((4, 4), 0.5, 2), g3,
                                      Layout("z", "y", col_splits=(0, 1, 4)))
    X3 = DistDenseMatrix.from_global(np.ones((4, 2)), g3, Layout("y", "x"))
    with pytest.raises(LayoutMismatch, match="column blocks"):
        spmm(A3, X3)
    return True


def test_bad_layouts_raise_before_communicating():
    assert run_loopback(2, _errors, timeout=TIMEOUT) == [True, True]
