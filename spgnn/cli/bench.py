"""``python -m spgnn bench NAME [ARGS]``: run one benchmark suite; ``python -m spgnn bench`` lists them.

The suites are the repository's ``benchmarks/`` folder, installed as
``spgnn._benchmarks`` (one module per suite, each with ``main(argv)`` and
its own options: ``python -m spgnn bench NAME --help``).  They are found
here by name, with :mod:`importlib`, so no library module imports a suite.
Suites that take ``--graph`` take a dataset name, a file or a generator spec
(repeatable), ``--json`` and ``--plot FILE``.  ``spmm`` is collective: launch
it with ``mpiexec -n P``.  When ``SPGNN_DATA`` is unset it is pointed at the
project's shared data folder, if there is one.

Thread counts: BLAS, OpenMP and Numba read their thread variables once, when
they load, and ``python -m spgnn`` has loaded numpy before any command runs;
so when a suite's ``thread_env(argv)`` (``--threads``) asks for other values
than the environment holds, the command sets them and re-executes itself
(once; never under ``mpiexec``, where ranks keep the launcher's environment).
"""

import argparse
import importlib
import os
import sys

#: The installed package of the suites (benchmarks/), imported by name only.
PACKAGE = "spgnn._benchmarks"
_REEXEC = "SPGNN_BENCH_REEXEC"


def add_parser(sub):
    p = sub.add_parser("bench", help="run a benchmark suite (python -m spgnn bench lists them)",
                       add_help=False)
    p.add_argument("-h", "--help", dest="kind", action="store_const", const=None,
                   help="list the suites")
    p.add_argument("kind", nargs="?", default=None, metavar="NAME", help="which suite")
    p.add_argument("args", nargs=argparse.REMAINDER,
                   help="the suite's options (python -m spgnn bench NAME --help)")
    p.set_defaults(command="bench")
    return p


def _under_mpi():
    return any(v in os.environ for v in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK"))


def _listing(suites):
    width = max(map(len, suites))
    return "\n".join(["usage: python -m spgnn bench NAME [ARGS]  (NAME --help: its options)", "",
                      "suites:"] + [f"  {n:<{width}}  {what}" for n, what in suites.items()])


def run(args):
    suites = importlib.import_module(PACKAGE)
    if args.kind not in suites.SUITES:
        listing = _listing(suites.SUITES)
        if args.kind in (None, "-h", "--help", "help"):
            print(listing)
            return 0
        print(f"spgnn bench: unknown suite {args.kind!r}\n\n{listing}", file=sys.stderr)
        return 2
    module = suites.load(args.kind)
    want = module.thread_env(args.args) if hasattr(module, "thread_env") else {}
    differs = {k: v for k, v in want.items() if os.environ.get(k) != v}
    if differs and not _under_mpi() and not os.environ.get(_REEXEC):
        os.environ.update(differs)
        os.environ[_REEXEC] = "1"
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, "-m", "spgnn", "bench", args.kind, *args.args])
    result = module.main(args.args)
    return result if isinstance(result, int) else 0
