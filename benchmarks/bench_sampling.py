"""Thin wrapper: ``python benchmarks/bench_sampling.py ARGS`` is ``python -m spgnn bench sampling ARGS``.

The benchmark lives in :mod:`spgnn.benchmarks.sampling`.
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _wrapper import run_command

    run_command(["-m", "spgnn", "bench", "sampling", *sys.argv[1:]])
