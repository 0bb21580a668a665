"""Graph partitioning and reordering for sparsity-aware distributed SpMM.

One list of partitioner names, :data:`PARTITIONERS`, and one entry point,
:func:`partition_graph` (the renumbering, block offsets and statistics a
command line or :class:`spgnn.gnn.DistGraph` needs).

Every partitioner returns a :class:`Partition`: a part id per vertex, the
permutation that makes every part contiguous (stable sort by part), the block
boundaries in the permuted order (usable as ``Layout("row",
row_splits=p.offsets)``) and exact communication statistics
(:class:`PartitionStats`).

Conventions
-----------
* A permutation ``perm`` maps new positions to old vertex ids:
  ``P X == X[perm]`` and ``P A Pᵀ == A[perm][:, perm]``;
  ``inverse_perm[old] == new``.
* Statistics are for ``Y = A X`` with A and X both split by rows along the
  same partition (1D sparsity-aware SpMM).  Rank ``i`` owns rows ``V_i`` of
  A, X and Y, and needs ``X[u]`` for every column ``u`` of its rows.  The
  structure of A is its stored entries that are not zero (explicit zeros
  are ignored: they cause no communication).

  - ``r(i, j)`` = number of vertices ``u`` in ``V_j`` (``j != i``) with some
    ``A[v, u] != 0``, ``v`` in ``V_i`` (``|NnzCols(i, j)|``),
  - ``λ_u`` = number of parts other than ``part(u)`` holding a row ``v``
    with ``A[v, u] != 0``,
  - send ``S_j = Σ_{u ∈ V_j} λ_u = Σ_i r(i, j)``, receive
    ``R_i = Σ_j r(i, j)``, total ``Σ_u λ_u`` (the λ−1 metric of the
    column-net hypergraph, METIS's total communication volume),
  - volumes are in rows of X: multiply by ``f · itemsize`` for bytes.

Partitioners
------------
:func:`block_partition` (contiguous, identity order),
:func:`random_partition` (balanced random), :func:`metis_partition`
(pymetis, vertex- or nnz-balanced, or on vertices and training vertices), :func:`ldg_partition`
(LDG, one streaming pass for graphs METIS cannot hold), :func:`balanced_partition` (METIS then a
refinement that lowers the maximum send volume, the objective of Graph-VB),
:func:`double_permutation` (Plexus's independent row and column
permutations) and :func:`reorder` (locality orders: RCM, degree, METIS).

Modules
-------
``stats`` (:class:`PartitionStats`, :func:`partition_stats`), ``result``
(:class:`Partition`), ``simple`` (block, random), ``metis``, ``balanced``
(the driver of the refinement kernel ``spgnn._kernels.numba.refine``),
``double`` (Plexus), ``locality`` (:func:`reorder`), ``order`` (orders from
part ids, ``P A Pᵀ``, a permuted graph, one rank's rows, partition files) and ``registry``
(:data:`PARTITIONERS`, :func:`partition_graph`).
"""

from .balanced import balanced_partition
from .double import DoublePermutation, block_nnz_imbalance, double_permutation
from .ldg import ldg_partition
from .metis import metis_partition
from .order import (local_view, order_from_parts, permute, permute_graph, read_partition_file,
                    write_partition_file)
from .registry import BALANCES_TRAINING, PARTITIONERS, PartitionOrder, partition_graph
from .locality import reorder
from .result import Partition
from .simple import block_partition, random_partition
from .stats import PartitionStats, partition_stats

__all__ = [
    "Partition", "PartitionStats", "DoublePermutation", "partition_stats", "block_partition",
    "random_partition", "metis_partition", "balanced_partition", "ldg_partition",
    "double_permutation",
    "reorder", "block_nnz_imbalance",
    # the registry and what the command lines do with a partition
    "PARTITIONERS", "BALANCES_TRAINING", "PartitionOrder", "partition_graph", "order_from_parts",
    "permute", "permute_graph", "local_view", "read_partition_file", "write_partition_file",
]
