"""Generated graphs drawn per rank (issue 37): the same training as the whole-graph path.

``DistGraph.from_generator`` (each rank draws chunks and routes edges to the row
owners) against ``DistGraph.from_graph(load_graph(spec))`` through
``TrainConfig.build``: bit-identical losses at 1, 2, 3 and 4 loopback ranks;
and the chunked generators' independence of how chunks are drawn.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from spgnn.comm import run_loopback
from spgnn.gnn.config import TrainConfig
from spgnn.io.generators import (num_chunks, parse_spec, rmat, rmat_chunk, rows_to_csr,
                                 symmetric_entries)
from spgnn.io.graph import vertex_split


def _losses(comm, cfg, whole):
    graph = cfg.load_graph() if whole and comm.rank == 0 else None
    if whole and comm.rank != 0:
        graph = None
    built = cfg.build(comm, graph) if not whole else cfg.build(comm, graph)
    return [built.trainer.train_epoch()["loss"] for _ in range(2)]


CASES = [("rmat:8:4:1", "random:6", "random:3", "1d-aware"),
         ("sbm:200:3:2", None, None, "1d"),
         ("plsbm:300:4:6:5:1", "degree", None, "15d")]


@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("spec,features,labels,algo", CASES)
def test_generated_rows_train_like_the_whole_graph(p, spec, features, labels, algo):
    if algo == "15d" and p % 2:
        algo = "1d"
    cfg = TrainConfig(graph=spec, features=features, labels=labels, algo=algo, epochs=2,
                      hidden=8, dtype="float64")
    assert cfg.generated

    def fn(comm):
        whole = cfg.load_graph() if comm.rank == 0 else None
        a = cfg.build(comm, whole)
        b = cfg.build(comm, None)             # every rank draws its own rows
        la = [a.trainer.train_epoch()["loss"] for _ in range(2)]
        lb = [b.trainer.train_epoch()["loss"] for _ in range(2)]
        return la, lb

    for la, lb in run_loopback(p, fn):
        assert la == lb


@settings(max_examples=15, deadline=None)
@given(scale=st.integers(0, 7), ef=st.integers(0, 5), seed=st.integers(0, 3),
       cuts=st.lists(st.integers(0, 128), max_size=3))
def test_rmat_rows_from_any_chunks_and_ranges_equal_the_whole(scale, ef, seed, cuts):
    n = 1 << scale
    whole = rmat(scale, ef, seed=seed)
    r, c = [], []
    for i in reversed(range(num_chunks(ef << scale))):       # any order of chunks
        a, b = symmetric_entries(*rmat_chunk(scale, ef, i, seed=seed))
        r.append(a)
        c.append(b)
    r = np.concatenate(r) if r else np.zeros(0, np.int64)
    c = np.concatenate(c) if c else np.zeros(0, np.int64)
    bounds = sorted({0, n, *(min(x, n) for x in cuts)})
    for lo, hi in zip(bounds, bounds[1:]):
        keep = (r >= lo) & (r < hi)
        part = rows_to_csr(r[keep], c[keep], lo, hi, n)
        ref = whole[lo:hi]
        assert np.array_equal(part.indptr, ref.indptr)
        assert np.array_equal(part.indices, ref.indices)


def test_per_vertex_split_of_a_range_is_that_of_the_whole():
    y = np.arange(10000) % 3
    y[5] = -1
    whole = vertex_split(y, 0, 10000, 0.6, 0.2, seed=4)
    part = vertex_split(y[4000:9000], 4000, 9000, 0.6, 0.2, seed=4)
    for w, q in zip(whole, part):
        assert np.array_equal(w[4000:9000], q)
    assert not any(m[5] for m in whole)
    assert 0.55 < whole[0].mean() < 0.65


def test_bad_generator_specs_are_value_errors():
    for bad in ("rmat:x", "sbm:0:3", "plsbm:10:2", "plsbm:10:2:0"):
        with pytest.raises(ValueError):
            parse_spec(bad)
    assert parse_spec("cora") is None
