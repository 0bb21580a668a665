"""``--algo auto`` choosing 1.5D or 3D moves the rows it ranked instead of drawing or reading
them again (issue 37): :func:`spgnn.core.row_moves.move_rows`.

On loopback ranks: moved rows equal, field for field (values, order and
dtypes), the rows a fresh draw or read makes; ``train`` with auto forced to
3d or 15d (``--grid`` / ``--replication auto``) on a generator spec and on
shards draws or reads every row once and trains bit for bit like the
explicit ``--algo``.
"""

import threading

import numpy as np
import pytest
import scipy.sparse as sp

import spgnn.gnn.rows as rows_mod
from spgnn.comm import run_loopback
from spgnn.gnn.config import TrainConfig
from spgnn.core.row_moves import move_rows
from spgnn.io import Graph, sbm
from spgnn.io import shards as shard_io
from spgnn.layout import block_offsets
from spgnn.partition.to_shards import partition_to_shards

FIELDS = ("deg", "label", "train", "val", "test", "orig")


def _same_block(got, want):
    assert (got.lo, got.hi) == (want.lo, want.hi)
    for a, b in ((got.adj, want.adj), (got.x, want.x)):
        if sp.issparse(b):
            # (the index dtype of an empty read may differ: only values are placed)
            assert sp.issparse(a) and a.dtype == b.dtype
            assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
            assert np.array_equal(a.data, b.data)
        else:
            assert a.dtype == b.dtype and np.array_equal(a, b)
    for f in FIELDS:
        assert getattr(got, f).dtype == getattr(want, f).dtype
        assert np.array_equal(getattr(got, f), getattr(want, f)), f
    cols = np.unique(want.adj.indices)
    assert np.array_equal(got.degree_of(cols), want.degree_of(cols))


#: Targets per rank at 3 ranks of n = 64 rows: overlapping, empty, the whole range.
TARGETS = [(0, 64), (5, 40), (30, 30)]


@pytest.mark.parametrize("features", ["random:5", "onehot"])
def test_moved_generator_rows_equal_a_fresh_draw(features):
    spec = "rmat:6:4:2"

    def fn(comm):
        off = block_offsets(64, comm.size)
        kw = dict(features=features, labels="random:3")
        held = rows_mod.generate_rows(comm, spec, rows=(off[comm.rank], off[comm.rank + 1]), **kw)
        lo, hi = TARGETS[comm.rank]
        got = move_rows(comm, held, lo, hi)
        return got, rows_mod.generate_rows(comm, spec, rows=(lo, hi), **kw)

    for got, want in run_loopback(3, fn):
        _same_block(got, want)


def _shards(tmp_path, parts=2):
    adj, x, y = sbm(64, 3, avg_degree=5, num_features=6, seed=4)
    g = Graph(adj=sp.csr_array(adj), features=x, labels=y).random_split(0.5, 0.2, seed=4)
    d = tmp_path / f"k{parts}"
    return d, partition_to_shards(g, d, parts, "random", 5)


def test_moved_shard_rows_equal_a_fresh_read_and_bad_spans_move_nothing(tmp_path):
    d, man = _shards(tmp_path)

    def fn(comm):
        off = block_offsets(man["n"], comm.size)
        held = shard_io.read_rows(d, man, off[comm.rank], off[comm.rank + 1])
        lo, hi = TARGETS[comm.rank]
        got = move_rows(comm, held, lo, hi)
        # overlapping held rows (every rank holds 0:8): nothing moves, on every rank
        return got, shard_io.read_rows(d, man, lo, hi), move_rows(
            comm, shard_io.read_rows(d, man, 0, 8), lo, hi)

    for got, want, none in run_loopback(3, fn):
        _same_block(got, want)
        assert none is None


class _Count:
    """Counts the calls of ``module.name`` (every loopback rank's)."""

    def __init__(self, monkeypatch, module, name):
        self.calls, lock, real = [], threading.Lock(), getattr(module, name)

        def counted(*args, **kwargs):
            with lock:
                self.calls.append(1)
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)


def _losses(comm, cfg):
    """``(algo, replication, two epochs' losses, the setup stages timed)`` of ``cfg``."""
    from spgnn.bench import StageClock

    clock = StageClock()
    b = cfg.build(comm, None, clock=clock)
    return (b.config.algo, b.config.replication, [b.trainer.train_epoch()["loss"] for _ in range(2)],
            set(clock.seconds))


def _explicit(forced, got):
    algo, c = got[0][0], got[0][1]
    assert algo == ("3d" if "grid" in forced else forced["algo"])
    assert all("move-rows" in g[3] for g in got)   # the ranks moved rows
    return dict(forced, algo=algo, **({"replication": c} if algo.startswith("15d") else {}))


@pytest.mark.parametrize("p,forced", [(2, {"grid": "1x1x2"}), (4, {"grid": "1x2x2"}),
                                      (2, {"algo": "15d", "replication": "auto"}),
                                      (4, {"algo": "15d-aware", "replication": "auto"})])
def test_train_auto_forced_to_3d_or_15d_on_a_generator_draws_once(monkeypatch, p, forced):
    common = dict(graph="rmat:7:4:1", features="random:6", labels="random:3", epochs=2,
                  hidden=8, dtype="float64")
    draws = _Count(monkeypatch, rows_mod, "generate_rows")
    got = run_loopback(p, _losses, TrainConfig(**common, **forced))
    assert len(draws.calls) == p                   # each rank drew its rows once
    want = run_loopback(p, _losses, TrainConfig(**common, **_explicit(forced, got)))
    assert [g[2] for g in got] == [w[2] for w in want]


@pytest.mark.parametrize("p,forced", [(2, {"grid": "1x1x2"}),
                                      (4, {"algo": "15d-aware", "replication": "auto"})])
def test_train_auto_forced_to_3d_or_15d_on_shards_reads_once(tmp_path, monkeypatch, p, forced):
    d, _ = _shards(tmp_path, parts=p)
    common = dict(graph=str(d), epochs=2, hidden=8, dtype="float64")
    reads = _Count(monkeypatch, shard_io, "read_rows")
    got = run_loopback(p, _losses, TrainConfig(**common, **forced))
    assert len(reads.calls) == p                   # each rank read its rows once
    want = run_loopback(p, _losses, TrainConfig(**common, **_explicit(forced, got)))
    assert [g[2] for g in got] == [w[2] for w in want]
