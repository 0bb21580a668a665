"""Minibatch GraphSAGE on loopback ranks (the checks live in tests/mpi/sage_checks.py).

What is invariant (see ``spgnn/gnn/minibatch.py``):

* ``FeatureStore.fetch`` returns ``X[ids]`` in request order for any ids
  (repeats, empty, all local, all remote) and moves each distinct remote row
  once: ledger bytes = ``|distinct remote ids| · row bytes`` received for
  rows, ``8 · |distinct remote ids|`` + the counts for ids.
* Training on P ranks follows ``step_schedule(num_batches, bulk, P)``: after
  every epoch every rank holds bit-identical parameters, equal (to 1e-10,
  summation order) to one process that averages, per step, the summed-loss
  gradients of exactly the minibatches of that step -- for the GraphSAGE and
  LADIES samplers, replicated and partitioned (c = 2) graphs, with dropout on.
* With one minibatch per step (``bulk`` = 1 ... or a single minibatch per
  epoch) P does not matter at all: the parameters equal the P = 1 run bit for
  bit.
* Restoring ``state_dict`` after an epoch and training on gives the same
  bits as training straight through.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

from spgnn import run_loopback
from spgnn.gnn.minibatch import bulk_positions, step_schedule
from spgnn.sampling import GraphSAGESampler, sample_partitioned, sample_replicated

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mpi"))
from sage_checks import (CFG, check_fetch, check_resume, check_same_on_every_rank,  # noqa: E402
                         check_training, reference_params, sbm_graph, train_dist)

TIMEOUT = 120
GRAPH = sbm_graph()


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_fetch_rows_dedup_and_ledger(p):
    run_loopback(p, check_fetch, timeout=TIMEOUT)


@pytest.mark.parametrize("p", [1, 2, 4])
@pytest.mark.parametrize("sampler", ["sage", "ladies"])
def test_training_matches_single_process_schedule(p, sampler):
    cfg = dict(CFG, sampler=sampler)
    ref = reference_params(GRAPH, p, cfg)
    run_loopback(p, check_training, GRAPH, cfg, ref, timeout=TIMEOUT)


def test_partitioned_mode_matches_its_schedule():
    cfg = dict(CFG, epochs=1)
    ref = reference_params(GRAPH, 4, cfg, "partitioned", 2)
    run_loopback(4, check_training, GRAPH, cfg, ref, "partitioned", 2, timeout=TIMEOUT)


def test_one_minibatch_per_step_is_independent_of_p():
    """batch_size >= n_train: one minibatch per epoch, empty steps elsewhere add exact zeros."""
    cfg = dict(CFG, batch_size=1000, epochs=2)

    def final(comm):
        _, states, _ = train_dist(comm, GRAPH, cfg)
        check_same_on_every_rank(comm, states[-1], "final")
        return states[-1]

    one = run_loopback(1, final, timeout=TIMEOUT)[0]
    for p in (2, 3):
        got = run_loopback(p, final, timeout=TIMEOUT)[0]
        for k in one:
            assert np.array_equal(one[k], got[k]), (p, k)


@pytest.mark.parametrize("p", [1, 3])
def test_resume_is_bit_identical(p):
    run_loopback(p, check_resume, GRAPH, CFG, timeout=TIMEOUT)


@pytest.mark.parametrize("nb,bulk,p,mode,c", [(9, 4, 4, "replicated", 1), (9, 4, 3, "replicated", 1),
                                              (1, 16, 4, "replicated", 1), (17, 16, 2, "replicated", 1),
                                              (11, 5, 4, "partitioned", 2), (7, 7, 6, "partitioned", 3)])
def test_step_schedule_covers_every_minibatch_once(nb, bulk, p, mode, c):
    s = step_schedule(nb, bulk, p, mode, c)
    ids = s[s >= 0]
    assert sorted(ids.tolist()) == list(range(nb))
    assert all((row >= 0).any() for row in s)           # no step is empty everywhere


@pytest.mark.parametrize("p,c", [(4, 1), (4, 2), (6, 3), (6, 2)])
def test_bulk_positions_match_the_samplers(p, c):
    """The trainer's idea of who gets which minibatch is what the samplers hand out."""
    import scipy.sparse as sp

    from spgnn.grid import grid_15d
    from spgnn.sampling import PartitionedGraph

    a = sp.csr_array(sp.random_array((20, 20), density=0.2, rng=np.random.default_rng(0)))
    a = a + a.T
    sampler = GraphSAGESampler((2,), frontier="unique", seed=0)
    k = 7
    batches = [np.array([i, (i + 3) % 20]) for i in range(k)]

    def body(comm):
        got_rep = sample_replicated(sampler, a, batches, comm).minibatch_ids
        pa = PartitionedGraph.from_global(a, grid_15d(c, comm))
        got_par = sample_partitioned(sampler, pa, batches).minibatch_ids
        lo, hi = bulk_positions(k, p, comm.rank, "replicated")
        plo, phi = bulk_positions(k, p, comm.rank, "partitioned", c)
        return (np.array_equal(got_rep, np.arange(lo, hi))
                and np.array_equal(got_par, np.arange(plo, phi)))

    assert all(run_loopback(p, body, timeout=TIMEOUT))
