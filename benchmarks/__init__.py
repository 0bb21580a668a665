"""The benchmark suites: ``python -m spgnn bench NAME [ARGS]`` (``python -m spgnn bench`` lists them).

This folder is installed as ``spgnn._benchmarks`` (setup.py's
``package_dir``, like ``kernels/`` as ``spgnn._kernels``).  Each suite is one
module with ``main(argv)`` and its own options (``python -m spgnn bench NAME
--help``); :mod:`spgnn.cli.bench` finds it by name in :data:`SUITES`, so no
library module imports a suite.  A suite may define ``thread_env(argv)``: the
thread variables it needs set before numpy and numba load (the command
re-executes itself once to set them).  What the suites share (threads,
records, the figure, the shared data folder) is in ``_common.py``; the
timing rule is the library's :mod:`spgnn.bench`.

Results are timings on whatever machine runs them: never assertions
(benchmarks/README.md, docs/performance.md).  Suites that append to
``benchmarks/results/`` or write ``docs/figures/`` find those folders next to
this one: run them from a checkout (an editable install).
"""

import importlib

from ._common import use_shared_data

#: ``{name: what it measures}``, every suite of this folder (tests check the two agree).
SUITES = {
    "kernels": "local SpMM / SDDMM / SpGEMM against scipy, torch CSR and GraphBLAS",
    "gcn": "one GCN training epoch against PyTorch Geometric",
    "gcn_pyg": "the PyG / plain-PyTorch GCN baselines alone",
    "gat": "one GAT training epoch against PyTorch Geometric's GATConv",
    "sampling": "GraphSAGE bulk sampling against PyG's NeighborLoader",
    "spmm": "every distributed SpMM algorithm side by side (under mpiexec)",
    "plexus": "3D (Plexus) nnz imbalance per permutation, peak memory of blocked aggregation",
    "perfmodel": "the performance model measured against held-out kernels and whole epochs",
    "codec": "message-codec throughput against the STREAM triad",
    "comm_reduction": "communication reduction (paper 004): bytes, accuracy, planner, codec speed",
    "gpu": "CUDA kernels against cuSPARSE / torch CUDA, a GCN epoch against PyG on the GPU",
    "graphblas": "triangle counting and masked SpGEMM against python-graphblas (SuiteSparse)",
    "hec": "HEC against --hec off: accuracy, halo bytes, hit rates",
    "gcn_accuracy": "GCN test accuracy over seeds at 1 and 4 ranks",
    "sage_accuracy": "minibatch GraphSAGE accuracy with the sage and ladies samplers",
    "partition_table": "partitioners on real graphs: volumes, max send, imbalance",
    "scale": "setup, epoch and peak memory of train as the graph grows (medians of fresh jobs)",
    "streaming_partition": "the streaming partitioner LDG against METIS and random: cut, balance",
    "edgelist_gen": "writes a large synthetic text edge list (spgnn partition's streaming path)",
    "memory_peak_shards": "the memory model's predicted per-rank peak of a shard directory",
}


def load(name):
    """The suite module ``name`` (``SPGNN_DATA`` defaulted first, :func:`._common.use_shared_data`).

    Raises KeyError for a name that is not in :data:`SUITES`.
    """
    if name not in SUITES:
        raise KeyError(name)
    use_shared_data()
    return importlib.import_module(f"{__name__}.{name}")
