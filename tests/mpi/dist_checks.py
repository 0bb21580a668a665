"""Distributed matrices and SpMM under real MPI, checked against scipy on every rank.

Run: ``mpiexec -n P python -m mpi4py tests/mpi/dist_checks.py [--examples N]``.
Hypothesis runs derandomized (the ``ci`` profile), so every rank draws the
same examples; all assertions are collective, so a failure raises on every
rank together (and ``-m mpi4py`` turns it into MPI_Abort).
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import given  # noqa: E402

from spgnn.testing.mpi import mpi_hypothesis_settings  # noqa: E402

from spgnn import Communicator  # noqa: E402
from dist_cases import (check_dense_placement, check_gather_rows, check_sparse_placement,  # noqa: E402
                        check_spmm_1d, gather_case, placement_case, spmm_case)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=15)
    parser.add_argument("--backend", default="numpy")
    args = parser.parse_args()
    comm = Communicator.world()
    p = comm.size
    profile = mpi_hypothesis_settings(args.examples)  # same examples on every rank

    @profile
    @given(placement_case(sizes=(p,)))
    def dense(case):
        check_dense_placement(comm, case, args.backend)

    @profile
    @given(placement_case(sizes=(p,)))
    def sparse(case):
        check_sparse_placement(comm, case, args.backend)

    @profile
    @given(spmm_case(sizes=(p,)))
    def spmm_1d(case):
        check_spmm_1d(comm, case, args.backend)

    @profile
    @given(gather_case(sizes=(p,)))
    def gather(case):
        check_gather_rows(comm, case, args.backend)

    for test in (dense, sparse, spmm_1d, gather):
        test()
        comm.barrier()
    if comm.rank == 0:
        print(f"OK dist_checks {p} ranks backend={args.backend}", flush=True)


if __name__ == "__main__":
    main()
