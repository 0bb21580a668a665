"""Shared helpers of the scripts in benchmarks/: the timing rule lives in :mod:`spgnn.bench`,
``write_record`` in :mod:`spgnn.benchmarks.common` (kept here for the scripts that import it)."""

import json

from spgnn.bench import machine, time_collective
from spgnn.benchmarks.common import write_record

__all__ = ["time_collective", "machine", "emit", "write_record"]


def emit(comm, record, as_json):
    """Print ``record`` (a dict) on rank 0 as a JSON line or ``key=value`` pairs."""
    if comm.rank != 0:
        return
    if as_json:
        print(json.dumps(record), flush=True)
    else:
        print("  ".join(f"{k}={v}" for k, v in record.items()), flush=True)
