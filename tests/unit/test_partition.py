"""spgnn.partition: exact statistics, permutations, partitioners, double permutation."""

import gzip
import importlib.util

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st

from spgnn import BackendUnavailable, DimensionMismatch, Layout
from spgnn.partition import (balanced_partition, block_nnz_imbalance, block_partition,
                             double_permutation, metis_partition, partition_stats,
                             random_partition, reorder)


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def random_graph(n, density, seed, symmetric=False):
    """Seed-driven random pattern (may hold self-loops and, unless symmetric, be directed)."""
    rng = np.random.default_rng(seed)
    A = sp.random_array((n, n), density=density, format="csr", rng=rng)
    if symmetric:
        A = (A + A.T).tocsr()
    return A


def brute_stats(A, parts, k):
    """Loops over the definitions of the statistics (report §3.2)."""
    A = sp.csr_array(A)
    A.eliminate_zeros()
    n = A.shape[0]
    need = [[set() for _ in range(k)] for _ in range(k)]   # need[i][j]: rows of X_j used by i
    for v in range(n):
        for u in A.indices[A.indptr[v]:A.indptr[v + 1]]:
            if parts[v] != parts[u]:
                need[parts[v]][parts[u]].add(int(u))
    r = np.array([[len(need[i][j]) for j in range(k)] for i in range(k)])
    lam = np.zeros(n, dtype=np.int64)
    for u in range(n):
        lam[u] = sum(1 for i in range(k) if i != parts[u] and u in need[i][parts[u]])
    cut = set()
    for v in range(n):
        for u in A.indices[A.indptr[v]:A.indptr[v + 1]]:
            if u != v and parts[u] != parts[v]:
                cut.add((min(u, v), max(u, v)))
    sizes = np.bincount(parts, minlength=k)
    return dict(r=r, lam=lam, send=r.sum(axis=0), recv=r.sum(axis=1), total=int(lam.sum()),
                messages=int((r > 0).sum()), edge_cut=len(cut),
                nnz=np.array([sum(A.indptr[v + 1] - A.indptr[v] for v in range(n) if parts[v] == i)
                              for i in range(k)]),
                oblivious=int(sum(n - s for s in sizes)))


def ring(n=8):
    i = np.arange(n)
    return sp.csr_array((np.ones(2 * n), (np.r_[i, i], np.r_[(i + 1) % n, (i - 1) % n])),
                        shape=(n, n))


# --------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------
@settings(max_examples=40)
@given(n=st.integers(1, 24), k=st.integers(1, 6), density=st.floats(0.0, 0.4),
       seed=st.integers(0, 2**32 - 1), symmetric=st.booleans())
def test_stats_match_brute_force(n, k, density, seed, symmetric):
    A = random_graph(n, density, seed, symmetric)
    parts = np.random.default_rng(seed + 1).integers(0, k, size=n)
    s = partition_stats(A, parts, k)
    b = brute_stats(A, parts, k)
    assert s.total_volume == b["total"] == b["r"].sum()
    np.testing.assert_array_equal(s.send_volume, b["send"])
    np.testing.assert_array_equal(s.recv_volume, b["recv"])
    np.testing.assert_array_equal(s.nnz_per_part, b["nnz"])
    np.testing.assert_array_equal(s.vertices_per_part, np.bincount(parts, minlength=k))
    assert s.messages == b["messages"]
    assert s.edge_cut == b["edge_cut"]
    assert s.oblivious_volume == b["oblivious"] == (k - 1) * n
    assert s.max_send == b["send"].max()
    assert s.mean_send == pytest.approx(b["total"] / k)
    if s.mean_send > 0:
        assert s.send_imbalance == pytest.approx(b["send"].max() / (b["total"] / k) - 1)
    assert s.volume_ratio == pytest.approx(b["total"] / b["oblivious"] if b["oblivious"] else 0)
    # paper bound: R_i <= (k-1) max r(i, j)
    assert np.all(s.recv_volume <= (k - 1) * max(b["r"].max(), 0))


def test_stats_ignore_explicit_zeros_and_duplicates():
    A = sp.csr_array((np.array([0.0, 1.0, 2.0]), (np.array([0, 0, 0]), np.array([1, 2, 2]))),
                     shape=(3, 3))
    s = partition_stats(A, np.array([0, 1, 2]), 3)
    assert s.total_volume == 1 and s.edge_cut == 1 and s.messages == 1


def test_ring_example():
    """Report §3.2: 8-cycle, 4 contiguous parts."""
    A = ring(8)
    p = block_partition(A, 4)
    s = p.stats
    assert s.total_volume == 8
    np.testing.assert_array_equal(s.send_volume, [2, 2, 2, 2])
    np.testing.assert_array_equal(s.recv_volume, [2, 2, 2, 2])
    assert s.messages == 8 and s.edge_cut == 4 and s.oblivious_volume == 24
    assert s.max_send == 2 and s.send_imbalance == 0.0 and s.volume_ratio == pytest.approx(1 / 3)
    # bytes per SpMM at f = 3, fp32: 96 B aware vs 288 B oblivious
    assert s.total_volume * 3 * 4 == 96 and s.oblivious_volume * 3 * 4 == 288
    np.testing.assert_array_equal(p.perm, np.arange(8))
    np.testing.assert_array_equal(p.offsets, [0, 2, 4, 6, 8])


def test_edge_cut_nonsymmetric_counts_unordered_pairs():
    # 0->1 and 1->0 are one pair; 2->0 only one direction is still one pair
    A = sp.csr_array((np.ones(3), (np.array([0, 1, 2]), np.array([1, 0, 0]))), shape=(3, 3))
    s = partition_stats(A, np.array([0, 1, 1]), 2)
    assert s.edge_cut == 2
    # Y = A X: part 0 (row 0) needs X[1]; part 1 (rows 1, 2) needs X[0] once
    assert s.total_volume == 2 and s.messages == 2


def test_stats_large_against_a_sparse_product():
    """At 2.6 M entries and 256 parts (the vectorised path at scale), the volumes equal an
    independent computation: part p receives column j when some row of p touches j and j
    lives elsewhere, i.e. a stored entry of (parts indicator)ᵀ · pattern(A)."""
    A = random_graph(100_000, 13 / 100_000, 0, symmetric=True)   # ~2.6 M entries
    n, k = A.shape[0], 256
    parts = np.random.default_rng(0).integers(0, k, size=n)
    s = partition_stats(A, parts, k)
    owner = sp.csr_matrix((np.ones(n), (parts, np.arange(n))), shape=(k, n))
    touched = (owner @ (A != 0).astype(np.float64)).tocoo()
    remote = parts[touched.col] != touched.row
    recv = np.bincount(touched.row[remote], minlength=k)
    send = np.bincount(parts[touched.col[remote]], minlength=k)
    assert s.total_volume == int(remote.sum())
    np.testing.assert_array_equal(s.recv_volume, recv)
    np.testing.assert_array_equal(s.send_volume, send)


# --------------------------------------------------------------------------
# permutations and simple partitioners
# --------------------------------------------------------------------------
@settings(max_examples=25)
@given(n=st.integers(0, 40), k=st.integers(1, 9), seed=st.integers(0, 2**32 - 1))
def test_perm_offsets_consistent(n, k, seed):
    A = random_graph(n, 0.2, seed, symmetric=True)
    p = random_partition(A, k, seed=seed)
    assert sorted(p.perm.tolist()) == list(range(n))
    assert p.offsets[0] == 0 and p.offsets[-1] == n and len(p.offsets) == k + 1
    for i in range(k):
        block = p.perm[p.offsets[i]:p.offsets[i + 1]]
        assert np.all(p.parts[block] == i)
        assert np.all(np.diff(block) > 0)                 # stable: original order kept
    sizes = np.diff(p.offsets)
    assert sizes.max() - sizes.min() <= 1                  # balanced random
    np.testing.assert_array_equal(p.inverse_perm[p.perm], np.arange(n))
    B = p.apply(A)
    np.testing.assert_array_equal(B.toarray(), A.toarray()[np.ix_(p.perm, p.perm)])
    X = np.arange(n * 2).reshape(n, 2)
    np.testing.assert_array_equal(p.unpermute_rows(p.permute_rows(X)), X)
    # permuted SpMM equals the permuted original
    np.testing.assert_allclose(B @ p.permute_rows(X), p.permute_rows(A @ X))
    lay = p.layout()
    assert isinstance(lay, Layout) and lay.row_splits == tuple(p.offsets.tolist())
    # statistics do not depend on the labelling: the block partition of P A Pᵀ is the same
    q = partition_stats(B, np.repeat(np.arange(k), sizes), k)
    assert q.total_volume == p.stats.total_volume and q.edge_cut == p.stats.edge_cut


def test_random_partition_deterministic_by_seed():
    A = random_graph(200, 0.05, 3, symmetric=True)
    a, b, c = (random_partition(A, 8, seed=s) for s in (1, 1, 2))
    np.testing.assert_array_equal(a.parts, b.parts)
    assert not np.array_equal(a.parts, c.parts)


def test_block_partition_identity():
    A = random_graph(10, 0.3, 0)
    p = block_partition(A, 3)
    np.testing.assert_array_equal(p.perm, np.arange(10))
    np.testing.assert_array_equal(p.offsets, [0, 4, 7, 10])


def test_errors_name_expected_and_got():
    A = ring(6)
    with pytest.raises(DimensionMismatch, match=r"square.*\(3, 4\)"):
        block_partition(sp.csr_array((3, 4)), 2)
    with pytest.raises(ValueError, match="nparts must be >= 1, but got nparts=0"):
        random_partition(A, 0)
    with pytest.raises(DimensionMismatch, match=r"shape \(6,\).*\(5,\)"):
        partition_stats(A, np.zeros(5, int), 2)
    with pytest.raises(ValueError, match=r"\[0, 2\), but got 2"):
        partition_stats(A, np.array([0, 1, 2, 0, 0, 0]), 2)
    with pytest.raises(ValueError, match=r"\[0, 2\), but got -1"):
        partition_stats(A, np.array([0, 1, -1, 0, 0, 0]), 2)
    with pytest.raises(ValueError, match="balance must be"):
        metis_partition(A, 2, balance="edges")
    with pytest.raises(ValueError, match="method must be"):
        reorder(A, "bogus")
    with pytest.raises(DimensionMismatch, match=r"shape \(6, 6\)"):
        block_partition(A, 2).apply(ring(5))


# --------------------------------------------------------------------------
# METIS and the balancing refinement
# --------------------------------------------------------------------------
needs_metis = pytest.mark.skipif(importlib.util.find_spec("pymetis") is None,
                                 reason="pymetis not installed (pip install -e '.[partition]')")


def sbm_graph(n=2000, blocks=16, p_in=0.02, p_out=0.002, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, blocks, size=n)
    i, j = np.triu_indices(n, 1)
    prob = np.where(z[i] == z[j], p_in, p_out)
    keep = rng.random(i.size) < prob
    i, j = i[keep], j[keep]
    return sp.csr_array((np.ones(2 * i.size), (np.r_[i, j], np.r_[j, i])), shape=(n, n))


def powerlaw_graph(n=3000, m=4, seed=0):
    """Preferential-attachment-like graph: hubs make METIS's send volume uneven."""
    rng = np.random.default_rng(seed)
    src, dst = [], []
    targets = list(range(m))
    pool = []
    for v in range(m, n):
        chosen = set(targets)
        src += [v] * len(chosen)
        dst += list(chosen)
        pool += list(chosen) + [v] * len(chosen)
        targets = [pool[t] for t in rng.integers(0, len(pool), size=m)]
    src, dst = np.array(src), np.array(dst)
    A = sp.csr_array((np.ones(2 * src.size), (np.r_[src, dst], np.r_[dst, src])), shape=(n, n))
    A.sum_duplicates()
    return A


@needs_metis
@pytest.mark.parametrize("balance", ["vertices", "nnz"])
def test_metis_balance_and_determinism(balance):
    A = powerlaw_graph()
    p = metis_partition(A, 8, balance=balance, seed=0)
    q = metis_partition(A, 8, balance=balance, seed=0)
    np.testing.assert_array_equal(p.parts, q.parts)
    assert p.parts.min() >= 0 and p.parts.max() < 8
    if balance == "vertices":
        assert p.stats.vertex_imbalance <= 0.05
    else:
        w = np.diff(A.indptr) + 1
        loads = np.bincount(p.parts, weights=w, minlength=8)
        assert loads.max() / loads.mean() - 1 <= 0.05
    r = random_partition(A, 8)
    assert p.stats.total_volume < 0.85 * r.stats.total_volume


@needs_metis
def test_metis_edge_cases():
    A = ring(5)
    one = metis_partition(A, 1)
    assert np.all(one.parts == 0) and one.stats.total_volume == 0
    many = metis_partition(A, 9)
    assert sorted(many.parts.tolist()) == [0, 1, 2, 3, 4] and len(many.offsets) == 10
    # directed input with self-loops is symmetrised for METIS
    D = sp.csr_array((np.ones(4), (np.array([0, 1, 2, 2]), np.array([1, 2, 2, 3]))), shape=(4, 4))
    assert metis_partition(D, 2).parts.shape == (4,)


def test_metis_missing_raises_backend_unavailable(monkeypatch):
    import builtins
    real = builtins.__import__

    def fake(name, *a, **kw):
        if name == "pymetis":
            raise ImportError("No module named 'pymetis'")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(BackendUnavailable, match=r"pip install -e '\.\[partition\]'"):
        metis_partition(ring(6), 2)


@needs_metis
@pytest.mark.parametrize("graph,k", [("powerlaw", 8), ("powerlaw", 32), ("sbm", 16)])
def test_balanced_never_worse_than_base(graph, k):
    A = powerlaw_graph() if graph == "powerlaw" else sbm_graph()
    base = metis_partition(A, k)
    b = balanced_partition(A, k, base=base, imbalance_tol=0.05)
    assert b.stats.max_send <= base.stats.max_send
    assert b.stats.total_volume <= 1.10 * base.stats.total_volume
    n = A.shape[0]
    capv = max(int(np.floor(1.05 * n / k)), -(-n // k), base.stats.vertices_per_part.max())
    assert b.stats.vertices_per_part.max() <= capv
    nnz = A.nnz
    capw = max(int(np.floor(1.05 * nnz / k)), -(-nnz // k), base.stats.nnz_per_part.max())
    assert b.stats.nnz_per_part.max() <= capw
    # the stats reported are those of the returned parts
    s = partition_stats(A, b.parts, k)
    assert s.max_send == b.stats.max_send and s.total_volume == b.stats.total_volume
    if graph == "powerlaw" and k == 32:
        assert b.stats.max_send < 0.9 * base.stats.max_send      # real progress on hubs


@needs_metis
def test_balanced_deterministic_and_from_array():
    A = powerlaw_graph(1500)
    a = balanced_partition(A, 16, seed=0)
    b = balanced_partition(A, 16, seed=0, base=metis_partition(A, 16, seed=0).parts)
    np.testing.assert_array_equal(a.parts, b.parts)
    assert balanced_partition(A, 1).stats.total_volume == 0


@needs_metis
def test_balanced_directed_matches_exact_stats():
    A = random_graph(400, 0.02, 5)          # directed, with self-loops
    b = balanced_partition(A, 8)
    s = partition_stats(A, b.parts, 8)
    assert s.max_send == b.stats.max_send <= b.info["base_stats"].max_send


# --------------------------------------------------------------------------
# double permutation and reordering
# --------------------------------------------------------------------------
def test_double_permutation_properties():
    n = 4000
    A = sbm_graph(n, 8, 0.01, 0.0005, seed=1)
    A = (A + sp.eye_array(n)).tocsr()        # GCN self-loops: the case a single permutation fails
    d = double_permutation(A, seed=3)
    assert sorted(d.row_perm.tolist()) == list(range(n))
    assert sorted(d.col_perm.tolist()) == list(range(n))
    assert not np.array_equal(d.row_perm, d.col_perm)
    e = double_permutation(A, seed=3)
    np.testing.assert_array_equal(d.row_perm, e.row_perm)
    A1, A2 = d.matrices(A)
    np.testing.assert_array_equal(A1.toarray(), A.toarray()[np.ix_(d.row_perm, d.col_perm)])
    # two layers: (P_c A P_rᵀ)(P_r A P_cᵀ)(P_c X) = P_c (A A X)
    X = np.random.default_rng(0).standard_normal((n, 3))
    Y = A2 @ (A1 @ d.permute_input(X))
    np.testing.assert_allclose(d.unpermute_output(Y, 2), A @ (A @ X), rtol=1e-10)
    np.testing.assert_allclose(d.unpermute_output(A1 @ d.permute_input(X), 1), A @ X,
                               rtol=1e-10)
    # load balance of 8x8 blocks: double ~1, single permutation keeps the diagonal heavy
    single = A[d.row_perm][:, d.row_perm]
    assert block_nnz_imbalance(A1, 8) < 1.15
    assert block_nnz_imbalance(A2, 8) < 1.15
    assert block_nnz_imbalance(single, 8) > 1.5
    assert block_nnz_imbalance(A, 8) > 1.5


@pytest.mark.parametrize("method", ["rcm", "degree", "metis"])
def test_reorder_is_permutation(method):
    if method == "metis" and importlib.util.find_spec("pymetis") is None:
        pytest.skip("pymetis not installed")
    A = sbm_graph(500, 4, 0.05, 0.005)
    perm = reorder(A, method, nparts=4)
    assert sorted(perm.tolist()) == list(range(500))
    if method == "degree":
        deg = np.diff(A.indptr)[perm]
        assert np.all(np.diff(deg) <= 0)
    if method == "rcm":
        B = A[perm][:, perm].tocoo()
        rows, cols = A.tocoo().row, A.tocoo().col
        assert np.abs(B.row - B.col).max() <= np.abs(rows - cols).max()


# --------------------------------------------------------------------------
# a real graph
# --------------------------------------------------------------------------
@needs_metis
def test_real_graph_facebook():
    from spgnn.testing.data import shared_data_path
    path = shared_data_path("snap_facebook_combined", "facebook_combined.txt.gz")
    with gzip.open(path, "rb") as f:
        e = np.loadtxt(f, dtype=np.int64, ndmin=2)
    n = int(e.max()) + 1
    keep = e[:, 0] != e[:, 1]
    s, t = e[keep, 0], e[keep, 1]
    A = sp.csr_array((np.ones(2 * s.size), (np.r_[s, t], np.r_[t, s])), shape=(n, n))
    A.sum_duplicates()
    k = 16
    r = random_partition(A, k)
    m = metis_partition(A, k)
    b = balanced_partition(A, k, base=m)
    assert m.stats.volume_ratio < 0.5 * r.stats.volume_ratio
    assert b.stats.max_send <= m.stats.max_send
    assert b.stats.total_volume <= 1.10 * m.stats.total_volume
    assert b.stats.vertex_imbalance <= 0.05 + 1e-9 or \
        b.stats.vertices_per_part.max() <= m.stats.vertices_per_part.max()


@pytest.mark.slow
def test_issue_targets_on_slashdot_at_64_parts():
    """The published targets on a real power-law graph (full table: docs/partitioning.md).

    Sparsity-aware + METIS moves a small share of the oblivious volume; the
    balancing partitioner cuts METIS's maximum send volume by at least 40 %
    while its total volume stays within 15 % of METIS's.
    """
    pytest.importorskip("pymetis", reason="METIS needs pymetis (pip install -e '.[partition]')")
    from spgnn.io import load_graph
    from spgnn.testing.data import shared_data_path

    g = load_graph(shared_data_path("snap_soc_slashdot0902", "soc-Slashdot0902.txt.gz"))
    a = g.symmetrize().without_self_loops().adj
    metis = metis_partition(a, 64, seed=0)
    bal = balanced_partition(a, 64, base=metis, seed=0)
    m, b = metis.stats, bal.stats
    assert m.total_volume <= 0.10 * m.oblivious_volume
    assert b.max_send <= 0.60 * m.max_send, (b.max_send, m.max_send)
    assert b.total_volume <= 1.15 * m.total_volume
