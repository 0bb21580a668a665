"""Shared benchmark helpers: the timing rule lives in :mod:`spgnn.bench`."""

import json

from spgnn.bench import machine, time_collective

__all__ = ["time_collective", "machine", "emit", "write_record"]


def emit(comm, record, as_json):
    """Print ``record`` (a dict) on rank 0 as a JSON line or ``key=value`` pairs."""
    if comm.rank != 0:
        return
    if as_json:
        print(json.dumps(record), flush=True)
    else:
        print("  ".join(f"{k}={v}" for k, v in record.items()), flush=True)


def write_record(record, out, as_json, print_table):
    """A single-process benchmark's end: the record to ``out`` (if given) as JSON, then
    the record as one JSON line (``as_json``) or ``print_table()``."""
    if out:
        with open(out, "w") as f:
            json.dump(record, f)
    if as_json:
        print(json.dumps(record))
    else:
        print_table()
