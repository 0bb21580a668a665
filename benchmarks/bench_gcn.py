"""Thin wrapper: ``python benchmarks/bench_gcn.py ARGS`` is ``python -m spgnn bench gcn ARGS``.

The benchmark lives in :mod:`spgnn.benchmarks.gcn`.
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _wrapper import run_command

    run_command(["-m", "spgnn", "bench", "gcn", *sys.argv[1:]])
