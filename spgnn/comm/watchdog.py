"""The collective watchdog: one daemon thread per MPI process (issue 38).

Two hangs no rank can see from inside a blocking MPI call:

* **A stalled collective.**  A rank that never reaches a collective (stopped,
  looping, waiting for input, or in a different collective) leaves every
  peer blocked forever.  Each :class:`~spgnn.comm.Communicator` call that
  blocks publishes, in one tuple store before the call and one after, what
  it is doing: ``(communicator, operation, ledger label, call number, start
  time)``.  The thread looks at that slot every :data:`TICK` seconds; when
  the call has run longer than the communicator's
  :attr:`~spgnn.comm.Communicator.collective_timeout`, it asks every member
  of the communicator what it is doing (point-to-point messages on
  ``MPI.COMM_WORLD`` with two reserved tags just below ``MPI_TAG_UB``,
  answered by their watchdog threads), prints **one** line naming the
  operation, the label, the time waited and the ranks that did not arrive,
  and ends the job with ``MPI_Abort`` (exit status :data:`TIMEOUT_EXIT`).
  Nothing is exchanged while every collective completes in time.

* **A lost launcher.**  After ``kill -9`` of ``hydra_pmi_proxy`` (or of
  ``mpiexec`` on a one-node job) the ranks become orphans and compute on, or
  wait forever.  The same thread compares ``os.getppid()`` with the parent
  it started under; when they differ the parent is gone, and the rank
  exits (status :data:`LAUNCHER_LOST_EXIT`) without MPI, whose launcher is gone.

What it can name: a peer whose watchdog thread answers within
:func:`answer_seconds` says where it is (in another collective, on which
communicator and label, or in no collective since which one); a peer that
does not answer (stopped with SIGSTOP, killed, or holding the Python
interpreter lock in a long computation) is named as not answering.  Of the
ranks waiting in the timed-out call, only the lowest reports; the others
defer to it for another timeout before reporting themselves.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import weakref

__all__ = ["DEFAULT_TIMEOUT", "TIMEOUT_EXIT", "LAUNCHER_LOST_EXIT", "ENV", "env_timeout",
           "check_timeout", "Watchdog", "start", "stop", "current"]

#: Environment variable: seconds a blocking collective may take (0 disables).
ENV = "SPGNN_COLLECTIVE_TIMEOUT"
#: Default of :data:`ENV`: 10 minutes, as torch.distributed's NCCL default.
#: Long enough for a healthy slow epoch, or a peer reading a file, on a laptop.
DEFAULT_TIMEOUT = 600.0
#: Exit status of a job ended by the watchdog (as ``timeout(1)``).
TIMEOUT_EXIT = 124
#: Exit status of a rank whose launcher is gone.
LAUNCHER_LOST_EXIT = 1
#: Seconds between two looks of the thread (less for short timeouts).
TICK = 0.5


def check_timeout(value, what: str = "collective_timeout") -> float:
    """``value`` as seconds (a finite number >= 0; 0 or ``None`` disables). Local."""
    if value is None:
        return 0.0
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if isinstance(value, bool) or not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{what} must be a number of seconds >= 0 (0 disables), "
                         f"but got {value!r}")
    return seconds


def env_timeout() -> float:
    """The default :attr:`Communicator.collective_timeout`: ``$SPGNN_COLLECTIVE_TIMEOUT``. Local."""
    raw = os.environ.get(ENV, "").strip()
    return DEFAULT_TIMEOUT if not raw else check_timeout(raw, ENV)


def answer_seconds(timeout: float) -> float:
    """How long a timed-out rank waits for its peers' answers."""
    return min(2.0, max(1.0, timeout / 2))


def _describe(comm_id: str, axis, size: int) -> str:
    where = "" if not axis else f", axis {'/'.join(axis)}"
    return f"communicator {comm_id} ({size} ranks{where})"


def _op(op: str, label: str) -> str:
    return f"{op} {label!r}" if label else f"{op} (no label)"


class Watchdog:
    """The per-process watchdog thread and the in-flight slot it watches.

    ``now`` is the blocking call in progress on this process (``None`` when
    none); ``last`` the previous one.  :class:`Communicator` writes both.
    """

    def __init__(self):
        from mpi4py import MPI

        self._MPI = MPI
        self.now = None
        self.last = None
        self.comms: "weakref.WeakValueDictionary[str, object]" = weakref.WeakValueDictionary()
        self.world = MPI.COMM_WORLD
        self.rank = self.world.Get_rank()
        self.size = self.world.Get_size()
        tag_ub = self.world.Get_attr(MPI.TAG_UB) or 32767
        # user tags lie below CHUNK_TAG = 32767: two tags above it, if MPI has them
        self.tags = (tag_ub, tag_ub - 1) if tag_ub >= 32769 else None
        self.can_ask = self.tags is not None and MPI.Query_thread() == MPI.THREAD_MULTIPLE
        self.ppid = os.getppid()
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.sends: list = []
        self.serial = 0
        self.deferred = None           # (in-flight tuple, until) after deferring to a lower rank
        self.thread = threading.Thread(target=self._run, name="spgnn-collective-watchdog",
                                       daemon=True)

    # ------------------------------------------------------------ the thread
    def _run(self):
        while not self.stopped.is_set():
            now = self.now
            tick = TICK
            if now is not None and now[0]._timeout > 0:
                tick = min(TICK, max(0.05, now[0]._timeout / 4))
            if self.stopped.wait(tick):
                return
            with self.lock:
                if self.stopped.is_set() or self._MPI.Is_finalized():
                    return
                try:
                    self._check_parent()
                    self._serve()
                    self._check_call()
                except Exception as exc:   # never let the watchdog kill a healthy job
                    _say(f"spgnn: rank {self.rank}: collective watchdog stopped: {exc!r}")
                    return

    def _check_parent(self):
        if self.ppid > 1 and os.getppid() != self.ppid:
            _say(f"spgnn: rank {self.rank}: the MPI launcher (pid {self.ppid}) is gone: exiting")
            os._exit(LAUNCHER_LOST_EXIT)

    def _serve(self):
        """Answer the queries of timed-out peers; forget finished replies."""
        if not self.can_ask:
            return
        query_tag = self.tags[0]
        misses = 0
        while misses < 3:
            # MPICH may need several polls to see each of several queued messages
            msg = self.world.improbe(source=self._MPI.ANY_SOURCE, tag=query_tag)
            if msg is None:
                misses += 1
                continue
            status = self._MPI.Status()
            serial, comm_id = msg.recv(status=status)
            self.sends.append(self.world.isend((serial, self._status(comm_id)),
                                               dest=status.Get_source(), tag=self.tags[1]))
        self.sends = [r for r in self.sends if not r.Test()]

    def _status(self, comm_id):
        comm = self.comms.get(comm_id)
        t = time.monotonic()
        now = self.now
        last = self.last
        return {"calls": None if comm is None else comm._ncalls,
                "now": None if now is None else (now[1], now[2], now[0]._wid, now[3], t - now[4]),
                "last": None if last is None else (last[1], last[2], last[0]._wid, last[3],
                                                   t - last[4])}

    def _check_call(self):
        now = self.now
        if now is None:
            return
        comm, op, label, call, t0 = now
        timeout = comm._timeout
        waited = time.monotonic() - t0
        if timeout <= 0 or waited < timeout:
            return
        if self.deferred is not None:
            if self.deferred[0] is now and time.monotonic() < self.deferred[1]:
                return
            if self.deferred[0] is not now:
                self.deferred = None
        report, problems = self._diagnose(now)
        if not report and self.deferred is None:
            self.deferred = (now, time.monotonic() + timeout + answer_seconds(timeout))
            return
        if self.now is not now:          # it completed while we asked
            return
        waited = time.monotonic() - t0
        missing = "; ".join(problems) if problems else (
            "every rank arrived (a slow or stuck network?)" if self.can_ask else
            "the ranks that did not arrive cannot be asked (MPI without THREAD_MULTIPLE)")
        _say(f"spgnn: collective timeout: {_op(op, label)} on "
             f"{_describe(comm._wid, comm.axis, comm.size)} did not complete within "
             f"{timeout:g} s (rank {self.rank} waited {waited:.1f} s): {missing}; "
             f"ending all {self.size} ranks ({ENV}={timeout:g})")
        time.sleep(0.25)                 # let the launcher forward the line
        try:
            self.world.Abort(TIMEOUT_EXIT)
        finally:
            os._exit(TIMEOUT_EXIT)

    def _diagnose(self, now):
        """``(report, problems)``: ask every member where it is; whether this rank reports."""
        comm, op, label, call, t0 = now
        if call is None:                 # point-to-point: op names the peer
            return True, ["its peer did not make the matching call"]
        if not self.can_ask:
            return True, []
        members = comm._world_ranks()
        self.serial += 1
        serial = self.serial
        asked = [m for m in members if m != self.rank]
        for m in asked:
            self.sends.append(self.world.isend((serial, comm._wid), dest=m, tag=self.tags[0]))
        answers = {}
        deadline = time.monotonic() + answer_seconds(comm._timeout)
        while len(answers) < len(asked) and time.monotonic() < deadline:
            self._serve()                # peers asking at the same time need our answer
            for m in asked:
                if m in answers:
                    continue
                msg = self.world.improbe(source=m, tag=self.tags[1])
                while msg is not None:
                    got_serial, status = msg.recv()
                    if got_serial == serial:
                        answers[m] = status
                        break
                    msg = self.world.improbe(source=m, tag=self.tags[1])
            time.sleep(0.01)
        problems, report = [], True
        for local, m in enumerate(members):
            if m == self.rank:
                continue
            who = f"rank {m}" if list(members) == list(range(len(members))) else \
                f"rank {m} (rank {local} of the communicator)"
            st = answers.get(m)
            if st is None:
                problems.append(f"{who} did not arrive and does not answer (stopped, killed, "
                                f"or busy in Python code)")
                continue
            inside = st["now"]
            here = inside is not None and inside[2] == comm._wid and inside[3] == call
            if here and inside[0] == op:
                if m < self.rank:
                    report = False       # the lowest waiting rank reports
                continue
            if here:
                problems.append(f"{who} is in {_op(inside[0], inside[1])} instead "
                                f"(call {call} on this communicator)")
                continue
            if st["calls"] is not None and st["calls"] >= call:
                continue                  # it passed this call already
            if inside is not None:
                where = (f"is in {_op(inside[0], inside[1])} on communicator {inside[2]} "
                         f"since {inside[4]:.1f} s")
            elif st["last"] is not None:
                last = st["last"]
                where = (f"is in no collective (its last, {_op(last[0], last[1])} on "
                         f"communicator {last[2]}, started {last[4]:.1f} s ago)")
            else:
                where = "is in no collective (it has made none)"
            problems.append(f"{who} did not arrive: it {where}")
        return report, problems

    # ------------------------------------------------------------ lifecycle
    def stop(self):
        """End the thread; waits for a look in progress (before ``MPI_Finalize``)."""
        self.stopped.set()
        with self.lock:
            pass


def _say(line: str) -> None:
    try:
        sys.stderr.flush()
    except Exception:
        pass
    try:
        os.write(2, (line + "\n").encode(errors="replace"))
    except OSError:
        pass


_WATCHDOG: Watchdog | None = None


def current() -> Watchdog | None:
    """The running watchdog of this process, or ``None``."""
    return _WATCHDOG


def start() -> Watchdog:
    """Start this process's watchdog (once); MPI must be initialised. Local."""
    global _WATCHDOG
    if _WATCHDOG is None:
        import atexit

        _WATCHDOG = Watchdog()
        _WATCHDOG.thread.start()
        # runs before mpi4py finalizes MPI at exit (atexit is last-in first-out)
        atexit.register(stop)
    return _WATCHDOG


def stop() -> None:
    """Stop this process's watchdog, if any (before ``MPI_Finalize``). Local."""
    if _WATCHDOG is not None:
        _WATCHDOG.stop()
