"""Launch Python code under ``mpiexec`` from an ordinary (serial) test run.

The launcher is the ``mpiexec`` that sits next to ``sys.executable``
(:func:`spgnn.comm.launch.find_mpiexec`, re-exported here for tests).  Every
job runs ``python -m mpi4py`` so that an uncaught exception on any rank calls
``MPI_Abort`` and ends the whole job instead of deadlocking it, and with one
thread per rank for Numba/OpenMP/BLAS because tests oversubscribe small
machines.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zlib
from typing import Callable, Iterable, Sequence

from spgnn.comm.launch import find_mpiexec

__all__ = ["find_mpiexec", "run_mpi", "mpi_test_marks", "mpi_hypothesis_settings",
           "run_property_checks", "SINGLE_THREAD_ENV"]

#: Environment added to every launched job (callers may override).
SINGLE_THREAD_ENV = {
    "NUMBA_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}


def run_mpi(script_or_module_args: str | Sequence[str], nprocs: int, timeout: float = 120,
            env: dict | None = None, via_mpi4py: bool = True) -> subprocess.CompletedProcess:
    """Run ``mpiexec -n nprocs python -m mpi4py <args>`` and capture its output.

    Parameters
    ----------
    script_or_module_args : str or sequence of str
        What follows ``python -m mpi4py``: a script path, or e.g.
        ``["-m", "pytest", "tests/mpi"]`` or ``[script, "--flag"]``.
    nprocs : int
        Number of ranks.
    timeout : float
        Seconds before the job is killed (``subprocess.TimeoutExpired``).
    env : dict, optional
        Extra environment variables, applied over the current environment
        and :data:`SINGLE_THREAD_ENV`.
    via_mpi4py : bool
        Run through ``python -m mpi4py`` (default).  ``False`` runs plain
        ``python <args>``, relying on spgnn's own abort hook.

    Returns
    -------
    subprocess.CompletedProcess
        With ``stdout`` holding stdout and stderr interleaved (text).

    Raises
    ------
    FileNotFoundError
        When no ``mpiexec`` is installed beside the interpreter (tests should
        call :func:`find_mpiexec` first and skip).
    """
    mpiexec = find_mpiexec()
    if mpiexec is None:
        raise FileNotFoundError(f"run_mpi: no mpiexec next to {sys.executable}; "
                                "install it with `pip install mpi4py mpich`")
    args = [script_or_module_args] if isinstance(script_or_module_args, str) \
        else list(script_or_module_args)
    full_env = {**os.environ, **SINGLE_THREAD_ENV, **(env or {})}
    runner = ["-m", "mpi4py"] if via_mpi4py else []
    cmd = [mpiexec, "-n", str(int(nprocs)), sys.executable, *runner, *args]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout, env=full_env)


def mpi_test_marks():
    """pytest marks for a module of tests that launch mpiexec: ``pytestmark = mpi_test_marks()``.

    Marks them ``mpi`` and skips them, with the reason, when no ``mpiexec``
    sits beside the interpreter.
    """
    import pytest

    return [pytest.mark.mpi,
            pytest.mark.skipif(find_mpiexec() is None,
                               reason="no mpiexec next to sys.executable "
                                      "(pip install -e '.[mpich]')")]


def mpi_hypothesis_settings(max_examples):
    """Hypothesis settings for property tests run under mpiexec (a decorator).

    Derandomized with no example database, so every rank draws the same
    examples in the same order: without it the ranks' collectives diverge
    and the job hangs.  Assertions inside must be collective
    (:mod:`spgnn.testing.asserts`).
    """
    from hypothesis import HealthCheck, settings

    return settings(derandomize=True, database=None, deadline=None, max_examples=max_examples,
                    suppress_health_check=list(HealthCheck), print_blob=True)


def run_property_checks(name: str, properties: Callable[..., Iterable[tuple]], *,
                        examples: int = 15, backend: str | None = "numpy",
                        options: Callable[[argparse.ArgumentParser], None] | None = None,
                        after: Callable | None = None,
                        summary: Callable[[argparse.Namespace], str] | None = None,
                        argv: Sequence[str] | None = None) -> None:
    """The ``main`` of a ``tests/mpi/*_checks.py`` file: Hypothesis properties under mpiexec.

    Collective: every rank of ``COMM_WORLD`` calls it with the same arguments.

    Parses ``--examples`` (default ``examples``), ``--backend`` (default
    ``backend``; no such option when ``None``) and whatever ``options(parser)``
    adds.  Then, on :meth:`Communicator.world`, each ``(label, strategy,
    check)`` that ``properties(comm, args)`` yields runs as one Hypothesis test
    under :func:`mpi_hypothesis_settings` -- ``check(case)`` once per drawn
    example -- followed by a barrier.  Its seed is a hash of ``name`` and
    ``label``: every rank draws the same examples in the same order (their
    collectives match), and two properties over one strategy still draw
    different examples.  ``after(comm, args)`` (fixed cases, error paths) runs
    next, then a barrier, and rank 0 prints ``OK <name> <P> ranks<summary(args)>``,
    the line the launching test looks for.  A failing check raises (on every
    rank when its assertions are collective, :mod:`spgnn.testing.asserts`),
    which ``python -m mpi4py`` turns into ``MPI_Abort``: the line is never printed.
    """
    from hypothesis import given, seed

    from spgnn.comm import Communicator

    parser = argparse.ArgumentParser(prog=name)
    parser.add_argument("--examples", type=int, default=examples)
    if backend is not None:
        parser.add_argument("--backend", default=backend)
    if options is not None:
        options(parser)
    args = parser.parse_args(argv)
    comm = Communicator.world()
    profile = mpi_hypothesis_settings(args.examples)
    for label, strategy, check in properties(comm, args):
        test = seed(zlib.crc32(f"{name}:{label}".encode()))(profile(given(strategy)(_calling(check))))
        test()
        comm.barrier()
    if after is not None:
        after(comm, args)
        comm.barrier()
    if comm.rank == 0:
        print(f"OK {name} {comm.size} ranks{summary(args) if summary else ''}", flush=True)


def _calling(check):
    # a named one-argument function for @given (a lambda with a default
    # argument would have Hypothesis fill the default instead)
    def property_(case):
        check(case)
    return property_
