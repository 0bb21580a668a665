"""Distributed sampling under real MPI: partitioned == replicated == single process, words == formula.

Run: ``mpiexec -n P python -m mpi4py tests/mpi/sampling_checks.py [--examples N]``.
Hypothesis runs derandomized so every rank draws the same examples; every
assertion is collective (``tests/sampling_cases.py``).
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from hypothesis import given  # noqa: E402

from spgnn.testing.mpi import mpi_hypothesis_settings  # noqa: E402

from spgnn import Communicator  # noqa: E402
from sampling_cases import check_modes_agree, check_words, dist_case  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=8)
    args = parser.parse_args()
    comm = Communicator.world()
    p = comm.size
    profile = mpi_hypothesis_settings(args.examples)  # same examples on every rank

    @profile
    @given(dist_case(sizes=(p,)))
    def modes(case):
        check_modes_agree(comm, case)

    @profile
    @given(dist_case(sizes=(p,)))
    def words(case):
        check_words(comm, case)

    for test in (modes, words):
        test()
        comm.barrier()
    # one fixed bulk on every replication factor this P allows, every sampler
    base = dict(n=64, density=0.08, isolated=3, gseed=7, ids="shifted", sizes=(4, 3), seed=21,
                root=0, batches=np.random.default_rng(3).integers(0, 64, (9, 4)), p=p)
    for c in (1, 2):
        if p % c:
            continue
        for kind in ("sage-tree", "sage-unique", "ladies"):
            check_modes_agree(comm, dict(base, c=c, kind=kind, prob="square_of_sum"))
    if comm.rank == 0:
        print(f"OK sampling_checks {p} ranks", flush=True)


if __name__ == "__main__":
    main()
