"""The minibatch memory model's formulas (issue 37 item 4; spgnn.plan.memory_minibatch)."""

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.plan.memory import hec_cache_bytes
from spgnn.plan.memory_minibatch import (frontier_bound, halo_counts, halo_held_bytes,
                                         hec_resident_bytes, hec_ring_rows, label_itemsize,
                                         sage_dims, sage_peak_bytes, setup_bytes)


def _pattern(n=40, seed=0):
    rng = np.random.default_rng(seed)
    a = sp.random(n, n, density=0.1, random_state=rng, format="csr")
    a = ((a + a.T) != 0).astype(np.float64)
    a.setdiag(0)
    a.eliminate_zeros()
    return sp.csr_array(a)


TRAIN = np.arange(40) % 3 == 0


def _counts(sharded=False):
    a = _pattern()
    return a, halo_counts(a, [0, 15, 40], TRAIN, 6, 3, sharded=sharded)


def test_counts_are_the_rows_halos_and_exchange_of_each_rank():
    a, c = _counts(sharded=True)
    for r, (lo, hi) in enumerate([(0, 15), (15, 40)]):
        block = a[lo:hi]
        cols = np.unique(block.indices)
        assert c.view_nnz[r] == block.nnz
        assert c.halos[r] == np.count_nonzero((cols < lo) | (cols >= hi))
        assert c.train[r] == np.count_nonzero(TRAIN[lo:hi])
    # two ranks: each sends what the other receives
    assert c.eval_sent[0] == c.eval_recv[1] and c.eval_sent[1] == c.eval_recv[0]


def test_frontier_bound_grows_by_the_fanout_and_stops_at_n():
    assert frontier_bound(4, (3, 2), 1000) == [(4, 16, 12), (16, 48, 32)]
    assert frontier_bound(4, (3, 2), 20) == [(4, 16, 12), (16, 20, 32)]


def test_the_ring_is_one_epoch_of_receives_or_the_capacity():
    assert hec_ring_rows(10, 4, capacity=1000) == 50
    assert hec_ring_rows(10, 4, capacity=20) == 20
    assert hec_ring_rows(10, 4, capacity=None) == 50
    assert hec_ring_rows(10, 4, capacity=1000, reset="never") == 1000


def test_hec_counts_the_caches_and_their_tables():
    _, c = _counts()
    dims = sage_dims(6, 5, 3, 2)
    off = halo_held_bytes(c, dims, hec="off", batch_size=4)
    on = halo_held_bytes(c, dims, hec="on", batch_size=4, planned=False)
    steps = max(-(-int(t) // 4) for t in c.train)
    for r in range(2):
        cs = hec_ring_rows(c.halos[r], steps)
        assert on["hec"][r] == (hec_cache_bytes(c.n, cs, dims[:2]) + c.rows[r] * 2
                                + c.halos[r] * 8)
        assert off["hec"][r] == 0
    # --hec-reset never fills the whole ring across epochs: resident = allocated
    assert (hec_resident_bytes(c, dims, batch_size=4, hec_capacity=50, hec_reset="never")
            == hec_cache_bytes(c.n, 50, dims[:2])).all()
    # the resident estimate never exceeds the allocation
    assert (hec_resident_bytes(c, dims, batch_size=4)
            <= np.array([hec_cache_bytes(c.n, hec_ring_rows(h, steps), dims[:2])
                         for h in c.halos])).all()


def test_parameters_are_two_weights_and_a_bias_per_layer_four_times():
    _, c = _counts()
    held = halo_held_bytes(c, [6, 5, 3], hec="none")
    assert (held["parameters"] == 4 * 4 * (2 * 6 * 5 + 5 + 2 * 5 * 3 + 3)).all()


def test_the_peak_adds_the_caches_resident_pages_and_grows_with_the_batch():
    _, c = _counts()
    dims = sage_dims(6, 5, 3, 2)
    off = sage_peak_bytes(c, dims, (3, 2), 4, hec="off", baseline=0)
    on = sage_peak_bytes(c, dims, (3, 2), 4, hec="on", baseline=0)
    assert on["peak"] > off["peak"] and off["hec_resident"] == [0, 0]
    assert off["peak"] == max(max(s, sum(v[r] for v in off["held"].values())
                                  + max(off["iteration"][r], off["evaluation"][r]))
                              for r, s in enumerate(off["setup"]))
    small, big = (sage_peak_bytes(c, [600, 500, 3], (3, 2), b, hec="off", baseline=0)
                  for b in (2, 30))
    assert max(big["iteration"]) > max(small["iteration"])


def test_setup_is_the_own_rows_term_and_rank_0_loads_the_whole_graph_in_memory():
    from spgnn.plan.memory import SETUP_BYTES_PER_NNZ, SETUP_FIXED_BYTES
    from spgnn.plan.memory_minibatch import (SETUP_BYTES_PER_ROOT_NNZ,
                                             SETUP_HALO_ROOT_BYTES_PER_FEATURE,
                                             SETUP_HALO_ROOT_BYTES_PER_NNZ,
                                             SETUP_ROOT_BYTES_PER_FEATURE,
                                             SETUP_SHARD_BYTES_PER_NNZ)

    a, mem = _counts()
    _, shards = _counts(sharded=True)
    own = SETUP_FIXED_BYTES + SETUP_SHARD_BYTES_PER_NNZ * np.array([a[:15].nnz, a[15:].nnz])
    # partitioned: every rank builds from its rows; in memory rank 0 also loads the graph
    assert np.allclose(setup_bytes(shards, "off"), own)
    assert np.allclose(setup_bytes(mem, "on"), own + [SETUP_HALO_ROOT_BYTES_PER_NNZ * a.nnz
                                                      + SETUP_HALO_ROOT_BYTES_PER_FEATURE * 240, 0])
    # replicated: the whole pattern is broadcast to every rank
    whole = SETUP_FIXED_BYTES + SETUP_BYTES_PER_NNZ["1d"] * a.nnz
    root = SETUP_BYTES_PER_ROOT_NNZ * a.nnz + SETUP_ROOT_BYTES_PER_FEATURE * 240
    assert np.allclose(setup_bytes(mem, None), [whole + root, whole])


def test_training_labels_take_the_smallest_integer_of_the_classes():
    assert [label_itemsize(c) for c in (1, 47, 128, 129, 32768, 32769, 2 ** 31 + 1)] == \
        [1, 1, 1, 2, 2, 4, 8]


def test_train_refuses_a_sage_run_over_the_memory_limit_on_every_rank():
    from spgnn.comm import run_loopback
    from spgnn.gnn.config import TrainConfig

    def run(comm):
        cfg = TrainConfig(graph="sbm:200:4:0", model="sage", hec="on", partition="random",
                          fanout="3,2", batch_size=16, hidden=4, epochs=1, backend="numpy",
                          memory_limit="1M")
        g = cfg.load_graph() if comm.rank == 0 else None
        try:
            cfg.build(comm, g)
        except ValueError as exc:
            return str(exc)
        return None

    got = run_loopback(2, run)
    assert got[0] == got[1] and "--hec on: predicted per-rank peak" in got[0]
    assert "exceeds --memory-limit 1,048,576 bytes" in got[0]


def test_plan_memory_model_sage_prints_the_peak(capsys):
    from spgnn.__main__ import main

    main(["plan", "--memory", "--model", "sage", "--graph", "sbm:200:4:0", "--partition",
          "random", "--ranks", "2", "--hec", "on", "--fanout", "3,2", "--json"])
    import json
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["sage_memory"][0]
    assert rec["ranks"] == 2 and rec["peak"] == max(rec["per_rank"]) > 0
    assert rec["held"]["hec"][0] > rec["hec_resident"][0] > 0
    assert main(["plan", "--model", "sage", "--graph", "sbm:200:4:0"]) == 2
    assert "--model sage applies with --memory" in capsys.readouterr().err


def test_train_refuses_partitioned_bulk_sampling_over_the_memory_limit_on_every_rank():
    from spgnn.comm import run_loopback
    from spgnn.gnn.config import TrainConfig

    def run(comm):
        cfg = TrainConfig(graph="sbm:200:4:0", model="sage", partition_mode="partitioned",
                          replication=2, fanout="3,2", batch_size=16, hidden=4, epochs=1,
                          backend="numpy", memory_limit="1M")
        g = cfg.load_graph() if comm.rank == 0 else None
        try:
            cfg.build(comm, g)
        except ValueError as exc:
            return str(exc)
        return None

    got = run_loopback(2, run)
    assert got[0] == got[1] and "(partitioned sampling): predicted per-rank peak" in got[0]
    assert "exceeds --memory-limit 1,048,576 bytes" in got[0]
