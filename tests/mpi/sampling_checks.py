"""Distributed sampling under real MPI: partitioned == replicated == single process, words == formula.

Run: ``mpiexec -n P python -m mpi4py tests/mpi/sampling_checks.py [--examples N]``.
Hypothesis runs derandomized so every rank draws the same examples; every
assertion is collective (``tests/sampling_cases.py``).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from spgnn.testing.mpi import run_property_checks  # noqa: E402
from sampling_cases import check_modes_agree, check_words, dist_case  # noqa: E402


def properties(comm, args):
    p = comm.size
    yield "modes", dist_case(sizes=(p,)), lambda case: check_modes_agree(comm, case)
    yield "words", dist_case(sizes=(p,)), lambda case: check_words(comm, case)


def fixed_bulk(comm, args):
    """One fixed bulk on every replication factor this P allows, every sampler."""
    p = comm.size
    base = dict(n=64, density=0.08, isolated=3, gseed=7, ids="shifted", sizes=(4, 3), seed=21,
                root=0, batches=np.random.default_rng(3).integers(0, 64, (9, 4)), p=p)
    for c in (1, 2):
        if p % c:
            continue
        for kind in ("sage-tree", "sage-unique", "ladies"):
            check_modes_agree(comm, dict(base, c=c, kind=kind, prob="square_of_sum"))


if __name__ == "__main__":
    run_property_checks("sampling_checks", properties, examples=8, backend=None, after=fixed_bulk)
