"""Fault class 9 (issue 38): a stalled collective and a lost launcher end the job.

A rank that never reaches a collective used to leave its peers waiting
forever; ranks whose launcher proxy was killed ran on as orphans.  The
collective watchdog (``spgnn.comm.watchdog``) ends the first with one line
naming the operation, its label and the missing rank, and the second by
noticing that the parent process changed.
"""

import os
import signal
import textwrap
import time
from pathlib import Path

import pytest

from spgnn.comm.watchdog import TIMEOUT_EXIT
from spgnn.testing.jobs import Job
from spgnn.testing.mpi import find_mpiexec

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(find_mpiexec() is None, reason="no mpiexec beside Python")]

STALL = textwrap.dedent("""
    import os, signal, sys, time
    import numpy as np
    from spgnn.comm import Communicator

    comm = Communicator.world()
    comm.barrier()
    if comm.rank == 1:
        if sys.argv[1] == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        time.sleep(600)
    with comm.track("fit"):
        comm.allreduce(np.ones(3), label="fit/loss")
    print("never reached")
""")

RUN_ON = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import numpy as np
    from spgnn.comm import Communicator

    comm = Communicator.world()
    Path(sys.argv[1], f"rank{comm.rank}").touch()     # the watchdog runs from here on
    while True:
        comm.allreduce(np.ones(3))
        time.sleep(0.01)
""")


def _kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _parent(pid):
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _settle(job, seconds=5):
    """The job's processes still alive ``seconds`` after it ended (killed ones take a moment)."""
    deadline = time.monotonic() + seconds
    while job.leftovers() and time.monotonic() < deadline:
        time.sleep(0.1)
    return job.leftovers()


@pytest.mark.parametrize("how,nprocs", [("sleep", 3), ("stop", 2)])
def test_a_rank_that_never_arrives_ends_the_job_with_one_message(tmp_path, how, nprocs):
    script = tmp_path / "stall.py"
    script.write_text(STALL)
    with Job([str(script), how], nprocs, env={"SPGNN_COLLECTIVE_TIMEOUT": "2"}) as job:
        try:
            rc, out = job.wait(timeout=30)
            left = _settle(job)
        finally:
            _kill_all(job.leftovers())      # a stopped rank outlives a killed launcher
        assert rc == TIMEOUT_EXIT, out
        assert out.count("spgnn: collective timeout") == 1, out
        line = next(s for s in out.splitlines() if "collective timeout" in s)
        assert "allreduce 'fit/loss'" in line and "within 2 s" in line, line
        assert "rank 1 did not arrive" in line, line
        if how == "sleep":              # its watchdog answers: it says where it is
            assert "in no collective" in line and "barrier" in line, line
        else:
            assert "does not answer" in line, line
        assert "Traceback" not in out and "never reached" not in out, out
        assert job.seconds < 15, (job.seconds, out)
        assert left == [], "processes left behind"


def test_ranks_whose_launcher_proxy_is_killed_exit(tmp_path):
    script = tmp_path / "run_on.py"
    script.write_text(RUN_ON)
    with Job([str(script), str(tmp_path)], 2) as job:
        try:
            deadline = time.monotonic() + 60
            while len(list(tmp_path.glob("rank*"))) < 2 and time.monotonic() < deadline:
                assert job.proc.poll() is None, job.proc.communicate()[0]
                time.sleep(0.1)
            proxies = [p for p in job.leftovers()
                       if b"hydra_pmi_proxy" in Path(f"/proc/{p}/cmdline").read_bytes()]
            ranks = [p for p in job.leftovers() if _parent(p) in proxies]
            assert len(ranks) == 2 and len(proxies) == 1, (ranks, proxies)
            os.kill(proxies[0], signal.SIGKILL)
            deadline = time.monotonic() + 5
            alive = ranks
            while alive and time.monotonic() < deadline:
                time.sleep(0.1)
                alive = [p for p in ranks if p in job.leftovers()]
            assert alive == [], "ranks run on after their launcher died"
        finally:
            _kill_all(job.leftovers())


def test_a_rank_that_left_a_section_alone_refuses_the_next_collective():
    """Issue 38: a callback raised on one rank, the caller caught it and called evaluate(): the
    other ranks hung.  The rank that left the section now refuses at once, naming why."""
    import numpy as np

    from spgnn.comm import run_loopback
    from spgnn.errors import CommunicatorBroken

    def rank(comm):
        sub = comm.split(0)                 # a grid axis: made before, broken with its parent
        if comm.rank == 1:
            try:
                with comm.section("fit"):
                    raise ValueError("callback failed")
            except ValueError:
                pass
            for c in (comm, sub):
                with pytest.raises(CommunicatorBroken, match="left 'fit' with ValueError: callb"):
                    c.allreduce(np.zeros(1))
        return comm.rank

    assert run_loopback(2, rank, timeout=30) == [0, 1]


def test_an_error_every_rank_agreed_on_leaves_the_communicator_usable():
    import numpy as np

    from spgnn.comm import run_loopback

    def rank(comm):
        try:
            with comm.section("fit"):
                comm.agree(ValueError("bad input") if comm.rank == 0 else None)
        except ValueError:
            pass
        return float(comm.allreduce(np.ones(1))[0])

    assert run_loopback(2, rank, timeout=30) == [2.0, 2.0]


def test_trainer_fit_breaks_the_communicator_of_the_rank_whose_callback_raised():
    from spgnn.comm import run_loopback
    from spgnn.errors import CommunicatorBroken
    from spgnn.gnn import GCN, Adam, DistGraph, Trainer
    from spgnn.io import Graph, sbm

    adj, x, y = sbm(40, 2, avg_degree=4, num_features=4, seed=0)
    g = Graph(adj=adj, features=x, labels=y).random_split(0.5, 0.2, seed=0)

    def rank(comm):
        dg = DistGraph.from_graph(g, comm, "1d")
        model = GCN(dg.num_features, 4, dg.num_classes)
        tr = Trainer(model, dg, Adam(model.param_groups(), lr=0.01))

        def callback(trainer, rec):
            raise RuntimeError(f"rank {comm.rank} callback")    # every rank, not agreed

        with pytest.raises(RuntimeError, match="callback"):
            tr.fit(2, evaluate=False, callback=callback)
        with pytest.raises(CommunicatorBroken, match="left 'Trainer.fit' with RuntimeError"):
            tr.evaluate()
        return True

    assert run_loopback(2, rank, timeout=60) == [True, True]
