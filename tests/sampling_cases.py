"""Distributed sampling checks shared by the loopback property tests and the mpiexec script.

Each ``check_*(comm, case)`` is collective over ``comm`` and raises
AssertionError on every rank together (``spgnn.testing.asserts``).
"""

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st

from spgnn import grid_15d
from spgnn.layout import block_bounds
from spgnn.sampling import (GraphSAGESampler, LADIESSampler, PartitionedGraph, sa_spgemm_15d,
                            sample_partitioned, sample_replicated, sampling_words,
                            set_selection_matrix)
from spgnn.sampling.distributed import stages_of
from spgnn.testing.asserts import collective_assert

SIZES = (1, 2, 4, 8)


def graph(n, density, seed, isolated=0):
    r = np.random.default_rng(seed)
    m = sp.random_array((n, n), density=density, rng=r, format="coo")
    a = sp.csr_array(((m + m.T) > 0).astype(np.float64))
    if isolated and n:
        keep = np.ones(n)
        keep[n - isolated:] = 0
        a = sp.csr_array(sp.diags_array(keep) @ a @ sp.diags_array(keep))
        a.eliminate_zeros()
    a.sort_indices()
    return a


def make_sampler(case):
    kind, sizes, seed = case["kind"], case["sizes"], case["seed"]
    if kind == "ladies":
        return LADIESSampler(sizes, ladies_prob=case["prob"], seed=seed)
    return GraphSAGESampler(sizes, frontier=kind.split("-")[1], seed=seed)


@st.composite
def dist_case(draw, sizes=SIZES):
    p = draw(st.sampled_from(sizes))
    c = draw(st.sampled_from([c for c in (1, 2) if p % c == 0]))
    n = draw(st.integers(1, 40))
    k = draw(st.integers(0, 9))
    b = draw(st.integers(1, 5))
    return dict(p=p, c=c, n=n, density=draw(st.sampled_from([0.0, 0.05, 0.15])),
                isolated=draw(st.integers(0, min(n, 3))), gseed=draw(st.integers(0, 2**31)),
                batches=np.random.default_rng(draw(st.integers(0, 2**31))).integers(0, n, (k, b)),
                ids=draw(st.sampled_from([None, "shifted"])),
                kind=draw(st.sampled_from(["sage-tree", "sage-unique", "ladies"])),
                prob=draw(st.sampled_from(["sum_of_squares", "square_of_sum"])),
                sizes=tuple(draw(st.lists(st.integers(0, 6), min_size=1, max_size=3))),
                seed=draw(st.integers(0, 2**40)), root=draw(st.sampled_from([None, 0])))


def check_modes_agree(comm, case):
    """Partitioned == replicated == single process, bit for bit, and the shares cover the bulk."""
    a = graph(case["n"], case["density"], case["gseed"], case["isolated"])
    smp = make_sampler(case)
    batches = case["batches"]
    k = batches.shape[0]
    ids = None if case["ids"] is None else np.arange(k) * 3 + 100
    ref = smp.sample(a, batches, minibatch_ids=ids)
    grid = grid_15d(case["c"], comm)
    root = case["root"]
    g = PartitionedGraph.from_global(a if (root is None or comm.rank == root) else None, grid,
                                     root=root)
    part = sample_partitioned(smp, g, batches, minibatch_ids=ids)
    with comm.track("replicated") as st_rep:
        rep = sample_replicated(smp, a, batches, comm, minibatch_ids=ids)
    ok, msg = True, ""
    if len(st_rep):
        ok, msg = False, f"replicated mode communicated: {st_rep.by_op()}"
    lo, hi = block_bounds(k, comm.size, comm.rank)
    if not rep.same_as(ref.minibatches(lo, hi)):
        ok, msg = False, "replicated share differs from the single-process bulk"
    for q, mid in enumerate(part.minibatch_ids):
        pos = ref.position(mid)
        if not part.minibatch(q).same_as(ref.minibatch(pos)):
            ok, msg = False, f"partitioned minibatch {mid} differs"
    collective_assert(comm, ok, msg)
    owned = comm.allgather_obj(part.minibatch_ids.tolist())
    allids = sorted(x for o in owned for x in o)
    collective_assert(comm, allids == sorted(ref.minibatch_ids.tolist()),
                      f"partitioned shares {owned} do not cover the bulk")


def check_words(comm, case):
    """sa_spgemm_15d: result == Q @ A and the ledger's words == the formula (report §3.2)."""
    a = graph(case["n"], case["density"], case["gseed"], case["isolated"])
    n = a.shape[0]
    grid = grid_15d(case["c"], comm)
    g = PartitionedGraph.from_global(a, grid)
    i, j, c, nb = g.i, g.j, g.c, g.nblocks
    r = np.random.default_rng(case["seed"] % 2**32 + i)        # Q_i differs per process row
    rows = int(r.integers(0, 6))
    ptr = np.sort(r.integers(0, 4 * rows + 1, rows + 1)) if rows else np.zeros(1, dtype=np.int64)
    ptr[0] = 0
    q = set_selection_matrix(r.integers(0, n, int(ptr[-1])), ptr, n)
    square = bool(case["seed"] % 2)
    with comm.track("spgemm") as stats:
        p = sa_spgemm_15d(q, g, square=square)
    qs = q.to_scipy()
    want = qs @ (a.multiply(a) if square else a)
    ok = np.array_equal(p.toarray(), want.toarray())
    words = sampling_words(q.indices, np.diff(a.indptr), g.offsets, i, j, c)
    got_col = stats.total("bytes_sent", op="alltoallv", label="sample-spgemm:colids") // 8
    got_row = stats.total("bytes_recv", op="alltoallv", label="sample-spgemm:rowdata") // 8
    # all-reduce: the other replicas' partial products (R_i + 2 nnz each)
    exp_ar = 0
    if c > 1:
        offs = g.offsets
        for jj in range(c):
            if jj == j:
                continue
            st_ = stages_of(nb, c, jj)
            lo, hi = offs[st_.start], offs[st_.stop] if len(st_) else offs[st_.start]
            mask = sp.diags_array(((np.arange(n) >= lo) & (np.arange(n) < hi)).astype(float))
            exp_ar += q.shape[0] + 2 * sp.csr_array(qs @ mask @ a).nnz
    got_ar = stats.total("bytes_recv", op="allgatherv", label="sample-spgemm:allreduce") // 8
    # never more than the oblivious volume: whole remote blocks of my stages
    oblivious = sum(2 * a[g.offsets[s]:g.offsets[s + 1]].nnz + g.offsets[s + 1] - g.offsets[s]
                    for s in stages_of(nb, c, j) if s != i)
    msg = (f"rank {comm.rank}: equal={ok} colids {got_col} vs {words['colids_sent']}, rowdata "
           f"{got_row} vs {words['rowdata_recv']}, allreduce {got_ar} vs {exp_ar}")
    ok = (ok and got_col == words["colids_sent"] and got_row == words["rowdata_recv"]
          and got_ar == exp_ar and got_row <= oblivious)
    collective_assert(comm, ok, msg)
