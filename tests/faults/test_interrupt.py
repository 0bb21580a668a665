"""Fault class 1 (issue 28): one Ctrl-C ends a multi-rank job, on every command.

A terminal's Ctrl-C sends SIGINT to every process of the job at once.  Ranks
blocked inside an MPI collective never see it in Python; the interrupt
watchdog (``spgnn.comm``) ends every rank with ``MPI_Abort`` within a fraction
of a second.  Each case: the job ends within seconds, exit status non-zero,
one line saying so, no traceback, no process left behind.
"""

import time

import pytest

from spgnn.testing.jobs import Job
from spgnn.testing.mpi import find_mpiexec

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(find_mpiexec() is None, reason="no mpiexec beside Python")]

#: Long-running commands: each would run for minutes if not interrupted.
COMMANDS = {
    "train-gcn": ["-m", "spgnn", "train", "--graph", "sbm:3000:4:0", "--epochs", "100000",
                  "--no-progress"],
    "train-sage": ["-m", "spgnn", "train", "--graph", "sbm:3000:4:0", "--model", "sage",
                   "--epochs", "100000", "--batch-size", "64", "--fanout", "5,5",
                   "--no-progress"],
    "spmm": ["-m", "spgnn", "spmm", "--graph", "rmat:14:8", "--repeat", "1000000"],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("mpi4py", [False, True], ids=["python", "python-m-mpi4py"])
def test_one_ctrl_c_ends_every_rank(name, mpi4py):
    with Job(COMMANDS[name], 4, mpi4py=mpi4py) as job:
        job.wait_for_mpi(4)
        time.sleep(1)                   # into the run: collectives under way
        job.ctrl_c()
        rc, out = job.wait(timeout=15)
        assert rc != 0, out
        assert "interrupted" in out, out
        assert "Traceback" not in out, out
        assert job.seconds < 5, (job.seconds, out)
        deadline = time.monotonic() + 5
        while job.leftovers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert job.leftovers() == [], "processes left behind"


def test_interrupt_during_start_up_ends_every_rank():
    """Ctrl-C while the interpreters still import (before any spgnn code runs, so Python
    itself reports it): every rank stops on its own, nothing is left behind."""
    with Job(COMMANDS["train-gcn"], 2) as job:
        time.sleep(0.3)
        job.ctrl_c()
        rc, out = job.wait(timeout=15)
        assert rc != 0, out
        assert job.seconds < 5, (job.seconds, out)
        assert job.leftovers() == []
