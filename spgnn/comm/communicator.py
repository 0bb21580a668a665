"""The :class:`Communicator`: the only place in spgnn that moves data between ranks.

It wraps a :class:`~spgnn.comm.transport.Transport` (MPI or loopback threads),
validates arguments, and records one :class:`~spgnn.comm.stats.CommEvent` per
call in a per-process :class:`~spgnn.comm.stats.Ledger` (byte model: see
:mod:`spgnn.comm.stats`).

Rank-consistent errors
----------------------
Each method checks what it can see locally (types, dtypes, shapes, counts
lengths and signs, roots) and raises a typed error from :mod:`spgnn.errors`
*before* communicating.  Such checks are rank-consistent only when every rank
passes arguments of the same kind, which is the MPI contract.  Checks whose
outcome can differ across ranks (local data, e.g. a per-rank O(nnz) check)
must not raise directly: catch the error and call :meth:`Communicator.agree`,
which makes every rank raise together instead of leaving some waiting in the
next collective.

Large messages
--------------
MPI counts and displacements are C ints.  :meth:`Communicator.alltoallv`
splits any exchange in which a single message or a displacement exceeds
:attr:`Communicator.max_count` elements into chunks of at most ``max_count``
elements, sent as non-blocking point-to-point messages on views of the
buffers.  The decision is global (all ranks take the same path).  Point-to-
point tag :data:`CHUNK_TAG` is reserved for these chunks; user tags must lie
in ``[0, CHUNK_TAG)``.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import pickle
import time
from typing import Any, Callable

import numpy as np

from spgnn import errors as _errors
from spgnn.comm import device as _device
from spgnn.comm import watchdog as _watchdog
from spgnn.comm.stats import CommEvent, Ledger, block_size, model_allgather, model_allreduce
from spgnn.comm.transport import REDUCE_OPS, MPITransport, Transport
from spgnn.errors import CommunicatorBroken, DimensionMismatch, DTypeError, RemoteError

__all__ = ["Communicator", "Request", "CHUNK_TAG", "world_rank", "mpi_library_info",
           "is_agreed_on_world", "abort_if_parallel", "agreed_like"]

#: Tag reserved for the chunks of split large messages (the smallest
#: ``MPI_TAG_UB`` the standard guarantees).
CHUNK_TAG = 32767

_COUNT_DTYPE = np.dtype(np.int64)
#: Seconds the abort hook waits between flushing the traceback and MPI_Abort.
ABORT_GRACE_SECONDS = 0.25
_PROCESS_LEDGER: Ledger | None = None


def _process_ledger() -> Ledger:
    """The ledger shared by every MPI communicator of this process."""
    global _PROCESS_LEDGER
    if _PROCESS_LEDGER is None:
        from mpi4py import MPI

        _PROCESS_LEDGER = Ledger(rank=MPI.COMM_WORLD.Get_rank())
    return _PROCESS_LEDGER


def _install_abort_hook():
    """Make an uncaught exception on any rank abort the whole MPI job.

    Without it, a rank that dies leaves its peers waiting forever in the next
    collective.  ``python -m mpi4py`` does the same; this covers plain
    ``python script.py`` runs.  ``SPGNN_ABORT_HOOK=0`` disables it.
    """
    import os
    import sys

    if os.environ.get("SPGNN_ABORT_HOOK", "1") == "0" or getattr(sys.excepthook, "_spgnn", False):
        return
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        previous(exc_type, exc, tb)
        if issubclass(exc_type, (SystemExit, KeyboardInterrupt)) and not (
                exc_type is SystemExit and exc.code not in (None, 0)):
            return
        try:
            sys.stderr.flush()
            sys.stdout.flush()
            from mpi4py import MPI

            if MPI.COMM_WORLD.Get_size() > 1:
                # MPICH's launcher kills every process on MPI_Abort and drops
                # output still in its pipes: the traceback above arrived cut
                # short (once in ~50 CI runs).  Give it time to forward it.
                time.sleep(ABORT_GRACE_SECONDS)
            MPI.COMM_WORLD.Abort(1)
        except Exception:  # already finalized: nothing left to abort
            pass

    hook._spgnn = True
    sys.excepthook = hook


def _device_buffers(method):
    """Let a collective take a device array (CuPy) as its buffer: staged or CUDA-aware.

    Host arrays go straight to ``method``.  For a device array the mode is
    :attr:`Communicator.gpu_comm` (:mod:`spgnn.comm.device`): ``staged`` runs
    ``method`` on a host copy and copies the result back, adding both copies'
    bytes to the call's last event (``staged_bytes``); ``cuda-aware`` runs it
    on the device buffers.  Every event of the call records the mode.
    """
    @functools.wraps(method)
    def wrapper(self, buf, *args, **kwargs):
        if not _device.is_device(buf):
            return method(self, buf, *args, **kwargs)
        mode = self.gpu_comm
        self._device_now = mode
        try:
            if mode == "cuda-aware":
                _device.synchronize(buf)
                out = method(self, buf, *args, **kwargs)
                staged = 0
            else:
                host = _device.to_host(buf)
                staged = host.nbytes
                out = method(self, host, *args, **kwargs)
        finally:
            self._device_now = ""
        if isinstance(out, Request):
            return _DeviceRequest(self, out, buf, mode, staged)
        if mode == "staged":
            staged += out.nbytes
            out = _device.to_device(out, buf)
        self._last_event.staged_bytes += staged
        return out

    return wrapper


class _DeviceRequest:
    """A non-blocking call on a device buffer: ``wait`` finishes the staging and the event."""

    def __init__(self, comm, req, like, mode, staged):
        self._comm, self._req, self._like, self._mode, self._staged = comm, req, like, mode, staged
        self._done, self._result = False, None

    def wait(self):
        if not self._done:
            out = self._req.wait()
            if self._mode == "staged":
                self._staged += out.nbytes
                out = _device.to_device(out, self._like)
            ev = self._comm._last_event
            ev.device, ev.staged_bytes = self._mode, ev.staged_bytes + self._staged
            self._done, self._result = True, out
        return self._result

    def test(self):
        """:meth:`Request.test` of the host call (the staging happens at :meth:`wait`). Local."""
        return self._done or self._req.test()


#: Exit status of a job ended by SIGINT (128 + 2, what shells report for Ctrl-C).
INTERRUPT_EXIT = 130


def _install_interrupt_watchdog():
    """Make one SIGINT or SIGTERM end every rank of the job, within a fraction of a second.

    Why a thread: Python runs a signal handler in the main thread between
    bytecodes, so a rank blocked inside an MPI collective (C code) never
    sees Ctrl-C, while the ranks that do see it leave; the others then wait
    forever.  ``signal.set_wakeup_fd`` is written by the C-level handler even
    while the main thread is blocked; a daemon thread waiting on it reports
    the interruption (rank 0, one line) and calls ``MPI_Abort``, which ends
    every rank.  ``SPGNN_ABORT_HOOK=0`` disables it with the abort hook.
    Must be called from the main thread; elsewhere it does nothing.
    """
    import os
    import signal
    import socket
    import sys
    import threading

    if os.environ.get("SPGNN_ABORT_HOOK", "1") == "0" or _WATCHDOG:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    read_end, write_end = socket.socketpair()
    write_end.setblocking(False)
    try:
        signal.set_wakeup_fd(write_end.fileno(), warn_on_full_buffer=False)
    except ValueError:          # not the main thread of the main interpreter
        return
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        # a Python-level handler, so that SIGTERM reaches the wakeup fd too
        signal.signal(signal.SIGTERM, lambda *_: None)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        # The watchdog alone answers Ctrl-C.  Python's default handler would
        # also raise KeyboardInterrupt in the main thread wherever it happens
        # to be, e.g. inside a ctypes callback while Numba compiles, where it
        # cannot be caught and prints "Exception ignored ..." with a traceback
        # on every rank just before MPI_Abort ends them.
        signal.signal(signal.SIGINT, lambda *_: None)
    watched = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM"}

    def watch():
        from mpi4py import MPI

        while True:
            data = read_end.recv(16)
            hit = [watched[s] for s in data if s in watched]
            if not hit:
                continue
            if MPI.COMM_WORLD.Get_rank() == 0:
                print(f"spgnn: interrupted by {hit[0]}: ending all {MPI.COMM_WORLD.Get_size()} "
                      f"ranks", file=sys.stderr, flush=True)
            time.sleep(ABORT_GRACE_SECONDS)      # let the launcher forward the line
            try:
                MPI.COMM_WORLD.Abort(INTERRUPT_EXIT)
            except Exception:  # MPI already finalized: nothing else to end but this process
                pass
            os._exit(INTERRUPT_EXIT)

    threading.Thread(target=watch, name="spgnn-interrupt-watchdog", daemon=True).start()
    _WATCHDOG.append((read_end, write_end))


_WATCHDOG: list = []


def _mark_agreed(exc: BaseException, comm) -> None:
    """Tag an exception that every rank of ``comm`` raises together (see :meth:`Communicator.agree`)."""
    try:
        exc.spgnn_agreed_size = comm.size
    except AttributeError:  # exceptions with __slots__: nothing to tag, callers abort instead
        pass


def agreed_like(new: BaseException, old: BaseException) -> BaseException:
    """``new`` (a reworded ``old``), raised together on every rank when ``old`` was. Local.

    A caller that catches an agreed error (:meth:`Communicator.agree`) and raises another
    in its place keeps the entry point's one-line report (rank 0 prints, no abort)."""
    size = getattr(old, "spgnn_agreed_size", None)
    if size is not None:
        try:
            new.spgnn_agreed_size = size
        except AttributeError:
            pass
    return new


def is_agreed_on_world(exc: BaseException) -> bool:
    """Whether ``exc`` is being raised on every rank of ``MPI.COMM_WORLD`` at once."""
    import sys

    size = getattr(exc, "spgnn_agreed_size", None)
    if size is None or "mpi4py.MPI" not in sys.modules:
        return size is not None
    from mpi4py import MPI

    return size == MPI.COMM_WORLD.Get_size()


def finalize_world() -> None:
    """End MPI on every rank together, after an error every rank raised (agreed). Collective.

    Why not just exit: ``python -m mpi4py`` (and the abort hook) turn a
    non-zero exit into ``MPI_Abort``, which can tear the job down before
    rank 0's one-line message reaches the terminal.  A barrier, then
    ``MPI_Finalize`` on every rank: the processes then exit with their code
    and nothing aborts.  Does nothing when MPI is not running.
    """
    import sys

    if "mpi4py.MPI" not in sys.modules:
        return
    from mpi4py import MPI

    if MPI.Is_initialized() and not MPI.Is_finalized():
        sys.stdout.flush()
        sys.stderr.flush()
        MPI.COMM_WORLD.Barrier()
        _watchdog.stop()
        MPI.Finalize()


def abort_if_parallel(code: int = 1) -> None:
    """``MPI_Abort`` when MPI is running with more than one rank; otherwise nothing.

    Used by command-line entry points after reporting an error, so that a
    rank failing alone cannot leave its peers waiting in a collective.
    """
    import sys

    if "mpi4py.MPI" not in sys.modules:
        return
    from mpi4py import MPI

    if MPI.Is_initialized() and not MPI.Is_finalized() and MPI.COMM_WORLD.Get_size() > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        # the launcher drops output still in its pipes when it kills the job:
        # give it the time to forward the message just printed
        time.sleep(ABORT_GRACE_SECONDS)
        MPI.COMM_WORLD.Abort(code)


def world_size() -> int:
    """The number of ranks in ``MPI.COMM_WORLD``, 1 when MPI was never started. Local."""
    import sys

    if "mpi4py.MPI" not in sys.modules:
        return 1
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_size()


def world_rank() -> int:
    """This process's rank in ``MPI.COMM_WORLD``, 0 when MPI was never started.

    Local; never initialises MPI (a process that has not imported
    ``mpi4py.MPI`` is a single rank as far as spgnn is concerned).
    """
    import sys

    if "mpi4py.MPI" not in sys.modules:
        return 0
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


def mpi_library_info() -> dict:
    """The MPI library in use: ``{"library", "standard", "world_size"}``.

    ``library`` is the first line of ``MPI_Get_library_version`` with runs of
    blanks collapsed, ``standard`` the MPI standard version (``"4.0"``),
    ``world_size`` the size of ``MPI.COMM_WORLD``.  Initialises MPI (imports
    ``mpi4py.MPI``); raises whatever loading MPI raises (``ImportError``,
    ``RuntimeError``), for the caller to report.  Local.
    """
    from mpi4py import MPI

    first = MPI.Get_library_version().strip().splitlines()[0]
    return {"library": " ".join(first.split()), "standard": "%d.%d" % MPI.Get_version(),
            "world_size": MPI.COMM_WORLD.Get_size()}


def _exclusive_cumsum(c: np.ndarray) -> np.ndarray:
    out = np.zeros_like(c)
    if c.size > 1:
        np.cumsum(c[:-1], out=out[1:])
    return out


def _op_name(op) -> str:
    name = getattr(op, "name", op)
    if not isinstance(name, str) or name not in REDUCE_OPS:
        raise ValueError(f"reduction op must be one of {REDUCE_OPS} or an object with such a "
                         f".name, but got {op!r}")
    return name


#: dtype kinds each reduction accepts: MPI defines SUM/PROD on integers,
#: floats and complex, MIN/MAX on integers and floats, LOR/LAND on integers
#: and C bool.  Checked locally so both transports reject the same calls.
_OP_KINDS = {"plus": "iufc", "times": "iufc", "min": "iuf", "max": "iuf",
             "lor": "iub", "land": "iub"}


def _check_op_dtype(opname: str, op: str, dtype: np.dtype) -> None:
    if dtype.kind not in _OP_KINDS[op]:
        raise DTypeError(f"{opname}: op={op!r} is not defined for dtype={dtype} "
                         f"(accepted kinds: {_OP_KINDS[op]!r})")


def _resolve_error_class(module: str, qualname: str):
    """The class a peer of a failing rank raises, or None for RemoteError."""
    if module == _errors.__name__ and qualname in _errors.__all__:
        cls = getattr(_errors, qualname)
    elif module == "builtins":
        cls = getattr(builtins, qualname, None)
    else:
        return None
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls
    return None


class Request:
    """Handle of a non-blocking call; :meth:`wait` completes it and records its event.

    ``record(seconds, blocked)`` gets the time from the start (``t0``) to
    the end of the wait and the time spent blocked: the start (``t0`` to
    this handle's creation) plus the wait itself.
    """

    __slots__ = ("_finish", "_record", "_t0", "_done", "_result", "_watched", "_started",
                 "_poll")

    def __init__(self, finish: Callable[[], Any], record: Callable[[float, float], None],
                 t0: float, watched=None, poll: Callable[[], bool] | None = None):
        self._finish, self._record, self._t0 = finish, record, t0
        # poll(): progress the transfer without blocking, True once it is complete
        self._poll = poll
        self._started = time.perf_counter() - t0
        self._done, self._result = False, None
        # (communicator, op, label, call number) for the collective watchdog, or None
        self._watched = watched

    def wait(self):
        """Block until complete; returns the received array (``None`` for sends).

        Idempotent: later calls return the same result and record nothing.
        """
        if not self._done:
            w = self._watched
            t_wait = time.perf_counter()
            if w is not None and w[0]._watch is not None:
                self._result = w[0]._watched_wait(w, self._finish)
            else:
                self._result = self._finish()
            self._done = True
            now = time.perf_counter()
            self._record(now - self._t0, self._started + (now - t_wait))
            self._finish = self._record = self._watched = self._poll = None
        return self._result

    def test(self) -> bool:
        """Progress the call without blocking; True once its transfer is complete. Local.

        MPI libraries such as mpich progress a non-blocking collective only
        inside MPI calls: a caller computing between the start and
        :meth:`wait` calls this between its kernels.  Records nothing:
        :meth:`wait` (still required) completes the call and records its event.
        """
        if self._done:
            return True
        return True if self._poll is None else bool(self._poll())


class Communicator:
    """A group of ranks with accounted collectives on numpy arrays.

    Parameters
    ----------
    transport : Transport
        What moves the bytes (:class:`~spgnn.comm.transport.MPITransport` or a
        loopback rank).
    axis : tuple of str, optional
        Names of the grid axes this communicator spans; recorded on every
        event.
    ledger : Ledger, optional
        Where events go.  Communicators split from one another share it.  A
        new one is made when omitted.

    Notes
    -----
    Properties are local; every method that moves data says ``Collective:``
    in its docstring.  Arrays are numpy arrays of a numeric or bool dtype;
    non-contiguous inputs are copied to contiguous ones first.  The
    collectives also take device arrays (CuPy) and return device arrays,
    moved as :attr:`gpu_comm` says (:mod:`spgnn.comm.device`; a ``bcast`` of
    a device buffer in ``staged`` mode returns a new array instead of
    filling ``buf``); ``send``/``recv`` take host arrays only.
    """

    #: Largest element count (and displacement) one MPI message may carry.
    #: Tests lower it on an instance to exercise the chunked path.
    max_count: int = 2**31 - 1

    _world: "Communicator | None" = None

    def __init__(self, transport: Transport, *, axis=(), ledger: Ledger | None = None):
        if not isinstance(transport, Transport):
            raise TypeError(f"Communicator: transport must be a Transport, but got "
                            f"{type(transport).__name__}")
        self.transport = transport
        self.axis = (axis,) if isinstance(axis, str) else tuple(axis)
        self.ledger = ledger if ledger is not None else Ledger(rank=transport.rank)
        self.gpu_comm = _device.default_mode()
        self._device_now = ""          # the mode of the device-array call in progress
        self._last_event = None
        self._timeout = _watchdog.env_timeout()
        # the collective watchdog (spgnn.comm.watchdog): set on MPI communicators
        # while it runs; the blocking calls made so far; this communicator's id
        self._watch = None
        self._ncalls = 0
        self._nsplits = 0
        self._wid = "world" if transport.size > 1 else "solo"
        # why this rank may not enter another collective (Communicator.section);
        # one list shared with every split, so a break reaches the grid's axes
        self._broken = [None]
        # seconds of the timed barriers (Ledger.time_waits) not yet put on an event
        self._pending_wait = 0.0

    @property
    def gpu_comm(self) -> str:
        """How device arrays move: ``"staged"`` or ``"cuda-aware"`` (:mod:`spgnn.comm.device`).

        Initialised from ``$SPGNN_GPU_COMM`` (default ``staged``); splits
        inherit it.  Set it to the same value on every rank.
        """
        return self._gpu_comm

    @gpu_comm.setter
    def gpu_comm(self, mode) -> None:
        self._gpu_comm = _device.check_mode(mode)

    @property
    def collective_timeout(self) -> float:
        """Seconds a blocking call may take before the watchdog ends the job; 0: never.

        Initialised from ``$SPGNN_COLLECTIVE_TIMEOUT`` (default
        :data:`~spgnn.comm.watchdog.DEFAULT_TIMEOUT`, 600 s); splits inherit
        it.  Enforced on MPI communicators of multi-rank jobs
        (:mod:`spgnn.comm.watchdog`); loopback ranks have ``run_loopback``'s
        ``timeout`` instead.  Set it to the same value on every rank.  Local.
        """
        return self._timeout

    @collective_timeout.setter
    def collective_timeout(self, seconds) -> None:
        self._timeout = _watchdog.check_timeout(seconds)

    # ------------------------------------------------------------ construction
    @classmethod
    def world(cls) -> "Communicator":
        """The communicator over ``MPI.COMM_WORLD`` (one per process, cached)."""
        if Communicator._world is None:
            from mpi4py import MPI

            world = cls.from_mpi(MPI.COMM_WORLD)
            if MPI.COMM_WORLD.Get_size() > 1:
                _install_abort_hook()
                _install_interrupt_watchdog()
                world._watch = _watchdog.start()
                world._watch.comms[world._wid] = world
            Communicator._world = world
        return Communicator._world

    @classmethod
    def from_mpi(cls, mpi_comm, axis=()) -> "Communicator":
        """Wrap an ``mpi4py`` communicator; it records into the process ledger."""
        return cls(MPITransport(mpi_comm), axis=axis, ledger=_process_ledger())

    @property
    def rank(self) -> int:
        return self.transport.rank

    @property
    def size(self) -> int:
        return self.transport.size

    def __repr__(self) -> str:
        return (f"Communicator(rank={self.rank}, size={self.size}, axis={self.axis}, "
                f"transport={type(self.transport).__name__})")

    def library_version(self) -> str:
        """The MPI library's version string (or the loopback's description)."""
        return self.transport.library_version()

    def split(self, color, key=None, *, axis=()) -> "Communicator | None":
        """Sub-communicator of the ranks passing the same ``color``.

        Parameters
        ----------
        color : int or None
            Non-negative group id; ``None`` joins no group and returns ``None``.
        key : int, optional
            Orders ranks in the new group (ties by current rank); defaults to
            the current rank.
        axis : tuple of str
            Grid axes the new communicator spans.

        Collective: yes, over this communicator.  The result shares this
        communicator's ledger and ``max_count``.
        """
        if color is not None and (not isinstance(color, (int, np.integer)) or color < 0):
            raise ValueError(f"split: color must be a non-negative int or None, but got {color!r}")
        key = self.rank if key is None else key
        if not isinstance(key, (int, np.integer)):
            raise TypeError(f"split: key must be an int, but got {key!r}")
        t0 = time.perf_counter()
        label = self._label(None)
        sub = self._run("split", label, self.transport.split,
                        None if color is None else int(color), int(key))
        # Model: an allgather of (color, key), two int64 per rank.
        self._record_allgather("split", label, 16, 16 * self.size, time.perf_counter() - t0)
        wid = f"{self._wid}/{self._nsplits}"
        self._nsplits += 1
        if sub is None:
            return None
        new = Communicator(sub, axis=axis, ledger=self.ledger)
        new.gpu_comm = self.gpu_comm
        new._timeout, new._wid = self._timeout, wid
        new._broken = self._broken
        if self._watch is not None:
            new._watch = self._watch
            new._watch.comms[wid] = new
        if "max_count" in self.__dict__:
            new.max_count = self.max_count
        return new

    # ---------------------------------------------------------------- helpers
    def _run(self, op, label, fn, *args):
        """``fn(*args)``, a blocking call, watched by the collective watchdog when it runs.

        Per call: a counter, one tuple stored before and two slots after.
        ``op`` names a point-to-point call with its peer (``"recv from rank 1"``);
        those are not counted as collective calls (``call`` is ``None``).
        """
        if self._broken[0] is not None:
            raise CommunicatorBroken(f"rank {self.rank}: {op.lstrip('~')} {label or ''!s} refused: "
                                     f"{self._broken[0]}; its peers may be waiting there in a "
                                     f"collective this rank will never join: end the job")
        timed = self.ledger.time_waits and op[0] != "~" and op != "barrier"
        w = self._watch
        if w is None:
            if timed:
                self._timed_barrier()
            return fn(*args)
        if op[0] == "~":
            now = (self, op[1:], label, None, time.monotonic())
        else:
            self._ncalls += 1
            now = (self, op, label, self._ncalls, time.monotonic())
        w.now = now
        try:
            if timed:
                self._timed_barrier()
            return fn(*args)
        finally:
            w.last = now
            w.now = None

    def _timed_barrier(self):
        """A barrier before a collective (``Ledger.time_waits``): its seconds are this rank's
        wait for the slowest rank, kept for the call's event (``wait_seconds``)."""
        if self.size > 1:
            t0 = time.perf_counter()
            self.transport.barrier()
            self._pending_wait += time.perf_counter() - t0

    def _take_wait(self) -> float:
        wait, self._pending_wait = self._pending_wait, 0.0
        return wait

    def _watched_wait(self, watched, finish):
        """``finish()`` of a non-blocking call, watched as its collective (``watched``)."""
        w = self._watch
        now = (*watched, time.monotonic())
        w.now = now
        try:
            return finish()
        finally:
            w.last = now
            w.now = None

    def _start_nonblocking(self, op, label):
        """What a non-blocking call's ``wait`` is watched as: counted at its start."""
        if self._watch is None:
            return None
        if op[0] == "~":
            return (self, op[1:], label, None)
        self._ncalls += 1
        return (self, op, label, self._ncalls)

    def _world_ranks(self) -> list:
        """The ``MPI.COMM_WORLD`` ranks of this communicator's members, in its rank order."""
        from mpi4py import MPI

        group = self.transport.comm.Get_group()
        try:
            return list(MPI.Group.Translate_ranks(group, list(range(self.size)),
                                                  MPI.COMM_WORLD.Get_group()))
        finally:
            group.Free()

    def _label(self, label) -> str:
        if label is None:
            return self.ledger.current_label()
        if not isinstance(label, str):
            raise TypeError(f"label must be a str or None, but got {label!r}")
        return label

    def _record(self, op, label, sent, recv, messages, seconds, blocked=None, wait=None):
        # a blocking call's seconds include its timed barrier (if any): take it out
        if wait is None:
            wait = self._take_wait()
            seconds = max(0.0, seconds - wait)
        blocked = seconds if blocked is None else blocked
        ev = CommEvent(op=op, label=label, axis=self.axis, bytes_sent=int(sent),
                       bytes_recv=int(recv), messages=int(messages), seconds=float(seconds),
                       rank=self.ledger.rank, device=self._device_now,
                       blocked_seconds=float(blocked), wait_seconds=float(wait))
        self._last_event = ev
        self.ledger.record(ev)

    def _record_allgather(self, op, label, own, total, seconds):
        self._record(op, label, *model_allgather(own, total, self.size), seconds)

    def _record_allreduce(self, op, label, n, itemsize, seconds):
        self._record(op, label, *model_allreduce(n, itemsize, self.size, self.rank), seconds)

    @staticmethod
    def _array(opname: str, buf, argname: str = "buf", min_ndim: int = 0) -> np.ndarray:
        # a device array (CUDA-aware mode) keeps its module: np.asarray would copy or refuse
        a = buf if isinstance(buf, np.ndarray) or _device.is_device(buf) else np.asarray(buf)
        if a.dtype.kind not in "biufc":
            raise DTypeError(f"{opname}: {argname} must have a numeric or bool dtype, but got "
                             f"dtype={a.dtype}")
        if a.ndim < min_ndim:
            raise DimensionMismatch(f"{opname}: {argname} must have at least {min_ndim} "
                                    f"dimension(s), but got shape {a.shape}")
        # not np.ascontiguousarray: it turns 0-d arrays into 1-d ones
        return a if a.flags.c_contiguous else _device.copy(a)

    def _counts(self, opname: str, argname: str, counts) -> np.ndarray:
        c = np.asarray(counts)
        if c.ndim != 1 or c.shape[0] != self.size:
            raise DimensionMismatch(f"{opname}: {argname} must have one entry per rank "
                                    f"(size={self.size}), but got shape {c.shape}")
        if c.dtype.kind not in "iu":
            raise DTypeError(f"{opname}: {argname} must be integers, but got dtype={c.dtype}")
        c = c.astype(_COUNT_DTYPE)
        if (c < 0).any():
            raise ValueError(f"{opname}: {argname} must be non-negative, but got {c.tolist()}")
        return c

    def _root(self, opname, root) -> int:
        if not isinstance(root, (int, np.integer)) or not 0 <= root < self.size:
            raise ValueError(f"{opname}: root must be a rank in [0, {self.size}), but got {root!r}")
        return int(root)

    def _peer(self, opname, name, peer, tag) -> tuple[int, int]:
        if not isinstance(peer, (int, np.integer)) or not 0 <= peer < self.size:
            raise ValueError(f"{opname}: {name} must be a rank in [0, {self.size}), but got {peer!r}")
        if not isinstance(tag, (int, np.integer)) or not 0 <= tag < CHUNK_TAG:
            raise ValueError(f"{opname}: tag must be in [0, {CHUNK_TAG}), but got {tag!r}")
        return int(peer), int(tag)

    # ------------------------------------------------------------ collectives
    def barrier(self) -> None:
        """Wait until every rank arrives.

        Collective: yes.  Recorded with zero bytes.
        """
        label = self._label(None)
        t0 = time.perf_counter()
        self._run("barrier", label, self.transport.barrier)
        self._record("barrier", label, 0, 0, 0, time.perf_counter() - t0)

    @_device_buffers
    def allreduce(self, buf, op="plus", *, label=None) -> np.ndarray:
        """Element-wise reduction over all ranks.

        Parameters
        ----------
        buf : array_like
            Same shape and dtype on every rank.
        op : str or Monoid
            ``"plus"``, ``"min"``, ``"max"``, ``"times"``, ``"lor"``,
            ``"land"``, or an object (e.g. a :class:`~spgnn.local.semiring.Monoid`)
            whose ``.name`` is one of them.

        Returns
        -------
        numpy.ndarray
            A new array of ``buf``'s shape and dtype.

        Collective: yes.
        """
        name = _op_name(op)
        a = self._array("allreduce", buf)
        _check_op_dtype("allreduce", name, a.dtype)
        label = self._label(label)
        t0 = time.perf_counter()
        out = self._run("allreduce", label, self.transport.allreduce, a.reshape(-1),
                        name).reshape(a.shape)
        self._record_allreduce("allreduce", label, a.size, a.itemsize, time.perf_counter() - t0)
        return out

    @_device_buffers
    def allgather(self, buf, *, label=None) -> np.ndarray:
        """Stack every rank's ``buf`` (same shape and dtype everywhere).

        Returns
        -------
        numpy.ndarray
            Shape ``(size, *buf.shape)``; row ``j`` is rank j's ``buf``.

        Collective: yes.
        """
        a = self._array("allgather", buf)
        label = self._label(label)
        p = self.size
        t0 = time.perf_counter()
        flat = self._run("allgather", label, self.transport.allgatherv, a.reshape(-1),
                         np.full(p, a.size, dtype=_COUNT_DTYPE))
        self._record_allgather("allgather", label, a.nbytes, a.nbytes * p,
                               time.perf_counter() - t0)
        return flat.reshape((p,) + a.shape)

    @_device_buffers
    def allgatherv(self, buf, counts=None, *, label=None) -> np.ndarray:
        """Concatenate every rank's rows along axis 0 (rank order).

        Ranks may pass different numbers of rows (including zero); the other
        dimensions and the dtype must agree (not checkable locally).

        Parameters
        ----------
        buf : array_like
            This rank's rows.
        counts : sequence of int, optional
            Rows every rank contributes, identical on all ranks (e.g. from a
            layout's block offsets).  When omitted they are exchanged first
            (event ``"allgather:counts"``).

        Collective: yes.
        """
        a = self._array("allgatherv", buf, min_ndim=1)
        label = self._label(label)
        p = self.size
        rowshape = a.shape[1:]
        rowsize = int(np.prod(rowshape, dtype=np.int64))
        if counts is None:
            t0 = time.perf_counter()
            rows = self._run("allgather:counts", label, self.transport.allgatherv,
                             np.array([a.shape[0]], dtype=_COUNT_DTYPE),
                             np.ones(p, dtype=_COUNT_DTYPE))
            self._record_allgather("allgather:counts", label, 8, 8 * p, time.perf_counter() - t0)
        else:
            rows = self._counts("allgatherv", "counts", counts)
            if int(rows[self.rank]) != a.shape[0]:
                raise DimensionMismatch(f"allgatherv: counts[{self.rank}]={int(rows[self.rank])} "
                                        f"must equal this rank's rows, but buf has {a.shape[0]}")
        counts = rows * rowsize
        t0 = time.perf_counter()
        flat = self._run("allgatherv", label, self.transport.allgatherv, a.reshape(-1), counts)
        self._record_allgather("allgatherv", label, a.nbytes, int(counts.sum()) * a.itemsize,
                               time.perf_counter() - t0)
        return flat.reshape((int(rows.sum()),) + rowshape)

    @_device_buffers
    def reduce_scatter(self, buf, counts=None, op="plus", *, label=None) -> np.ndarray:
        """Reduce ``buf`` over ranks and keep this rank's block of rows.

        Parameters
        ----------
        buf : array_like
            Same shape and dtype on every rank, at least 1-D.
        counts : sequence of int, optional
            Rows of the result per rank (sum = ``buf.shape[0]``); defaults to
            the even block split (first ``n % size`` ranks get one more row).
        op : str or Monoid
            As for :meth:`allreduce`.

        Returns
        -------
        numpy.ndarray
            Shape ``(counts[rank], *buf.shape[1:])``.

        Collective: yes.
        """
        name = _op_name(op)
        a = self._array("reduce_scatter", buf, min_ndim=1)
        _check_op_dtype("reduce_scatter", name, a.dtype)
        p, r = self.size, self.rank
        n = a.shape[0]
        if counts is None:
            c = np.array([block_size(n, p, j) for j in range(p)], dtype=_COUNT_DTYPE)
        else:
            c = self._counts("reduce_scatter", "counts", counts)
            if int(c.sum()) != n:
                raise DimensionMismatch(f"reduce_scatter: counts must sum to buf.shape[0]={n}, "
                                        f"but got sum {int(c.sum())} from {c.tolist()}")
        label = self._label(label)
        rowshape = a.shape[1:]
        rowsize = int(np.prod(rowshape, dtype=np.int64))
        el = c * rowsize
        t0 = time.perf_counter()
        out = self._run("reduce_scatter", label, self.transport.reduce_scatter, a.reshape(-1),
                        el, name)
        own = int(el[r]) * a.itemsize
        msgs = int(np.count_nonzero(el)) - (1 if el[r] > 0 else 0)
        self._record("reduce_scatter", label, a.nbytes - own, (p - 1) * own, msgs,
                     time.perf_counter() - t0)
        return out.reshape((int(c[r]),) + rowshape)

    @_device_buffers
    def alltoall(self, buf, *, label=None) -> np.ndarray:
        """Personalised exchange of equal blocks: ``out[j]`` is rank j's ``buf[rank]``.

        ``buf`` has shape ``(size, ...)``, the same on every rank.

        Collective: yes.
        """
        a = self._array("alltoall", buf, min_ndim=1)
        p = self.size
        if a.shape[0] != p:
            raise DimensionMismatch(f"alltoall: buf.shape[0] must equal size={p}, but got "
                                    f"buf.shape={a.shape}")
        label = self._label(label)
        t0 = time.perf_counter()
        out = self._run("alltoall", label, self.transport.alltoall, a)
        block = a.nbytes // p
        self._record("alltoall", label, (p - 1) * block, (p - 1) * block,
                     (p - 1) if block > 0 else 0, time.perf_counter() - t0)
        return out

    @_device_buffers
    def alltoallv(self, sendbuf, sendcounts, recvcounts=None, *, label=None,
                  split=None) -> np.ndarray:
        """Personalised exchange of variable-sized blocks of rows.

        Parameters
        ----------
        sendbuf : array_like
            At least 1-D; rows ``[sdispl_j, sdispl_j + sendcounts[j])`` go to
            rank j (``sdispl`` is the exclusive prefix sum of ``sendcounts``).
            Trailing dimensions and dtype must agree across ranks.
        sendcounts : sequence of int
            Rows for each rank (elements when ``sendbuf`` is 1-D); must sum
            to ``sendbuf.shape[0]``.
        recvcounts : sequence of int, optional
            Rows to expect from each rank.  When omitted they are exchanged
            first (event ``"alltoall:counts"``).  When given they must match
            what the peers send (not checkable locally).
        split : bool, optional
            With ``recvcounts``: the caller's decision, identical on every
            rank, whether to take the chunked large-message path (e.g. an
            exchange plan that knows the largest total any rank sends or
            receives).  Skips the ``"allreduce:split"`` agreement.

        Returns
        -------
        numpy.ndarray
            Rows received, ordered by source rank, shape
            ``(sum(recvcounts), *sendbuf.shape[1:])``.

        Collective: yes.  Oversized messages are split (see module docs);
        with ``recvcounts`` given, the split decision costs one small
        allreduce (event ``"allreduce:split"``) unless ``split`` is given.
        """
        return self._alltoallv("alltoallv", sendbuf, sendcounts, recvcounts, label,
                               nonblocking=False, split=split)

    @_device_buffers
    def ialltoallv(self, sendbuf, sendcounts, recvcounts=None, *, label=None,
                   split=None) -> Request:
        """Non-blocking :meth:`alltoallv`; ``.wait()`` returns the received rows.

        ``sendbuf`` must not be modified before ``wait``.  The counts exchange
        (when ``recvcounts`` is omitted) happens at the start and is blocking.
        The event is recorded at ``wait`` with the elapsed time since start.

        Collective: yes (the start; ``wait`` is local).
        """
        return self._alltoallv("ialltoallv", sendbuf, sendcounts, recvcounts, label,
                               nonblocking=True, split=split)

    def _alltoallv(self, opname, sendbuf, sendcounts, recvcounts, label, nonblocking, split=None):
        a = self._array(opname, sendbuf, "sendbuf", min_ndim=1)
        p, r = self.size, self.rank
        sc = self._counts(opname, "sendcounts", sendcounts)
        if int(sc.sum()) != a.shape[0]:
            raise DimensionMismatch(f"{opname}: sendcounts must sum to sendbuf.shape[0]="
                                    f"{a.shape[0]}, but got sum {int(sc.sum())} from {sc.tolist()}")
        rc = None if recvcounts is None else self._counts(opname, "recvcounts", recvcounts)
        label = self._label(label)
        rowshape = a.shape[1:]
        rowsize = int(np.prod(rowshape, dtype=np.int64))
        w = a.itemsize
        mc = int(self.max_count)
        s_el = sc * rowsize
        s_dis = _exclusive_cumsum(s_el)
        send_big = bool(s_el.max() > mc or s_dis.max() > mc)

        if rc is None:
            # Piggyback on the counts exchange a bound B_i on this rank's
            # messages: its largest message, or max_count + 1 when its own
            # send side needs splitting.  Every receiver j gets
            # N_j = sum_i count_ij <= sum_i B_i, so "sum_i B_i > max_count" is
            # a decision every rank computes identically from the same
            # values, with no extra round.
            bound = mc + 1 if send_big else int(s_el.max())
            msg = np.empty((p, 2), dtype=_COUNT_DTYPE)
            msg[:, 0] = sc
            msg[:, 1] = bound
            t0 = time.perf_counter()
            got = self._run("alltoall:counts", label, self.transport.alltoall, msg)
            nb = (p - 1) * msg.itemsize * 2
            self._record("alltoall:counts", label, nb, nb, p - 1, time.perf_counter() - t0)
            rc = got[:, 0].copy()
            split = int(got[:, 1].sum()) > mc
        elif split is not None:
            split = bool(split)
        else:
            r_el = rc * rowsize
            local = send_big or bool(r_el.max() > mc or _exclusive_cumsum(r_el).max() > mc)
            t0 = time.perf_counter()
            flag = self._run("allreduce:split", label, self.transport.allreduce,
                             np.array([int(local)], dtype=_COUNT_DTYPE), "max")
            self._record_allreduce("allreduce:split", label, 1, 8, time.perf_counter() - t0)
            split = bool(flag[0])

        r_el = rc * rowsize
        r_dis = _exclusive_cumsum(r_el)
        # 64-byte aligned on the host (see transport); on the device in CUDA-aware mode
        out = _device.empty_like_module(a, (int(rc.sum()),) + rowshape, a.dtype)
        sflat, rflat = a.reshape(-1), out.reshape(-1)
        others = [j for j in range(p) if j != r]
        sent = int(s_el[others].sum()) * w
        recv = int(r_el[others].sum()) * w

        start_wait = 0.0
        if nonblocking and self.ledger.time_waits:
            # the start is collective: its barrier is timed (and watched) as _run times a
            # blocking call's, before the start itself
            self._run(opname, label, lambda: None)
            start_wait = self._take_wait()
        t0 = time.perf_counter()
        if not split:
            messages = int(np.count_nonzero(s_el[others]))
            if nonblocking:
                req = self.transport.ialltoallv(sflat, s_el, s_dis, rflat, r_el, r_dis)
                finish, poll = req.wait, getattr(req, "test", None)
            else:
                self._run(opname, label, self.transport.alltoallv, sflat, s_el, s_dis, rflat,
                          r_el, r_dis)
        else:
            if int(r_el[r]) != int(s_el[r]):
                raise DimensionMismatch(f"{opname}: sendcounts[{r}]={int(sc[r])} to oneself but "
                                        f"recvcounts[{r}]={int(rc[r])}")
            reqs, messages = [], 0
            # Post every receive before any send, then walk the peers starting
            # after oneself so that not every rank targets rank 0 first.
            order = [(r + k) % p for k in range(1, p)]
            for j in order:
                d, n = int(r_dis[j]), int(r_el[j])
                for off in range(0, n, mc):
                    reqs.append(self.transport.irecv(rflat[d + off:d + min(off + mc, n)],
                                                     j, CHUNK_TAG))
            for j in order:
                d, n = int(s_dis[j]), int(s_el[j])
                for off in range(0, n, mc):
                    reqs.append(self.transport.isend(sflat[d + off:d + min(off + mc, n)],
                                                     j, CHUNK_TAG))
                    messages += 1
            rflat[int(r_dis[r]):int(r_dis[r] + r_el[r])] = sflat[int(s_dis[r]):int(s_dis[r] + s_el[r])]

            def finish():
                for q in reqs:
                    q.wait()

            def poll():
                return all([q.test() for q in reqs])     # a list: every request progresses

            if not nonblocking:
                self._run(opname, label, finish)

        def record(seconds, blocked=None):
            if nonblocking:
                self._record(opname, label, sent, recv, messages, seconds, blocked, start_wait)
            else:
                self._record(opname, label, sent, recv, messages, seconds)

        if nonblocking:
            def complete():
                finish()
                return out

            return Request(complete, record, t0, self._start_nonblocking(opname, label), poll)
        record(time.perf_counter() - t0)
        return out

    @_device_buffers
    def bcast(self, buf, root=0, *, label=None) -> np.ndarray:
        """Root's ``buf`` on every rank.

        Every rank passes an array of the same shape and dtype (MPI
        semantics).  A writeable C-contiguous ``buf`` is overwritten in place
        on non-root ranks and returned; anything else is copied first.

        Collective: yes.
        """
        root = self._root("bcast", root)
        # CuPy's flags have no ``writeable``: device memory always is
        if ((isinstance(buf, np.ndarray) or _device.is_device(buf)) and buf.flags.c_contiguous
                and getattr(buf.flags, "writeable", True)):
            a = self._array("bcast", buf)
        else:
            a = _device.copy(self._array("bcast", buf))
        label = self._label(label)
        p = self.size
        t0 = time.perf_counter()
        self._run("bcast", label, self.transport.bcast, a.reshape(-1), root)
        m = a.nbytes
        if self.rank == root:
            self._record("bcast", label, m * (p - 1), 0, (p - 1) if m > 0 else 0,
                         time.perf_counter() - t0)
        else:
            self._record("bcast", label, 0, m, 0, time.perf_counter() - t0)
        return a

    # --------------------------------------------------------- point to point
    def send(self, buf, dest, tag=0, *, label=None) -> None:
        """Blocking send of an array to ``dest`` (tag in ``[0, CHUNK_TAG)``)."""
        dest, tag = self._peer("send", "dest", dest, tag)
        a = self._array("send", buf)
        label = self._label(label)
        t0 = time.perf_counter()
        self._run(f"~send to rank {dest}", label, self.transport.send, a.reshape(-1), dest, tag)
        self._record_p2p("send", label, dest, a.nbytes, time.perf_counter() - t0)

    def recv(self, buf, source, tag=0, *, label=None) -> np.ndarray:
        """Blocking receive into ``buf`` (a writeable C-contiguous array); returns ``buf``."""
        source, tag = self._peer("recv", "source", source, tag)
        self._check_recv_buf("recv", buf)
        label = self._label(label)
        t0 = time.perf_counter()
        self._run(f"~recv from rank {source}", label, self.transport.recv, buf.reshape(-1),
                  source, tag)
        self._record_p2p("recv", label, source, buf.nbytes, time.perf_counter() - t0)
        return buf

    def isend(self, buf, dest, tag=0, *, label=None) -> Request:
        """Non-blocking send; ``.wait()`` returns ``None``.  Do not modify ``buf`` before."""
        dest, tag = self._peer("isend", "dest", dest, tag)
        a = self._array("isend", buf)
        label = self._label(label)
        t0 = time.perf_counter()
        req = self.transport.isend(a.reshape(-1), dest, tag)
        return Request(req.wait,
                       lambda s, b: self._record_p2p("send", label, dest, a.nbytes, s, b), t0,
                       self._start_nonblocking(f"~isend to rank {dest}", label))

    def irecv(self, buf, source, tag=0, *, label=None) -> Request:
        """Non-blocking receive into ``buf``; ``.wait()`` returns ``buf``."""
        source, tag = self._peer("irecv", "source", source, tag)
        self._check_recv_buf("irecv", buf)
        label = self._label(label)
        t0 = time.perf_counter()
        req = self.transport.irecv(buf.reshape(-1), source, tag)
        return Request(lambda: (req.wait(), buf)[1],
                       lambda s, b: self._record_p2p("recv", label, source, buf.nbytes, s, b), t0,
                       self._start_nonblocking(f"~irecv from rank {source}", label))

    def _check_recv_buf(self, opname, buf):
        if not isinstance(buf, np.ndarray):
            raise TypeError(f"{opname}: buf must be a numpy array, but got {type(buf).__name__}")
        self._array(opname, buf)
        if not (buf.flags.c_contiguous and buf.flags.writeable):
            raise ValueError(f"{opname}: buf must be C-contiguous and writeable")

    def _record_p2p(self, op, label, peer, nbytes, seconds, blocked=None):
        # point-to-point calls never run a timed barrier (only the two peers take part)
        if peer == self.rank:  # self-traffic is never counted
            self._record(op, label, 0, 0, 0, seconds, blocked, 0.0)
        elif op == "send":
            self._record(op, label, nbytes, 0, 1, seconds, blocked, 0.0)
        else:
            self._record(op, label, 0, nbytes, 0, seconds, blocked, 0.0)

    # ------------------------------------------------------------- objects
    def allgather_obj(self, obj, *, label=None) -> list:
        """List of every rank's picklable ``obj``, in rank order.

        Collective: yes.  Recorded as ``"allgather:obj"`` sized by the pickles.
        """
        label = self._label(label)
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        t0 = time.perf_counter()
        parts = self._run("allgather:obj", label, self.transport.allgather_obj, data)
        self._record_allgather("allgather:obj", label, len(data), sum(len(b) for b in parts),
                               time.perf_counter() - t0)
        return [pickle.loads(b) for b in parts]

    def bcast_obj(self, obj, root=0, *, label=None):
        """Root's picklable ``obj`` on every rank (root gets ``obj`` itself).

        Collective: yes.  Recorded as ``"bcast:obj"`` sized by the pickle.
        """
        root = self._root("bcast_obj", root)
        label = self._label(label)
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL) if self.rank == root else None
        t0 = time.perf_counter()
        data = self._run("bcast:obj", label, self.transport.bcast_obj, data, root)
        m, p = len(data), self.size
        if self.rank == root:
            self._record("bcast:obj", label, m * (p - 1), 0, (p - 1) if m > 0 else 0,
                         time.perf_counter() - t0)
            return obj
        self._record("bcast:obj", label, 0, m, 0, time.perf_counter() - t0)
        return pickle.loads(data)

    # ------------------------------------------------------------ failures
    def agree(self, error: BaseException | None = None) -> None:
        """Rank-consistent failure: raise on every rank if any rank passes an error.

        Every rank calls it with ``None`` or the exception it caught.  If no
        rank failed it returns ``None`` (cost: one int64 allreduce).
        Otherwise the failing ranks re-raise their own exception and every
        other rank raises the class of the lowest failing rank's error when
        it is an :mod:`spgnn.errors` class or a builtin exception (message
        ``"rank r: <message>"``), else :class:`~spgnn.errors.RemoteError`.

        Collective: yes.  Never hangs when every rank calls it.
        """
        if error is not None and not isinstance(error, BaseException):
            raise TypeError(f"agree: error must be an exception or None, but got {error!r}")
        label = self._label(None) or "agree"
        flag = self.allreduce(np.array([error is not None], dtype=_COUNT_DTYPE), "max",
                              label=label)
        if not flag[0]:
            return None
        info = None if error is None else (type(error).__module__, type(error).__qualname__,
                                           str(error))
        infos = self.allgather_obj(info, label=label)
        if error is not None:
            _mark_agreed(error, self)
            raise error
        failed = [(r, i) for r, i in enumerate(infos) if i is not None]
        r0, (module, qualname, message) = failed[0]
        more = f" (and {len(failed) - 1} other rank(s) failed)" if len(failed) > 1 else ""
        cls = _resolve_error_class(module, qualname)
        exc = None
        if cls is not None:
            try:
                exc = cls(f"rank {r0}: {message}{more}")
            except Exception:  # a builtin with a special constructor
                exc = None
        if exc is None:
            exc = RemoteError(f"rank {r0} raised {module}.{qualname}: {message}{more}")
        _mark_agreed(exc, self)
        raise exc from None

    @contextlib.contextmanager
    def section(self, name: str):
        """A collective section: leaving it with an error on this rank alone breaks the communicator.

        Local (no communication).  ``with comm.section("fit"): ...`` around
        code whose collectives every rank runs in step.  When an exception
        leaves the block on this rank without being agreed (:meth:`agree`,
        :meth:`raise_together` mark the errors every rank raises together),
        its peers may still be inside, waiting in a collective this rank will
        not join; catching the exception and calling another collective would
        hang them and this rank.  So every later blocking call of this
        communicator and its splits raises
        :class:`~spgnn.errors.CommunicatorBroken` naming the section and the
        error, at once.  MPI cannot repair the job: end it.  A one-rank
        communicator never breaks (nobody can wait for it).
        """
        try:
            yield self
        except Exception as exc:
            if self.size > 1 and getattr(exc, "spgnn_agreed_size", None) is None:
                self._broken[0] = f"this rank left {name!r} with {type(exc).__name__}: {exc}"
            raise

    def raise_together(self, error: BaseException) -> None:
        """Raise ``error``, which every rank of this communicator raises at this point. Local.

        For a decision every rank takes from identical data (an all-reduced
        value, a replicated parameter), so no communication is needed to agree
        on it; the error is marked agreed, as :meth:`agree`'s are, so the
        command line reports it once and ends MPI cleanly.
        """
        _mark_agreed(error, self)
        raise error

    def abort(self, code: int = 1) -> None:
        """Terminate the whole job (``MPI_Abort``); does not return."""
        self.transport.abort(code)

    # -------------------------------------------------------------- stats
    def clock(self, name: str):
        """Context manager adding the time spent inside it to ``ledger.clocks[name]``.

        For work inside a communication step that is not a call, e.g. the
        exchange codec (``"quantize"``), so the epoch phases can name it.
        Local: no communication.
        """
        return self.ledger.clock(name)

    def track(self, label: str):
        """Context manager collecting the events recorded while it is open.

        Yields a :class:`~spgnn.comm.stats.CommStats` that receives every
        event recorded into this communicator's ledger (so also by the
        communicators split from the same world) until the scope closes.
        Scopes nest: inside ``track("a")`` and ``track("b")`` a call without a
        label is labelled ``"a/b"``, and both scopes collect it.

        Local: no communication.

        Examples
        --------
        The bytes of one SpMM on two loopback ranks (threads of this process):

        >>> import numpy as np
        >>> from spgnn import DistDenseMatrix, DistSparseMatrix, grid_1d, rmat, run_loopback, spmm
        >>> def job(comm):
        ...     grid = grid_1d(comm)
        ...     A = DistSparseMatrix.from_global(rmat(6, 4, seed=0), grid, backend="numpy")
        ...     X = DistDenseMatrix.from_global(np.ones((64, 8), np.float32), grid,
        ...                                     backend="numpy")
        ...     with comm.track("spmm") as stats:
        ...         spmm(A, X, algorithm="1d-aware")
        ...     return stats
        >>> stats = run_loopback(2, job)   # one CommStats per rank
        >>> [s.total("bytes_sent", label="spmm-1d-aware:exchange") for s in stats]
        [800, 864]
        >>> sorted(stats[0].by_label())    # planning (once per matrix), then the row exchange
        ['spmm-1d-aware:exchange', 'spmm-1d-aware:plan']
        """
        return self.ledger.scope(label)
