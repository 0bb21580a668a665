"""Communicator collectives and ledger on the thread-based loopback transport.

Every rank builds every other rank's input from a seed, so the expected
result is computed with numpy from the same data, for any world size.  The
byte-model formulas are re-derived here independently of spgnn.comm.stats.
"""

import threading
import time

import numpy as np
import pytest
from hypothesis import given, strategies as st

from spgnn.comm import CommStats, Communicator, LoopbackTransport, run_loopback
from spgnn.errors import DimensionMismatch, DTypeError, GridError, RemoteError

SIZES = [1, 2, 3, 4, 8]
DTYPES = [np.int64, np.float64, np.int32, np.float32]


def block(n, p, r):
    """Even split, first n % p ranks one larger (independent of the library)."""
    return n // p + (1 if r < n % p else 0)


def data(seed, r, shape, dtype):
    rng = np.random.default_rng([seed, r])
    return rng.integers(-5, 6, size=shape).astype(dtype)


def last(comm, op):
    evs = [e for e in comm.ledger.stats.events if e.op == op]
    return evs[-1]


def sums_match(all_stats):
    """Σ bytes_sent == Σ bytes_recv per op over ranks (send and recv pair up)."""
    sent, recv = {}, {}
    for st_ in all_stats:
        for e in st_:
            op = "p2p" if e.op in ("send", "recv") else e.op
            sent[op] = sent.get(op, 0) + e.bytes_sent
            recv[op] = recv.get(op, 0) + e.bytes_recv
    assert sent == recv


# --------------------------------------------------------------------------
# Collectives against numpy
# --------------------------------------------------------------------------

@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_ops(p, dtype):
    shape = (7, 3)

    def fn(comm):
        for op in ("plus", "min", "max"):
            x = data(1, comm.rank, shape, dtype)
            y = comm.allreduce(x, op)
            allx = np.stack([data(1, r, shape, dtype) for r in range(p)])
            ref = {"plus": allx.sum(0), "min": allx.min(0), "max": allx.max(0)}[op]
            np.testing.assert_array_equal(y, ref.astype(dtype))
            assert y.dtype == np.dtype(dtype) and y.shape == shape
            ev = last(comm, "allreduce")
            n, w = x.size, x.itemsize
            expect = 2 * (n - block(n, p, comm.rank)) * w if p > 1 else 0
            assert (ev.bytes_sent, ev.bytes_recv) == (expect, expect)
            assert ev.messages == (2 * int(np.ceil(np.log2(p))) if p > 1 else 0)   # halving + doubling
        return comm.ledger.stats

    sums_match(run_loopback(p, fn))


def test_allreduce_monoid_and_logical():
    from spgnn.local.semiring import MAX

    def fn(comm):
        y = comm.allreduce(np.array([comm.rank, -comm.rank], dtype=np.float64), MAX)
        np.testing.assert_array_equal(y, [comm.size - 1, 0])
        b = comm.allreduce(np.array([comm.rank == 0, True]), "land")
        np.testing.assert_array_equal(b, [comm.size == 1, True])
        o = comm.allreduce(np.array([comm.rank == 1], dtype=np.int32), "lor")
        np.testing.assert_array_equal(o, [int(comm.size > 1)])
        t = comm.allreduce(np.array(2.0), "times")
        assert t.shape == () and t == 2.0 ** comm.size

    run_loopback(3, fn)


@pytest.mark.parametrize("p", SIZES)
def test_allgather_and_allgatherv(p):
    def rows(r):
        return (3 * r + 1) % 4  # includes ranks with zero rows

    def fn(comm):
        r = comm.rank
        x = data(2, r, (2, 3), np.float64)
        g = comm.allgather(x)
        np.testing.assert_array_equal(g, np.stack([data(2, j, (2, 3), np.float64) for j in range(p)]))
        ev = last(comm, "allgather")
        assert ev.bytes_sent == x.nbytes * (p - 1) and ev.bytes_recv == x.nbytes * (p - 1)
        assert ev.messages == (p - 1)

        for shape_tail, dtype in [((), np.int32), ((3,), np.float32), ((2, 2), np.int64)]:
            y = data(3, r, (rows(r),) + shape_tail, dtype)
            out = comm.allgatherv(y)
            ref = np.concatenate([data(3, j, (rows(j),) + shape_tail, dtype) for j in range(p)])
            np.testing.assert_array_equal(out, ref)
            assert out.dtype == np.dtype(dtype)
            ev = last(comm, "allgatherv")
            assert ev.bytes_sent == y.nbytes * (p - 1)
            assert ev.bytes_recv == ref.nbytes - y.nbytes
            assert ev.messages == (p - 1 if y.nbytes else 0)
            cev = last(comm, "allgather:counts")
            assert cev.bytes_sent == cev.bytes_recv == 8 * (p - 1)
        return comm.ledger.stats

    sums_match(run_loopback(p, fn))


@pytest.mark.parametrize("p", SIZES)
def test_reduce_scatter(p):
    def fn(comm):
        r = comm.rank
        n = 2 * p + 1
        x = data(4, r, (n, 2), np.int64)
        total = sum(data(4, j, (n, 2), np.int64) for j in range(p))
        # default: even split
        y = comm.reduce_scatter(x)
        starts = np.cumsum([0] + [block(n, p, j) for j in range(p)])
        np.testing.assert_array_equal(y, total[starts[r]:starts[r + 1]])
        own = block(n, p, r) * 2 * 8
        ev = last(comm, "reduce_scatter")
        assert ev.bytes_sent == x.nbytes - own and ev.bytes_recv == (p - 1) * own
        # explicit counts with zeros; max reduction
        counts = [(j * 5) % 3 for j in range(p)]
        m = sum(counts)
        x2 = data(5, r, (m,), np.float64)
        z = comm.reduce_scatter(x2, counts, op="max")
        ref = np.max(np.stack([data(5, j, (m,), np.float64) for j in range(p)]), axis=0)
        s = int(np.sum(counts[:r]))
        np.testing.assert_array_equal(z, ref[s:s + counts[r]])
        ev = last(comm, "reduce_scatter")
        assert ev.messages == sum(1 for j in range(p) if j != r and counts[j] > 0)
        return comm.ledger.stats

    sums_match(run_loopback(p, fn))


@pytest.mark.parametrize("p", SIZES)
def test_alltoall(p):
    def fn(comm):
        x = data(6, comm.rank, (p, 2, 2), np.int32)
        y = comm.alltoall(x)
        for j in range(p):
            np.testing.assert_array_equal(y[j], data(6, j, (p, 2, 2), np.int32)[comm.rank])
        ev = last(comm, "alltoall")
        assert ev.bytes_sent == ev.bytes_recv == (p - 1) * 16
        return comm.ledger.stats

    sums_match(run_loopback(p, fn))


def counts_matrix(seed, p):
    """C[i, j] rows sent from rank i to rank j, with zeros."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 4, size=(p, p))
    c[rng.random((p, p)) < 0.3] = 0
    return c


def expected_alltoallv(seed, p, r, tail, dtype, C):
    return np.concatenate([np.split(data(seed, i, (C[i].sum(),) + tail, dtype),
                                    np.cumsum(C[i])[:-1])[r] for i in range(p)])


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("tail,dtype", [((), np.int64), ((3,), np.float64), ((2, 2), np.float32)])
@pytest.mark.parametrize("given_recv", [False, True])
@pytest.mark.parametrize("nonblocking", [False, True])
def test_alltoallv(p, tail, dtype, given_recv, nonblocking):
    C = counts_matrix(p * 7 + len(tail), p)

    def fn(comm):
        r = comm.rank
        x = data(7, r, (C[r].sum(),) + tail, dtype)
        rc = C[:, r] if given_recv else None
        if nonblocking:
            req = comm.ialltoallv(x, C[r], rc, label="xchg")
            y = req.wait()
            assert req.wait() is y  # idempotent
            op = "ialltoallv"
        else:
            y = comm.alltoallv(x, C[r], rc, label="xchg")
            op = "alltoallv"
        np.testing.assert_array_equal(y, expected_alltoallv(7, p, r, tail, dtype, C))
        ev = [e for e in comm.ledger.stats if e.op == op]
        assert len(ev) == 1
        ev = ev[0]
        rowbytes = int(np.prod(tail, dtype=int)) * np.dtype(dtype).itemsize
        others = [j for j in range(p) if j != r]
        assert ev.bytes_sent == C[r, others].sum() * rowbytes
        assert ev.bytes_recv == C[others, r].sum() * rowbytes
        assert ev.messages == np.count_nonzero(C[r, others])
        assert ev.label == "xchg"
        ops = {e.op for e in comm.ledger.stats}
        if given_recv:
            assert "allreduce:split" in ops and "alltoall:counts" not in ops
        else:
            cev = last(comm, "alltoall:counts")
            assert cev.bytes_sent == cev.bytes_recv == (p - 1) * 16
            assert "allreduce:split" not in ops
        return comm.ledger.stats

    sums_match(run_loopback(p, fn))


@pytest.mark.parametrize("p", SIZES)
def test_bcast_and_p2p(p):
    def fn(comm):
        r = comm.rank
        for root in {0, p - 1, p // 2}:
            buf = data(8, r, (4, 2), np.float64)
            out = comm.bcast(buf, root=root)
            np.testing.assert_array_equal(out, data(8, root, (4, 2), np.float64))
            assert out is buf  # in place for contiguous writeable buffers
            ev = last(comm, "bcast")
            if r == root:
                assert (ev.bytes_sent, ev.bytes_recv, ev.messages) == (64 * (p - 1), 0, p - 1)
            else:
                assert (ev.bytes_sent, ev.bytes_recv, ev.messages) == (0, 64, 0)
        # ring shift with blocking and non-blocking point-to-point
        right, left = (r + 1) % p, (r - 1) % p
        x = data(9, r, (5,), np.int64)
        rq = comm.irecv(np.empty(5, np.int64), left, tag=3)
        sq = comm.isend(x, right, tag=3)
        got = rq.wait()
        assert sq.wait() is None
        np.testing.assert_array_equal(got, data(9, left, (5,), np.int64))
        if p > 1:
            if r % 2 == 0:
                comm.send(x, right, tag=1)
                y = comm.recv(np.empty(5, np.int64), left, tag=1)
            else:
                y = comm.recv(np.empty(5, np.int64), left, tag=1)
                comm.send(x, right, tag=1)
            np.testing.assert_array_equal(y, data(9, left, (5,), np.int64))
        sends = [e for e in comm.ledger.stats if e.op == "send"]
        assert all(e.bytes_sent == (40 if p > 1 else 0) for e in sends)
        # objects
        objs = comm.allgather_obj({"r": r, "pad": "x" * r})
        assert objs == [{"r": j, "pad": "x" * j} for j in range(p)]
        o = comm.bcast_obj(("hello", r) if r == 0 else None, root=0)
        assert o == ("hello", 0)
        return comm.ledger.stats

    sums_match(run_loopback(p, fn))


def test_copy_on_send_shows_aliasing():
    def fn(comm):
        x = np.full(4, comm.rank, dtype=np.int64)
        req = comm.isend(x, (comm.rank + 1) % comm.size)
        x[:] = -1  # illegal under MPI before wait; the copy makes the result deterministic
        req.wait()
        return comm.recv(np.empty(4, np.int64), (comm.rank - 1) % comm.size)

    res = run_loopback(3, fn)
    assert [int(v[0]) for v in res] == [2, 0, 1]


def test_empty_and_single_rank_edge_cases():
    def fn(comm):
        p = comm.size
        z = comm.alltoallv(np.empty((0, 3)), np.zeros(p, int))
        assert z.shape == (0, 3)
        g = comm.allgatherv(np.empty((0, 2), np.int32))
        assert g.shape == (0, 2) and g.dtype == np.int32
        a = comm.allreduce(np.empty(0))
        assert a.shape == (0,)
        return [e for e in comm.ledger.stats if e.op in ("alltoallv", "allgatherv", "allreduce")]

    for p in (1, 4):
        for evs in run_loopback(p, fn):
            assert all(e.bytes_sent == e.bytes_recv == e.messages == 0 for e in evs)


@given(seed=st.integers(0, 2**16), p=st.sampled_from([1, 2, 3, 5]),
       width=st.integers(0, 3), max_count=st.sampled_from([None, 1, 3, 7]))
def test_alltoallv_property(seed, p, width, max_count):
    C = counts_matrix(seed, p)

    def fn(comm):
        if max_count is not None:
            comm.max_count = max_count
        r = comm.rank
        x = data(seed, r, (C[r].sum(), width), np.float64)
        y = comm.alltoallv(x, C[r])
        np.testing.assert_array_equal(y, expected_alltoallv(seed, p, r, (width,), np.float64, C))
        return comm.ledger.stats

    stats = run_loopback(p, fn)
    sums_match(stats)
    total = sum(s.total("bytes_sent", op="alltoallv") for s in stats)
    assert total == (C.sum() - np.trace(C)) * width * 8


# --------------------------------------------------------------------------
# Large messages
# --------------------------------------------------------------------------

@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("given_recv", [False, True])
@pytest.mark.parametrize("nonblocking", [False, True])
def test_large_message_split(p, given_recv, nonblocking):
    mc = 7
    # Messages of 0..20 rows of 2 elements: several exceed 7 elements.
    C = (np.arange(p * p).reshape(p, p) * 5) % 11

    def fn(comm):
        r = comm.rank
        x = data(10, r, (C[r].sum(), 2), np.int64)
        rc = C[:, r] if given_recv else None
        ref = comm.alltoallv(x, C[r], rc)  # default max_count: one MPI call
        comm.max_count = mc
        sub = comm.split(0)  # inherits the lowered max_count
        assert sub.max_count == mc
        y = comm.ialltoallv(x, C[r], rc).wait() if nonblocking else comm.alltoallv(x, C[r], rc)
        np.testing.assert_array_equal(y, ref)
        np.testing.assert_array_equal(y, expected_alltoallv(10, p, r, (2,), np.int64, C))
        op = "ialltoallv" if nonblocking else "alltoallv"
        big = [e for e in comm.ledger.stats if e.op == op][-1]
        small = [e for e in comm.ledger.stats if e.op == "alltoallv"][0]
        assert (big.bytes_sent, big.bytes_recv) == (small.bytes_sent, small.bytes_recv)
        chunks = sum(-(-int(C[r, j]) * 2 // mc) for j in range(p) if j != r)
        assert big.messages == chunks
        return comm.ledger.stats

    sums_match(run_loopback(p, fn))


def test_split_decision_is_global_for_receive_side():
    # Every single message fits in max_count, but rank 0 receives more than
    # max_count elements in total (a receive displacement overflows): every
    # rank must take the chunked path, or the job would deadlock.
    p, mc = 4, 7

    def fn(comm):
        comm.max_count = mc
        sc = np.zeros(p, int)
        sc[0] = 3
        y = comm.alltoallv(np.full(3, comm.rank), sc)
        if comm.rank == 0:
            np.testing.assert_array_equal(y, np.repeat(np.arange(p), 3))
        y2 = comm.alltoallv(np.full(3, comm.rank), sc, recvcounts=np.full(p, 3) if comm.rank == 0
                            else np.zeros(p, int))
        np.testing.assert_array_equal(y, y2)
        return comm.ledger.stats

    sums_match(run_loopback(p, fn, timeout=20))


# --------------------------------------------------------------------------
# Ledger: track, reduce, table
# --------------------------------------------------------------------------

def test_track_scoping_and_nesting():
    def fn(comm):
        x = np.ones(8)
        comm.allreduce(x)
        with comm.track("outer") as outer:
            comm.allreduce(x)
            with comm.track("inner") as inner:
                comm.allreduce(x)
                comm.allreduce(x, label="explicit")
            sub = comm.split(comm.rank % 2, axis=("row",))
            sub.allreduce(x)  # shares the ledger
        comm.allreduce(x)
        labels = [e.label for e in outer]
        assert labels == ["outer", "outer/inner", "explicit", "outer", "outer"]
        assert [e.op for e in outer][-2:] == ["split", "allreduce"]
        assert outer.events[-1].axis == ("row",)
        assert [e.label for e in inner] == ["outer/inner", "explicit"]
        assert len(comm.ledger.stats) == 7
        assert comm.ledger.stats.events[0].label == ""
        assert outer.total("calls", label="outer") == 4  # includes "outer/inner"
        assert outer.total("calls", label="outer/inner") == 1
        assert outer.total("calls", axis="row") == 1
        by = outer.by_op()
        assert by["allreduce"]["calls"] == 4
        assert set(outer.by_label()) == {"outer", "outer/inner", "explicit"}
        return True

    assert run_loopback(4, fn) == [True] * 4


def test_reduce_and_table():
    p = 3

    def fn(comm):
        with comm.track("work") as st_:
            comm.allgatherv(np.ones((comm.rank, 2)))
            comm.alltoallv(np.ones(p * comm.rank), np.full(p, comm.rank))
        red = st_.reduce(comm)
        return st_, red

    res = run_loopback(p, fn)
    reds = [r for _, r in res]
    stats = [s for s, _ in res]
    red = reds[0]
    assert all(r.sum == red.sum for r in reds[1:])
    for key, row in red.sum.items():
        op, label, axis = key
        vals = [s.total("bytes_sent", op=op, label=label) for s in stats]
        assert row["bytes_sent"] == sum(vals)
        assert red.max[key]["bytes_sent"] == max(vals)
        assert row["bytes_sent"] == row["bytes_recv"]
        assert row["calls"] == p
    assert red.total("bytes_sent", op="alltoallv") == sum(s.total(op="alltoallv") for s in stats)
    assert red.total("bytes_recv", how="max") == max(s.total("bytes_recv") for s in stats)
    assert red.nranks == p
    for text in (stats[1].table(), stats[1].table(per_rank=True), red.table(),
                 red.table(per_rank=True)):
        assert "alltoallv" in text and "work" in text and "bytes sent" in text
    d = stats[1].to_dict()
    import json
    json.dumps(d)
    json.dumps(red.to_dict())
    assert d["by_op"]["alltoallv"]["calls"] == 1
    cs = CommStats(stats[1].events)
    assert cs.messages == stats[1].messages
    cs.clear()
    assert len(cs) == 0


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------

class CustomError(Exception):
    pass


@pytest.mark.parametrize("exc_type,expected", [
    (GridError, GridError), (DimensionMismatch, DimensionMismatch),
    (ValueError, ValueError), (KeyError, KeyError), (CustomError, RemoteError)])
def test_agree_raises_same_type_everywhere(exc_type, expected):
    p = 4

    def fn(comm):
        assert comm.agree(None) is None
        err = exc_type("bad block") if comm.rank in (1, 3) else None
        try:
            comm.agree(err)
        except BaseException as e:  # noqa: BLE001
            return e
        return None

    res = run_loopback(p, fn, timeout=10)
    for r, e in enumerate(res):
        if r in (1, 3):
            assert type(e) is exc_type  # the failing ranks re-raise their own error
        else:
            assert type(e) is expected
            assert "rank 1" in str(e) and "bad block" in str(e) and "1 other rank" in str(e)


def test_checkpoint_error_in_an_agreed_section_is_a_checkpoint_error_everywhere(tmp_path):
    """A checkpoint read that fails on one rank only (its own file is corrupt)
    raises CheckpointError on every rank, not RemoteError on the healthy ones:
    the class lives in spgnn.errors, which agree() rebuilds."""
    from spgnn.checkpoint import load_checkpoint, save_checkpoint
    from spgnn.errors import CheckpointError

    files = [save_checkpoint(tmp_path / str(r), {"w": np.arange(3.0)}, step=1) for r in range(3)]
    files[1].write_bytes(b"not a zip file")

    def fn(comm):
        err = None
        try:
            load_checkpoint(files[comm.rank])
        except CheckpointError as e:
            err = e
        try:
            comm.agree(err)
        except CheckpointError as e:
            return type(e), str(e)
        return None, None

    res = run_loopback(3, fn, timeout=10)
    assert [t for t, _ in res] == [CheckpointError] * 3
    assert res[0][1].startswith("rank 1: load_checkpoint:") and res[2][1] == res[0][1]


def test_failing_rank_fails_fast_with_original_exception():
    class Boom(RuntimeError):
        pass

    def fn(comm):
        if comm.rank == 2:
            raise Boom("rank 2 exploded")
        comm.allreduce(np.ones(3))  # peers wait here until the abort releases them
        comm.recv(np.empty(1), (comm.rank + 1) % comm.size)
        return comm.rank

    t0 = time.monotonic()
    with pytest.raises(Boom, match="exploded"):
        run_loopback(4, fn, timeout=60)
    assert time.monotonic() - t0 < 10
    time.sleep(0.1)  # the released peers finish promptly
    assert not [t for t in threading.enumerate()
                if t.name.startswith("loopback-rank") and t.is_alive()]


def test_rank_blocked_in_recv_fails_fast():
    def fn(comm):
        if comm.rank == 0:
            time.sleep(0.2)
            raise KeyError("late")
        comm.recv(np.empty(1), 0)

    t0 = time.monotonic()
    with pytest.raises(KeyError):
        run_loopback(2, fn)
    assert time.monotonic() - t0 < 10


def test_missing_collective_times_out():
    def fn(comm):
        if comm.rank == 0:
            comm.barrier()

    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        run_loopback(2, fn, timeout=0.5)
    assert time.monotonic() - t0 < 5


def test_abort_stops_every_rank():
    from spgnn.errors import LoopbackAborted

    def fn(comm):
        if comm.rank == 1:
            comm.abort(3)
        comm.barrier()

    with pytest.raises(LoopbackAborted, match="abort"):
        run_loopback(3, fn)


def test_validation_before_communication():
    def fn(comm):
        p = comm.size
        cases = [
            (lambda: comm.alltoallv(np.ones(3), [3]), DimensionMismatch),
            (lambda: comm.alltoallv(np.ones(3), [4] + [0] * (p - 1)), DimensionMismatch),
            (lambda: comm.alltoallv(np.ones(3), [4, -1] + [0] * (p - 2)), ValueError),
            (lambda: comm.alltoallv(np.ones(3), [1.5] * p), DTypeError),
            (lambda: comm.alltoallv(np.ones(2), [2] + [0] * (p - 1), [1]), DimensionMismatch),
            (lambda: comm.alltoallv(np.float64(1), [1] + [0] * (p - 1)), DimensionMismatch),
            (lambda: comm.allreduce(np.array(["a"])), DTypeError),
            (lambda: comm.allreduce(np.ones(2, dtype=object)), DTypeError),
            (lambda: comm.allreduce(np.ones(2), "median"), ValueError),
            (lambda: comm.allreduce(np.ones(2), "lor"), DTypeError),
            (lambda: comm.allreduce(np.ones(2, bool), "plus"), DTypeError),
            (lambda: comm.reduce_scatter(np.ones(2 * p, complex), op="max"), DTypeError),
            (lambda: comm.alltoall(np.ones((p + 1, 2))), DimensionMismatch),
            (lambda: comm.reduce_scatter(np.ones(4), [5] + [0] * (p - 1)), DimensionMismatch),
            (lambda: comm.bcast(np.ones(2), root=p), ValueError),
            (lambda: comm.send(np.ones(2), dest=-1), ValueError),
            (lambda: comm.send(np.ones(2), dest=0, tag=40000), ValueError),
            (lambda: comm.recv([0.0], source=0), TypeError),
            (lambda: comm.split(-2), ValueError),
        ]
        for call, exc in cases:
            with pytest.raises(exc):
                call()
        assert len(comm.ledger.stats) == 0  # nothing was communicated
        return True

    assert run_loopback(2, fn) == [True, True]


def test_split_groups_and_axis():
    def fn(comm):
        r, p = comm.rank, comm.size
        sub = comm.split(r % 2, key=-r, axis=("col",))
        members = [j for j in range(p) if j % 2 == r % 2]
        assert sub.size == len(members)
        assert sub.rank == sorted(members, key=lambda j: -j).index(r)
        got = sub.allgather(np.array([r]))
        np.testing.assert_array_equal(got[:, 0], sorted(members, key=lambda j: -j))
        assert sub.ledger is comm.ledger
        assert last(comm, "allgather").axis == ("col",)
        # a second split with the same colors makes a new, independent group
        sub2 = comm.split(r % 2)
        np.testing.assert_array_equal(sub2.allreduce(np.array([1])), [len(members)])
        assert comm.split(None) is None
        assert isinstance(sub.transport, LoopbackTransport)
        assert "loopback" in comm.library_version()
        return True

    assert run_loopback(5, fn) == [True] * 5


def test_run_loopback_args_and_results():
    res = run_loopback(3, lambda comm, a, b=0: (comm.rank, a, b), 5, b=7)
    assert res == [(0, 5, 7), (1, 5, 7), (2, 5, 7)]
    with pytest.raises(ValueError):
        run_loopback(0, lambda comm: None)
    assert isinstance(run_loopback(1, lambda comm: comm)[0], Communicator)


def test_import_does_not_start_mpi():
    import subprocess
    import sys

    code = "import sys, spgnn, spgnn.comm, spgnn.testing.mpi; print('mpi4py' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("p", [1, 3, 4])
def test_allgatherv_with_known_counts_skips_the_counts_exchange(p):
    rows = [r % 3 for r in range(p)]

    def body(comm):
        mine = np.full((rows[comm.rank], 2), comm.rank, dtype=np.float32)
        with comm.track("known") as stats:
            got = comm.allgatherv(mine, counts=rows)
        want = np.concatenate([np.full((rows[r], 2), r, dtype=np.float32) for r in range(p)])
        assert np.array_equal(got, want)
        assert [e.op for e in stats.events] == ["allgatherv"]
        assert stats.total("bytes_recv") == (sum(rows) - rows[comm.rank]) * 8
        with pytest.raises(DimensionMismatch, match="must equal this rank's rows"):
            comm.allgatherv(np.zeros((rows[comm.rank] + 1, 2)), counts=rows)
        return True

    assert all(run_loopback(p, body, timeout=15))


@pytest.mark.parametrize("p", [1, 2, 3])
def test_received_arrays_start_on_a_cache_line(p):
    """What a collective returns is often the next SpMM's X: it starts on 64 bytes.

    Row counts cover numpy-sized buffers and ones past the allocator's
    huge-page threshold (spgnn.local.alloc.HUGE_MIN_BYTES).
    """
    def body(comm):
        outs = {}
        for rows in (1, 5, 40_000):
            x = np.ones((rows, 3), np.float32)
            spread = np.ones((rows * p, 3), np.float32)
            outs[f"allreduce {rows}"] = comm.allreduce(x)
            outs[f"allgatherv {rows}"] = comm.allgatherv(x)
            outs[f"reduce_scatter {rows}"] = comm.reduce_scatter(spread)
            outs[f"alltoallv {rows}"] = comm.alltoallv(spread, [rows] * p)
            outs[f"ialltoallv {rows}"] = comm.ialltoallv(spread, [rows] * p).wait()
        outs["allgather"] = comm.allgather(np.ones(3, np.float32))
        outs["alltoall"] = comm.alltoall(np.ones((p, 3), np.int64))
        return {k: (v.size, v.ctypes.data % 64) for k, v in outs.items()}

    for got in run_loopback(p, body, timeout=30):
        assert all(size > 0 for size, _ in got.values()), got
        assert {k: off for k, (_, off) in got.items() if off} == {}
