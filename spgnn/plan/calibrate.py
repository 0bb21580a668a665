"""Measure the machine for the performance model (:mod:`spgnn.plan.model`), and fit it.

Communication:

* :func:`measure_alpha_beta`: α (latency) and β (seconds per byte) of a
  ping-pong between ranks 0 and 1 (the others wait).  α is half the small
  round trip, β the extra half round trip per byte of the large one.  With
  more ranks than cores the numbers mean little; measure with 2 ranks
  (``mpiexec -n 2 python -m spgnn calibrate``);
* :func:`measure_collectives`: ledger rows of each collective kind and size,
  which :func:`spgnn.plan.model.fit_comm` fits.

Compute, and the fit:

* :func:`measure_spmm` / :func:`measure_gemm`: median seconds of the local
  kernels (through the backend, as training runs them) over a list of shapes;
* :func:`calibrate`: fit :class:`spgnn.plan.model.Calibration` on the
  *fitting* shapes (R-MAT graphs, a grid of GEMM shapes) in one process, or
  the collectives (:func:`measure_collectives`) with two ranks or more;
* :func:`validate_compute`: predicted vs measured on *held-out* shapes
  (real graphs, other GEMM shapes), median relative error.

Timings on a shared machine are noisy: every number is the median of
``reps`` runs after a warm-up (:func:`spgnn.bench.median_seconds`).  Never
used by unit tests.
"""

import statistics
import time

import numpy as np

from ..backends import get_backend
from ..bench import machine, median_seconds
from ..io import load_adjacency
from ..io.preprocess import normalized_adjacency as normalize_adjacency
from ..local import LocalCSR
from .model import DEFAULT_CALIBRATION, Calibration, fit_comm, fit_gemm, fit_spmm

__all__ = ["measure_alpha_beta", "measure_collectives", "COLLECTIVE_SIZES", "DEFAULT_ALPHA",
           "DEFAULT_BETA", "FIT_SPMM_GRAPHS", "FIT_FEATS", "FIT_GEMM", "HELDOUT_SPMM_GRAPHS",
           "HELDOUT_FEATS", "HELDOUT_GEMM", "measure_spmm", "measure_gemm", "calibrate",
           "validate_compute"]

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


# --------------------------------------------------------------------- compute, and the fit
#: Fitting set: R-MAT graphs (scale, edge factor) and feature widths.
FIT_SPMM_GRAPHS = ("rmat:10:8", "rmat:12:4", "rmat:12:16", "rmat:14:8", "rmat:15:2")
FIT_FEATS = (4, 16, 64, 128)
#: GEMM (m, k, n): a grid of the tall-skinny products of a layer (n_r×D·D×D')
#: and of its weight gradient (D×n_r·n_r×D').
FIT_GEMM = tuple([(m, k, n) for m in (1000, 8000, 64000) for k in (8, 32, 128, 512)
                  for n in (8, 32, 128, 512) if m * k * n <= 64000 * 128 * 128]
                 + [(k, m, n) for m in (2000, 16000, 64000) for k in (8, 32, 128, 512)
                    for n in (8, 32, 128) if m * k * n <= 64000 * 128 * 128])
#: Held-out set: real graphs (dataset names) and other widths and shapes.
HELDOUT_SPMM_GRAPHS = ("cora", "ego-facebook", "ca-astroph", "email-enron", "luxembourg-osm")
HELDOUT_FEATS = (8, 32, 96)
HELDOUT_GEMM = ((2708, 1433, 16), (2708, 16, 7), (16, 2708, 7), (4039, 32, 32),
                (20000, 96, 24), (24, 20000, 96), (5000, 200, 50), (300, 300, 300),
                (12000, 8, 128), (128, 12000, 8))


def _load(spec):
    adj, name = load_adjacency(spec)
    return normalize_adjacency(adj).astype(np.float32), name


def measure_spmm(specs, feats, backend=None, reps=5, log=None):
    """``[(m, nnz, f, seconds, name), ...]`` of ``Â X`` for every graph spec and width. Local."""
    be = get_backend(backend)
    out = []
    for spec in specs:
        a, name = _load(spec)
        local = LocalCSR.from_scipy(a)
        rng = np.random.default_rng(0)
        for f in feats:
            x = rng.standard_normal((a.shape[1], f)).astype(np.float32)
            t = median_seconds(lambda: be.spmm(local, x, "plus_times"), reps)
            out.append((a.shape[0], int(a.nnz), int(f), t, name))
            if log:
                log(f"spmm {name} n={a.shape[0]} nnz={a.nnz} f={f}: {t * 1e3:.3f} ms")
    return out


def measure_gemm(shapes, backend=None, reps=5, log=None):
    """``[(m, k, n, seconds), ...]`` of the backend's float32 ``matmul``. Local."""
    be = get_backend(backend)
    rng = np.random.default_rng(0)
    out = []
    for m, k, n in shapes:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        t = median_seconds(lambda: be.matmul(a, b), reps)
        out.append((m, k, n, t))
        if log:
            log(f"gemm {m}x{k}x{n}: {t * 1e3:.3f} ms")
    return out


def calibrate(comm=None, backend=None, reps=5, log=None, previous=None):
    """Measure and fit a :class:`~spgnn.plan.model.Calibration`. Collective when ``comm`` is given.

    One process (``comm`` None or of size 1): the compute kernels, keeping
    ``previous``'s communication.  Two ranks or more: the collectives,
    keeping ``previous``'s compute -- never both, because an MPI rank
    waiting in a barrier spins on a core, and on a machine with few cores
    the kernels measured beside it run in scheduler time slices (8 or 16 ms
    each here).  Returns the calibration on rank 0, ``None`` elsewhere.
    """
    base = previous if previous is not None else DEFAULT_CALIBRATION
    meta = dict(base.meta)
    meta.pop("source", None)
    stamp = {"machine": machine(), "reps": reps,
             "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if comm is not None and comm.size >= 2:
        rows = measure_collectives(comm, reps=max(reps, 5))
        if comm.rank != 0:
            return None
        meta["comm"] = {**stamp, "ranks": comm.size, "samples": rows}
        return Calibration(fit_comm(rows), base.spmm, base.gemm, meta, base.gemm_table)
    spmm_rows = measure_spmm(FIT_SPMM_GRAPHS, FIT_FEATS, backend, reps, log)
    gemm_rows = measure_gemm(FIT_GEMM, backend, reps, log)
    meta["compute"] = {**stamp, "backend": backend or "default",
                       "spmm_samples": [r[:4] for r in spmm_rows]}
    return Calibration(base.comm, fit_spmm([r[:4] for r in spmm_rows]), fit_gemm(gemm_rows),
                       meta, tuple(gemm_rows))


def _errors(pred, meas):
    return [abs(p - m) / m for p, m in zip(pred, meas)]


def validate_compute(cal, backend=None, reps=5, log=None):
    """Predicted vs measured kernel times on the held-out shapes. Local.

    Returns ``{"spmm": rows, "gemm": rows, "spmm_median_error": e,
    "gemm_median_error": e}`` with rows ``[shape..., measured, predicted]``.
    """
    spmm = measure_spmm(HELDOUT_SPMM_GRAPHS, HELDOUT_FEATS, backend, reps, log)
    gemm = measure_gemm(HELDOUT_GEMM, backend, reps, log)
    spmm_rows = [(name, m, z, f, t, cal.spmm_seconds(m, z, f)) for m, z, f, t, name in spmm]
    gemm_rows = [(m, k, n, t, cal.gemm_seconds(m, k, n)) for m, k, n, t in gemm]
    return {"spmm": spmm_rows, "gemm": gemm_rows,
            "spmm_median_error": statistics.median(_errors([r[5] for r in spmm_rows],
                                                           [r[4] for r in spmm_rows])),
            "gemm_median_error": statistics.median(_errors([r[4] for r in gemm_rows],
                                                           [r[3] for r in gemm_rows]))}
