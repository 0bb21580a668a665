"""``python -m spgnn COMMAND``: see ``python -m spgnn --help``."""

import argparse
import sys

from .cli import demo, info

COMMANDS = {"demo": demo, "info": info}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m spgnn",
                                     description="spgnn: distributed sparse linear algebra for GNNs")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, mod in COMMANDS.items():
        mod.add_parser(sub)
    args = parser.parse_args(argv)
    return COMMANDS[args.command].run(args) or 0


if __name__ == "__main__":
    sys.exit(main())
