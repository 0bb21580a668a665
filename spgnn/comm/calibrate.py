"""Measure the α–β (latency–inverse bandwidth) model on the current machine.

Collective: ranks 0 and 1 ping-pong a small and a large message; the others
wait.  α is half the small round trip, β the extra half round trip per byte
of the large one.  With more ranks than cores the numbers mean little;
measure with 2 ranks (``mpiexec -n 2 python -m spgnn calibrate``).
"""

import time

import numpy as np

__all__ = ["measure_alpha_beta", "DEFAULT_ALPHA", "DEFAULT_BETA"]

#: Fallback when nothing can be measured: 2 µs and 10 GB/s (shared-memory MPI, one node).
DEFAULT_ALPHA = 2e-6
DEFAULT_BETA = 1e-10


def _pingpong(comm, nbytes, reps):
    buf = np.zeros(max(1, nbytes), dtype=np.uint8)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        if comm.rank == 0:
            comm.send(buf, 1, label="calibrate")
            comm.recv(buf, 1, label="calibrate")
        else:
            comm.recv(buf, 0, label="calibrate")
            comm.send(buf, 0, label="calibrate")
        best = min(best, time.perf_counter() - t0)
    return best


def measure_alpha_beta(comm, *, small=8, large=1 << 22, reps=20):
    """Return ``(alpha_seconds, beta_seconds_per_byte)`` on every rank. Collective.

    With a single rank nothing can be measured and the defaults are returned.
    """
    result = np.array([DEFAULT_ALPHA, DEFAULT_BETA])
    if comm.size >= 2:
        if comm.rank == 0 or comm.rank == 1:
            sub = comm.split(0, comm.rank)
            t_small = _pingpong(sub, small, reps)
            t_large = _pingpong(sub, large, max(3, reps // 4))
            alpha = t_small / 2
            beta = max(t_large / 2 - alpha, 1e-12) / large
            result = np.array([alpha, beta])
        else:
            comm.split(None, comm.rank)
        result = comm.bcast(result, root=0, label="calibrate")
    return float(result[0]), float(result[1])
