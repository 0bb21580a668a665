"""Checks of the shared runner itself (:func:`spgnn.testing.mpi.run_property_checks`).

Run: ``mpiexec -n P python -m mpi4py tests/mpi/runner_checks.py [--examples N]
[--fail-rank R]``.  Two properties draw from one strategy and log their cases;
``after`` gathers every rank's log and asserts (collectively) that all ranks
drew the same examples in the same order, each property ``--examples`` of
them, and that the two properties did not draw the same sequence.
``--fail-rank R`` makes rank ``R`` fail its third example: the job must end
non-zero without the OK line.
"""

from hypothesis import strategies as st

from spgnn.testing.asserts import collective_assert
from spgnn.testing.mpi import run_property_checks

DRAWN = {"first": [], "second": []}


def options(parser):
    parser.add_argument("--fail-rank", type=int, default=None)


def properties(comm, args):
    for label in DRAWN:
        def check(case, log=DRAWN[label]):
            log.append(case)
            if comm.rank == args.fail_rank and len(log) == 3:
                raise AssertionError(f"rank {comm.rank} fails its third example on purpose")
        yield label, st.integers(0, 2**62), check


def after(comm, args):
    logs = comm.allgather_obj(DRAWN)
    collective_assert(comm, all(log == logs[0] for log in logs), f"ranks drew {logs}")
    collective_assert(comm, all(len(v) == args.examples for v in DRAWN.values()), f"{DRAWN}")
    collective_assert(comm, DRAWN["first"] != DRAWN["second"], f"one sequence twice: {DRAWN}")


if __name__ == "__main__":
    run_property_checks("runner_checks", properties, examples=10, backend=None,
                        options=options, after=after)
