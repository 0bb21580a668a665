"""Communicator checks under real MPI.

Run: ``mpiexec -n P python -m mpi4py tests/mpi/comm_checks.py [--expect-size P]``
(``tests/test_comm_mpi.py`` does, for several P).  Prints ``OK comm P ranks``
on rank 0 and exits 0 when every check passed on every rank.

Assertions are collective: each check first does all its communication, then
records local mismatches without raising, then every rank learns through an
allreduce whether any rank failed, so a failing rank never leaves its peers
waiting.  An unexpected exception ends the job through ``-m mpi4py``'s
``MPI_Abort``.

``--fail-rank R`` makes rank R raise before a collective, to test that the
job aborts instead of hanging.
"""

import argparse
import sys

import numpy as np

from spgnn.comm import Communicator
from spgnn.errors import DimensionMismatch, RemoteError


class Checker:
    """Collects local mismatches of one check."""

    def __init__(self, name):
        self.name, self.failures = name, []

    def eq(self, got, want, what):
        if not (np.shape(got) == np.shape(want) and np.array_equal(got, want)):
            self.failures.append(f"{what}: got {got!r}, want {want!r}")

    def true(self, cond, what):
        if not cond:
            self.failures.append(what)


def block(n, p, r):
    return n // p + (1 if r < n % p else 0)


def data(seed, r, shape, dtype):
    return np.random.default_rng([seed, r]).integers(-5, 6, size=shape).astype(dtype)


def counts_matrix(seed, p):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 4, size=(p, p))
    c[rng.random((p, p)) < 0.3] = 0
    return c


def check_allreduce(comm, ck):
    p, r = comm.size, comm.rank
    for dtype in (np.int64, np.float64, np.int32):
        x = data(1, r, (7, 3), dtype)
        allx = np.stack([data(1, j, (7, 3), dtype) for j in range(p)])
        for op, ref in (("plus", allx.sum(0)), ("min", allx.min(0)), ("max", allx.max(0))):
            with comm.track("ar") as st:
                y = comm.allreduce(x, op)
            ck.eq(y, ref.astype(dtype), f"allreduce {op} {np.dtype(dtype)}")
            ev = st.events[0]
            moved = 2 * (x.size - block(x.size, p, r)) * x.itemsize if p > 1 else 0
            ck.eq((ev.bytes_sent, ev.bytes_recv, ev.messages),
                  (moved, moved, 2 * int(np.ceil(np.log2(p))) if p > 1 else 0),
                  "allreduce ledger")


def check_allgather(comm, ck):
    p, r = comm.size, comm.rank
    x = data(2, r, (2, 3), np.float32)
    ck.eq(comm.allgather(x), np.stack([data(2, j, (2, 3), np.float32) for j in range(p)]),
          "allgather")
    for tail in ((), (3,)):
        rows = (3 * r + 1) % 4
        y = data(3, r, (rows,) + tail, np.int64)
        with comm.track("agv") as st:
            out = comm.allgatherv(y)
        ref = np.concatenate([data(3, j, ((3 * j + 1) % 4,) + tail, np.int64) for j in range(p)])
        ck.eq(out, ref, f"allgatherv tail={tail}")
        ev = [e for e in st if e.op == "allgatherv"][0]
        ck.eq((ev.bytes_sent, ev.bytes_recv), (y.nbytes * (p - 1), ref.nbytes - y.nbytes),
              "allgatherv ledger")


def check_reduce_scatter(comm, ck):
    p, r = comm.size, comm.rank
    n = 2 * p + 1
    x = data(4, r, (n, 2), np.float64)
    total = sum(data(4, j, (n, 2), np.float64) for j in range(p))
    starts = np.cumsum([0] + [block(n, p, j) for j in range(p)])
    ck.eq(comm.reduce_scatter(x), total[starts[r]:starts[r + 1]], "reduce_scatter default")
    counts = [(j * 5) % 3 for j in range(p)]
    x2 = data(5, r, (sum(counts),), np.int64)
    ref = np.min(np.stack([data(5, j, (sum(counts),), np.int64) for j in range(p)]), axis=0)
    s = sum(counts[:r])
    ck.eq(comm.reduce_scatter(x2, counts, op="min"), ref[s:s + counts[r]], "reduce_scatter counts")


def check_alltoall(comm, ck):
    p, r = comm.size, comm.rank
    x = data(6, r, (p, 2), np.int32)
    y = comm.alltoall(x)
    ck.eq(y, np.stack([data(6, j, (p, 2), np.int32)[r] for j in range(p)]), "alltoall")


def _expected_alltoallv(seed, p, r, tail, C):
    return np.concatenate([np.split(data(seed, i, (C[i].sum(),) + tail, np.float64),
                                    np.cumsum(C[i])[:-1])[r] for i in range(p)])


def check_alltoallv(comm, ck):
    p, r = comm.size, comm.rank
    for tail in ((), (3,)):
        C = counts_matrix(11 + len(tail), p)
        x = data(7, r, (C[r].sum(),) + tail, np.float64)
        want = _expected_alltoallv(7, p, r, tail, C)
        rowbytes = int(np.prod(tail, dtype=int)) * 8
        others = [j for j in range(p) if j != r]
        for given in (False, True):
            rc = C[:, r] if given else None
            with comm.track("a2av") as st:
                y = comm.alltoallv(x, C[r], rc)
                y2 = comm.ialltoallv(x, C[r], rc).wait()
            ck.eq(y, want, f"alltoallv tail={tail} given={given}")
            ck.eq(y2, want, f"ialltoallv tail={tail} given={given}")
            for ev in [e for e in st if e.op in ("alltoallv", "ialltoallv")]:
                ck.eq((ev.bytes_sent, ev.bytes_recv, ev.messages),
                      (C[r, others].sum() * rowbytes, C[others, r].sum() * rowbytes,
                       np.count_nonzero(C[r, others])), f"{ev.op} ledger")


def check_large_messages(comm, ck):
    p, r = comm.size, comm.rank
    mc = 7
    C = (np.arange(p * p).reshape(p, p) * 5) % 11
    sub = comm.split(0)
    sub.max_count = mc
    x = data(10, r, (C[r].sum(), 2), np.int64)
    want = np.concatenate([np.split(data(10, i, (C[i].sum(), 2), np.int64),
                                    np.cumsum(C[i])[:-1])[r] for i in range(p)])
    chunks = sum(-(-int(C[r, j]) * 2 // mc) for j in range(p) if j != r)
    for given in (False, True):
        rc = C[:, r] if given else None
        with sub.track("big") as st:
            y = sub.alltoallv(x, C[r], rc)
            y2 = sub.ialltoallv(x, C[r], rc).wait()
        ck.eq(y, want, f"chunked alltoallv given={given}")
        ck.eq(y2, want, f"chunked ialltoallv given={given}")
        for ev in [e for e in st if e.op in ("alltoallv", "ialltoallv")]:
            ck.eq(ev.messages, chunks, f"chunked {ev.op} messages")
            ck.eq(ev.bytes_sent, sum(int(C[r, j]) for j in range(p) if j != r) * 16,
                  f"chunked {ev.op} bytes")


def check_bcast_p2p_objects(comm, ck):
    p, r = comm.size, comm.rank
    root = p - 1
    buf = data(8, r, (4, 2), np.float64)
    ck.eq(comm.bcast(buf, root=root), data(8, root, (4, 2), np.float64), "bcast")
    right, left = (r + 1) % p, (r - 1) % p
    x = data(9, r, (5,), np.int64)
    rq = comm.irecv(np.empty(5, np.int64), left, tag=3)
    sq = comm.isend(x, right, tag=3)
    ck.eq(rq.wait(), data(9, left, (5,), np.int64), "isend/irecv ring")
    sq.wait()
    if p > 1:
        if r % 2 == 0:
            comm.send(x, right, tag=1)
            y = comm.recv(np.empty(5, np.int64), left, tag=1)
        else:
            y = comm.recv(np.empty(5, np.int64), left, tag=1)
            comm.send(x, right, tag=1)
        ck.eq(y, data(9, left, (5,), np.int64), "send/recv ring")
    ck.true(comm.allgather_obj({"r": r}) == [{"r": j} for j in range(p)], "allgather_obj")
    ck.true(comm.bcast_obj(("hi", r) if r == 0 else None) == ("hi", 0), "bcast_obj")


def check_agree(comm, ck):
    p, r = comm.size, comm.rank
    ck.true(comm.agree(None) is None, "agree(None)")
    err = DimensionMismatch("bad local block") if r == p - 1 else None
    try:
        comm.agree(err)
        ck.true(False, "agree did not raise")
    except DimensionMismatch as e:
        ck.true(r == p - 1 or f"rank {p - 1}" in str(e), f"agree message: {e}")

    class Local(Exception):
        pass

    try:
        comm.agree(Local("x") if r == 0 else None)
    except Local:
        ck.true(r == 0, "agree: only rank 0 re-raises its own class")
    except RemoteError:
        ck.true(r != 0, "agree: peers raise RemoteError")


def check_split_track_reduce(comm, ck):
    p, r = comm.size, comm.rank
    sub = comm.split(r % 2, axis=("row",))
    members = [j for j in range(p) if j % 2 == r % 2]
    ck.eq(sub.allgather(np.array([r]))[:, 0], np.array(members), "split members")
    with comm.track("outer") as outer:
        comm.allreduce(np.ones(5))
        with comm.track("inner"):
            sub.allgatherv(np.ones((r, 2)))
    ck.true([e.label for e in outer] == ["outer", "outer/inner", "outer/inner"],
            f"track labels {[e.label for e in outer]}")
    ck.true(outer.events[-1].axis == ("row",), "axis recorded")
    red = outer.reduce(comm)
    for key, row in red.sum.items():
        ck.eq(row["bytes_sent"], row["bytes_recv"], f"sum sent == sum recv for {key}")
    local = outer.total("bytes_recv", op="allreduce")
    ck.eq(red.max[("allreduce", "outer", ())]["bytes_recv"],
          max(comm.allgather_obj(local)), "reduce max")
    ck.true("allgatherv" in red.table() and "outer" in outer.table(), "tables render")


def check_received_arrays_aligned(comm, ck):
    """Arrays the collectives return start on 64 bytes (they feed SpMM kernels)."""
    p = comm.size
    for rows in (1, 5, 40_000):  # the last past the allocator's huge-page threshold
        x = np.ones((rows, 3), np.float32)
        spread = np.ones((rows * p, 3), np.float32)
        outs = {"allreduce": comm.allreduce(x), "allgatherv": comm.allgatherv(x),
                "reduce_scatter": comm.reduce_scatter(spread),
                "alltoallv": comm.alltoallv(spread, [rows] * p),
                "ialltoallv": comm.ialltoallv(spread, [rows] * p).wait(),
                "alltoall": comm.alltoall(np.ones((p, rows), np.int64))}
        for k, v in outs.items():
            ck.true(v.size > 0 and v.ctypes.data % 64 == 0,
                    f"{k} rows={rows}: size {v.size}, address % 64 = {v.ctypes.data % 64}")


CHECKS = [check_allreduce, check_allgather, check_reduce_scatter, check_alltoall,
          check_alltoallv, check_large_messages, check_bcast_p2p_objects, check_agree,
          check_split_track_reduce, check_received_arrays_aligned]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect-size", type=int, default=None)
    ap.add_argument("--fail-rank", type=int, default=None)
    args = ap.parse_args(argv)
    comm = Communicator.world()
    p, r = comm.size, comm.rank

    if args.fail_rank is not None:
        if r == args.fail_rank:
            raise RuntimeError(f"rank {r} fails on purpose before a collective")
        comm.barrier()  # the peers would wait here forever without -m mpi4py
        return 0

    failed = []
    if args.expect_size is not None and p != args.expect_size:
        # A launcher/library mismatch yields singleton ranks; no collective is safe.
        print(f"FAIL rank {r}: COMM_WORLD.size={p}, expected {args.expect_size}", flush=True)
        return 1
    for check in CHECKS:
        ck = Checker(check.__name__)
        check(comm, ck)
        for msg in ck.failures:
            print(f"FAIL rank {r} {ck.name}: {msg}", flush=True)
        bad = comm.allreduce(np.array([len(ck.failures)]), "max", label="checks")
        if bad[0]:
            failed.append(ck.name)
    if r == 0:
        if failed:
            print(f"FAILED comm {p} ranks: {', '.join(failed)}", flush=True)
        else:
            print(f"OK comm {p} ranks ({comm.library_version().splitlines()[0]})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
