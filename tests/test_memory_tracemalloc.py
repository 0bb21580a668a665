"""The memory model's counts against the arrays a built trainer really holds (issue 37 item 4).

A GCN trainer is built on a small R-MAT graph (2 loopback ranks, numpy
backend) for 1d, 1d-aware, 15d-aware and 3d, trained one epoch, and then:

* every numpy array reachable from the trainer is found (each buffer once,
  views folded into the array that owns the memory) and summed by kind
  (sparse blocks, node data, saved tensors, parameters with gradients and
  Adam state): :func:`spgnn.plan.memory.held_bytes` must equal each sum
  exactly, rank by rank;
* tracemalloc (allocations, not RSS) cross-checks the inventory: the bytes
  still allocated after the build and an epoch, less what was allocated
  before, cover the arrays found, with at most a stated margin for Python
  objects (the trainer's dicts, plans and closures, not arrays).
"""

import gc
import tracemalloc

import pytest

from spgnn.comm import run_loopback
from spgnn.gnn.config import TrainConfig
from spgnn.plan.choose import aggregation_pattern
from spgnn.plan.memory import held_bytes
from spgnn.plan.model import candidate_configs, rank_configs
from spgnn.testing.held import held_buffers

GRAPH = dict(graph="rmat:9:8:1", features="random:12", labels="random:3")
HIDDEN = 8


def _kind(path):
    if path.startswith(".optimizer"):
        return "parameters"
    if path.startswith(".model"):
        return "saved"
    if any(k in path for k in ("._node", ".features")):
        return "data"
    if path.startswith(".graph"):
        return "graph"
    return "other"


def held_arrays(root):
    """``{kind: bytes}`` of the numpy buffers reachable from ``root`` (each buffer once)."""
    return held_buffers(root, _kind)


def _options(algo, grid):
    return {"replication": 2} if algo.startswith("15d") else {"grid": grid} if grid else {}


def _build(comm, algo, grid=None):
    extra = _options(algo, grid)
    cfg = TrainConfig(**GRAPH, hidden=HIDDEN, epochs=1, backend="numpy", algo=algo, **extra)
    g = cfg.load_graph() if comm.rank == 0 else None
    built = cfg.build(comm, g)
    del g
    built.trainer.train_epoch()
    return built


def _prediction(algo, ranks, grid=None):
    cfg = TrainConfig(**GRAPH)
    g = cfg.load_graph()
    a = aggregation_pattern(g.adj)
    dims = [int(g.features.shape[1]), HIDDEN, int(g.num_classes)]
    c = 2 if algo.startswith("15d") else 1
    configs = ([("3d", 1, tuple(int(v) for v in grid.split("x")))] if grid else
               [cf for cf in candidate_configs(ranks, (algo,)) if cf[1] == c][:1])
    return a, rank_configs(a, ranks, dims, configs=configs)[0], dims


@pytest.mark.parametrize("algo, ranks, grid", [("1d", 2, None), ("1d-aware", 4, None),
                                              ("15d-aware", 4, None), ("3d", 4, "2x2x1")])
def test_held_bytes_equal_the_arrays_a_trainer_holds(algo, ranks, grid):
    a, pred, dims = _prediction(algo, ranks, grid)
    model = held_bytes(a, pred, dims)
    got = run_loopback(ranks, lambda comm: held_arrays(_build(comm, algo, grid).trainer))
    for r, kinds in enumerate(got):
        assert kinds.get("other", 0) == 0, kinds
        assert kinds["graph"] > 0 and kinds["parameters"] > 0
        for kind, counted in model.items():
            if counted is not None:
                assert kinds[kind] == counted[r], (algo, r, kind, kinds[kind], counted[r])


def test_tracemalloc_sees_the_held_arrays_and_little_else(monkeypatch):
    """What stays allocated after a build and an epoch (tracemalloc, both ranks together) is
    the arrays the model counts plus Python objects (the trainer's dicts, plans, ledgers):
    at least the arrays, at most 128 KiB more (about 64 KiB measured at any size: the
    objects do not grow with the graph).  A first, untraced build imports and compiles
    what the second one would otherwise count."""
    run_loopback(2, lambda comm: _build(comm, "1d-aware").trainer)
    monkeypatch.setitem(GRAPH, "graph", "rmat:11:8:1")
    a, pred, dims = _prediction("1d-aware", 2)
    counted = sum(int(v.sum()) for v in held_bytes(a, pred, dims).values())
    kept = []
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        kept.extend(run_loopback(2, lambda comm: _build(comm, "1d-aware").trainer))
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert counted > 500_000
    assert counted <= grown <= counted + 128 * 1024, (counted, grown)
