"""Minibatch GraphSAGE under real mpiexec at 1, 2 and 4 ranks (tests/mpi/sage_checks.py).

Feature fetching (rows, de-duplication, ledger bytes), training equal to the
single-process schedule reference with bit-identical replicas (SBM; GraphSAGE
and LADIES samplers; partitioned c = 2 on even P), bit-identical resume, and a
short Cora run (skipped inside the script when the shared data is absent).
"""

import os

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 300

pytestmark = mpi_test_marks()


@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_sage_checks(nprocs):
    proc = run_mpi([os.path.join(HERE, "mpi", "sage_checks.py"), "--cora-epochs", "2"], nprocs,
                   timeout=TIMEOUT)
    tail = proc.stdout[-5000:]
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{tail}"
    assert f"OK sage_checks {nprocs} ranks" in proc.stdout, tail
