"""Thin wrapper: ``python benchmarks/bench_gcn_pyg.py ARGS`` is ``python -m spgnn.benchmarks.gcn_pyg ARGS``.

The PyG / plain-PyTorch GCN baselines live in :mod:`spgnn.benchmarks.gcn_pyg`.
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _wrapper import run_command

    run_command(["-m", "spgnn.benchmarks.gcn_pyg", *sys.argv[1:]])
