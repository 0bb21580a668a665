"""Distributed sampling on loopback ranks: modes agree bit for bit, words match the formula.

P in {1, 2, 4, 8} virtual ranks (threads), c in {1, 2}; Hypothesis draws the
graph (isolated vertices included), the bulk (k = 0 and k < P included), the
sampler and its sizes.  tests/mpi/sampling_checks.py runs the same checks
under mpiexec.
"""

import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings

from spgnn import (DistSparseMatrix, GridError, Layout, LayoutMismatch, grid_1d, grid_15d,
                   run_loopback)
from spgnn.sampling import GraphSAGESampler, PartitionedGraph, sample_partitioned

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sampling_cases import check_modes_agree, check_words, dist_case, graph  # noqa: E402

TIMEOUT = 30


@given(dist_case())
@settings(max_examples=20)
def test_partitioned_equals_replicated_equals_serial(case):
    run_loopback(case["p"], check_modes_agree, case, timeout=TIMEOUT)


@given(dist_case())
@settings(max_examples=15)
def test_spgemm_15d_words_match_formula(case):
    run_loopback(case["p"], check_words, case, timeout=TIMEOUT)


def test_every_grid_on_one_bulk():
    """One fixed bulk, every (P, c) and every sampler: all agree with the serial result."""
    base = dict(n=64, density=0.08, isolated=3, gseed=7, ids="shifted", sizes=(4, 3),
                seed=21, root=0, batches=np.random.default_rng(3).integers(0, 64, (9, 4)))
    for kind in ("sage-tree", "sage-unique", "ladies"):
        for p, c in ((1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (8, 1), (8, 2)):
            case = dict(base, p=p, c=c, kind=kind, prob="sum_of_squares")
            run_loopback(p, check_modes_agree, case, timeout=TIMEOUT)


def test_partitioned_rejects_bad_layouts():
    a = graph(10, 0.3, 1)

    def body(comm):
        grid = grid_15d(2, comm)
        A = DistSparseMatrix.from_global(a, grid, Layout("row", "layer"))
        try:
            PartitionedGraph(A)
        except LayoutMismatch:
            pass
        else:
            raise AssertionError("Layout('row', 'layer') accepted")
        B = DistSparseMatrix.from_global(a, grid_1d(comm), Layout("row"))
        try:
            sample_partitioned(GraphSAGESampler([2]), B, [np.array([0])])
        except GridError:
            pass
        else:
            raise AssertionError("a 1D grid accepted")
        return True

    assert all(run_loopback(2, body, timeout=TIMEOUT))
