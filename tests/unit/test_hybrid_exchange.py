"""Minimum vertex cover, the paper's worked example, and pre/post/hybrid exchanges (loopback)."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st
from scipy.sparse.csgraph import maximum_bipartite_matching

from spgnn.comm import run_loopback
from spgnn.core.hybrid import HybridPlan, assign_edges, min_vertex_cover_bipartite

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "mpi"))
from exchange_checks import check_exchange, exchange_case  # noqa: E402


def test_paper_worked_example():
    """Fig. 2: S0 = {1,2,3}, S1 = {4,5,6}; cut edges 4→1, 4→2, 4→3, 5→2, 6→2: 5 → 3 → 2."""
    src = np.array([4, 4, 4, 5, 6])
    dst = np.array([1, 2, 3, 2, 2])
    assert src.size == 5                                   # per edge
    assert np.unique(dst).size == 3 == np.unique(src).size  # pre, post
    post = assign_edges(src, dst, "hybrid")
    assert set(zip(src[post], dst[post])) == {(4, 1), (4, 2), (4, 3)}
    assert set(zip(src[~post], dst[~post])) == {(5, 2), (6, 2)}
    messages = np.unique(src[post]).size + np.unique(dst[~post]).size
    assert messages == 2                                   # h4 and the partial p2
    cs, cd = min_vertex_cover_bipartite([0, 0, 0, 1, 2], [0, 1, 2, 1, 1], 3, 3)
    assert list(np.flatnonzero(cs)) == [0] and list(np.flatnonzero(cd)) == [1]   # {4, 2}


def test_worked_example_exchange():
    """The same graph through HybridPlan on 2 ranks: rank 1 sends exactly h4 and p2."""
    n = 7   # node ids 0..6; rank 0 owns 0..3 (1, 2, 3), rank 1 owns 4..6
    a = sp.csr_array((np.ones(5), ([1, 2, 3, 2, 2], [4, 4, 4, 5, 6])), shape=(n, n))

    def fn(comm):
        from spgnn import DistDenseMatrix, DistSparseMatrix, Layout, ProcessGrid, spmm

        grid = ProcessGrid(comm, (2,), ("row",))
        lay = Layout("row", row_splits=(0, 4, 7))
        A = DistSparseMatrix.from_global(a, grid, lay, backend="numpy")
        x = np.arange(n * 3, dtype=np.float64).reshape(n, 3)
        X = DistDenseMatrix.from_global(x, grid, lay, backend="numpy")
        out = {}
        for mode in ("post", "pre", "hybrid"):
            Y = spmm(A, X, algorithm="1d-aware", aggregation=mode)
            (r0, r1), _ = Y.layout.bounds(grid, Y.shape)
            np.testing.assert_array_equal(Y.local, (a @ x)[r0:r1])
            plan = HybridPlan.for_spmm_1d(A, X, mode)
            out[mode] = (plan.rows_sent, list(plan.send_keys))
        return out

    r0, r1 = run_loopback(2, fn)
    assert r1 == {"post": (3, [4, 5, 6]), "pre": (3, [1, 2, 3]), "hybrid": (2, [2, 4])}
    assert all(v[0] == 0 for v in r0.values())


@settings(max_examples=60, deadline=None)
@given(ns=st.integers(1, 9), nd=st.integers(1, 9), density=st.floats(0.05, 0.9),
       seed=st.integers(0, 2**31))
def test_cover_is_minimum_and_valid(ns, nd, density, seed):
    g = sp.random_array((ns, nd), density=density, format="csr", rng=seed)
    coo = g.tocoo()
    cs, cd = min_vertex_cover_bipartite(coo.row, coo.col, ns, nd)
    assert np.all(cs[coo.row] | cd[coo.col])           # a cover
    size = int(np.count_nonzero(maximum_bipartite_matching(g, perm_type="column") >= 0))
    assert cs.sum() + cd.sum() == size                  # König: minimum


def test_bad_aggregation_refused():
    with pytest.raises(ValueError, match="aggregation must be one of"):
        assign_edges([0], [0], "both")


@settings(max_examples=30, deadline=None)
@given(exchange_case(sizes=(1, 2, 3, 4)))
def test_exchange_loopback(case):
    run_loopback(case["p"], check_exchange, case, "numba")


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 40), p=st.integers(1, 9), density=st.floats(0.02, 0.5),
       seed=st.integers(0, 2**31))
def test_predicted_messages_symmetric(n, p, density, seed):
    """Symmetric pattern: pre == post per pair (transposed pair); hybrid <= both, = matching."""
    from spgnn.core.hybrid import predict_messages

    a = sp.random_array((n, n), density=density, format="csr", rng=seed)
    a = sp.csr_array(((a + a.T) != 0).astype(np.float64))
    offsets = np.linspace(0, n, p + 1).astype(np.int64)
    post, pre, hyb = (predict_messages(a, offsets, m) for m in ("post", "pre", "hybrid"))
    np.testing.assert_array_equal(post, pre.T)
    assert np.all(hyb <= np.minimum(pre, post))
    assert np.array_equal(hyb, hyb.T)


def test_plan_command_aggregation_rows():
    """`spgnn plan --aggregation`: post bytes equal the 1d-aware plan's; hybrid <= pre == post."""
    import argparse

    from spgnn.cli.plan import add_parser, plan_all

    sub = argparse.ArgumentParser().add_subparsers()
    add_parser(sub)
    args = sub.choices["plan"].parse_args(
        ["--graph", "rmat:9:8", "--ranks", "3,8", "--algos", "1d-aware", "--aggregation",
         "post,pre,hybrid", "--alpha", "1e-6", "--beta", "1e-9", "--feat", "16",
         "--quantize", "int2"])
    _, rows, _ = plan_all(args)
    for r in rows:
        agg = r["aggregation"]
        assert agg["post"]["bytes"] == r["bytes_total"]
        assert agg["hybrid"]["rows"] <= agg["pre"]["rows"] == agg["post"]["rows"]
        for v in agg.values():
            # int2 at F = 16: 4 code bytes and 4 bf16 parameter bytes per row, 16F/(F+16) = 8x
            assert v["int2"] == {"data": 4 * v["rows"], "params": 4 * v["rows"]}
            assert v["bytes"] == 8 * (v["int2"]["data"] + v["int2"]["params"])


@pytest.mark.parametrize("p", [2, 3, 4])
def test_predicted_bytes_equal_ledger(p):
    """`predict_bytes` (no communication) equals the ledger of a coded and an fp32 exchange."""
    from spgnn.core.codec import make_codec
    from spgnn.core.hybrid import predict_bytes

    n, F = 23, 6          # F = 6: int2 rows end mid-byte, so segments pad to a byte
    g = sp.random_array((n, n), density=0.15, format="csr", rng=p)
    a = ((g + g.T) != 0).astype(np.float64).tocsr()
    offsets = np.linspace(0, n, p + 1).astype(np.int64)
    x = np.random.default_rng(p).standard_normal((n, F))

    def fn(comm):
        from spgnn import DistDenseMatrix, DistSparseMatrix, Layout, ProcessGrid, spmm

        grid = ProcessGrid(comm, (p,), ("row",))
        lay = Layout("row", row_splits=tuple(int(o) for o in offsets))
        A = DistSparseMatrix.from_global(a, grid, lay, backend="numba")
        X = DistDenseMatrix.from_global(x, grid, lay, backend="numba")
        got = {}
        for mode in ("post", "pre", "hybrid"):
            for q in ("none", "int2", "int4"):
                spmm(A, X, algorithm="1d-aware", aggregation=mode, codec=make_codec(q))
                with comm.track("t") as st:
                    spmm(A, X, algorithm="1d-aware", aggregation=mode, codec=make_codec(q))
                lab = st.by_label()
                got[mode, q] = (sum(v["bytes_sent"] for k, v in lab.items()
                                    if not k.endswith(":params")),
                                sum(v["bytes_sent"] for k, v in lab.items()
                                    if k.endswith(":params")))
        return got

    res = run_loopback(p, fn)
    for mode in ("post", "pre", "hybrid"):
        for q in ("none", "int2", "int4"):
            want = predict_bytes(a, offsets, mode, F, q, itemsize=8)
            got = tuple(sum(r[mode, q][k] for r in res) for k in (0, 1))
            assert got == want, (mode, q, got, want)
            assert (want[1] == 0) == (q == "none")
