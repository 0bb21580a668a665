"""The planner predicts the ledger exactly (loopback ranks; tests/mpi checks real MPI)."""

import numpy as np
from hypothesis import given, strategies as st

from spgnn import DistDenseMatrix, DistSparseMatrix, Layout, ProcessGrid, run_loopback, spmm
from spgnn.core.spmm_15d import layouts_15d
from spgnn.core.spmm_3d import layouts_3d
from spgnn.plan.events import plan_spmm
from spgnn.testing.strategies_dist import random_sparse, splits_for


def ledger_by_key(stats):
    """{(op, label, axis): (sent, recv, messages)} for one rank's events."""
    out = {}
    for e in stats.events:
        key = (e.op, e.label, tuple(e.axis))
        s, r, m = out.get(key, (0, 0, 0))
        out[key] = (s + e.bytes_sent, r + e.bytes_recv, m + e.messages)
    return out


def plan_by_key(plan, phase, rank):
    out = {}
    for e in plan.select(phase):
        key = (e.op, e.label, tuple(e.axis))
        s, r, m = out.get(key, (0, 0, 0))
        out[key] = (s + int(e.sent[rank]), r + int(e.recv[rank]), m + int(e.messages[rank]))
    return out


def distribute(comm, a, x, algorithm, offsets=None, c=2, grid3d=None):
    """A and X in the layouts ``algorithm`` expects (as the spmm command builds them)."""
    p, n = comm.size, a.shape[0]
    if algorithm in ("15d", "15d-aware"):
        grid = ProcessGrid(comm, (p // c, c), ("row", "layer"))
        la, lx = layouts_15d(grid, n, row_splits=offsets)
    elif algorithm == "3d":
        grid = ProcessGrid(comm, grid3d, ("x", "y", "z"))
        lay = layouts_3d(grid, ("x", "y", "z"), n, x.shape[1], shard_input=True)
        la, lx = lay["A"], lay["X"]
    else:
        grid = ProcessGrid(comm, (p,), ("row",))
        la = lx = Layout("row", row_splits=offsets)
    return (DistSparseMatrix.from_global(a, grid, la, backend="numpy"),
            DistDenseMatrix.from_global(x, grid, lx, backend="numpy"))


def run_and_record(a, x, p, offsets, algorithm, c=2, grid3d=None):
    def body(comm):
        A, X = distribute(comm, a, x, algorithm, offsets, c, grid3d)
        with comm.track("first") as first:
            spmm(A, X, algorithm=algorithm)
        with comm.track("again") as again:
            spmm(A, X, algorithm=algorithm)
        return ledger_by_key(first), ledger_by_key(again)

    return run_loopback(p, body, timeout=15)


def _strip(d):
    """Drop zero rows so that absent and all-zero events compare equal."""
    return {k: v for k, v in d.items() if any(v)}


def _factor3(p, data):
    x = data.draw(st.sampled_from([d for d in range(1, p + 1) if p % d == 0]))
    y = data.draw(st.sampled_from([d for d in range(1, p // x + 1) if (p // x) % d == 0]))
    return (x, y, p // x // y)


@given(st.sampled_from([1, 2, 3, 4, 6, 8]), st.integers(0, 24), st.integers(1, 4),
       st.sampled_from([0.0, 0.1, 0.3]), st.integers(0, 2**31 - 1),
       st.sampled_from(["1d", "1d-aware", "15d", "15d-aware", "3d"]), st.data())
def test_plan_equals_ledger(p, n, f, density, seed, algorithm, data):
    c, grid3d, blocks = 1, None, p
    if algorithm in ("15d", "15d-aware"):
        c = data.draw(st.sampled_from([d for d in (1, 2, 3, 4) if p % d == 0]))
        blocks = p // c
    if algorithm == "3d":
        grid3d = _factor3(p, data)
        offsets = None
    else:
        offsets = data.draw(splits_for(n, blocks)) or None
    a = random_sparse((n, n), density, seed, dtype=np.float32)
    x = np.ones((n, f), dtype=np.float32)
    plan = plan_spmm(a, algorithm, p, f, offsets=offsets, itemsize=4, replication=c, grid=grid3d)
    runs = run_and_record(a, x, p, offsets, algorithm, c, grid3d)
    for rank, (first, again) in enumerate(runs):
        setup_and_spmm = plan_by_key(plan, "setup", rank)
        for k, v in plan_by_key(plan, "spmm", rank).items():
            s = setup_and_spmm.get(k, (0, 0, 0))
            setup_and_spmm[k] = tuple(a_ + b_ for a_, b_ in zip(s, v))
        assert _strip(first) == _strip(setup_and_spmm), (rank, first, setup_and_spmm)
        assert _strip(again) == _strip(plan_by_key(plan, "spmm", rank)), (rank, again)
