"""Distributed matrices and SpMM under real MPI, checked against scipy on every rank.

Run: ``mpiexec -n P python -m mpi4py tests/mpi/dist_checks.py [--examples N]``.
Hypothesis runs derandomized (the ``ci`` profile), so every rank draws the
same examples; all assertions are collective, so a failure raises on every
rank together (and ``-m mpi4py`` turns it into MPI_Abort).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spgnn.testing.mpi import run_property_checks  # noqa: E402

from dist_cases import (check_dense_placement, check_gather_rows, check_sparse_placement,  # noqa: E402
                        check_spmm_1d, gather_case, placement_case, spmm_case)


def properties(comm, args):
    p, be = comm.size, args.backend
    yield "dense", placement_case(sizes=(p,)), lambda case: check_dense_placement(comm, case, be)
    yield ("sparse", placement_case(sizes=(p,)),
           lambda case: check_sparse_placement(comm, case, be))
    yield "spmm_1d", spmm_case(sizes=(p,)), lambda case: check_spmm_1d(comm, case, be)
    yield "gather", gather_case(sizes=(p,)), lambda case: check_gather_rows(comm, case, be)


if __name__ == "__main__":
    run_property_checks("dist_checks", properties, examples=15,
                        summary=lambda args: f" backend={args.backend}")
