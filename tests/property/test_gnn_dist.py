"""Distributed GCN training on loopback ranks equals the single-process run.

For P in {1, 2, 3, 4, 8} and every algorithm (``1d``, ``1d-aware``,
``15d-aware`` with c in {1, 2}, ``3d`` on several X x Y x Z grids), with
dropout off and several Adam epochs, the loss after every epoch equals the
numpy reference (float64: 1e-9; float32: 1e-4), every replica of every
parameter block is bit-identical after every step (collective assert), and
the assembled weights equal the reference's.  With dropout on, every
algorithm and P gives the single-rank losses (counter-based masks keyed by
global node ids).  The checks live in tests/mpi/gnn_checks.py and are shared
with the mpiexec runs.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spgnn import run_loopback
from spgnn.gnn import GCN, Adam, DistGraph, Trainer, placement_for
from spgnn.testing.gnn_reference import train_reference

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "mpi"))
from gnn_checks import cases_for, check_gcn_losses, sbm_graph  # noqa: E402

TIMEOUT = 30
GRAPH = sbm_graph()
EPOCHS = 4
BASE = dict(graph=GRAPH, hidden=6, layers=3, epochs=EPOCHS, lr=0.05, seed=1, dtype=np.float64)
REF = train_reference(GRAPH.adj, GRAPH.features, GRAPH.labels, GRAPH.train_mask,
                      [GRAPH.num_features, 6, 6, GRAPH.num_classes], epochs=EPOCHS, lr=0.05,
                      weight_decay=5e-4, seed=1)
CASES = [(p, algo, grid) for p in (1, 2, 3, 4, 8) for algo, grid in cases_for(p)]


@pytest.mark.parametrize("p,algo,grid", CASES, ids=[f"P{p}-{a}-{g}" for p, a, g in CASES])
def test_losses_equal_single_process(p, algo, grid):
    run_loopback(p, check_gcn_losses, dict(BASE, algo=algo, grid=grid), REF, timeout=TIMEOUT)


@pytest.mark.parametrize("p,grid,opts", [
    (8, (2, 2, 2), dict(shard_input=True, order="aggregate-first")),
    (8, (2, 2, 2), dict(shard_weights=False, order="transform-first")),
    (4, (1, 2, 2), dict(shard_input=True, order="transform-first", root_only=False)),
    (3, (3, 1, 1), dict(order="aggregate-first", dtype=np.float32, rtol=1e-4)),
])
def test_3d_variants(p, grid, opts):
    run_loopback(p, check_gcn_losses, dict(BASE, algo="3d", grid=grid, **opts), REF,
                 timeout=TIMEOUT)


def _dropout_losses(comm, algo, grid, partition="none"):
    kw = {"grid": grid} if algo == "3d" else {}
    dg = DistGraph.from_graph(GRAPH if comm.rank == 0 else None, comm, placement_for(algo, **kw),
                              dtype=np.float64, partition=partition)
    model = GCN(dg.num_features, 6, dg.num_classes, layers=2, dropout=0.5, seed=3)
    tr = Trainer(model, dg, Adam(model.param_groups(5e-4), lr=0.05))
    out = [tr.train_epoch()["loss"] for _ in range(3)]
    return out, tr.evaluate(), tr.predict()


def test_dropout_masks_do_not_depend_on_p_or_layout():
    want, ev, pred = run_loopback(1, _dropout_losses, "1d", None)[0]
    for p, algo, grid in [(2, "1d-aware", None), (4, "15d-aware", None), (8, "3d", (2, 2, 2)),
                          (4, "3d", (1, 2, 2))]:
        got, gev, gpred = run_loopback(p, _dropout_losses, algo, grid, timeout=TIMEOUT)[0]
        np.testing.assert_allclose(got, want, rtol=1e-10)
        assert gev == pytest.approx(ev, rel=1e-9)
        np.testing.assert_array_equal(gpred, pred)


def test_partitioned_graph_trains_identically():
    pytest.importorskip("spgnn.partition")
    want, ev, pred = run_loopback(1, _dropout_losses, "1d", None)[0]
    got, gev, gpred = run_loopback(4, _dropout_losses, "1d-aware", None, "random",
                                   timeout=TIMEOUT)[0]
    np.testing.assert_allclose(got, want, rtol=1e-10)
    np.testing.assert_array_equal(gpred, pred)      # predictions come back in input order


@settings(max_examples=12, deadline=None)
@given(p=st.sampled_from([2, 3, 4, 8]), algo=st.sampled_from(["1d-aware", "15d-aware", "3d"]),
       n=st.integers(5, 30), hidden=st.integers(1, 5), layers=st.integers(1, 4),
       order=st.sampled_from(["auto", "aggregate-first", "transform-first"]),
       seed=st.integers(0, 1000))
def test_random_shapes(p, algo, n, hidden, layers, order, seed):
    graph = sbm_graph(n=n, f=4, c=3, seed=seed)
    if graph.train_mask.sum() == 0:
        return
    grid = [g for a, g in cases_for(p) if a == algo][-1]
    case = dict(graph=graph, hidden=hidden, layers=layers, epochs=2, lr=0.05, seed=seed,
                dtype=np.float64, algo=algo, grid=grid, order=order)
    run_loopback(p, check_gcn_losses, case, timeout=TIMEOUT)
