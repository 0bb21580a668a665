"""``--algo auto`` from the ranks' rows (:mod:`spgnn.plan.from_rows`), no rank holding Â.

On loopback ranks: the counts gathered from row blocks give every candidate
the same prediction, to the float, as the whole matrix (``choose()``'s
ranking); ``train`` on a generator spec or a shard directory ranks from the
rows and trains bit for bit like the whole-graph path.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.comm import run_loopback
from spgnn.errors import GridError
from spgnn.gnn.config import TrainConfig
from spgnn.gnn.data import part_blocks
from spgnn.io import Graph, sbm
from spgnn.io import shards as shard_io
from spgnn.partition.to_shards import partition_to_shards
from spgnn.plan.choose import _configs, aggregation_pattern, choose
from spgnn.plan.from_rows import choose_from_rows, gather_counts, needed_counts, pattern_rows
from spgnn.plan.model import load_calibration, rank_configs

DIMS = [5, 8, 3]


def _random_graph(n, m, seed):
    """A symmetric A with a few self-loops and a stored zero, and its Â pattern."""
    rng = np.random.default_rng(seed)
    r, c = rng.integers(0, n, m), rng.integers(0, n, m)
    raw = sp.csr_array((np.ones(m), (r, c)), shape=(n, n))
    raw = sp.csr_array(raw + raw.T)
    if raw.nnz:                               # a symmetric pair of stored zeros
        i, j = 0, raw.indices[0]
        raw.data[raw.indptr[i]:raw.indptr[i + 1]][raw.indices[raw.indptr[i]:raw.indptr[i + 1]]
                                                  == j] = 0
        raw.data[raw.indptr[j]:raw.indptr[j + 1]][raw.indices[raw.indptr[j]:raw.indptr[j + 1]]
                                                  == i] = 0
    return raw, aggregation_pattern(raw)


def _random_pattern(n, m, seed):
    return _random_graph(n, m, seed)[1]


def _dicts(preds):
    return [(p.to_dict(), [s.seconds for s in p.steps]) for p in preds]


@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("n,m,seed,cuts", [(37, 150, 0, "even"), (50, 400, 1, "random"),
                                           (7, 4, 2, "random")])
def test_every_candidate_priced_from_rows_as_from_the_whole_matrix(p, n, m, seed, cuts,
                                                                   monkeypatch):
    raw, a = _random_graph(n, m, seed)
    rng = np.random.default_rng(seed + 10 * p)
    off = (np.linspace(0, n, p + 1).astype(int) if cuts == "even" else
           np.concatenate([[0], np.sort(rng.integers(0, n + 1, p - 1)), [n]]))
    agg = 1 + seed % 2
    identity = bool((seed + p) % 2)          # rows of A (+ I counted) or of Â itself
    if seed == 1:
        monkeypatch.setattr("spgnn.plan.from_rows.RUN_CHUNK", 7)   # many row chunks
    configs = _configs(p, None, ())
    want = rank_configs(a, p, DIMS, load_calibration(), configs=configs, agg_blocks=agg)

    def fn(comm):
        lo, hi = int(off[comm.rank]), int(off[comm.rank + 1])
        rows = raw[lo:hi] if identity else a[lo:hi]
        counts = gather_counts(comm, rows, lo, n, needed_counts(n, p, DIMS, configs, agg),
                               add_identity=identity)
        return _dicts(rank_configs(counts, p, DIMS, load_calibration(), configs=configs,
                                   agg_blocks=agg))

    for got in run_loopback(p, fn):
        assert got == _dicts(want)


def test_pattern_rows_are_the_aggregation_patterns_rows():
    raw, a = _random_graph(30, 90, 4)
    for lo, hi in [(0, 30), (3, 17), (29, 30), (5, 5)]:
        got = pattern_rows(raw[lo:hi], lo)
        assert got.has_sorted_indices and (got != a[lo:hi]).nnz == 0


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_choose_from_rows_equals_choose_on_rmat(p):
    cfg = TrainConfig(graph="rmat:7:6:3", features="random:5", labels="random:3")
    g = cfg.load_graph()
    a = aggregation_pattern(g.adj)
    n = a.shape[0]
    off = np.linspace(0, n, p + 1).astype(int)

    def fn(comm):
        lo, hi = int(off[comm.rank]), int(off[comm.rank + 1])
        mine = choose_from_rows(comm, a[lo:hi], lo, n, DIMS)
        whole = choose(comm, g if comm.rank == 0 else None, DIMS)
        grid = choose_from_rows(comm, a[lo:hi], lo, n, DIMS, grid=f"1x1x{p}", agg_blocks=2)
        return mine, whole, grid, choose(comm, g if comm.rank == 0 else None, DIMS,
                                         grid=f"1x1x{p}", agg_blocks=2)

    for mine, whole, grid, whole_grid in run_loopback(p, fn):
        assert mine == whole and grid == whole_grid
    if p == 1:
        assert len(mine[3]) == 1                    # one rank: nothing ranked


def test_bad_rows_and_double_permutation_are_one_error_on_every_rank():
    a = _random_pattern(20, 60, 3)

    def fn(comm, lo, hi, **kw):
        try:
            choose_from_rows(comm, a[lo:hi], lo, 20, DIMS, **kw)
        except (ValueError, GridError) as exc:
            return type(exc).__name__, str(exc)
        return None

    for args, kw, what in [(lambda r: (0, 10), {}, "cover"),          # both ranks rows 0:10
                           (lambda r: (10 * r, 10 * r + 10), {"permute": "double"}, "whole"),
                           (lambda r: (10 * r, 10 * r + 10), {"grid": "3x1x1"}, "")]:
        got = run_loopback(2, lambda comm: fn(comm, *args(comm.rank), **kw))
        assert all(g is not None and what in g[1] for g in got), got


@pytest.mark.parametrize("p,algo", [(1, "auto"), (2, "auto"), (3, "auto"), (2, "15d")])
def test_train_auto_on_a_generator_spec_ranks_rows_like_the_whole_graph(p, algo):
    # p=3 chooses 3d and 15d-c=2 holds all rows: the rows are drawn again for the layout
    opts = {"algo": "15d", "replication": "auto"} if algo == "15d" else {}
    cfg = TrainConfig(graph="rmat:8:4:1", features="random:6", labels="random:3", epochs=2,
                      hidden=8, dtype="float64", **opts)
    assert cfg.generated

    def fn(comm):
        whole = cfg.load_graph() if comm.rank == 0 else None
        a = cfg.build(comm, whole)
        b = cfg.build(comm, None)              # every rank draws its own rows and ranks them
        la = [a.trainer.train_epoch()["loss"] for _ in range(2)]
        lb = [b.trainer.train_epoch()["loss"] for _ in range(2)]
        return a.auto, b.auto, a.config.algo, b.config.algo, la, lb

    for auto_a, auto_b, algo_a, algo_b, la, lb in run_loopback(p, fn):
        assert auto_a == auto_b and algo_a == algo_b
        assert la == lb


def test_train_auto_on_shards_ranks_the_shards_rows(tmp_path):
    adj, x, y = sbm(60, 3, avg_degree=5, num_features=7, seed=2)
    g = Graph(adj=sp.csr_array(adj), features=x, labels=y).random_split(0.5, 0.2, seed=2)
    d = tmp_path / "k2"
    man = partition_to_shards(g, d, 2, "random", 4)
    whole = shard_io.read_rows(d, man, 0, man["n"]).adj
    a = aggregation_pattern(whole)
    p = 4                                      # K = 2 parts cut into P = 4 blocks
    dims = [man["num_features"], 8, man["num_classes"]]
    configs = [c for c in _configs(p, None, ("1d", "1d-aware", "15d", "15d-aware", "3d"))
               if c[0] == "3d" or part_blocks(man["offsets"], p // c[1]) is not None]
    want = rank_configs(a, p, dims, load_calibration(), configs=configs,
                        offsets_for=lambda b: (a, part_blocks(man["offsets"], b)))
    cfg = TrainConfig(graph=str(d), epochs=2, hidden=8, dtype="float64")

    def fn(comm):
        b = cfg.build(comm, None)
        chosen = TrainConfig(graph=str(d), epochs=2, hidden=8, dtype="float64",
                             algo=b.config.algo, replication=b.config.replication,
                             grid=b.config.grid).build(comm, None)
        return (b.auto, [b.trainer.train_epoch()["loss"] for _ in range(2)],
                [chosen.trainer.train_epoch()["loss"] for _ in range(2)])

    for auto, la, lb in run_loopback(p, fn):
        # the default --memory-limit (host memory / ranks on it) prices the shards' blocks too
        assert all(r["memory_peak_bytes"] > 0 for r in auto)
        assert [{k: v for k, v in r.items() if not k.startswith("memory_")}
                for r in auto] == [w.to_dict() for w in want[:3]]
        assert la == lb


def test_plan_on_a_shard_directory_ranks_from_the_shards_rows(tmp_path, capsys):
    import json

    from spgnn.__main__ import main
    from spgnn.plan.events import plan_spmm
    from spgnn.plan.model import candidate_configs

    adj, x, y = sbm(48, 3, avg_degree=4, num_features=5, seed=1)
    g = Graph(adj=sp.csr_array(adj), features=x, labels=y).random_split(0.5, 0.2, seed=1)
    d = tmp_path / "k2"
    man = partition_to_shards(g, d, 2, "random", 3)
    assert main(["plan", "--graph", str(d), "--ranks", "2,3,4", "--time", "--dims", "5,8,3",
                 "--feat", "6", "--alpha", "2e-6", "--beta", "1e-10", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    whole = sp.csr_array(shard_io.read_rows(d, man, 0, man["n"]).adj != 0, dtype=np.float32)
    a = aggregation_pattern(whole)

    def blocks(b):
        return part_blocks(man["offsets"], b)

    # K=2 parts: at P=3 only 3d (even blocks of the shards' order) can place them
    assert [r["ranks"] for r in got["plans"]] == [2] * 5 + [3] + [4] * 5
    for row in got["plans"]:
        q, algo = row["ranks"], row["algorithm"]
        extra = ({"replication": 2} if algo.startswith("15d") else
                 {"grid": tuple(int(v) for v in row["grid"].split("x"))} if algo == "3d" else {})
        off = None if algo == "3d" else blocks(q // extra.get("replication", 1))
        assert row["collectives"] == plan_spmm(whole, algo, q, 6, offsets=off,
                                               **extra).to_dict()["collectives"]
    for entry in got["timed"]:
        q = entry["ranks"]
        configs = [c for c in candidate_configs(q) if c[0] == "3d" or blocks(q // c[1])]
        want = rank_configs(a, q, [5, 8, 3], load_calibration(), configs=configs,
                            offsets_for=lambda b: (a, blocks(b)))
        assert entry["ranking"] == [w.to_dict() for w in want]


def test_shard_parts_no_candidate_can_place_are_one_error_naming_the_fix(tmp_path):
    adj, x, y = sbm(40, 3, avg_degree=4, num_features=5, seed=3)
    g = Graph(adj=sp.csr_array(adj), features=x, labels=y).random_split(0.5, 0.2, seed=3)
    partition_to_shards(g, tmp_path / "k4", 4, "random", 1)

    def fn(comm, model):
        cfg = TrainConfig(graph=str(tmp_path / "k4"), model=model, epochs=1, hidden=4)
        try:
            return cfg.build(comm, None).config.algo
        except GridError as exc:
            return str(exc)

    # gat trains 1d/1d-aware only: 3 blocks of 4 parts cannot be; gcn can still take 3d
    assert all("re-partition with --parts 3" in e for e in run_loopback(3, fn, "gat"))
    assert set(run_loopback(3, fn, "gcn")) <= {"3d", "15d", "15d-aware"}


@pytest.mark.parametrize("p", [2, 3])
def test_memory_limit_from_rows_prices_like_the_whole_matrix(p):
    """The memory model reads the same counts: the peaks and the configurations skipped under
    ``memory_limit`` are those of ``choose()`` on the whole graph, and none fitting is one error."""
    cfg = TrainConfig(graph="rmat:7:6:3", features="random:5", labels="random:3")
    g = cfg.load_graph()
    a = aggregation_pattern(g.adj)
    n = a.shape[0]
    off = np.linspace(0, n, p + 1).astype(int)

    def fn(comm, limit):
        lo, hi = int(off[comm.rank]), int(off[comm.rank + 1])
        try:
            mine = choose_from_rows(comm, a[lo:hi], lo, n, DIMS, memory_limit=limit)
        except ValueError as exc:
            return str(exc)
        return mine, choose(comm, g if comm.rank == 0 else None, DIMS, memory_limit=limit)

    for mine, whole in run_loopback(p, fn, 10**12):
        assert mine == whole and mine[3][0]["memory_peak_bytes"] > 0
    peaks = sorted({d["memory_peak_bytes"] for d in mine[3]})
    for mine, whole in run_loopback(p, fn, peaks[0]):      # only the smallest peaks fit
        assert mine == whole and all(d["memory_peak_bytes"] <= peaks[0] for d in mine[3])
    assert all("no configuration fits in --memory-limit 1 bytes" in m
               for m in run_loopback(p, fn, 1))
