"""Plexus's 3D optimisations: ``python benchmarks/bench_plexus.py imbalance`` (nnz max/mean per rank,
original / single / double permutation, 8-64 ranks, computed) and ``mpiexec -n 2 python
benchmarks/bench_plexus.py memory`` (peak memory of blocked aggregation).  See
spgnn/benchmarks/plexus.py and docs/performance_model.md.
"""

import os
import sys

if __name__ == "__main__":
    if not os.environ.get("SPGNN_DATA"):
        os.environ["SPGNN_DATA"] = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                "..", "..", "shared", "data")
    from spgnn.benchmarks.plexus import main

    sys.exit(main())
