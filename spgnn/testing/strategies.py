"""Hypothesis strategies for local sparse blocks and dense operands.

Seed-driven, like :mod:`spgnn.testing.strategies_dist`: Hypothesis draws
small parameters (shape, density, a seed, dtypes, flags) and
``numpy.random.default_rng(seed)`` fills the arrays.  Shrinking then acts
on the parameters, examples are cheap to build, and a failing example is
reproducible from the printed parameters alone (:func:`build_csr`).
"""

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st

from ..local.csr import LocalCSR

__all__ = ["INDEX_DTYPES", "VALUE_DTYPES", "build_csr", "build_dense", "csr_params",
           "local_csr", "dense", "index_array"]

INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
VALUE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _values(rng, size, dtype, integer):
    """Small integers (exact sums: plus semirings compare exactly, zeros give
    structural zeros) or normal floats."""
    if integer:
        return rng.integers(-4, 5, size=size).astype(dtype)
    return rng.standard_normal(size).astype(dtype)


def build_csr(shape, density, seed, index_dtype=np.int64, value_dtype=np.float64,
              unsorted=False, duplicates=False, integer_values=False):
    """A ``(LocalCSR, scipy.sparse.csr_array)`` pair sharing one set of arrays.

    Parameters
    ----------
    shape : (int, int), zeros allowed
    density : float in [0, 1]
        Probability of each position being stored (before duplicates).
    seed : int
    index_dtype, value_dtype : dtypes of the indices and the data
    unsorted : bool
        Shuffle the entries inside each row.
    duplicates : bool
        Store about a third of the entries a second time (other value), so
        that kernels must treat repeats as separate semiring terms.
    integer_values : bool
        Draw values from the integers -4..4 instead of a normal law.
    """
    m, n = int(shape[0]), int(shape[1])
    rng = np.random.default_rng(seed)
    mask = rng.random((m, n)) < density
    rows, cols = np.nonzero(mask)                  # row-major: sorted, no repeats
    if duplicates and rows.size:
        pick = rng.random(rows.size) < 1 / 3
        rows = np.concatenate([rows, rows[pick]])
        cols = np.concatenate([cols, cols[pick]])
    # order entries by row; within a row sorted by column or shuffled
    key2 = rng.random(rows.size) if unsorted else cols
    order = np.lexsort((key2, rows))
    rows, cols = rows[order], cols[order]
    data = _values(rng, rows.size, value_dtype, integer_values)
    indptr = np.zeros(m + 1, dtype=index_dtype)
    np.cumsum(np.bincount(rows, minlength=m), out=indptr[1:])
    a = LocalCSR(indptr, cols.astype(index_dtype), data, (m, n), check="full")
    return a, sp.csr_array((data, a.indices, a.indptr), shape=(m, n))


def build_dense(shape, seed, dtype=np.float64, integer_values=False):
    """A C-ordered dense array filled from ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    return _values(rng, int(np.prod(shape)), dtype, integer_values).reshape(shape)


@st.composite
def csr_params(draw, shape=None, max_dim=12, index_dtypes=INDEX_DTYPES,
               value_dtypes=VALUE_DTYPES, integer_values=None):
    """Keyword arguments for :func:`build_csr` (printed by Hypothesis on failure)."""
    if shape is None:
        shape = (draw(st.integers(0, max_dim)), draw(st.integers(0, max_dim)))
    return dict(
        shape=tuple(shape),
        density=draw(st.sampled_from([0.0, 0.1, 0.3, 0.6, 1.0])),
        seed=draw(st.integers(0, 2**32 - 1)),
        index_dtype=draw(st.sampled_from(index_dtypes)),
        value_dtype=draw(st.sampled_from(value_dtypes)),
        unsorted=draw(st.booleans()),
        duplicates=draw(st.booleans()),
        integer_values=(draw(st.booleans()) if integer_values is None else integer_values),
    )


@st.composite
def local_csr(draw, shape=None, max_dim=12, index_dtypes=INDEX_DTYPES,
              value_dtypes=VALUE_DTYPES, integer_values=None):
    """``(LocalCSR, scipy csr_array)`` of ``shape`` (drawn, zeros included, if ``None``).

    Indices may be unsorted and duplicated; rows and columns may be empty.
    """
    return build_csr(**draw(csr_params(shape, max_dim, index_dtypes, value_dtypes,
                                       integer_values)))


@st.composite
def dense(draw, shape, value_dtypes=VALUE_DTYPES, integer_values=False):
    """A dense float array of ``shape`` with a drawn dtype and seed."""
    dtype = draw(st.sampled_from(value_dtypes))
    return build_dense(shape, draw(st.integers(0, 2**32 - 1)), dtype, integer_values)


@st.composite
def index_array(draw, n, max_len=16, allow_negative=True):
    """Row/column selector for an axis of length ``n``: any order, repeats,
    negative entries (counting from the end) when ``allow_negative``."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    lo = -n if allow_negative else 0
    vals = draw(st.lists(st.integers(lo, n - 1), max_size=max_len))
    dtype = draw(st.sampled_from([np.int32, np.int64]))
    return np.asarray(vals, dtype=dtype)
