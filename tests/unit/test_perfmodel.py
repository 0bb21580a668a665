"""The performance model: exact arithmetic, exact bytes against the ledger, fits, calibration files."""

import json
import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st

from spgnn import run_loopback
from spgnn.errors import CalibrationError, GridError
from spgnn.plan.events import pair_rows
from spgnn.gnn import GCN, Adam, DistGraph, Trainer, placement_for
from spgnn.io import Graph, sbm
from spgnn.plan.model import (DEFAULT_CALIBRATION, FORMAT, Calibration, candidate_configs,
                             fit_comm, fit_gemm, fit_spmm, kind_of, load_calibration,
                             local_work, predict_epoch, rank_configs)
from spgnn.testing.gnn_reference import normalize_adjacency

CAL = Calibration(comm={"default": (1e-6, 1e-9), "allreduce": (3e-6, 2e-9)},
                  spmm=(1e-5, 2e-9, 3e-9, 4e-10, 1e-10), gemm=(2e-6, 1e-11, 5e-10))


def test_arithmetic_by_hand():
    assert CAL.comm_seconds("allreduce", 4, 1000) == pytest.approx(4 * 3e-6 + 1000 * 2e-9)
    assert CAL.comm_seconds("alltoallv", 3, 500) == pytest.approx(3e-6 + 500e-9)
    assert CAL.spmm_seconds(100, 1000, 16) == pytest.approx(1e-5 + 2e-9 * 16000 + 3e-6 + 4e-10 * 1600)
    # 2**16 rows x 16 x 4 bytes = 16 x the cache: 4 more doublings of nnz*f at 1e-10
    assert CAL.spmm_seconds(1 << 16, 1000, 16) == pytest.approx(
        1e-5 + 2e-9 * 16000 + 3e-6 + 4e-10 * 16 * (1 << 16) + 1e-10 * 16000 * 4)
    # 2mkn = 2*10*20*30 flops, 4*(200 + 600 + 300) bytes
    assert CAL.gemm_seconds(10, 20, 30) == pytest.approx(2e-6 + 1e-11 * 12000 + 5e-10 * 4400)
    assert [kind_of(o) for o in ("allgatherv", "alltoall:counts", "allreduce:split", "send")] == \
        ["allgather", "alltoall", "allreduce", "default"]


def test_local_work_counts_blocks():
    a = sp.csr_array(np.array([[1, 1, 0, 0], [0, 1, 0, 1], [1, 0, 1, 0], [0, 0, 0, 1]]))
    rows, nnz = local_work(a, "1d", 2)
    assert rows.tolist() == [2, 2] and nnz.tolist() == [4, 3]
    rows, nnz = local_work(a, "15d", 4, replication=2)      # rank i*2+j: row block i, slab j
    assert rows.tolist() == [2, 2, 2, 2] and nnz.tolist() == [3, 1, 1, 2]
    rows, nnz = local_work(a, "3d", 4, grid=(2, 1, 2))      # layer 0: (d, o) = (z, x) blocks
    assert rows.tolist() == [2, 2, 2, 2] and nnz.tolist() == [3, 1, 1, 2]


def _graph(n=40, f=8, seed=0):
    adj, x, y = sbm(n, 3, avg_degree=4, num_features=f, seed=seed)
    return Graph(adj=adj, features=x, labels=y).random_split(0.6, 0.2, seed=seed)


@pytest.mark.parametrize("algo,p,c", [("1d", 3, 1), ("1d-aware", 4, 1), ("15d", 4, 2),
                                      ("15d-aware", 4, 2), ("1d-aware", 1, 1)])
def test_epoch_communication_equals_ledger(algo, p, c):
    """Every SpMM and dW all-reduce of a real epoch: each rank's bytes and messages, exact."""
    graph, hidden = _graph(), 16         # layer 0 aggregates first (8 -> 16), layer 1 transforms

    def body(comm):
        placement = placement_for(algo, c=c if algo.startswith("15d") else None)
        dg = DistGraph.from_graph(graph, comm, placement)
        model = GCN(dg.num_features, hidden, dg.num_classes, layers=2, dropout=0.0)
        trainer = Trainer(model, dg, Adam(model.param_groups(0), lr=0.01))
        with comm.track("epoch") as st:
            trainer.train_epoch()
        return [(e.op, e.bytes_sent, e.bytes_recv, e.messages) for e in st.events
                if e.label.startswith("spmm") or e.label.endswith("allreduce-dW")]

    per_rank = run_loopback(p, body)
    dims = [graph.features.shape[1], hidden, int(graph.labels.max()) + 1]
    pred = predict_epoch(normalize_adjacency(graph.adj), algo, p, dims, CAL, replication=c)
    comm_steps = [s for s in pred.steps if s.kind != "compute"]
    for r, events in enumerate(per_rank):
        for op in {e[0] for e in events} | {s.kind for s in comm_steps}:
            ledger = [sum(max(e[1], e[2]) for e in events if e[0] == op),
                      sum(e[3] for e in events if e[0] == op)]
            planned = [sum(int(s.rank_bytes[r]) for s in comm_steps if s.kind == op),
                       sum(int(s.rank_messages[r]) for s in comm_steps if s.kind == op)]
            assert planned == ledger, (r, op)
    assert pred.seconds == pytest.approx(sum(s.seconds for s in pred.steps))
    for s in comm_steps:        # the slowest rank's alpha-beta time
        assert s.seconds == pytest.approx(max(CAL.comm_seconds(s.kind, m, b) for b, m
                                              in zip(s.rank_bytes, s.rank_messages)))


def test_time_structure():
    """More latency or less bandwidth never makes an epoch faster; P = 1 has no communication."""
    a = normalize_adjacency(_graph(200).adj)
    dims = [32, 16, 4]
    p1 = predict_epoch(a, "1d-aware", 1, dims, CAL)
    assert p1.split()[1] == 0
    slow = Calibration({"default": (1e-4, 1e-8)}, CAL.spmm, CAL.gemm)
    for algo, c, grid in candidate_configs(8):
        fast = predict_epoch(a, algo, 8, dims, CAL, replication=c, grid=grid)
        assert predict_epoch(a, algo, 8, dims, slow, replication=c, grid=grid).seconds >= \
            fast.seconds
        assert fast.split()[0] > 0
    # wider features cost more everywhere
    for algo, c, grid in candidate_configs(4):
        narrow = predict_epoch(a, algo, 4, dims, CAL, replication=c, grid=grid).seconds
        wide = predict_epoch(a, algo, 4, [64, 32, 4], CAL, replication=c, grid=grid).seconds
        assert wide > narrow


def test_3d_bytes_are_the_planned_epoch():
    """3d's steps carry plan_gcn_3d's events (tested equal to the ledger), summed per rank."""
    from spgnn.plan.events import plan_gcn_3d

    a = normalize_adjacency(_graph(64).adj)
    for grid in ((2, 2, 2), (1, 2, 4), (4, 2, 1)):
        pred = predict_epoch(a, "3d", 8, [16, 8, 4], CAL, grid=grid, itemsize=4)
        events = plan_gcn_3d(64, [16, 8, 4], grid, itemsize=4)
        comm = [s for s in pred.steps if s.kind != "compute"]
        assert sorted((s.layer, s.phase, s.name, s.nbytes, s.messages) for s in comm) == \
            sorted((layer, phase, e.label, int(np.maximum(e.sent, e.recv).max()),
                    int(e.messages.max())) for layer, phase, e in events)
    with pytest.raises(GridError):
        predict_epoch(a, "3d", 8, [16, 8, 4], CAL, grid=(2, 2, 1))
    with pytest.raises(GridError):
        predict_epoch(a, "15d", 8, [16, 8, 4], CAL, replication=3)


def test_ranking_is_sorted_and_deterministic():
    a = normalize_adjacency(_graph(120).adj)
    ranked = rank_configs(a, 8, [16, 16, 4], CAL)
    times = [p.seconds for p in ranked]
    assert times == sorted(times)
    assert len(ranked) == len(candidate_configs(8))
    assert [p.label for p in rank_configs(a, 8, [16, 16, 4], CAL)] == [p.label for p in ranked]
    # with free communication the fewest local flops win: never 1 x 8 x 1-style full replication
    free = Calibration({"default": (0.0, 0.0)}, CAL.spmm, CAL.gemm)
    best = rank_configs(a, 8, [16, 16, 4], free)[0]
    assert best.split()[1] == 0


def test_fits_recover_the_model():
    rng = np.random.default_rng(0)
    true_spmm, true_gemm = (4e-6, 1.5e-9, 2e-9, 3e-10, 2e-10), (3e-6, 2e-11, 4e-10)
    cal = Calibration({"default": (0, 0)}, true_spmm, true_gemm)
    spmm_samples = [(m, z, f, cal.spmm_seconds(m, z, f))
                    for m, z, f in zip(rng.integers(10, 10**5, 30), rng.integers(10, 10**6, 30),
                                       rng.choice([4, 16, 64, 128], 30))]
    gemm_samples = [(m, k, n, cal.gemm_seconds(m, k, n))
                    for m, k, n in rng.integers(2, 2000, (30, 3))]
    np.testing.assert_allclose(fit_spmm(spmm_samples), true_spmm, rtol=1e-6)
    np.testing.assert_allclose(fit_gemm(gemm_samples), true_gemm, rtol=1e-6)
    comm = [(op, m, b, a + m + be * b) for op, a, be in (("allreduce", 0, 1e-9),
                                                           ("alltoallv", 0, 3e-9))
            for m, b in ((1, 8), (2, 1 << 20), (1, 1 << 12), (2, 1 << 22))]
    comm = [(op, m, b, m * 2e-6 + b * (1e-9 if op == "allreduce" else 3e-9))
            for op, m, b, _ in comm]
    got = fit_comm(comm)
    np.testing.assert_allclose(got["allreduce"], (2e-6, 1e-9), rtol=1e-6)
    np.testing.assert_allclose(got["alltoall"], (2e-6, 3e-9), rtol=1e-6)
    with pytest.raises(CalibrationError):
        fit_comm([("allreduce", 1, 8, 1e-6)])
    with pytest.raises(CalibrationError):
        fit_spmm(spmm_samples[:2])


def test_calibration_file_round_trip_and_bad_files(tmp_path, monkeypatch):
    path = tmp_path / "cal.json"
    CAL.save(path)
    assert Calibration.load(path) == CAL
    monkeypatch.setenv("SPGNN_CALIBRATION", str(tmp_path / "absent.json"))
    assert load_calibration() is DEFAULT_CALIBRATION
    monkeypatch.setenv("SPGNN_CALIBRATION", str(path))
    assert load_calibration() == CAL
    good = CAL.to_dict()
    bad = {"not json": "{", "wrong format": json.dumps({**good, "format": "x"}),
           "negative": json.dumps({**good, "spmm": [1, -1, 0, 0, 0]}),
           "nan": json.dumps({**good, "gemm": [1, math.nan, 0]}),
           "short": json.dumps({**good, "gemm": [1, 2]}),
           "kind": json.dumps({**good, "comm": {**good["comm"], "gossip": [1, 1]}}),
           "no default": json.dumps({**good, "comm": {"allreduce": [1, 1]}}),
           "missing": json.dumps({"format": FORMAT, "comm": good["comm"]}),
           "array": "[1, 2]"}
    for name, text in bad.items():
        p = tmp_path / f"{name}.json"
        p.write_text(text)
        with pytest.raises(CalibrationError, match="cal|calibration") as err:
            Calibration.load(p)
        assert str(p) in str(err.value), name
    with pytest.raises(CalibrationError, match="cannot read"):
        load_calibration(tmp_path / "nope.json")


def test_gemm_table_interpolates_rates():
    rate = 50e9                                    # every measured shape ran at 50 GFLOP/s
    shapes = [(1000, 16, 16), (1000, 128, 128), (8000, 32, 8), (64, 4000, 64), (512, 512, 512)]
    table = tuple((m, k, n, 2 * m * k * n / rate) for m, k, n in shapes)
    cal = Calibration(CAL.comm, CAL.spmm, CAL.gemm, gemm_table=table)
    assert cal.gemm_seconds(3000, 40, 7) == pytest.approx(2 * 3000 * 40 * 7 / rate)
    assert cal.gemm_seconds(2, 2, 2) == pytest.approx(min(t for *_, t in table))   # the floor
    assert cal.gemm_seconds(0, 5, 5) == 0.0
    # a faster neighbourhood is predicted faster
    fast = Calibration(CAL.comm, CAL.spmm, CAL.gemm,
                       gemm_table=table[:-1] + ((512, 512, 512, table[-1][3] / 4),))
    assert fast.gemm_seconds(400, 400, 400) < cal.gemm_seconds(400, 400, 400)
    assert Calibration.from_dict(cal.to_dict()) == cal
    for row in ([1, 2, 3], [1, 2, 0, 1e-3], [1, 2, 3, -1]):
        with pytest.raises(CalibrationError, match="gemm_table"):
            Calibration(CAL.comm, CAL.spmm, CAL.gemm, gemm_table=(row,))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(1, 40), st.floats(0, 1), st.integers(1, 6), st.integers(0, 2**16))
def test_pair_rows_counts_distinct_columns_per_block(n, density, k, seed):
    """The stamp-array pair_rows equals counting distinct (row block, column) pairs by sorting."""
    rng = np.random.default_rng(seed)
    a = sp.random_array((n, n), density=density, format="csr", rng=rng)
    offsets = np.sort(np.concatenate([[0, n], rng.integers(0, n + 1, k - 1)]))
    part = np.searchsorted(offsets, np.arange(n), side="right") - 1
    coo = sp.coo_array(a)
    pairs = np.unique(np.stack([part[coo.row], coo.col]), axis=1)
    want = np.zeros((k, k), dtype=np.int64)
    np.add.at(want, (pairs[0], part[pairs[1]]), 1)
    np.fill_diagonal(want, 0)
    assert (pair_rows(a, offsets) == want).all()
