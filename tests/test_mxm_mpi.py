"""Distributed mxm under real mpiexec: 1d at 1, 2, 3, 4, 8 ranks, 2D Sparse SUMMA at 1 and 4,
the non-square-grid error at 2, 3, 8 (tests/mpi/mxm_checks.py: results against a dense
reference, ledger bytes against spgnn.plan.events.plan_mxm)."""

import os

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = mpi_test_marks()


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 8])
def test_mxm_under_mpi(nprocs):
    # the numpy backend: compiling the numba kernels for five semirings on every rank of a
    # loaded 2-core machine took minutes; tests/unit/test_graphblas_local.py checks them
    backend = "numpy"
    examples = "6" if nprocs == 8 else "10"
    proc = run_mpi([os.path.join(HERE, "mpi", "mxm_checks.py"), "--examples", examples,
                    "--backend", backend], nprocs, timeout=300)
    tail = proc.stdout[-5000:]
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{tail}"
    assert f"OK mxm_checks {nprocs} ranks" in proc.stdout, tail
