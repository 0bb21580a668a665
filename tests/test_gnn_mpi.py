"""GCN training under real mpiexec: every algorithm at 1, 2, 3, 4 and 8 ranks.

Each job runs tests/mpi/gnn_checks.py: on a small SBM graph (rank 0 holds it,
the others get it scattered) every algorithm that fits P (1d, 1d-aware,
15d-aware with c = 1 and 2, 3d on two grid shapes) trains 3 Adam epochs with
dropout off; the loss after every epoch must equal the single-process numpy
reference and parameter replicas must stay bit-identical.  With the shared
data present (``shared_data_path("planetoid")``, else skipped), two Cora
epochs (1d-aware and a 3d grid, float32) are checked at 2 and 8 ranks.
"""

import os

import pytest

from spgnn.testing.data import shared_data_path
from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 300

pytestmark = mpi_test_marks()


def _run(nprocs, extra=()):
    proc = run_mpi([os.path.join(HERE, "mpi", "gnn_checks.py"), *extra], nprocs, timeout=TIMEOUT)
    tail = proc.stdout[-5000:]
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{tail}"
    assert f"OK gnn_checks {nprocs} ranks" in proc.stdout, tail
    return proc.stdout


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 8])
def test_gcn_sbm_under_mpi(nprocs):
    out = _run(nprocs)
    assert out.count("ok sbm") >= 4, out[-3000:]


@pytest.mark.parametrize("nprocs", [2, 8])
def test_gcn_cora_under_mpi(nprocs):
    root = shared_data_path("planetoid")
    out = _run(nprocs, ["--cora", str(root), "--skip-sbm"])
    assert out.count("ok cora") == 2, out[-3000:]
