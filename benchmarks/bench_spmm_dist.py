"""Thin wrapper: ``python benchmarks/bench_spmm_dist.py ARGS`` is ``python -m spgnn bench spmm ARGS``.

The benchmark lives in :mod:`spgnn.benchmarks.spmm`.
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _wrapper import run_command

    run_command(["-m", "spgnn", "bench", "spmm", *sys.argv[1:]])
