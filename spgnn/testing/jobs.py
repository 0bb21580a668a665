"""Multi-rank jobs for fault tests: start, interrupt, time, and check that nothing is left behind.

A :class:`Job` runs ``mpiexec -n P python -m spgnn ...`` (or any module) in a
session of its own, as a shell runs a foreground job, so that :meth:`Job.ctrl_c`
delivers SIGINT to every process of the job at once, exactly like a
terminal's Ctrl-C.  Every process carries a unique environment marker, which
:func:`leftover_processes` finds in ``/proc`` after the job has ended (Linux).
Test-only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from spgnn.comm.launch import find_mpiexec

from .mpi import SINGLE_THREAD_ENV

__all__ = ["Job", "leftover_processes"]

MARKER = "SPGNN_TEST_JOB"


def leftover_processes(marker):
    """PIDs of live processes whose environment holds ``SPGNN_TEST_JOB=marker``. Local."""
    want = f"{MARKER}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if want in env.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


def _limit_file_size(nbytes):
    """In the child: files may not grow past ``nbytes`` (a full disk, portably).

    Writing past the limit then fails with ``EFBIG`` instead of killing the
    process (SIGXFSZ ignored), as a full disk fails with ``ENOSPC``.
    """
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(nbytes), int(nbytes)))


class Job:
    """``mpiexec -n nprocs python <args>`` in its own session, output captured.

    Use as a context manager: on exit the whole session is killed (SIGKILL)
    if it is still running, so a failing test never leaves processes behind.
    ``file_size_limit`` (bytes) makes every write past it fail as a full disk
    would; ``cwd`` is the job's working directory.
    """

    def __init__(self, args, nprocs, *, env=None, mpi4py=False, file_size_limit=None, cwd=None):
        mpiexec = find_mpiexec()
        if mpiexec is None:
            raise FileNotFoundError("no mpiexec beside the interpreter")
        self.marker = uuid.uuid4().hex
        full_env = {**os.environ, **SINGLE_THREAD_ENV, **(env or {}), MARKER: self.marker}
        runner = ["-m", "mpi4py"] if mpi4py else []
        self.cmd = [mpiexec, "-n", str(nprocs), sys.executable, *runner, *args]
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True, env=full_env,
                                     start_new_session=True, cwd=cwd,
                                     preexec_fn=None if file_size_limit is None else
                                     lambda: _limit_file_size(file_size_limit))
        self.output = None
        self.seconds = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.communicate()
        return False

    def wait_for_mpi(self, nranks, timeout=60):
        """Block until ``nranks`` processes of the job have the MPI library loaded.

        A rank that has loaded ``libmpi`` is past its imports and inside
        ``Communicator.world()``: a signal then reaches running code, not the
        interpreter's start-up.  Raises ``TimeoutError`` after ``timeout``.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            loaded = 0
            for pid in leftover_processes(self.marker):
                try:
                    if "libmpi" in Path(f"/proc/{pid}/maps").read_text():
                        loaded += 1
                except OSError:
                    continue
            if loaded >= nranks:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"the job ended before MPI started: {' '.join(self.cmd)}")
            time.sleep(0.1)
        raise TimeoutError(f"MPI not loaded by {nranks} ranks after {timeout} s")

    def ctrl_c(self):
        """SIGINT to every process of the job (a terminal's Ctrl-C)."""
        os.killpg(self.proc.pid, signal.SIGINT)

    def wait(self, timeout):
        """``(returncode, output)``; the job is killed and ``TimeoutError`` raised past ``timeout``."""
        t0 = time.monotonic()
        try:
            self.output, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.output, _ = self.proc.communicate()
            raise TimeoutError(f"job still running after {timeout} s: {' '.join(self.cmd)}\n"
                               f"{self.output[-2000:]}") from None
        self.seconds = time.monotonic() - t0
        return self.proc.returncode, self.output

    def leftovers(self):
        """Processes of this job still alive (after :meth:`wait`)."""
        return leftover_processes(self.marker)
