"""Launch Python code under ``mpiexec`` from an ordinary (serial) test run.

The launcher is the ``mpiexec`` that sits next to ``sys.executable``
(:func:`spgnn.comm.launch.find_mpiexec`, re-exported here for tests).  Every
job runs ``python -m mpi4py`` so that an uncaught exception on any rank calls
``MPI_Abort`` and ends the whole job instead of deadlocking it, and with one
thread per rank for Numba/OpenMP/BLAS because tests oversubscribe small
machines.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Sequence

from spgnn.comm.launch import find_mpiexec

__all__ = ["find_mpiexec", "run_mpi", "mpi_test_marks", "mpi_hypothesis_settings", "SINGLE_THREAD_ENV"]

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
