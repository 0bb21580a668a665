"""Sharded datasets (issue 37 items 1-2): the format, ``spgnn partition``, ``DistGraph.from_shards``.

Loopback ranks, a 60-vertex SBM graph: training from shards equals training
from the load-and-scatter path bit for bit (losses and training bytes).
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.comm import run_loopback
from spgnn.errors import GridError, ShardError
from spgnn.gnn import GCN, Adam, DistGraph, Trainer
from spgnn.gnn.data import Ordered, prepare, scatter, shard_offsets
from spgnn.gnn.placement import as_placement
from spgnn.gnn.sources import FullGraph
from spgnn.io import Graph, sbm
from spgnn.io import shards as shard_io
from spgnn.io.preprocess import (gcn_degrees, normalized_adjacency, normalized_adjacency_rows,
                                 row_normalize_features, undirected_weights)
from spgnn.partition.to_shards import partition_to_shards

EPOCHS = 3
SEED = 4


def _graph():
    adj, x, y = sbm(60, 3, avg_degree=5, num_features=7, seed=2)
    adj = sp.csr_array(adj)
    adj.data = np.linspace(0.5, 2.0, adj.nnz).astype(np.float32)      # weighted, asymmetric
    return Graph(adj=adj, features=x, labels=y).random_split(0.5, 0.2, seed=2)


G = _graph()


@pytest.fixture(scope="module")
def shard_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    out = {}
    for k, method in ((1, "random"), (2, "metis"), (3, "random"), (4, "random")):
        out[k] = root / f"k{k}"
        partition_to_shards(G, out[k], k, method, SEED)
    return out


def _method(d):
    return shard_io.read_manifest(d)["partition"]["method"]


def _train(dg):
    src = FullGraph(dg)
    model = GCN(src.num_features, 6, dg.num_classes, layers=2, dropout=0.0, seed=1)
    tr = Trainer(model, src, Adam(model.param_groups(5e-4), lr=0.05))
    recs = [tr.train_epoch() for _ in range(EPOCHS)]
    return ([r["loss"] for r in recs],
            {k: v for k, v in recs[-1]["bytes_by_label"].items() if not k.startswith("gnn-setup")})


def _blocks(dg):
    A = dg.A if dg.A is not None else dg._A_base
    return (A.local.indptr.tobytes(), A.local.indices.tobytes(), A.local.data.tobytes(),
            np.asarray(dg.features.local).tobytes(), np.asarray(dg._nodes_by_order["c"].local).tobytes())


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_training_from_shards_equals_load_and_scatter(shard_dirs, p):
    d = shard_dirs[p]
    method = _method(d)

    def fn(comm):
        ref = DistGraph.from_graph(G if comm.rank == 0 else None, comm, "1d-aware",
                                   partition=method, seed=SEED)
        got = DistGraph.from_shards(d, comm, "1d-aware")
        assert _blocks(got) == _blocks(ref)
        assert got.offsets == ref.offsets and got.num_classes == ref.num_classes
        assert got.counts == ref.counts and got.partition == method
        # memory: this rank read its own part file only, and holds only its rows
        assert got.shard_files == [shard_io.part_file(comm.rank)]
        lo, hi = got.offsets[comm.rank], got.offsets[comm.rank + 1]
        assert got.features.local.shape[0] == hi - lo == got.A.local.shape[0]
        return _train(ref), _train(got)

    for ref, got in run_loopback(p, fn):
        assert ref == got


def _scatter_reference(comm, d, placement, adjacency="gcn"):
    """What the scatter step makes from the whole graph in the shards' order and blocks."""
    placement = as_placement(placement)
    man = shard_io.read_manifest(d)
    perm = shard_io.read_rows(d, man, 0, man["n"]).orig
    pre = prepare(G, adjacency, True, np.float32)
    adj = sp.csr_array(pre.adj[perm][:, perm])
    adj.sort_indices()
    grid = placement.make_grid(comm)
    offsets = shard_offsets(man, placement, grid)
    meta = dict(n=man["n"], f=man["num_features"], c=man["num_classes"], offsets=offsets,
                nnz_x=int(np.count_nonzero(pre.x)), counts=man["counts"])
    ordered = Ordered(meta, None, adj, pre.x[perm], pre.nodes.take(perm))
    layouts = placement.layouts(grid, meta["n"], offsets)
    sh = scatter(ordered, grid, layouts, everyone=True, double=False, backend=None)
    return DistGraph(comm, grid, placement, meta, sh, adjacency=adjacency,
                     sparse_features=False)


@pytest.mark.parametrize("k, p", [(4, 2), (2, 4), (3, 1)])
def test_k_and_p_dividing_each_other(shard_dirs, k, p):
    """K = m·P coarsens the parts, P = m·K cuts each part in m; as the scatter step would."""
    d = shard_dirs[k]

    def fn(comm):
        ref = _scatter_reference(comm, d, "1d-aware")
        got = DistGraph.from_shards(d, comm, "1d-aware", sparse_features=False)
        assert _blocks(got) == _blocks(ref) and got.offsets == ref.offsets
        if k >= p:
            m = k // p
            assert got.shard_files == [shard_io.part_file(m * comm.rank + i) for i in range(m)]
        else:
            assert got.shard_files == [shard_io.part_file(comm.rank // (p // k))]
        return _train(ref), _train(got)

    for ref, got in run_loopback(p, fn):
        assert ref == got


@pytest.mark.parametrize("placement, p, k", [("15d-aware", 4, 2), ("3d", 2, 2)])
def test_other_placements_from_shards(shard_dirs, placement, p, k):
    d = shard_dirs[k]

    def fn(comm):
        ref = DistGraph.from_graph(G if comm.rank == 0 else None, comm, placement,
                                   partition=_method(d), seed=SEED)
        got = DistGraph.from_shards(d, comm, placement)
        assert _blocks(got) == _blocks(ref)
        return _train(ref), _train(got)

    for ref, got in run_loopback(p, fn):
        assert ref == got


def test_mean_adjacency_from_shards(shard_dirs):
    d = shard_dirs[2]

    def fn(comm):
        ref = DistGraph.from_graph(G if comm.rank == 0 else None, comm, "1d-aware",
                                   partition=_method(d), seed=SEED, adjacency="mean")
        got = DistGraph.from_shards(d, comm, "1d-aware", adjacency="mean")
        return _blocks(ref) == _blocks(got)

    assert all(run_loopback(2, fn))


def _every_rank_raises(p, call):
    def fn(comm):
        try:
            call(comm)
        except Exception as exc:        # noqa: BLE001 -- the test looks at every rank's class
            return type(exc).__name__, str(exc)
        return None, ""
    return run_loopback(p, fn)


def test_k_not_dividing_p_is_one_error_naming_the_fix(shard_dirs):
    got = _every_rank_raises(2, lambda c: DistGraph.from_shards(shard_dirs[3], c, "1d-aware"))
    assert {name for name, _ in got} == {"GridError"}
    assert all("--parts 2" in msg for _, msg in got)
    assert issubclass(GridError, ValueError)


def _copy(src, dst):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


@pytest.mark.parametrize("damage", ["truncated", "missing", "checksum", "version"])
def test_damaged_shards_are_one_typed_error_on_every_rank(shard_dirs, tmp_path, damage):
    d = _copy(shard_dirs[2], tmp_path / "d")
    part = d / shard_io.part_file(1)
    if damage == "truncated":
        part.write_bytes(part.read_bytes()[:-100])
    elif damage == "missing":
        part.unlink()
    elif damage == "checksum":
        b = bytearray(part.read_bytes())
        b[len(b) // 2] ^= 0xFF
        part.write_bytes(bytes(b))
    else:
        man = json.loads((d / "manifest.json").read_text())
        man["version"] = shard_io.VERSION + 1
        (d / "manifest.json").write_text(json.dumps(man))
    got = _every_rank_raises(2, lambda c: DistGraph.from_shards(d, c, "1d-aware"))
    assert [name for name, _ in got] == ["ShardError", "ShardError"]
    words = {"truncated": "truncated", "missing": "missing", "checksum": "checksum",
             "version": "version"}[damage]
    assert all(words in msg for _, msg in got)
    assert issubclass(ShardError, ValueError)


def test_interrupted_write_resumes(tmp_path, monkeypatch):
    whole = tmp_path / "whole"
    partition_to_shards(G, whole, 4, "random", SEED)
    d = tmp_path / "resumed"
    real, calls = shard_io._write_part, []

    def interrupted(path, payload):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(path)
        real(path, payload)

    monkeypatch.setattr(shard_io, "_write_part", interrupted)
    with pytest.raises(KeyboardInterrupt):
        partition_to_shards(G, d, 4, "random", SEED)
    monkeypatch.setattr(shard_io, "_write_part", real)
    assert not shard_io.is_shard_dir(d) and (d / shard_io.PROGRESS).exists()
    assert not [f for f in os.listdir(d) if f.startswith(".tmp-")]
    with pytest.raises(ShardError, match="interrupted"):
        shard_io.read_manifest(d)
    kept = []
    man = partition_to_shards(G, d, 4, "random", SEED, progress=lambda k, was: kept.append(was))
    assert kept == [True, True, False, False]
    assert shard_io.is_shard_dir(d) and not (d / shard_io.PROGRESS).exists()
    for e, f in zip(man["files"], json.loads((whole / "manifest.json").read_text())["files"]):
        assert e == f
        assert hashlib.sha256((d / e["file"]).read_bytes()).hexdigest() == e["sha256"]
    # a directory holding something else is refused, an up-to-date one is left as it is
    with pytest.raises(ShardError, match="another graph or partition"):
        partition_to_shards(G, d, 2, "random", SEED)
    assert partition_to_shards(G, d, 4, "random", SEED) == man
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(ShardError, match="not a shard directory"):
        partition_to_shards(G, tmp_path / "other", 2, "none")


def test_gcn_rows_are_bit_identical_to_the_whole_matrix():
    rng = np.random.default_rng(0)
    for t in range(5):
        n = int(rng.integers(5, 80))
        a = sp.random_array((n, n), density=0.1, rng=rng, format="csr", dtype=np.float32)
        a.data *= np.float32(rng.choice([1.0, 1e-3, 123.4]))
        ap, deg = undirected_weights(a), gcn_degrees(a)
        for dt in (np.float32, np.float64):
            whole = normalized_adjacency(a, dt)
            lo, hi = n // 3, 2 * n // 3
            got = normalized_adjacency_rows(ap[lo:hi], np.arange(lo, hi), deg[lo:hi],
                                            lambda ids: deg[ids], dt)
            ref = whole[lo:hi]
            assert np.array_equal(got.indptr, ref.indptr)
            assert np.array_equal(got.indices, ref.indices)
            assert got.data.tobytes() == ref.data.tobytes()
        mask = rng.random((n, 9)) < 0.05
        for x in (rng.random((n, 9)) * mask, rng.normal(size=(n, 9)) * mask):  # and signed
            for form in ("csr", "dense"):
                assert row_normalize_features(x[lo:hi], np.float32, form=form).tobytes() == \
                    row_normalize_features(x, np.float32, form=form)[lo:hi].tobytes()


def test_partition_command_writes_shards(tmp_path):
    out = tmp_path / "sbm"
    cmd = [sys.executable, "-m", "spgnn", "partition", "--graph", "sbm:200:3:0", "--parts", "2",
           "--method", "random", "--out", str(out), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["parts"] == 2 and res["n"] == 200 and res["parts_written"] == 2
    assert shard_io.is_shard_dir(out)
    man = shard_io.read_manifest(out)
    assert man["partition"] == {**man["partition"], "method": "random", "seed": 0}
    assert sum(man["counts"].values()) == 200
    bad = tmp_path / "taken"
    bad.mkdir()
    (bad / "x").write_text("")
    r = subprocess.run(cmd[:-2] + [str(bad)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "not a shard directory" in r.stderr
    assert not Path(bad / "manifest.json").exists()


def test_sparse_features_are_stored_as_csr(tmp_path):
    x = sp.csr_array(np.where(np.asarray(G.features) > 0.8, G.features, 0))
    g = Graph(adj=G.adj, features=x, labels=G.labels, train_mask=G.train_mask)
    partition_to_shards(g, tmp_path / "s", 2, "random", SEED)
    assert shard_io.read_manifest(tmp_path / "s")["features_stored"] == "csr"

    def fn(comm):
        ref = DistGraph.from_graph(g if comm.rank == 0 else None, comm, "1d-aware",
                                   partition="random", seed=SEED)
        got = DistGraph.from_shards(tmp_path / "s", comm, "1d-aware")
        return _blocks(ref) == _blocks(got) and type(ref.features) is type(got.features)

    assert all(run_loopback(2, fn))


@pytest.mark.parametrize("n", [5, 1000])       # a lookup table, a binary search
def test_degree_of_a_column_without_a_stored_degree_is_a_shard_error(n):
    from spgnn.io.shards import RowBlock

    a = sp.csr_array((2, n), dtype=np.float64)
    z = np.zeros(2, bool)
    block = RowBlock(0, 2, a, np.array([2.0, 3.0]), np.zeros((2, 1), np.float32),
                     np.zeros(2, np.int64), z, z, z, np.arange(2), [],
                     np.array([0, 1, 4]), np.array([2.0, 3.0, 7.0]))
    assert block.degree_of(np.array([4, 0, 1, 4])).tolist() == [7.0, 2.0, 3.0, 7.0]
    with pytest.raises(ShardError, match="has no stored degree"):
        block.degree_of(np.array([0, 3]))
