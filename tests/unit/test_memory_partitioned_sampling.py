"""The distributed sampler's iteration bound against tracemalloc (issue 37).

One :func:`~spgnn.sampling.sample_partitioned` call (GraphSAGE, ``--frontier
unique``, a bulk of 8 minibatches) on a small graph with skewed degrees, at 2
loopback ranks (threads of this process: tracemalloc sees both), on
``grid_15d(1)`` and ``grid_15d(2)``, numba backend (the default; numpy's reference
SpGEMM expands every term and is not priced): the peak tracemalloc sees above what was
allocated before must not exceed the two ranks'
:func:`~spgnn.plan.memory_minibatch.partitioned_sampling_bytes` summed, and the
bound must not be many times the peak (it is made from the largest degrees).
"""

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.comm import run_loopback
from spgnn.grid import grid_15d
from spgnn.layout import block_offsets
from spgnn.plan.memory_minibatch import (halo_counts, partitioned_sampling_bytes,
                                         partitioned_view_counts, top_degrees_needed)
from spgnn.sampling import GraphSAGESampler, PartitionedGraph, sample_partitioned

N, FANOUT, BATCH, BULK = 3000, (5, 3), 64, 8


def _graph():
    rng = np.random.default_rng(7)
    # skewed degrees: endpoints drawn with a power-law weight
    w = 1.0 / np.arange(1, N + 1) ** 0.8
    w /= w.sum()
    src = rng.choice(N, 40_000, p=w)
    dst = rng.integers(0, N, 40_000)
    a = sp.coo_array((np.ones(src.size), (src, dst)), shape=(N, N)).tocsr()
    a = ((a + a.T) > 0).astype(np.float64).tocsr()
    a.sum_duplicates()
    a.sort_indices()
    return a


def _job(comm, a, c, batches, backend):
    g = PartitionedGraph.from_global(a, grid_15d(c, comm), backend=backend)
    sampler = GraphSAGESampler(FANOUT, frontier="unique", seed=3)
    # once first: the kernels' first call compiles and caches (not the sampler's memory)
    sample_partitioned(sampler, g, batches[:2])
    comm.barrier()
    if comm.rank == 0:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
    comm.barrier()
    bulk = sample_partitioned(sampler, g, batches)
    comm.barrier()
    out = tracemalloc.get_traced_memory()[1] - base if comm.rank == 0 else None
    comm.barrier()
    del bulk
    return out


@pytest.mark.parametrize("c", [1, 2])
def test_partitioned_sampling_bound_holds(c, backend="numba"):
    a = _graph()
    rng = np.random.default_rng(1)
    batches = [rng.choice(N, BATCH, replace=False) for _ in range(BULK)]
    counts = halo_counts(a, block_offsets(N, 2), np.ones(N, dtype=bool), 4, 2)
    counts = partitioned_view_counts(counts, a, block_offsets(N, 2 // c),
                                     top_degrees_needed(BATCH, FANOUT, N))
    bound = int(np.sum(partitioned_sampling_bytes(counts, FANOUT, BATCH, BULK)))
    tracemalloc.start()
    try:
        peak = run_loopback(2, _job, a, c, batches, backend)[0]
    finally:
        tracemalloc.stop()
    assert 0 < peak <= bound, (peak, bound)
    assert bound < 8 * peak, (peak, bound)
