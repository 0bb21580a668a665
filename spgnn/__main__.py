"""``python -m spgnn COMMAND``: see ``python -m spgnn --help``."""

import argparse
import re
import sys
import time

from .errors import SpgnnError
from .cli import bench, calibrate, datasets, demo, graph, info, partition, plan, spmm, train

COMMANDS = {"demo": demo, "info": info, "spmm": spmm, "plan": plan, "calibrate": calibrate,
            "train": train, "datasets": datasets, "bench": bench, "graph": graph,
            "partition": partition}


#: A value that starts with a minus sign and a digit, such as ``-1,5,5`` or
#: ``-1e-3``: argparse takes only plain negative numbers as values, the rest
#: as unknown options.  No spgnn option looks like this.
_NEGATIVE_VALUE = re.compile(r"-\d[\d.,eE+-]*")


def join_negative_values(argv):
    """``--opt -1,5,5`` -> ``--opt=-1,5,5``, so that our validators (not argparse) judge the value."""
    out = []
    for token in argv:
        if (out and out[-1].startswith("--") and "=" not in out[-1]
                and _NEGATIVE_VALUE.fullmatch(token)):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m spgnn",
                                     description="spgnn: distributed sparse linear algebra for GNNs")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, mod in COMMANDS.items():
        mod.add_parser(sub)
    args = parser.parse_args(join_negative_values(sys.argv[1:] if argv is None else argv))
    try:
        return COMMANDS[args.command].run(args) or 0
    except KeyboardInterrupt:
        # One line, no traceback per rank.  In a parallel job the interrupt
        # watchdog (spgnn.comm) is ending every rank with MPI_Abort already;
        # wait for it rather than leave MPI with ranks still in a collective.
        from .comm import INTERRUPT_EXIT, world_size

        if world_size() > 1:
            time.sleep(10)
        print(f"spgnn {args.command}: interrupted", file=sys.stderr, flush=True)
        return INTERRUPT_EXIT
    except (SpgnnError, ValueError, TypeError, OSError, ImportError) as exc:
        # Bad input: one line instead of a traceback per rank.  An error every
        # rank raises together (Communicator.agree) is printed once and every
        # rank exits; one raised by a rank alone aborts the job so that no
        # rank is left waiting in a collective.
        from .comm import abort_if_parallel, finalize_world, is_agreed_on_world, world_rank

        agreed = is_agreed_on_world(exc)
        if not agreed or world_rank() == 0:
            print(f"spgnn {args.command}: error: {exc}", file=sys.stderr, flush=True)
        if agreed:
            finalize_world()          # every rank exits with 2; nothing aborts
        else:
            abort_if_parallel(2)
        return 2


if __name__ == "__main__":
    sys.exit(main())
