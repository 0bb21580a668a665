"""Fault class 4 (issue 28): rank-local decisions are agreed, never trusted.

Anything that decides control flow or global metadata is agreed across ranks:
a ``fit`` callback that stops on one rank stops every rank after the same
epoch; ``from_global(root=None)`` compares a fingerprint of every rank's
input; ``from_local`` compares the global shape and layout.  Each case ends
with the same typed error on every rank (or the documented behaviour), never
different answers per rank, an IndexError or a hang.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn import DistDenseMatrix, DistSparseMatrix, Layout, grid_1d, run_loopback
from spgnn.errors import RankMismatch
from spgnn.gnn import GCN, Adam, DistGraph, Trainer
from spgnn.io import load_graph

GRAPH = load_graph("sbm:200:3:0")


def test_a_callback_that_stops_on_one_rank_stops_every_rank():
    def body(comm):
        dg = DistGraph.from_graph(GRAPH if comm.rank == 0 else None, comm)
        model = GCN(dg.num_features, 8, dg.num_classes, seed=0)
        tr = Trainer(model, dg, Adam(model.param_groups(), lr=0.01))
        history = tr.fit(10, evaluate=False,
                         callback=lambda t, rec: comm.rank == 1 and rec["epoch"] == 2)
        return len(history), tr.epoch

    assert run_loopback(3, body, timeout=60) == [(3, 3)] * 3


def _matrix(seed):
    return sp.random_array((12, 12), density=0.3, rng=np.random.default_rng(seed), format="csr")


@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_from_global_with_different_inputs_per_rank_raises_on_every_rank(kind):
    def body(comm):
        a = _matrix(7 if comm.rank == 2 else 0)       # rank 2 holds another matrix
        grid = grid_1d(comm)
        try:
            if kind == "sparse":
                DistSparseMatrix.from_global(a, grid, Layout("row"))
            else:
                DistDenseMatrix.from_global(a.toarray(), grid, Layout("row"))
        except RankMismatch as exc:
            return str(exc)
        return None

    for msg in run_loopback(3, body, timeout=60):
        assert msg is not None and "rank 2 differs from rank 0" in msg, msg


def test_from_global_check_can_be_skipped():
    """``check_same=False``: the caller's promise; nothing is compared."""
    def body(comm):
        grid = grid_1d(comm)
        out = []
        for check in (True, False):
            with comm.track("t") as st:
                A = DistSparseMatrix.from_global(_matrix(0), grid, Layout("row"),
                                                 check_same=check)
            out.append((A.nnz, st.total("calls", label="check:same") > 0))
        return out

    assert run_loopback(3, body, timeout=60) == [[(_matrix(0).nnz, True),
                                                  (_matrix(0).nnz, False)]] * 3


@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_from_local_with_different_global_shapes_raises_on_every_rank(kind):
    def body(comm):
        grid = grid_1d(comm)
        n = 13 if comm.rank == 1 else 12              # rank 1 claims another global shape
        (r0, r1), _ = Layout("row").bounds(grid, (n, 4))
        try:
            if kind == "sparse":
                DistSparseMatrix.from_local(sp.csr_array((r1 - r0, 4)), (n, 4), grid)
            else:
                DistDenseMatrix.from_local(np.zeros((r1 - r0, 4)), (n, 4), grid)
        except RankMismatch as exc:
            return str(exc)
        return None

    for msg in run_loopback(3, body, timeout=60):
        assert msg is not None and "global shape and layout" in msg, msg
