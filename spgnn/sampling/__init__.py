"""Matrix-based bulk sampling for minibatch GNN training (GraphSAGE, LADIES).

Tripathy, Yelick, Buluç (MLSys 2024), ``research/003_matrix_sampling.md``;
the API, algorithms and RNG keying are described in ``docs/sampling.md``.

* :mod:`spgnn.sampling.local` -- one process: selection matrices, ``P = Q A``
  (SpGEMM or row gather), normalisation, sampling without replacement,
  extraction, bulk of ``k`` minibatches.
* :mod:`spgnn.sampling.distributed` -- graph-replicated (no communication)
  and graph-partitioned (sparsity-aware 1.5D SpGEMM) modes.
* :mod:`spgnn.sampling.rng` -- counter-based random numbers keyed to global ids.

Importing this package imports neither MPI nor numba.
"""

from .local import (FRONTIERS, LADIES_PROBS, SAMPLE_METHODS, BulkSample, GraphSAGESampler,
                    LADIESSampler, LocalGraph, SampledBlock, ladies_probabilities,
                    normalize_batches, probability_matrix, row_normalize, sample_rows,
                    selection_matrix, set_selection_matrix)
from .distributed import (PartitionedGraph, sa_spgemm_15d, sample_partitioned,
                          sample_replicated, sampling_words)

__all__ = [
    "BulkSample", "SampledBlock", "GraphSAGESampler", "LADIESSampler", "LocalGraph",
    "selection_matrix", "set_selection_matrix", "probability_matrix", "row_normalize",
    "sample_rows", "ladies_probabilities", "normalize_batches", "LADIES_PROBS",
    "SAMPLE_METHODS", "FRONTIERS",
    "PartitionedGraph", "sa_spgemm_15d", "sample_partitioned", "sample_replicated",
    "sampling_words",
]
