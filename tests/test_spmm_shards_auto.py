"""``spmm --graph DIR --algo auto`` (issue 37): ranked from the shards' row blocks, no rank
holding the graph, then run from the rows the ranks read (moved, not read again).

On loopback ranks: :func:`choose_spmm_from_rows` predicts every candidate as
``choose_spmm`` does on the whole matrix, to the float; ``spmm.measure`` on
shards with auto (K = P, K a multiple of P, P a multiple of K; auto forced
to 15d and 3d) passes its scipy check, reads each row once and reports the
choice with the bytes of ``auto:counts``.
"""

import argparse
import threading

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.comm import run_loopback
from spgnn.io import Graph, sbm
from spgnn.io import shards as shard_io
from spgnn.partition.to_shards import partition_to_shards
from spgnn.plan.choose import choose_spmm
from spgnn.plan.from_rows import choose_spmm_from_rows


def _args(graph, **kw):
    base = dict(graph=str(graph), feat=5, algo="auto", partition="none", partition_file=None,
                replication=2, grid=None, backend="numpy", repeat=1, seed=3, check=True,
                json=True, num_nodes=None, relabel=False, memory_limit=None)
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    adj, x, y = sbm(60, 3, avg_degree=5, num_features=4, seed=6)
    g = Graph(adj=sp.csr_array(adj), features=x, labels=y).random_split(0.5, 0.2, seed=6)
    d = tmp_path_factory.mktemp("spmm-auto")
    return {k: (d / f"k{k}", partition_to_shards(g, d / f"k{k}", k, "random", 2)) for k in (2, 4)}


@pytest.mark.parametrize("p", [2, 3])
def test_choose_spmm_from_rows_equals_choose_spmm_on_the_whole_matrix(p):
    rng = np.random.default_rng(p)
    n = 40
    a = sp.random_array((n, n), density=0.1, rng=rng, format="csr")
    a = sp.csr_array(a + a.T)
    a.sort_indices()
    off = np.linspace(0, n, p + 1).astype(int)

    def fn(comm):
        r = comm.rank
        mine = choose_spmm_from_rows(comm, a[off[r]:off[r + 1]], int(off[r]), n, 6)
        return mine, choose_spmm(comm, a if r == 0 else None, 6)

    for mine, whole in run_loopback(p, fn):
        assert mine == whole


class _Reads:
    def __init__(self, monkeypatch):
        self.calls, lock, real = [], threading.Lock(), shard_io.read_rows

        def counted(*a, **kw):
            with lock:
                self.calls.append(1)
            return real(*a, **kw)

        monkeypatch.setattr(shard_io, "read_rows", counted)


@pytest.mark.parametrize("p,k,opts,algo", [
    (1, 2, {}, None), (2, 2, {}, None), (4, 2, {}, None), (2, 4, {}, None),
    (4, 4, {"algo": "15d", "replication": "auto"}, "15d"),
    (2, 2, {"grid": "1x1x2"}, "3d")])
def test_spmm_auto_on_shards_checks_against_scipy_and_reads_once(shards, monkeypatch, p, k, opts,
                                                                 algo):
    from spgnn.cli import spmm

    d, _ = shards[k]
    reads = _Reads(monkeypatch)
    got = run_loopback(p, lambda comm: spmm.measure(comm, _args(d, **opts)))
    assert len(reads.calls) == p                   # each rank read its rows once
    for out in got:
        assert out["check_passed"] and out["max_abs_err"] < 1e-5
        assert out["algorithm"] == out["auto"][0]["algorithm"]
        assert algo is None or out["algorithm"] == algo
        assert (out["auto_bytes_by_label"].get("auto:counts", 0) > 0) == (p > 1)


def test_spmm_auto_on_shards_refuses_partition_by_name(shards):
    from spgnn.cli import spmm

    d, _ = shards[2]
    spmm.check_args(_args(d, memory_limit="1G"))   # priced (tests/test_spmm_shards_auto_memory.py)
    with pytest.raises(ValueError, match="--partition metis do"):
        spmm.check_args(_args(d, partition="metis"))
    spmm.check_args(_args(d))                      # auto itself is accepted
