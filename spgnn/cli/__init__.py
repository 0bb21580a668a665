"""Command-line subcommands; each module has ``add_parser(subparsers)`` and ``run(args)``."""

import json


def print_result(comm, result, as_json):
    """Print a command's result dict on rank 0: one JSON object, or aligned ``key value`` lines."""
    if comm.rank != 0:
        return
    if as_json:
        print(json.dumps(result), flush=True)
        return
    width = max((len(k) for k in result), default=0) + 2
    for key, val in result.items():
        print(f"{key:<{width}} {val}")
