"""The memory model's counts against the arrays they count (issue 37 item 4)."""

import numpy as np
import scipy.sparse as sp

from spgnn.plan.memory import peak_bytes, resident_bytes, within_limit
from spgnn.plan.model import rank_configs


def _graph(n=60, seed=0):
    rng = np.random.default_rng(seed)
    a = sp.random(n, n, density=0.08, random_state=rng, format="csr")
    a = (a + a.T + sp.eye(n)).tocsr()
    return sp.csr_array(a)


def _csr_bytes(m):
    m = sp.csr_array(m)
    return (m.indices.astype(np.int32).nbytes + m.data.astype(np.float32).nbytes
            + m.indptr.astype(np.int32).nbytes)


def test_1d_graph_blocks_are_the_row_blocks_without_a_transpose():
    # Â is symmetric: the backward pass multiplies by the same block (the trainer's
    # arrays: tests/test_memory_tracemalloc.py)
    a = _graph()
    preds = {p.algorithm: p for p in rank_configs(a, 4, [8, 5, 3])}
    res = resident_bytes(a, preds["1d"], [8, 5, 3])
    off = np.linspace(0, a.shape[0], 5).astype(int)
    for r in range(4):
        block = a[off[r]:off[r + 1]]
        assert res["graph"][r] == _csr_bytes(block)
        rows = block.shape[0]     # saved inputs (8 + 5 wide), a dropout mask, the outputs (5 + 3)
        assert res["activations"][r] == rows * (8 + 5) * 4 + rows * 5 + rows * (5 + 3) * 4


def test_parameters_are_weights_gradients_and_two_adam_moments():
    # spgnn's GCN has no bias
    a = _graph()
    p = rank_configs(a, 2, [8, 5, 3])[0]
    res = resident_bytes(a, p, [8, 5, 3])
    assert (res["parameters"] == (8 * 5 + 5 * 3) * 4 * 4).all()


def test_within_limit_keeps_the_ranking_and_drops_what_does_not_fit():
    a = _graph()
    ranked = rank_configs(a, 4, [8, 5, 3])
    peaks = [peak_bytes(a, p, [8, 5, 3], baseline=0) for p in ranked]
    limit = sorted(peaks)[len(peaks) // 2]
    kept = within_limit(ranked, limit, a=a, dims=[8, 5, 3], baseline=0)
    assert [p for p, _ in kept] == [p for p, k in zip(ranked, peaks) if k <= limit]
    assert all(k <= limit for _, k in kept)
    assert within_limit(ranked, 0, a=a, dims=[8, 5, 3], baseline=0) == []


def test_parse_bytes_accepts_suffixes_and_refuses_the_rest():
    import pytest

    from spgnn.plan.memory import parse_bytes

    assert parse_bytes("2G") == 2 * 2 ** 30
    assert parse_bytes("500M") == 500 * 2 ** 20
    assert parse_bytes("1234") == 1234
    for bad in ("lots", "0", "-1G"):
        with pytest.raises(ValueError, match="--memory-limit"):
            parse_bytes(bad)


def test_choose_skips_what_does_not_fit_and_refuses_when_nothing_does():
    from types import SimpleNamespace

    import spgnn
    from spgnn.plan.choose import aggregation_pattern, choose

    g = SimpleNamespace(adj=_graph(80))
    dims = [8, 5, 3]
    a = aggregation_pattern(g.adj)
    peaks = sorted({peak_bytes(a, p, dims) for p in rank_configs(a, 2, dims)})
    assert len(peaks) > 1

    def fn(comm, limit):
        try:
            return choose(comm, g if comm.rank == 0 else None, dims, memory_limit=limit)[3]
        except ValueError as exc:
            return str(exc)

    top = spgnn.run_loopback(2, fn, peaks[0])
    assert top[0] == top[1]
    assert all(r["memory_peak_bytes"] <= peaks[0] for r in top[0])
    assert top[0][0]["memory_skipped"]
    msgs = spgnn.run_loopback(2, fn, peaks[0] - 1)
    assert all("no configuration fits" in m for m in msgs)


def test_within_limit_refuses_to_keep_unpriced_predictions():
    import pytest

    a = _graph()
    with pytest.raises(ValueError, match="dims"):
        within_limit(rank_configs(a, 2, [8, 5, 3]), 10 ** 12)


def test_default_limit_is_host_memory_over_the_ranks_on_this_host(monkeypatch):
    import spgnn
    from spgnn.plan.host import default_memory_limit, memory_limit_bytes, ranks_on_host

    monkeypatch.setenv("SPGNN_HOST_MEMORY", str(12 * 2 ** 30))

    def fn(comm):       # loopback ranks are threads of one process: all on this host
        return (ranks_on_host(comm), default_memory_limit(comm), memory_limit_bytes(comm, None),
                memory_limit_bytes(comm, "none"), memory_limit_bytes(comm, "1G"))

    assert spgnn.run_loopback(3, fn) == [(3, 4 * 2 ** 30, 4 * 2 ** 30, None, 2 ** 30)] * 3


def test_train_auto_applies_the_default_limit_and_none_turns_it_off(monkeypatch):
    import spgnn
    from spgnn.gnn.config import TrainConfig

    opts = dict(graph="rmat:7:6:3", features="random:5", labels="random:3", epochs=1, hidden=4,
                backend="numpy")

    def fn(comm, limit):
        cfg = TrainConfig(**opts, memory_limit=limit)
        g = cfg.load_graph() if comm.rank == 0 else None
        try:
            return cfg.build(comm, g).auto
        except ValueError as exc:
            return str(exc)

    monkeypatch.setenv("SPGNN_HOST_MEMORY", str(2 * 2 ** 30))     # 1 GiB a rank: fits
    fits = spgnn.run_loopback(2, fn, None)
    assert fits[0] == fits[1] and all(0 < r["memory_peak_bytes"] <= 2 ** 30 for r in fits[0])
    monkeypatch.setenv("SPGNN_HOST_MEMORY", str(2 * 10 ** 6))     # 1 MB a rank: nothing fits
    assert all("no configuration fits" in m and "--memory-limit none" in m
               and "the default, this host's memory" in m for m in spgnn.run_loopback(2, fn, None))
    off = spgnn.run_loopback(2, fn, "none")
    assert all("memory_peak_bytes" not in r for r in off[0])


def test_an_explicit_algo_on_a_generator_spec_is_priced_from_the_rows():
    import spgnn
    from spgnn.gnn.config import TrainConfig

    opts = dict(graph="rmat:7:6:3", features="random:5", labels="random:3", epochs=1, hidden=4,
                backend="numpy")

    def fn(comm, algo, limit):
        try:          # no rank loads the graph: each draws its rows, the counts are gathered
            b = TrainConfig(**opts, algo=algo, memory_limit=limit).build(comm, None)
            return b.trainer.train_epoch()["loss"] > 0
        except ValueError as exc:
            return str(exc)

    for algo in ("1d-aware", "15d-aware", "3d"):
        assert spgnn.run_loopback(4, fn, algo, "4G") == [True] * 4
        msgs = spgnn.run_loopback(4, fn, algo, "1M")
        assert all(m.startswith(f"--algo {algo}: ") and "does not fit in --memory-limit" in m
                   for m in msgs)


def test_plan_memory_on_a_shard_directory_prices_the_parts_blocks(tmp_path, capsys):
    import json

    from spgnn.__main__ import main
    from spgnn.gnn.data import part_blocks
    from spgnn.io import Graph, sbm
    from spgnn.io import shards as shard_io
    from spgnn.partition.to_shards import partition_to_shards
    from spgnn.plan.choose import aggregation_pattern
    from spgnn.plan.model import candidate_configs, load_calibration

    adj, x, y = sbm(48, 3, avg_degree=4, num_features=5, seed=1)
    g = Graph(adj=sp.csr_array(adj), features=x, labels=y).random_split(0.5, 0.2, seed=1)
    d = tmp_path / "k2"
    man = partition_to_shards(g, d, 2, "random", 3)
    assert main(["plan", "--graph", str(d), "--ranks", "4", "--time", "--memory", "--dims",
                 "5,8,3", "--alpha", "2e-6", "--beta", "1e-10", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["timed"][0]["ranking"]
    a = aggregation_pattern(shard_io.read_rows(d, man, 0, man["n"]).adj)

    def offsets_for(b):
        return a, part_blocks(man["offsets"], b)

    configs = [c for c in candidate_configs(4) if c[0] == "3d" or offsets_for(4 // c[1])[1]]
    ranked = rank_configs(a, 4, [5, 8, 3], load_calibration(), configs=configs,
                          offsets_for=offsets_for)
    want = within_limit(ranked, float("inf"), a=a, dims=[5, 8, 3], offsets_for=offsets_for)
    assert [r["memory_peak_bytes"] for r in got] == [peak for _, peak in want]
    assert len({r["memory_peak_bytes"] for r in got}) > 1


def test_codec_buffers_are_the_codes_and_parameters_a_quantized_exchange_holds():
    # train --quantize int4 on 1d-aware: the widest exchange (min(in, out) columns per
    # layer: 5 here) encodes the rows each rank sends and receives per peer
    from spgnn.backends import get_backend
    from spgnn.core.codec import make_codec
    from spgnn.plan.events import pair_rows

    a, dims = _graph(), [8, 5, 3]
    pred = [p for p in rank_configs(a, 3, dims) if p.algorithm == "1d-aware"][0]
    off = np.linspace(0, a.shape[0], 4).astype(int)
    r = pair_rows(a, off)                       # r[i, j]: rows rank i gets from rank j
    be, rng = get_backend("numpy"), np.random.default_rng(0)
    for quantize in ("int8", "int4", "int2"):
        codec = make_codec(quantize)
        res = resident_bytes(a, pred, dims, quantize=quantize)
        plain = resident_bytes(a, pred, dims)
        for i in range(3):
            held = 0
            for seg in (r[:, i], r[i, :]):      # what rank i sends, what it receives
                x = rng.standard_normal((int(seg.sum()), 5)).astype(np.float32)
                codes, params = codec.encode(be, x, seg, np.arange(x.shape[0]))
                held += codes.nbytes + params.nbytes
            assert held > 0 and res["codec"][i] == held
            assert res["total"][i] == plain["total"][i] + held
        assert not plain["codec"].any()
    # only 1d-aware exchanges are coded
    p1d = [p for p in rank_configs(a, 3, dims) if p.algorithm == "1d"][0]
    assert not resident_bytes(a, p1d, dims, quantize="int2")["codec"].any()
    assert peak_bytes(a, pred, dims, quantize="int8", baseline=0) >= peak_bytes(a, pred, dims,
                                                                                baseline=0)


def test_hec_cache_bytes_are_the_historical_caches_arrays():
    # train --hec on: one cache per level (level 0: the features), HECRunner's own count
    from spgnn.gnn.hec import HECConfig, HECRunner
    from spgnn.gnn.hec_cache import HistoricalCache
    from spgnn.plan.memory import hec_cache_bytes

    n, cs, dims = 50, 7, [12, 6]
    caches = [HistoricalCache(n, cs, d, 2, check_age=lv > 0) for lv, d in enumerate(dims)]
    held = sum(sum(x.nbytes for x in c.arrays) + c.read.nbytes for c in caches)
    assert hec_cache_bytes(n, cs, dims) == held
    runner = HECRunner(HECConfig(cs=cs))
    runner.dims, runner.levels, runner.dtype = dims, len(dims), np.float32
    assert runner.cache_bytes(n, cs) == held


def test_train_quantize_flows_into_the_pricing(monkeypatch):
    # an explicit --algo priced on a loaded graph (_check_memory) and on drawn rows
    # (choose_from_rows); its recorder of the counts needed prices without a codec
    import spgnn
    import spgnn.plan.memory as memory
    from spgnn.gnn.config import TrainConfig

    seen, real = [], memory.peak_bytes

    def peak(*a, **kw):
        seen.append(kw.get("quantize"))
        return real(*a, **kw)

    monkeypatch.setattr(memory, "peak_bytes", peak)
    opts = dict(graph="rmat:7:6:3", features="random:5", labels="random:3", epochs=1, hidden=4,
                backend="numpy", algo="1d-aware", quantize="int4", memory_limit="4G")

    def fn(comm, load):
        cfg = TrainConfig(**opts)
        cfg.build(comm, cfg.load_graph() if load and comm.rank == 0 else None)
        return True

    for load in (True, False):
        seen.clear()
        assert spgnn.run_loopback(2, fn, load) == [True] * 2
        assert "int4" in seen
