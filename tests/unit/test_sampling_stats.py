"""Goodness of fit of the samplers (report §8.2, tests 11-14), with scipy.stats.

T independent trials come out of ONE bulk call: T identical rows in a tree
(GraphSAGE; the RNG keys rows by their position) or T minibatches with the
same batch (LADIES; keyed by the minibatch id).  Seeds are fixed, so every
run computes the same statistics: the tests are deterministic, never flaky.
Each accepts the intended law at alpha = 1e-3 and rejects a deliberately
wrong one (wrong null hypothesis, or a biased sampler) at the same level.
"""

from itertools import combinations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from spgnn.sampling import GraphSAGESampler, LADIESSampler, ladies_probabilities

ALPHA = 1e-3


def star(weights):
    """Vertex 0 linked to 1..d with the given edge weights (symmetric)."""
    d = len(weights)
    r = np.r_[np.zeros(d, dtype=int), np.arange(1, d + 1)]
    c = np.r_[np.arange(1, d + 1), np.zeros(d, dtype=int)]
    w = np.r_[weights, weights].astype(np.float64)
    return sp.csr_array((w, (r, c)), shape=(d + 1, d + 1))


def subset_counts(blk, d, s):
    """Histogram of the sampled subsets (neighbour ids 1..d), one per row."""
    cats = {c: q for q, c in enumerate(combinations(range(1, d + 1), s))}
    m = blk.adj.to_scipy()
    counts = np.zeros(len(cats))
    for r in range(m.shape[0]):
        v = tuple(sorted(blk.src_ids[m.indices[m.indptr[r]:m.indptr[r + 1]]].tolist()))
        counts[cats[v]] += 1
    return counts, list(cats)


@pytest.mark.parametrize("method", ["floyd", "es", "its"])
def test_sage_subsets_uniform(method):
    """d = 6, s = 2: 15 subsets, T = 15000 (report test 11)."""
    d, s, T = 6, 2, 15000
    a = star(np.ones(d))
    bulk = GraphSAGESampler([s], method=method, seed=11).sample(a, [np.zeros(T, dtype=np.int64)])
    counts, _ = subset_counts(bulk.blocks[0], d, s)
    assert counts.sum() == T
    assert stats.chisquare(counts).pvalue > ALPHA
    # a deliberately wrong null (subsets weighted by their vertex sum) is rejected
    wrong = np.array([sum(c) for c in combinations(range(1, d + 1), s)], dtype=float)
    assert stats.chisquare(counts, wrong / wrong.sum() * T).pvalue < ALPHA


def test_biased_sampler_is_rejected():
    """The same test rejects a biased sampler: uniform first pick, then its ring neighbour."""
    d, s, T = 6, 2, 15000
    r = np.random.default_rng(5)
    first = r.integers(1, d + 1, T)
    second = np.where(r.random(T) < 0.5, first % d + 1, r.integers(1, d + 1, T))
    second = np.where(second == first, first % d + 1, second)
    cats = {c: q for q, c in enumerate(combinations(range(1, d + 1), s))}
    counts = np.zeros(len(cats))
    for x, y in zip(first, second):
        counts[cats[tuple(sorted((x, y)))]] += 1
    assert stats.chisquare(counts).pvalue < ALPHA


@pytest.mark.parametrize("method", ["floyd", "es"])
def test_sage_inclusion_counts_large_degree(method):
    """d = 40, s = 5: corrected chi-square for without-replacement counts (report test 12)."""
    d, s, T = 40, 5, 4000
    a = star(np.ones(d))
    blk = GraphSAGESampler([s], method=method, seed=12).sample(
        a, [np.zeros(T, dtype=np.int64)]).blocks[0]
    c = np.bincount(blk.src_ids, minlength=d + 1)[1:]
    e = T * s / d
    x = (d - 1) / (d - s) * np.sum((c - e) ** 2 / e)
    assert stats.chi2.sf(x, d - 1) > ALPHA
    # with-replacement variance (no correction factor) would be wrong, but the
    # strong check is against a wrong mean: vertex 1 favoured by 60 %
    skew = np.full(d, 1.0)
    skew[0] = 1.6
    ew = T * s * skew / skew.sum()
    xw = (d - 1) / (d - s) * np.sum((c - ew) ** 2 / ew)
    assert stats.chi2.sf(xw, d - 1) < ALPHA


def _ladies_draws(a, batch, prob, s, T, method, seed):
    smp = LADIESSampler([s], ladies_prob=prob, include_batch=False, method=method, seed=seed)
    return smp.sample(a, [batch] * T).blocks[0]


def _fig1():
    ed = [(0, 1), (1, 4), (2, 5), (3, 5), (4, 5), (0, 2), (3, 4)]
    r = [u for u, v in ed] + [v for u, v in ed]
    c = [v for u, v in ed] + [u for u, v in ed]
    return sp.csr_array((np.ones(len(r)), (r, c)), shape=(6, 6))


@pytest.mark.parametrize("prob,other", [("sum_of_squares", "square_of_sum"),
                                        ("square_of_sum", "sum_of_squares")])
@pytest.mark.parametrize("method", ["es", "its"])
def test_ladies_single_draw_matches_probabilities(prob, other, method):
    """s = 1 on the paper's Figure 1 graph: multinomial chi-square (report test 13)."""
    a, batch, T = _fig1(), np.array([1, 5]), 12000
    blk = _ladies_draws(a, batch, prob, 1, T, method, seed=13)
    assert blk.src_ids.size == T
    counts = np.bincount(blk.src_ids, minlength=6)
    p = ladies_probabilities(a, [batch], prob).toarray()[0]
    support = p > 0
    assert counts[~support].sum() == 0
    assert stats.chisquare(counts[support], p[support] * T).pvalue > ALPHA
    # the other formula is the deliberately wrong law: rejected
    q = ladies_probabilities(a, [batch], other).toarray()[0]
    assert stats.chisquare(counts[support], q[support] * T).pvalue < ALPHA


@pytest.mark.parametrize("method", ["es", "its"])
def test_ladies_pairs_follow_successive_sampling(method):
    """s = 2 on a weighted star: exact successive-sampling pair laws (report test 14)."""
    w = np.array([1.0, 1.5, 2.0, 2.5, 3.0])
    a = star(w)
    T = 20000
    blk = _ladies_draws(a, np.array([0]), "sum_of_squares", 2, T, method, seed=14)
    counts, cats = subset_counts(blk, w.size, 2)
    p = w ** 2 / np.sum(w ** 2)
    pi = {i + 1: p[i] for i in range(w.size)}
    exact = np.array([pi[x] * pi[y] / (1 - pi[x]) + pi[y] * pi[x] / (1 - pi[y]) for x, y in cats])
    assert np.isclose(exact.sum(), 1.0)
    assert stats.chisquare(counts, exact * T).pvalue > ALPHA
    # wrong: pairs proportional to p_x p_y (independent draws conditioned on distinct)
    prod = np.array([pi[x] * pi[y] for x, y in cats])
    assert stats.chisquare(counts, prod / prod.sum() * T).pvalue < ALPHA
