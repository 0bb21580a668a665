"""Single-process references the distributed results are checked against."""

import numpy as np
import scipy.sparse as sp

from ..backends import get_backend
from ..local.csr import LocalCSR

__all__ = ["reference_spmm"]


def reference_spmm(a, x, semiring):
    """``a (+).(x) x`` on one process with the numpy (scipy) backend, as float64-exact as the inputs."""
    return np.asarray(get_backend("numpy").spmm(LocalCSR.from_scipy(sp.csr_array(a)), x, semiring))
