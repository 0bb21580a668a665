"""Command-line subcommands; each module has ``add_parser(subparsers)`` and ``run(args)``."""

import json
import math


def print_result(comm, result, as_json):
    """Print a command's result dict on rank 0: one JSON object, or aligned ``key value`` lines."""
    if comm.rank != 0:
        return
    if as_json:
        print(json.dumps(json_safe(result), allow_nan=False), flush=True)
        return
    width = max((len(k) for k in result), default=0) + 2
    for key, val in result.items():
        print(f"{key:<{width}} {val}")


def json_safe(value):
    """``value`` with every NaN or infinite float replaced by ``None``. Pure.

    JSON has no NaN: ``json.dumps`` would write a bare ``NaN`` that strict
    parsers reject.  A quantity that is not a number (the accuracy of an
    empty set) is reported as null.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:    # numpy scalars
        return json_safe(value.item())
    return value
