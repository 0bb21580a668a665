"""Timing helpers shared by the benchmarks (OSU style).

Warm-ups first, a barrier before each timed repetition, the time of a
repetition is the maximum over ranks (the slowest rank decides), and the
report is the median over repetitions.  Only rank 0 prints.
"""

import json
import platform
import statistics
import time

import numpy as np

__all__ = ["time_collective", "machine", "emit"]


def time_collective(comm, fn, *, repeat=5, warmup=1):
    """Median over ``repeat`` runs of the slowest rank's time for ``fn()``. Collective."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        comm.barrier()
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        times.append(float(comm.allreduce(np.array([dt]), op="max", label="bench:time")[0]))
    return statistics.median(times)


def machine():
    """A short description of where a benchmark ran."""
    import os

    return {"host_cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "python": platform.python_version()}


def emit(comm, record, as_json):
    """Print ``record`` (a dict) on rank 0 as a JSON line or ``key=value`` pairs."""
    if comm.rank != 0:
        return
    if as_json:
        print(json.dumps(record), flush=True)
    else:
        print("  ".join(f"{k}={v}" for k, v in record.items()), flush=True)
