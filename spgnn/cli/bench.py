"""``python -m spgnn bench {kernels,gcn,sampling,spmm} [--graph G ...] [--json] [--plot FILE]``.

Runs one of the benchmarks of :mod:`spgnn.benchmarks` with its own options
(``python -m spgnn bench KIND --help`` lists them); every kind takes
``--graph`` (a dataset name, a file or a generator spec; repeatable),
``--json`` and ``--plot FILE`` (bars with ranges and ratios, matplotlib).
``spmm`` is collective: launch it with ``mpiexec -n P``.

Thread counts: BLAS, OpenMP and Numba read their thread variables once, when
they load, and ``python -m spgnn`` has loaded numpy before any command runs;
so when ``--threads`` asks for other values than the environment holds, the
command sets them and re-executes itself (once; never under ``mpiexec``,
where ranks keep the launcher's environment).
"""

import argparse
import importlib
import os
import sys

KINDS = {"kernels": "spgnn.benchmarks.kernels", "gcn": "spgnn.benchmarks.gcn",
         "sampling": "spgnn.benchmarks.sampling", "spmm": "spgnn.benchmarks.spmm"}
_REEXEC = "SPGNN_BENCH_REEXEC"


def add_parser(sub):
    p = sub.add_parser("bench", help="run a benchmark (kernels, gcn, sampling, spmm) on any "
                                     "graph; JSON and a figure", add_help=False)
    p.add_argument("kind", choices=tuple(KINDS), help="which benchmark")
    p.add_argument("args", nargs=argparse.REMAINDER,
                   help="the benchmark's options (python -m spgnn bench KIND --help)")
    p.set_defaults(command="bench")
    return p


def _under_mpi():
    return any(v in os.environ for v in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK"))


def run(args):
    module = importlib.import_module(KINDS[args.kind])
    want = module.thread_env(args.args) if hasattr(module, "thread_env") else {}
    differs = {k: v for k, v in want.items() if os.environ.get(k) != v}
    if differs and not _under_mpi() and not os.environ.get(_REEXEC):
        os.environ.update(differs)
        os.environ[_REEXEC] = "1"
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, "-m", "spgnn", "bench", args.kind, *args.args])
    result = module.main(args.args)
    return result if isinstance(result, int) else 0
