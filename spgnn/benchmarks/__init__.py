"""The benchmarks behind ``python -m spgnn bench KIND`` (and ``benchmarks/bench_*.py``).

* :mod:`~spgnn.benchmarks.kernels` -- local SpMM / SDDMM / SpGEMM against scipy,
  torch CSR and GraphBLAS;
* :mod:`~spgnn.benchmarks.gcn` -- one GCN training epoch against PyTorch
  Geometric (:mod:`~spgnn.benchmarks.gcn_pyg` holds the PyG baselines);
* :mod:`~spgnn.benchmarks.sampling` -- GraphSAGE bulk sampling against PyG's
  ``NeighborLoader``;
* :mod:`~spgnn.benchmarks.spmm` -- every distributed SpMM algorithm side by side
  (collective: under ``mpiexec``);
* :mod:`~spgnn.benchmarks.common` -- threads, graphs by name, records, figures.

Each module has ``main(argv)``: its options, ``--graph``, ``--json`` and
``--plot FILE``.  Results are timings on whatever machine runs them: never
assertions (benchmarks/README.md, docs/performance.md).
"""
