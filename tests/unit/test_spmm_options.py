"""``spmm``'s per-algorithm options come from one table (``SPMM_OPTIONS``): an option given to an
algorithm that does not take it is refused by name before any communication, a neutral value is as
if not given, an unknown name is a TypeError.  One loopback rank: the checks are local."""

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn import DistDenseMatrix, DistSparseMatrix, Layout, grid_1d, run_loopback, spmm
from spgnn.core.spmm import SPMM_OPTIONS


def _operands(comm):
    g = grid_1d(comm)
    a = sp.random_array((6, 6), density=0.4, format="csr", rng=0, dtype=np.float64)
    A = DistSparseMatrix.from_global(a, g, Layout("row"))
    X = DistDenseMatrix.from_global(np.ones((6, 2)), g, Layout("row"))
    return a, A, X


@pytest.mark.parametrize("algorithm, options, needle", [
    ("1d", {"aggregation": "pre"}, "aggregation='pre' needs algorithm '1d-aware', but got '1d'"),
    ("1d-aware", {"row_blocks": 2}, "row_blocks=2 needs algorithm '3d', but got '1d-aware'"),
    ("1d-aware", {"aggregation": "both"}, "aggregation must be one of"),
    ("1d-aware", {"aggregation": "pre", "semiring": "min_plus"}, "needs the plus_times semiring"),
])
def test_options_of_another_algorithm_are_refused_by_name(algorithm, options, needle):
    def run(comm):
        _, A, X = _operands(comm)
        kw = dict(options)
        semiring = kw.pop("semiring", "plus_times")
        with pytest.raises(ValueError, match=None) as info:
            spmm(A, X, semiring, algorithm=algorithm, **kw)
        assert needle in str(info.value), str(info.value)
    run_loopback(1, run)


def test_neutral_values_are_as_if_not_given_and_unknown_names_are_type_errors():
    def run(comm):
        a, A, X = _operands(comm)
        neutral = {k: v for d, _ in SPMM_OPTIONS.values() for k, v in d.items()}
        got = spmm(A, X, algorithm="1d", **neutral).to_global()
        np.testing.assert_allclose(got, a @ np.ones((6, 2)))
        with pytest.raises(TypeError, match="unknown option"):
            spmm(A, X, algorithm="1d", aggregaton="pre")
    run_loopback(1, run)
