"""The loopback transport: ``P`` virtual ranks as threads of one process.

:func:`run_loopback` runs a function on ``P`` threads, each holding a
:class:`~spgnn.comm.Communicator` over a :class:`LoopbackTransport`.  It lets
property tests and notebooks run distributed code without ``mpiexec``; the
semantics are MPI's (see :class:`~spgnn.comm.transport.Transport`), sent
data is always copied, and reductions combine in rank order, so results are
deterministic.  A rank that fails releases its peers at once
(:class:`~spgnn.errors.LoopbackAborted`), so a job never hangs.
"""

from __future__ import annotations

import collections
import pickle
import queue
import threading
import time
from typing import Any, Callable

import numpy as np

from spgnn.comm.communicator import Communicator
from spgnn.comm.stats import Ledger
from spgnn.comm.transport import Transport
from spgnn.errors import DimensionMismatch, LoopbackAborted
from spgnn.comm.device import copy as _copy
from spgnn.comm.device import empty_like_module

__all__ = ["LoopbackTransport", "run_loopback"]

_NP_REDUCE = {
    "plus": np.add, "min": np.minimum, "max": np.maximum,
    "times": np.multiply, "lor": np.logical_or, "land": np.logical_and,
}



class _World:
    """State shared by every group of one :func:`run_loopback` call."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.aborted = threading.Event()
        self.lock = threading.Lock()
        self.barriers: list[threading.Barrier] = []

    def new_barrier(self, n: int) -> threading.Barrier:
        # The timeout turns a rank that never reaches a collective into a
        # BrokenBarrierError on its peers instead of a hang.
        b = threading.Barrier(n, timeout=self.timeout)
        with self.lock:
            self.barriers.append(b)
            if self.aborted.is_set():
                b.abort()
        return b

    def abort(self):
        with self.lock:
            self.aborted.set()
            barriers = list(self.barriers)
        for b in barriers:
            b.abort()


class _Group:
    """One communicator's worth of shared state: rendezvous slots, p2p channels, splits."""

    def __init__(self, world: _World, size: int):
        self.world = world
        self.size = size
        self.barrier = world.new_barrier(size)
        self.slots: list[Any] = [None] * size
        self.lock = threading.Lock()
        self.channels: dict[tuple[int, int, int], _Channel] = {}
        # (split sequence number, color) -> [group, members still to pick it up]
        self.children: dict[tuple[int, int], list] = {}

    def channel(self, src, dst, tag) -> "_Channel":
        with self.lock:
            ch = self.channels.get((src, dst, tag))
            if ch is None:
                ch = self.channels[(src, dst, tag)] = _Channel()
            return ch


class _Channel:
    """Messages from one source to one destination with one tag, in send order."""

    def __init__(self):
        self.messages: queue.Queue = queue.Queue()
        # Receives match in the order they were posted (MPI non-overtaking).
        self.posted: collections.deque = collections.deque()


class _DoneRequest:
    __slots__ = ()

    def wait(self) -> None:
        return None

    def test(self) -> bool:
        return True


class _LoopbackRecv:
    __slots__ = ("_tr", "_ch", "buf", "done")

    def __init__(self, tr: "LoopbackTransport", ch: _Channel, buf: np.ndarray):
        self._tr, self._ch, self.buf, self.done = tr, ch, buf, False

    def test(self) -> bool:
        return self.done

    def fill(self, msg: np.ndarray):
        if msg.size != self.buf.size:
            raise DimensionMismatch(
                f"recv: message of {msg.size} elements does not match the receive "
                f"buffer of {self.buf.size} elements")
        self.buf.reshape(-1)[...] = msg.reshape(-1)
        self.done = True

    def wait(self) -> None:
        # Only the owning rank's thread receives on this channel, so draining
        # the queue into the posted requests in order needs no extra lock.
        world = self._tr._group.world
        deadline = time.monotonic() + world.timeout
        while not self.done:
            try:
                msg = self._ch.messages.get(timeout=0.02)
            except queue.Empty:
                if world.aborted.is_set():
                    raise LoopbackAborted("recv: the loopback job was aborted") from None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"recv: no message after {world.timeout} s") from None
                continue
            self._ch.posted.popleft().fill(msg)


class LoopbackTransport(Transport):
    """One virtual rank of a thread-based communicator (see :func:`run_loopback`).

    Every collective is a rendezvous: each rank deposits a copy of its
    contribution, a barrier releases, every rank reads what it needs, and a
    second barrier keeps the slots alive until everyone has read.  Sent data
    is always copied, so a caller that mutates a send buffer afterwards (or
    aliases send and receive buffers) sees the same result as under MPI.
    """

    def __init__(self, group: _Group, rank: int):
        self._group = group
        self.rank = rank
        self.size = group.size
        self._split_seq = 0

    # The one synchronisation primitive every collective is built on.
    def _exchange(self, contribution: Any) -> list:
        g = self._group
        if g.world.aborted.is_set():
            raise LoopbackAborted("collective: the loopback job was aborted")
        g.slots[self.rank] = contribution
        g.barrier.wait()
        view = list(g.slots)
        g.barrier.wait()
        return view

    def split(self, color, key):
        seq = self._split_seq
        self._split_seq += 1  # every member calls split in the same order
        entries = self._exchange((color, key, self.rank))
        if color is None or color < 0:
            return None  # MPI_UNDEFINED
        members = sorted((k, r) for c, k, r in entries if c == color)
        new_rank = members.index((key, self.rank))
        g = self._group
        with g.lock:
            slot = g.children.get((seq, color))
            if slot is None:
                slot = g.children[(seq, color)] = [_Group(g.world, len(members)), len(members)]
            slot[1] -= 1
            if slot[1] == 0:
                del g.children[(seq, color)]
        return LoopbackTransport(slot[0], new_rank)

    def barrier(self):
        self._exchange(None)

    def allreduce(self, sendbuf, op):
        parts = self._exchange(_copy(sendbuf))
        ufunc = _NP_REDUCE[op]
        out = empty_like_module(sendbuf, sendbuf.shape, sendbuf.dtype)
        out[...] = parts[0]
        for p in parts[1:]:  # fixed rank order: deterministic like MPI's
            ufunc(out, p, out=out)
        return out

    def allgatherv(self, sendbuf, counts):
        parts = self._exchange(_copy(sendbuf).reshape(-1))
        for j, (p, c) in enumerate(zip(parts, counts)):
            if p.size != int(c):
                raise DimensionMismatch(
                    f"allgatherv: rank {j} sent {p.size} elements but counts[{j}]={int(c)}")
        out = empty_like_module(sendbuf, int(sum(p.size for p in parts)), sendbuf.dtype)
        return np.concatenate(parts, out=out) if parts else out

    def alltoall(self, sendbuf):
        parts = self._exchange(_copy(sendbuf))
        out = empty_like_module(sendbuf, sendbuf.shape, sendbuf.dtype)
        for j, p in enumerate(parts):
            out[j] = p[self.rank]
        return out

    def _alltoallv_now(self, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls):
        pieces = [_copy(sendbuf[int(d):int(d) + int(c)])
                  for c, d in zip(sendcounts, sdispls)]
        parts = self._exchange(pieces)
        for j in range(self.size):
            piece = parts[j][self.rank]
            if piece.size != int(recvcounts[j]):
                raise DimensionMismatch(
                    f"alltoallv: rank {j} sent {piece.size} elements to rank {self.rank} "
                    f"but recvcounts[{j}]={int(recvcounts[j])}")
            d = int(rdispls[j])
            recvbuf[d:d + piece.size] = piece

    def alltoallv(self, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls):
        self._alltoallv_now(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls)

    def ialltoallv(self, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls):
        # Completes eagerly at the start.  MPI allows that (a non-blocking
        # collective may complete early); only a program that needs progress
        # on other traffic between start and wait would deadlock here.
        self._alltoallv_now(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls)
        return _DoneRequest()

    def reduce_scatter(self, sendbuf, recvcounts, op):
        total = self.allreduce(sendbuf, op)
        start = int(np.sum(np.asarray(recvcounts[:self.rank], dtype=np.int64)))
        out = empty_like_module(sendbuf, int(recvcounts[self.rank]), sendbuf.dtype)
        out[...] = total[start:start + out.shape[0]]
        return out

    def bcast(self, buf, root):
        parts = self._exchange(_copy(buf) if self.rank == root else None)
        if self.rank != root:
            src = parts[root]
            if src.size != buf.size:
                raise DimensionMismatch(
                    f"bcast: root {root} sent {src.size} elements but this rank's "
                    f"buffer holds {buf.size}")
            buf.reshape(-1)[...] = src.reshape(-1)

    def isend(self, buf, dest, tag):
        self._group.channel(self.rank, dest, tag).messages.put(_copy(buf))
        return _DoneRequest()

    def send(self, buf, dest, tag):
        self.isend(buf, dest, tag)

    def irecv(self, buf, source, tag):
        ch = self._group.channel(source, self.rank, tag)
        req = _LoopbackRecv(self, ch, buf)
        ch.posted.append(req)
        return req

    def recv(self, buf, source, tag):
        self.irecv(buf, source, tag).wait()

    def allgather_obj(self, obj):
        # Pickling is the copy-on-send for objects.
        return [pickle.loads(b) for b in self._exchange(pickle.dumps(obj))]

    def bcast_obj(self, obj, root):
        parts = self._exchange(pickle.dumps(obj) if self.rank == root else None)
        return pickle.loads(parts[root])

    def abort(self, code=1):
        self._group.world.abort()
        exc = LoopbackAborted(f"abort({code}) called on loopback rank {self.rank}")
        exc.explicit = True
        raise exc

    def library_version(self):
        return "spgnn loopback transport (threads in one process)"


def solo_communicator() -> Communicator:
    """A communicator of this process alone: size 1, no MPI (``MPI_COMM_SELF``'s role).

    Its collectives return their input; it has a ledger of its own.  Data
    held whole by one rank (a sampled minibatch's activations) lives on a
    grid over it.  Local: making it communicates nothing, and a one-party
    rendezvous never waits.

    Examples
    --------
    >>> from spgnn import grid_1d
    >>> from spgnn.comm import solo_communicator
    >>> comm = solo_communicator()
    >>> comm.rank, comm.size, grid_1d(comm).shape
    (0, 1, (1,))
    """
    return Communicator(LoopbackTransport(_Group(_World(timeout=60), 1), 0))


def run_loopback(nranks: int, fn: Callable, *args, timeout: float = 60, **kwargs) -> list:
    """Run ``fn(comm, *args, **kwargs)`` on ``nranks`` virtual ranks (threads).

    Parameters
    ----------
    nranks : int
        Number of virtual ranks, at least 1.
    fn : callable
        Called once per rank with a :class:`~spgnn.comm.Communicator` over a
        :class:`LoopbackTransport` as first argument.  Each rank gets its own
        ledger, as an MPI process would.
    timeout : float
        Seconds after which a rank still waiting in a collective fails and the
        call raises ``TimeoutError``.

    Returns
    -------
    list
        ``fn``'s return value on each rank, indexed by rank.

    Raises
    ------
    Exception
        The original exception of the first rank that failed (its type is
        preserved).  Its peers are released from their collectives at once
        (``BrokenBarrierError`` / :class:`LoopbackAborted`), so the call never
        hangs.

    Examples
    --------
    >>> import numpy as np
    >>> from spgnn import run_loopback
    >>> run_loopback(3, lambda comm: (comm.rank, comm.size))
    [(0, 3), (1, 3), (2, 3)]
    >>> run_loopback(2, lambda comm: comm.allreduce(np.array([comm.rank + 1.0])))
    [array([3.]), array([3.])]
    """
    if int(nranks) != nranks or nranks < 1:
        raise ValueError(f"run_loopback: nranks must be a positive integer, but got {nranks!r}")
    nranks = int(nranks)
    world = _World(timeout)
    group = _Group(world, nranks)
    results: list = [None] * nranks
    failures: list[tuple[int, BaseException]] = []
    fail_lock = threading.Lock()

    def body(r: int):
        comm = Communicator(LoopbackTransport(group, r), ledger=Ledger(rank=r))
        try:
            results[r] = fn(comm, *args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            with fail_lock:
                failures.append((r, exc))
            # Record first, then abort: the first entry is the original error,
            # never the BrokenBarrierError it causes on the peers.
            world.abort()

    threads = [threading.Thread(target=body, args=(r,), name=f"loopback-rank-{r}", daemon=True)
               for r in range(nranks)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in threads):
        world.abort()
        for t in threads:
            t.join(1.0)
        if not failures:
            raise TimeoutError(f"run_loopback: ranks still running after {timeout} s")
    if failures:
        # Peers of a failed rank fail with BrokenBarrierError/LoopbackAborted;
        # report the error that started it.
        original = [exc for _, exc in failures
                    if not isinstance(exc, (threading.BrokenBarrierError, LoopbackAborted))
                    or getattr(exc, "explicit", False)]
        if original:
            raise original[0]
        raise TimeoutError(f"run_loopback: a collective was not reached by every rank within "
                           f"{timeout} s") from failures[0][1]
    return results
