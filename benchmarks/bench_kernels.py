"""Thin wrapper: ``python benchmarks/bench_kernels.py ARGS`` is ``python -m spgnn bench kernels ARGS``.

The benchmark lives in :mod:`spgnn.benchmarks.kernels` (installed with spgnn,
so ``python -m spgnn bench kernels`` works from any checkout or install).
Importing this file gives that module's functions (``combine_reports``,
``markdown_tables``, ...).
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _wrapper import run_command

    run_command(["-m", "spgnn", "bench", "kernels", *sys.argv[1:]])

from spgnn.benchmarks.kernels import *  # noqa: E402,F401,F403
from spgnn.benchmarks.kernels import combine_reports, main, markdown_tables  # noqa: E402,F401
