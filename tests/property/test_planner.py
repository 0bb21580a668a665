"""The planner predicts the ledger exactly (loopback ranks; tests/mpi checks real MPI)."""

import numpy as np
from hypothesis import given, strategies as st

from spgnn import DistDenseMatrix, DistSparseMatrix, Layout, ProcessGrid, run_loopback, spmm
from spgnn.planner import plan_spmm
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


def run_and_record(a, x, p, offsets, algorithm):
    def body(comm):
        grid = ProcessGrid(comm, (p,), ("row",))
        A = DistSparseMatrix.from_global(a, grid, Layout("row", row_splits=offsets), backend="numpy")
        X = DistDenseMatrix.from_global(x, grid, Layout("row", row_splits=offsets), backend="numpy")
        with comm.track("first") as first:
            spmm(A, X, algorithm=algorithm)
        with comm.track("again") as again:
            spmm(A, X, algorithm=algorithm)
        return ledger_by_key(first), ledger_by_key(again)

    return run_loopback(p, body, timeout=15)


def _strip(d):
    """Drop zero rows so that absent and all-zero events compare equal."""
    return {k: v for k, v in d.items() if any(v)}


@given(st.sampled_from([1, 2, 3, 4, 8]), st.integers(0, 24), st.integers(1, 4),
       st.sampled_from([0.0, 0.1, 0.3]), st.integers(0, 2**31 - 1),
       st.sampled_from(["1d", "1d-aware"]), st.data())
def test_plan_equals_ledger(p, n, f, density, seed, algorithm, data):
    offsets = data.draw(splits_for(n, p)) or None
    a = random_sparse((n, n), density, seed, dtype=np.float32)
    x = np.ones((n, f), dtype=np.float32)
    plan = plan_spmm(a, algorithm, p, f, offsets=offsets, itemsize=4)
    for rank, (first, again) in enumerate(run_and_record(a, x, p, offsets, algorithm)):
        setup_and_spmm = plan_by_key(plan, "setup", rank)
        for k, v in plan_by_key(plan, "spmm", rank).items():
            s = setup_and_spmm.get(k, (0, 0, 0))
            setup_and_spmm[k] = tuple(a_ + b_ for a_, b_ in zip(s, v))
        assert _strip(first) == _strip(setup_and_spmm), (rank, first, setup_and_spmm)
        assert _strip(again) == _strip(plan_by_key(plan, "spmm", rank)), (rank, again)
