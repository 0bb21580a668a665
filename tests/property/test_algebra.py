"""Element-wise operations, apply, select, reductions, extract and the expression API on
loopback ranks, against numpy/scipy; operand errors raised on every rank before communicating."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spgnn import (DistSparseMatrix, Layout, ProcessGrid, apply, ewise_add, ewise_mult, extract,
                   reduce_cols, reduce_rows, reduce_scalar, register_binary_op, register_monoid,
                   register_unary_op, run_loopback, select)
from spgnn.errors import DimensionMismatch, LayoutMismatch
from spgnn.testing.strategies_dist import random_sparse, splits_for


def _dense(m):
    return m.to_global().toarray()


def _pat(m):
    s = m.to_global()
    out = np.zeros(s.shape, bool)
    c = s.tocoo()
    out[c.row, c.col] = True
    return out


register_binary_op("hypot_t", lambda x, y: (x * x + y * y) ** 0.5)
register_monoid("absmax_t2", "max", float("-inf"))
register_unary_op("scale_by_row_t", lambda x, i, j: x * (i + 1) - j, indexed=True)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([1, 2, 3, 4]), st.integers(0, 9), st.integers(0, 9),
       st.integers(0, 2**30), st.sampled_from(["row", "2d"]), st.data())
def test_elementwise_select_reduce_extract(p, n, m, seed, kind, data):
    a = random_sparse((n, m), 0.4, seed)
    b = random_sparse((n, m), 0.4, seed + 1)
    rows = data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=6)) if n else []
    cols = data.draw(st.lists(st.integers(0, max(m - 1, 0)), max_size=6)) if m else []
    splits = data.draw(splits_for(n, p))

    def body(comm):
        if kind == "2d" and p == 4:
            grid, lay = ProcessGrid(comm, (2, 2), ("row", "col")), Layout("row", "col")
        else:
            grid, lay = ProcessGrid(comm, (p,), ("row",)), Layout("row", row_splits=splits)
        A = DistSparseMatrix.from_global(a, grid, lay, backend="numpy")
        B = DistSparseMatrix.from_global(b, grid, lay, backend="numpy")
        return dict(
            add=(_dense(ewise_add(A, B)), _pat(ewise_add(A, B))),
            mult=(_dense(ewise_mult(A, B)), _pat(ewise_mult(A, B))),
            hyp=_dense(ewise_add(A, B, "hypot_t")),
            app=_dense(apply(A, "ainv")), idx=_dense(apply(A, "scale_by_row_t")),
            lam=_dense(apply(A, lambda x: 2 * x)),
            tril=_dense(select(A, "tril", -1)), triu=_dense(select(A, "triu")),
            diag=_dense(select(A, "diag")), pos=_dense(select(A, "valuegt", 0.0)),
            pred=_dense(select(A, lambda x, i, j: (i + j) % 2 == 0)),
            rsum=reduce_rows(A).to_global()[:, 0], rmax=reduce_rows(A, "absmax_t2").to_global()[:, 0],
            csum=reduce_cols(A).to_global()[:, 0], total=reduce_scalar(A),
            tmin=reduce_scalar(A, "min"),
            ext=_dense(extract(A, rows, cols)),
            expr=_dense(A.ewise_mult(B, "plus").new(mask=B.S)),
            shift=_shift(A, B))

    res = run_loopback(p, body, timeout=60)
    ad, bd = a.toarray(), b.toarray()
    pa, pb = ad != 0, bd != 0
    for r in res:
        np.testing.assert_allclose(r["add"][0], ad + bd)
        np.testing.assert_array_equal(r["add"][1], pa | pb)
        np.testing.assert_allclose(r["mult"][0], ad * bd)
        np.testing.assert_array_equal(r["mult"][1], pa & pb)
        np.testing.assert_allclose(r["hyp"], np.where(pa & pb, np.hypot(ad, bd), ad + bd))
        np.testing.assert_allclose(r["app"], -ad)
        ii, jj = np.indices(ad.shape)
        np.testing.assert_allclose(r["idx"], np.where(pa, ad * (ii + 1) - jj, 0))
        np.testing.assert_allclose(r["lam"], 2 * ad)
        np.testing.assert_allclose(r["tril"], np.tril(ad, -1))
        np.testing.assert_allclose(r["triu"], np.triu(ad))
        np.testing.assert_allclose(r["diag"], np.where(ii == jj, ad, 0))
        np.testing.assert_allclose(r["pos"], np.where(ad > 0, ad, 0))
        np.testing.assert_allclose(r["pred"], np.where((ii + jj) % 2 == 0, ad, 0))
        np.testing.assert_allclose(r["rsum"], ad.sum(axis=1))
        np.testing.assert_allclose(r["rmax"], np.where(pa.any(axis=1),
                                                       np.where(pa, ad, -np.inf).max(axis=1, initial=-np.inf),
                                                       -np.inf))
        np.testing.assert_allclose(r["csum"], ad.sum(axis=0))
        assert r["total"] == pytest.approx(ad.sum())
        assert r["tmin"] == (ad[pa].min() if pa.any() else np.inf)
        np.testing.assert_allclose(r["ext"], ad[np.ix_(rows, cols)] if rows and cols
                                   else np.zeros((len(rows), len(cols))))
        np.testing.assert_allclose(r["expr"], np.where(pb, np.where(pa & pb, ad + bd, 0), 0))
        # C(mask=~A.S, accum=plus) << A + B keeps C's entries under A, adds elsewhere
        want = np.where(pa, bd, np.where(pb, bd + (ad + bd), 0))
        np.testing.assert_allclose(r["shift"], want)


def _shift(A, B):
    C = B.apply("identity").new()
    C(mask=~A.S, accum="plus") << A.ewise_add(B)
    return _dense(C)


@pytest.mark.parametrize("p", [1, 3])
def test_operand_errors_on_every_rank_before_communication(p):
    def body(comm):
        grid = ProcessGrid(comm, (p,), ("row",))
        A = DistSparseMatrix.from_global(random_sparse((6, 5), 0.5, 1), grid, Layout("row"),
                                         backend="numpy")
        B = DistSparseMatrix.from_global(random_sparse((5, 6), 0.5, 2), grid, Layout("row"),
                                         backend="numpy")
        C = DistSparseMatrix.from_global(random_sparse((6, 5), 0.5, 3), grid,
                                         Layout(None, "row"), backend="numpy")
        got = []
        with comm.track("errors") as seen:
            for call, err in ((lambda: ewise_add(A, B), DimensionMismatch),
                              (lambda: ewise_mult(A, C), LayoutMismatch),
                              (lambda: A.mxm(A).new(), DimensionMismatch),
                              (lambda: A.mxm(B).new(mask=A.S), DimensionMismatch),
                              (lambda: apply(A, "nope"), ValueError),
                              (lambda: select(A, "nope"), ValueError),
                              (lambda: extract(A, [7], None), DimensionMismatch)):
                with pytest.raises(err):
                    call()
                got.append(err.__name__)
        return got, len(seen.events)

    for got, events in run_loopback(p, body, timeout=30):
        assert len(got) == 7 and events == 0
