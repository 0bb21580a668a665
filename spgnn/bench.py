"""Timing helpers for commands, calibration and benchmarks (OSU style).

Warm-ups first, a barrier before each timed repetition, the time of a
repetition is the slowest rank's, and the report is the median over
repetitions.  Never used in unit tests: timings are not assertions.
"""

import os
import platform
import statistics
import time

import numpy as np

__all__ = ["time_collective", "median_seconds", "machine", "StageClock", "peak_rss_bytes"]


def time_collective(comm, fn, *, repeat=5, warmup=1, with_max=False):
    """``(median, min)`` over ``repeat`` runs of the slowest rank's time for ``fn()``
    (``(median, min, max)`` with ``with_max``). Collective."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(1, repeat)):
        comm.barrier()
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        times.append(float(comm.allreduce(np.array([dt]), op="max", label="bench:time")[0]))
    if with_max:
        return statistics.median(times), min(times), max(times)
    return statistics.median(times), min(times)


def median_seconds(fn, reps=5):
    """Median wall time of ``fn()`` over ``reps`` runs after one warm-up. Local."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def peak_rss_bytes(comm):
    """``{"per_rank": [...], "max": int}``: each rank's peak resident memory so far. Collective.

    From ``getrusage(RUSAGE_SELF).ru_maxrss`` (KiB on Linux, bytes on macOS):
    the high-water mark of the whole process -- interpreter, libraries and
    every transient of setup included -- which is what a batch system's
    memory limit is checked against.
    """
    import resource
    import sys

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss = int(rss) if sys.platform == "darwin" else int(rss) * 1024
    per_rank = [int(v) for v in comm.allgather_obj(rss, label="report:memory")]
    return {"per_rank": per_rank, "max": max(per_rank)}


def machine():
    """A short description of where a measurement ran."""
    return {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "python": platform.python_version(),
            "numba_threads": os.environ.get("NUMBA_NUM_THREADS", "default")}


class StageClock:
    """Seconds per named setup stage on this rank: ``with clock.stage("generate"): ...``. Local.

    A stage entered again adds to its total.  :meth:`by_stage` (collective)
    gives each stage's maximum over the ranks (``setup_seconds_by_stage``).
    """

    def __init__(self):
        self.seconds = {}

    def stage(self, name):
        import contextlib

        @contextlib.contextmanager
        def timed():
            t0 = time.perf_counter()
            try:
                yield
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0
        return timed()

    def by_stage(self, comm, label="train:report"):
        """``{stage: max seconds over ranks}`` in the order of first use. Collective."""
        names = []
        for part in comm.allgather_obj(list(self.seconds), label=label):
            names += [k for k in part if k not in names]
        mine = np.array([self.seconds.get(k, 0.0) for k in names])
        red = comm.allreduce(mine, op="max", label=label) if names else mine
        return {k: float(v) for k, v in zip(names, red)}
