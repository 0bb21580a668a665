"""Validate the performance model (spgnn.plan.model): ``python benchmarks/bench_perfmodel.py MODE``.

``validate-compute`` (one process, < 5 min): fit the compute model on the
fitting shapes, then predict vs measure the held-out ones; prints the median
errors and appends a record to benchmarks/results/perfmodel.jsonl.
``validate-ranking`` (``mpiexec -n 2``, < 5 min): every 2-rank configuration's
GCN epoch, measured vs predicted, three times; prints Spearman's rho, the model's
and the measured best, the regret; appends a record.
``compute`` (one process): held-out kernel shapes, predicted vs measured.
``epochs`` (``mpiexec -n 2``): every 2-rank configuration's GCN epoch and
communication seconds, predicted vs measured, and the ranking.
``table``: the model's top configurations at 64-4096 ranks on SNAP graphs.

One BLAS/OpenMP/Numba thread per process unless the environment says
otherwise (the committed calibration's setting; one rank per core).
See docs/performance_model.md for the commands and the committed results.
"""

import os
import sys

if __name__ == "__main__":
    if not os.environ.get("SPGNN_DATA"):
        os.environ["SPGNN_DATA"] = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                "..", "..", "shared", "data")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "NUMBA_NUM_THREADS"):
        os.environ.setdefault(var, "1")          # before numpy and numba start
    from spgnn.benchmarks.perfmodel import main

    sys.exit(main())
