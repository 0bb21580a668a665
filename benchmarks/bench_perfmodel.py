"""Validate the performance model (spgnn.perfmodel): ``python benchmarks/bench_perfmodel.py MODE``.

``compute`` (one process): held-out kernel shapes, predicted vs measured.
``epochs`` (``mpiexec -n 2``): every 2-rank configuration's GCN epoch and
communication seconds, predicted vs measured, and the ranking.
``table``: the model's top configurations at 64-4096 ranks on SNAP graphs.
See docs/performance_model.md for the commands and the committed results.
"""

import os
import sys

if __name__ == "__main__":
    if not os.environ.get("SPGNN_DATA"):
        os.environ["SPGNN_DATA"] = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                "..", "..", "shared", "data")
    from spgnn.benchmarks.perfmodel import main

    sys.exit(main())
