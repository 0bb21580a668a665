"""``--model sage-full`` under real mpiexec at 1, 2 and 4 ranks (tests/mpi/sage_full_checks.py).

Each job trains paper 004's model (GraphSAGE-mean + LayerNorm, dropout on)
with ``--quantize none`` under post, pre and hybrid aggregation (1d-aware),
plain 1d and, at even P, 15d-aware: the per-epoch losses agree inside the
job, and with a single-process run here (so across rank counts); every
ledger label of a training epoch equals the wire-format formula (fp32 and
int2/int4 exchanges, gradient all-reduces).
"""

import json
import os
import sys

import numpy as np
import pytest

from spgnn.comm import run_loopback
from spgnn.testing.mpi import mpi_test_marks, run_mpi

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "mpi"))
from sage_full_checks import sage_full_graph, train_sage_full  # noqa: E402

pytestmark = mpi_test_marks()


@pytest.fixture(scope="module")
def reference():
    g = sage_full_graph()
    return [r["loss"] for r in run_loopback(1, lambda c: train_sage_full(c, g, epochs=2)[0])[0]]


@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_sage_full_under_mpi(nprocs, reference):
    proc = run_mpi([os.path.join(HERE, "mpi", "sage_full_checks.py"), "--epochs", "2"], nprocs,
                   timeout=300)
    tail = proc.stdout[-5000:]
    assert proc.returncode == 0, f"rc={proc.returncode}; output tail:\n{tail}"
    assert f"OK sage_full_checks {nprocs} ranks" in proc.stdout, tail
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("LOSSES ")][-1]
    np.testing.assert_allclose(json.loads(line[len("LOSSES "):]), reference, rtol=1e-9)
