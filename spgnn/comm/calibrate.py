"""Measure the α–β (latency–inverse bandwidth) model on the current machine.

Collective: ranks 0 and 1 ping-pong a small and a large message; the others
wait.  α is half the small round trip, β the extra half round trip per byte
of the large one.  With more ranks than cores the numbers mean little;
measure with 2 ranks (``mpiexec -n 2 python -m spgnn calibrate``).
"""

import time

import numpy as np

__all__ = ["measure_alpha_beta", "measure_collectives", "COLLECTIVE_SIZES", "DEFAULT_ALPHA",
           "DEFAULT_BETA"]

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


#: Message sizes (bytes per rank) the collective calibration sweeps.
COLLECTIVE_SIZES = (8, 1 << 10, 1 << 14, 1 << 17, 1 << 20, 1 << 22, 1 << 23)


def measure_collectives(comm, *, sizes=COLLECTIVE_SIZES, reps=7):
    """Ledger rows ``(op, messages, bytes, seconds)`` of each collective kind and size. Collective.

    ``messages`` and ``bytes`` (the larger of sent and received) are the
    slowest rank's under the ledger's byte model; ``seconds`` is the median
    over ``reps`` of the slowest rank's time, each repetition after a
    barrier (medians resist the load of a shared machine; the minimum would
    flatter it).  Every rank returns the same rows.
    """
    p, r = comm.size, comm.rank
    rows = []
    for size in sizes:
        n = max(1, size // 4)
        buf = np.ones(n, dtype=np.float32)
        counts = [n // p + (1 if j < n % p else 0) for j in range(p)]
        sendbuf = np.ones(max(1, n // p) * p, dtype=np.float32)
        calls = {
            "allreduce": lambda: comm.allreduce(buf, label="calibrate"),
            "allgatherv": lambda: comm.allgatherv(buf[:counts[r]], counts, label="calibrate"),
            "alltoallv": lambda: comm.alltoallv(sendbuf, [len(sendbuf) // p] * p,
                                                recvcounts=[len(sendbuf) // p] * p,
                                                label="calibrate"),
            "bcast": lambda: comm.bcast(buf, root=0, label="calibrate"),
        }
        for op, fn in calls.items():
            fn()                                        # warm-up
            times = []
            for _ in range(reps):
                comm.barrier()
                with comm.track("calibrate-one") as st:
                    t0 = time.perf_counter()
                    fn()
                    dt = time.perf_counter() - t0
                ev = [e for e in st.events if e.op == op]
                local = np.array([dt, max(e.bytes_sent for e in ev), max(e.bytes_recv for e in ev),
                                  sum(e.messages for e in ev)], dtype=np.float64)
                times.append(comm.allreduce(local, op="max", label="calibrate:time"))
            med = np.median(np.array(times), axis=0)
            rows.append((op, int(med[3]), int(max(med[1], med[2])), float(med[0])))
    return rows
