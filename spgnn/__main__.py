"""``python -m spgnn COMMAND``: see ``python -m spgnn --help``."""

import argparse
import sys

from .errors import SpgnnError
from .cli import calibrate, demo, info, plan, spmm

COMMANDS = {"demo": demo, "info": info, "spmm": spmm, "plan": plan, "calibrate": calibrate}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m spgnn",
                                     description="spgnn: distributed sparse linear algebra for GNNs")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, mod in COMMANDS.items():
        mod.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command].run(args) or 0
    except (SpgnnError, ValueError, TypeError, OSError, ImportError) as exc:
        # Bad input: one line instead of a traceback per rank.  Abort so that
        # a rank failing alone never leaves the others waiting.
        from .comm.communicator import abort_if_parallel

        print(f"spgnn {args.command}: error: {exc}", file=sys.stderr, flush=True)
        abort_if_parallel(2)
        return 2


if __name__ == "__main__":
    sys.exit(main())
