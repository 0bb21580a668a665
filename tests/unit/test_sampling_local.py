"""Single-process matrix-based sampling: structural properties (report §8.2, 1-6, 10).

Hypothesis draws small graphs (isolated vertices included), bulks with
repeated batch vertices, fanouts above the degrees, every method and
frontier mode; the checks are exact.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from spgnn import DTypeError, DimensionMismatch, InvalidSparseStructure
from spgnn.sampling import (GraphSAGESampler, LADIESSampler, LocalGraph, ladies_probabilities,
                            probability_matrix, rng, row_normalize, sample_rows,
                            selection_matrix, set_selection_matrix)


def random_graph(n, density, seed, weighted=False, isolated=0):
    """Symmetric graph on n vertices; the last ``isolated`` vertices have no edge."""
    r = np.random.default_rng(seed)
    m = sp.random_array((n, n), density=density, rng=r, format="coo")
    a = sp.csr_array(((m + m.T) > 0).astype(np.float64))
    if isolated:
        keep = np.ones(n)
        keep[n - isolated:] = 0
        d = sp.diags_array(keep)
        a = sp.csr_array(d @ a @ d)
        a.eliminate_zeros()
    if weighted:
        a.data = r.integers(1, 4, a.nnz).astype(np.float64)
        a = sp.csr_array((a + a.T) / 2)
    a.sort_indices()
    return a


@st.composite
def cases(draw):
    n = draw(st.integers(1, 30))
    a = random_graph(n, draw(st.sampled_from([0.0, 0.05, 0.2, 0.5])), draw(st.integers(0, 2**31)),
                     isolated=draw(st.integers(0, min(3, n))))
    k = draw(st.integers(1, 4))
    batches = [np.asarray(draw(st.lists(st.integers(0, n - 1), min_size=0, max_size=6)),
                          dtype=np.int64)
               for _ in range(k)]
    sizes = tuple(draw(st.lists(st.integers(0, 8), min_size=1, max_size=3)))
    return dict(a=a, batches=batches, sizes=sizes, seed=draw(st.integers(0, 2**40)))


def _check_common(bulk, a):
    for t, blk in enumerate(bulk.blocks):
        blk.adj.check(full=True)
        assert blk.adj.indices.dtype == np.int64 and blk.adj.data.dtype == np.float64
        assert not np.isnan(blk.adj.data).any()
        assert blk.row_ptr[-1] == blk.adj.shape[0] == blk.dst_ids.size
        assert blk.col_ptr[-1] == blk.adj.shape[1] == blk.src_ids.size
        assert np.all(np.diff(blk.row_ptr) >= 0) and np.all(np.diff(blk.col_ptr) >= 0)
        if t + 1 < len(bulk.blocks):  # rows(A^{t+1}) == cols(A^t), per minibatch
            nxt = bulk.blocks[t + 1]
            assert np.array_equal(nxt.dst_ids, blk.src_ids)
            assert np.array_equal(nxt.row_ptr, blk.col_ptr)
        m = blk.adj.to_scipy().tocoo()
        rmb = np.searchsorted(blk.row_ptr, m.row, side="right") - 1
        cmb = np.searchsorted(blk.col_ptr, m.col, side="right") - 1
        assert np.array_equal(rmb, cmb), "an entry leaves its minibatch's diagonal block"
        # every sampled edge is an edge of A, with A's value
        ref = a.toarray()[blk.dst_ids[m.row], blk.src_ids[m.col]]
        assert np.all(ref != 0) and np.array_equal(ref, m.data)


@given(cases(), st.sampled_from(["tree", "unique"]), st.sampled_from(["floyd", "es", "its"]),
       st.booleans())
def test_sage_properties(case, frontier, method, include_dst):
    a = case["a"]
    deg = np.diff(a.indptr)
    smp = GraphSAGESampler(case["sizes"], frontier=frontier, method=method,
                           include_dst=include_dst, seed=case["seed"])
    bulk = smp.sample(a, case["batches"])
    _check_common(bulk, a)
    for t, (blk, s) in enumerate(zip(bulk.blocks, case["sizes"])):
        counts = np.diff(blk.adj.indptr)
        assert np.array_equal(counts, np.minimum(s, deg[blk.dst_ids])), "min(s, deg) per row"
        m = blk.adj.to_scipy()
        for r in range(m.shape[0]):   # distinct sampled vertices per row
            v = blk.src_ids[m.indices[m.indptr[r]:m.indptr[r + 1]]]
            assert np.unique(v).size == v.size
        if frontier == "unique":
            for i in range(bulk.k):
                src = blk.src_ids[blk.col_ptr[i]:blk.col_ptr[i + 1]]
                dst = blk.dst_ids[blk.row_ptr[i]:blk.row_ptr[i + 1]]
                assert np.unique(src).size == src.size
                assert np.array_equal(src[:dst.size], dst), "targets first"
        elif include_dst:
            for i in range(bulk.k):
                dst = blk.dst_ids[blk.row_ptr[i]:blk.row_ptr[i + 1]]
                assert np.array_equal(blk.src_ids[blk.col_ptr[i]:blk.col_ptr[i] + dst.size], dst)
        else:   # tree: one column per sampled nonzero
            assert blk.adj.shape[1] == blk.adj.nnz
    if frontier == "tree" and bulk.blocks:
        flat = np.concatenate([np.asarray(b, dtype=np.int64) for b in case["batches"]])
        assert np.array_equal(bulk.blocks[0].dst_ids, flat)


@given(cases(), st.sampled_from(["sum_of_squares", "square_of_sum"]),
       st.sampled_from(["es", "its"]), st.booleans())
def test_ladies_properties(case, prob, method, include_batch):
    a = case["a"]
    smp = LADIESSampler(case["sizes"], ladies_prob=prob, method=method, include_batch=include_batch,
                        keep_prob=True, seed=case["seed"])
    bulk = smp.sample(a, case["batches"])
    _check_common(bulk, a)
    for blk, s in zip(bulk.blocks, case["sizes"]):
        p = blk.prob.to_scipy()
        assert not np.isnan(p.data).any()
        sums = np.asarray(p.sum(axis=1)).ravel()
        assert np.allclose(sums[sums > 0], 1.0)
        for i in range(bulk.k):
            mb = blk.minibatch(i)
            dst, src = mb.dst_ids, mb.src_ids
            lo, hi = p.indptr[i], p.indptr[i + 1]
            support = p.indices[lo:hi][p.data[lo:hi] > 0]
            if include_batch:
                ud = dst[np.sort(np.unique(dst, return_index=True)[1])]
                assert np.array_equal(src[:ud.size], ud)
                sampled = src[ud.size:]
                # sampled vertices that were in the batch are hidden behind it
                assert sampled.size <= min(s, support.size)
                assert np.all(np.diff(sampled) > 0)
            else:
                sampled = src
                assert sampled.size == min(s, support.size), "min(s, |support|) vertices"
                assert np.unique(sampled).size == sampled.size
            assert np.isin(sampled, support).all(), "sampled vertices lie in the support of P"
            # EXTRACT exactness: A[B_i, C_i], values included, nothing else
            want = a.toarray()[np.ix_(dst, src)]
            assert np.array_equal(mb.adj.toarray(), want)


@given(cases(), st.sampled_from(["sage-tree", "sage-unique", "ladies"]))
@settings(max_examples=25)
def test_bulk_equals_one_at_a_time(case, kind):
    a = case["a"]
    if kind == "ladies":
        smp = LADIESSampler(case["sizes"], seed=case["seed"])
    else:
        smp = GraphSAGESampler(case["sizes"], frontier=kind.split("-")[1], seed=case["seed"])
    k = len(case["batches"])
    ids = np.arange(k) * 7 + 3           # global ids, not positions
    g = LocalGraph(a)
    bulk = smp.sample(g, case["batches"], minibatch_ids=ids)
    for i in range(k):
        one = smp.sample(g, [case["batches"][i]], minibatch_ids=[ids[i]])
        assert one.same_as(bulk.minibatch(i))
    # splitting the bulk anywhere gives the same minibatches
    if k > 1:
        tail = smp.sample(g, case["batches"][1:], minibatch_ids=ids[1:])
        assert tail.same_as(bulk.minibatches(1, k))


def hash2_numba(keys, xs):
    """The numba kernel's ``H`` on arrays (imports numba), to compare with ``rng.hash2``."""
    from spgnn._kernels.numba.sample import hash2_array

    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    xs = np.ascontiguousarray(xs, dtype=np.int64)
    out = np.empty(keys.shape[0], dtype=np.uint64)
    hash2_array(keys, xs, out)
    return out


def test_rng_numpy_equals_numba_and_is_keyed():
    r = np.random.default_rng(1)
    keys = r.integers(0, 2**63, 1000, dtype=np.int64).astype(np.uint64) * np.uint64(2)
    xs = r.integers(0, 2**40, 1000)
    assert np.array_equal(rng.hash2(keys, xs), hash2_numba(keys, xs))
    u = rng.uniform(keys, xs)
    assert u.min() > 0 and u.max() < 1
    k1 = rng.row_keys(5, "sage-tree", np.arange(4), 1, np.arange(4))
    assert np.unique(k1).size == 4
    assert not np.array_equal(k1, rng.row_keys(6, "sage-tree", np.arange(4), 1, np.arange(4)))
    assert not np.array_equal(k1, rng.row_keys(5, "sage-tree", np.arange(4), 2, np.arange(4)))
    assert np.array_equal(k1, rng.row_keys(5, "sage-tree", np.arange(4), 1, np.arange(4)))


def _fig1():
    ed = [(0, 1), (1, 4), (2, 5), (3, 5), (4, 5), (0, 2), (3, 4)]
    r = [u for u, v in ed] + [v for u, v in ed]
    c = [v for u, v in ed] + [u for u, v in ed]
    return sp.csr_array((np.ones(len(r)), (r, c)), shape=(6, 6))


def test_paper_figure1_probabilities():
    a = _fig1()
    p = ladies_probabilities(a, [np.array([1, 5])], "square_of_sum").toarray()
    assert np.allclose(p, [[1 / 7, 0, 1 / 7, 1 / 7, 4 / 7, 0]])
    p = ladies_probabilities(a, [np.array([1, 5])], "paper").toarray()
    assert np.allclose(p, [[1 / 7, 0, 1 / 7, 1 / 7, 4 / 7, 0]])
    p = ladies_probabilities(a, [np.array([1, 5])], "sum_of_squares").toarray()
    assert np.allclose(p, [[1 / 5, 0, 1 / 5, 1 / 5, 2 / 5, 0]])
    assert np.array_equal(ladies_probabilities(a, [np.array([1, 5])], "zou").toarray(), p)


def test_gather_and_spgemm_paths_agree():
    a = random_graph(40, 0.1, 3, weighted=True, isolated=2)
    v = np.array([0, 5, 5, 39, 12, 38])
    q = selection_matrix(v, 40)
    pg = probability_matrix(a, q, path="gather").to_scipy()
    ps = probability_matrix(a, q, path="spgemm").to_scipy()
    assert np.array_equal(pg.toarray(), ps.toarray())
    assert np.array_equal(pg.toarray(), a[v].toarray())
    # the fused SAGE path samples exactly what sampling the explicit P gives
    g = LocalGraph(a)
    keys = rng.row_keys(1, "test", np.zeros(v.size), 0, np.arange(v.size))
    ip, pos = sample_rows(*g.gather(v), keys, 3, "floyd", False)
    pp = probability_matrix(g, q, path="spgemm")
    ip2, pos2 = sample_rows(pp.indptr, pp.indices, pp.data, np.arange(v.size), keys, 3, "floyd",
                            False)
    assert np.array_equal(ip, ip2)
    assert np.array_equal(g.a.indices[pos], pp.indices[pos2])
    # LADIES Q: set rows, duplicates merged
    qs = set_selection_matrix(np.array([1, 1, 2, 3]), np.array([0, 3, 4]), 40).to_scipy()
    assert qs.toarray()[0].nonzero()[0].tolist() == [1, 2] and qs[0, 1] == 1
    sq = probability_matrix(a, qs, square=True).to_scipy()
    assert np.allclose(sq.toarray(), (qs @ a.multiply(a)).toarray())
    with pytest.raises(ValueError):
        probability_matrix(a, qs, path="gather")


def test_row_normalize_no_nan():
    p = selection_matrix([], 3)
    assert row_normalize(p).data.size == 0
    m = sp.csr_array(np.array([[0.0, 0.0], [1.0, 3.0]]))
    m.data[:] = [1.0, 3.0]
    q = probability_matrix(m, sp.csr_array(np.array([[1.0, 1.0]])), path="spgemm")
    assert np.allclose(row_normalize(q).toarray(), [[0.25, 0.75]])


def test_isolated_and_empty_inputs():
    a = sp.csr_array((5, 5))
    for smp in (GraphSAGESampler([3, 2]), GraphSAGESampler([3], frontier="unique"),
                LADIESSampler([4], keep_prob=True)):
        bulk = smp.sample(a, [np.array([0, 1]), np.array([], dtype=np.int64)])
        assert bulk.num_edges == 0
        for blk in bulk.blocks:
            assert not np.isnan(blk.adj.data).any()
            if blk.prob is not None:
                assert not np.isnan(blk.prob.data).any()
    assert GraphSAGESampler([2]).sample(a, np.zeros((0, 3), dtype=np.int64)).k == 0


def test_numba_backend_matches_numpy():
    a = random_graph(50, 0.08, 9, weighted=True)
    b = [np.array([1, 2, 3]), np.array([4, 4, 40])]
    for smp in (LADIESSampler([6, 3], seed=4), GraphSAGESampler([4, 3], frontier="unique", seed=4)):
        x = smp.sample(a, b, backend="numpy")
        y = smp.sample(a, b, backend="numba")
        assert x.same_as(y)


def test_sage_uniform_even_for_weighted_a():
    a = random_graph(30, 0.3, 2, weighted=True)
    b = np.arange(30)[None, :]
    ones = sp.csr_array(a, copy=True)
    ones.data[:] = 1.0
    x = GraphSAGESampler([3], seed=2).sample(a, b)
    y = GraphSAGESampler([3], seed=2).sample(ones, b)
    assert np.array_equal(x.blocks[0].src_ids, y.blocks[0].src_ids)
    assert not np.array_equal(x.blocks[0].adj.data, y.blocks[0].adj.data)   # A's values kept


def test_input_validation():
    a = random_graph(10, 0.3, 1)
    with pytest.raises(InvalidSparseStructure):
        GraphSAGESampler([2]).sample(a, [np.array([0, 10])])
    with pytest.raises(InvalidSparseStructure):
        GraphSAGESampler([2]).sample(a, [np.array([-1])])
    with pytest.raises(DTypeError):
        GraphSAGESampler([2]).sample(a, [np.array([0.5])])
    with pytest.raises(DimensionMismatch):
        GraphSAGESampler([2]).sample(sp.csr_array((3, 4)), [np.array([0])])
    with pytest.raises(DimensionMismatch):
        GraphSAGESampler([2]).sample(a, [np.array([0])], minibatch_ids=[0, 1])
    with pytest.raises(ValueError):
        GraphSAGESampler([-1])
    with pytest.raises(ValueError):
        GraphSAGESampler([2], frontier="dedup")
    with pytest.raises(ValueError):
        LADIESSampler([2], method="floyd")
    with pytest.raises(ValueError):
        LADIESSampler([2], ladies_prob="squared")
    with pytest.raises(TypeError):
        GraphSAGESampler([2]).sample(np.eye(3), [np.array([0])])
