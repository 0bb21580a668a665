"""The model prices 3d training's options: ``--agg-blocks K`` and ``--permute double`` (issue 26).

* ``agg_blocks=K``: the planner's events are exact (tested against the ledger in
  tests/unit/test_plexus_3d.py and under mpiexec in tests/test_plexus_mpi.py); here the
  arithmetic: the same bytes per rank, each aggregation all-reduce's messages K times (by
  hand, when every chunk is non-empty), and the SpMM charged K - 1 more call overheads.
* ``permutation``: the slowest rank's SpMM is priced on the double-permuted shards, the
  ones :func:`~spgnn.plan.events.nnz_per_rank_3d` counts (tested equal to a run's shards).
* ``rank_configs`` prices the options on the 3d candidates only.
"""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.io import sbm
from spgnn.partition import double_permutation
from spgnn.plan.model import Calibration, candidate_configs, predict_epoch, rank_configs
from spgnn.plan.events import nnz_per_rank_3d, plan_gcn_3d
from spgnn.testing.gnn_reference import normalize_adjacency

CAL = Calibration(comm={"default": (1e-6, 1e-9), "allreduce": (3e-6, 2e-9)},
                  spmm=(1e-5, 2e-9, 3e-9, 4e-10, 1e-10), gemm=(2e-6, 1e-11, 5e-10))


def _clustered(n=96, seed=0):
    """Four communities in the input order: the diagonal blocks hold most entries."""
    adj, _, _ = sbm(n, 4, avg_degree=8, num_features=2, seed=seed)
    return sp.csr_array(normalize_adjacency(adj))


def _by_label(plan, label):
    return [e for _, _, e in plan if e.label == label]


def test_blocked_aggregation_events_by_hand():
    n, dims, grid, k = 96, [8, 16, 16, 4], (2, 2, 2), 4
    plain = plan_gcn_3d(n, dims, grid)
    blocked = plan_gcn_3d(n, dims, grid, agg_blocks=k)
    p, q = _by_label(plain, "spmm-3d:allreduce"), _by_label(blocked, "spmm-3d:allreduce")
    assert len(q) == k * len(p)
    # every other event is untouched, in order
    assert [(e.op, e.label) for _, _, e in blocked if e.label != "spmm-3d:allreduce"] == \
        [(e.op, e.label) for _, _, e in plain if e.label != "spmm-3d:allreduce"]
    for ev in (lambda e: e.sent, lambda e: e.recv):
        np.testing.assert_array_equal(sum(ev(e) for e in q), sum(ev(e) for e in p))
    # 48 rows per block, chunks of 12 (aligned to the group of 2): all non-empty, so every
    # rank sends 2*ceil(log2 2) = 2 messages per chunk, K times the unblocked all-reduce's
    assert all((e.messages == 2).all() for e in p + q)
    # one chunk by hand: 12 rows x (width 8 / G_i = 4 columns) over 2 ranks, float32
    assert int(q[0].sent[0]) == 2 * (12 * 4 - 12 * 4 // 2) * 4
    # more chunks than rows / group size: the empty chunks' all-reduces send nothing
    tiny = _by_label(plan_gcn_3d(10, [4, 4, 2], (2, 1, 1), agg_blocks=8), "spmm-3d:allreduce")
    assert len(tiny) == 16 and sum(int(e.messages.max()) for e in tiny[:8]) == 5 * 2
    with pytest.raises(ValueError, match="agg_blocks"):
        plan_gcn_3d(10, [4, 4, 2], (2, 1, 1), agg_blocks=0)


def test_blocked_aggregation_prediction():
    a = _clustered()
    dims, grid, k = [8, 16, 16, 4], (2, 2, 2), 3
    plain = predict_epoch(a, "3d", 8, dims, CAL, grid=grid)
    blocked = predict_epoch(a, "3d", 8, dims, CAL, grid=grid, agg_blocks=k)
    ar = [s for s in plain.steps if s.name == "spmm-3d:allreduce"]
    br = [s for s in blocked.steps if s.name == "spmm-3d:allreduce"]
    assert sum(s.nbytes for s in br) <= sum(s.nbytes for s in ar) and len(br) == k * len(ar)
    assert sum(int(s.rank_bytes.sum()) for s in br) == sum(int(s.rank_bytes.sum()) for s in ar)
    # α: K times the messages; β: the same bytes (even chunks: each max is 1/K of the whole)
    alpha, beta = CAL.comm["allreduce"]
    assert sum(s.seconds for s in br) == pytest.approx(
        k * sum(alpha * s.messages for s in ar) + sum(beta * s.nbytes for s in ar))
    spmm = [s.seconds for s in plain.steps if s.name.startswith("spmm") and s.kind == "compute"]
    got = [s.seconds for s in blocked.steps if s.name.startswith("spmm") and s.kind == "compute"]
    assert got == pytest.approx([t + (k - 1) * CAL.spmm[0] for t in spmm])
    assert blocked.seconds > plain.seconds
    assert blocked.to_dict()["agg_blocks"] == k and plain.to_dict()["permute"] == "none"


def test_double_permutation_prices_the_permuted_shards():
    a = _clustered()
    dims, grid = [8, 16, 16, 16], (2, 2, 2)       # aggregate-first layers: Plexus's roles
    dp = double_permutation(a, seed=3)
    plain = predict_epoch(a, "3d", 8, dims, CAL, grid=grid)
    double = predict_epoch(a, "3d", 8, dims, CAL, grid=grid, permutation=dp)
    for pred, perm in ((plain, None), (double, dp)):
        z = nnz_per_rank_3d(a, grid, 3, permutation=perm)
        fwd = [s.seconds for s in pred.steps if s.name == "spmm"]
        width = [math.ceil(w / 2) for w in dims[:-1]]
        assert fwd == pytest.approx([max(CAL.spmm_seconds(48, int(v), width[layer])
                                         for v in z[layer]) for layer in range(3)])
    # the communication does not move (dense all-reduces), the slowest rank's SpMM does
    assert [(s.name, s.nbytes, s.messages) for s in double.steps if s.kind != "compute"] == \
        [(s.name, s.nbytes, s.messages) for s in plain.steps if s.kind != "compute"]
    assert double.split()[0] < plain.split()[0]
    assert double.to_dict()["permute"] == "double"


def test_rank_configs_prices_the_options_on_3d_only():
    a = _clustered()
    dims = [8, 16, 4]
    ranked = rank_configs(a, 4, dims, CAL, agg_blocks=2,
                          permutation_for=lambda m: double_permutation(m, 0))
    assert len(ranked) == len(candidate_configs(4))
    for r in ranked:
        d = r.to_dict()
        if r.algorithm == "3d":
            assert (d["permute"], d["agg_blocks"]) == ("double", 2)
            want = predict_epoch(a, "3d", 4, dims, CAL, grid=r.grid, agg_blocks=2,
                                 permutation=double_permutation(a, 0))
            assert r.seconds == pytest.approx(want.seconds)
        else:
            assert "permute" not in d
            assert r.seconds == pytest.approx(predict_epoch(
                a, r.algorithm, 4, dims, CAL, replication=r.replication).seconds)
