"""Semiring op codes and the scalar helpers every kernel shares.

Kernels take the additive monoid and the multiplicative operator as small
integers instead of Python callables: a callable argument would make numba
compile (and cache) one specialisation per operator, whereas an integer keeps
exactly one compiled kernel per dtype signature.  The branches below are
loop-invariant, so LLVM unswitches or predicts them in the hot loops.

Pure numba, no spgnn imports (this package is installed as
``spgnn._kernels.numba``).
"""

import numba
import numpy as np

__all__ = [
    "ADD_PLUS", "ADD_MIN", "ADD_MAX", "ADD_TIMES",
    "MUL_TIMES", "MUL_PLUS", "MUL_FIRST", "MUL_SECOND", "MUL_PAIR",
    "ADD_CODES", "MUL_CODES", "semiring_add", "semiring_mul", "row_partition", "clamp_parts",
]

# Additive monoids.
ADD_PLUS = 0
ADD_MIN = 1
ADD_MAX = 2
ADD_TIMES = 3

# Multiplicative operators a (x) b.
MUL_TIMES = 0
MUL_PLUS = 1
MUL_FIRST = 2
MUL_SECOND = 3
MUL_PAIR = 4

#: Name -> code maps, for the Python side that converts a semiring.
ADD_CODES = {"plus": ADD_PLUS, "min": ADD_MIN, "max": ADD_MAX, "times": ADD_TIMES}
MUL_CODES = {"times": MUL_TIMES, "plus": MUL_PLUS, "first": MUL_FIRST,
             "second": MUL_SECOND, "pair": MUL_PAIR}


@numba.njit(cache=True, nogil=True)
def semiring_add(op, acc, v):
    """``acc (+) v``.

    ``min``/``max`` propagate NaN like ``np.minimum``/``np.maximum`` (the
    numpy reference uses those ufuncs), hence the ``v != v`` test instead of
    the builtin ``min``/``max``.
    """
    if op == ADD_PLUS:
        return acc + v
    if op == ADD_MIN:
        return v if (v < acc or v != v) else acc
    if op == ADD_MAX:
        return v if (v > acc or v != v) else acc
    return acc * v


@numba.njit(cache=True, nogil=True)
def semiring_mul(op, a, b, one):
    """``a (x) b``; ``one`` is 1 in the value dtype.

    ``one`` is passed in (callers take it from ``out.dtype.type(1)``) because a
    float literal would be float64 and silently promote float32 accumulators.
    """
    if op == MUL_TIMES:
        return a * b
    if op == MUL_PLUS:
        return a + b
    if op == MUL_FIRST:
        return a
    if op == MUL_SECOND:
        return b
    return one


@numba.njit(cache=True, nogil=True)
def row_partition(indptr, nparts):
    """Split rows into ``nparts`` contiguous chunks of about equal work.

    Work of a row is its nonzero count plus one (the ``+ 1`` accounts for
    per-row costs such as initialising a dense output row, and keeps long
    runs of empty rows from landing in one chunk).  Returns ``bounds``
    (int64, ``nparts + 1``): chunk ``p`` holds rows ``bounds[p]:bounds[p+1]``.

    Why: ``prange`` schedules its iteration space statically in equal
    contiguous blocks, so iterating over rows directly puts all the hub rows of
    a power-law graph on one thread.  Balanced chunks (several per thread)
    fix that at O(nparts log nrows) cost.
    """
    nrows = indptr.shape[0] - 1
    bounds = np.empty(nparts + 1, dtype=np.int64)
    bounds[0] = 0
    total = np.int64(indptr[nrows]) + nrows
    for p in range(1, nparts):
        target = (total * p) // nparts
        # first row r with indptr[r] + r >= target (binary search)
        lo = bounds[p - 1]
        hi = np.int64(nrows)
        while lo < hi:
            mid = (lo + hi) // 2
            if np.int64(indptr[mid]) + mid < target:
                lo = mid + 1
            else:
                hi = mid
        bounds[p] = lo
    bounds[nparts] = nrows
    return bounds


@numba.njit(cache=True, nogil=True)
def clamp_parts(nparts, nrows):
    """``nparts`` clamped to ``[min(1, nrows), nrows]``: never an empty chunk list for rows.

    The chunk count is an argument of every row-parallel kernel rather than
    ``numba.get_num_threads()`` read inside: that call is a dynamic global
    which would stop numba from caching the compiled kernel on disk.  Callers
    pass a few chunks per thread (``4 * numba.get_num_threads()``).
    """
    if nparts > nrows:
        return nrows
    if nparts < 1 and nrows > 0:
        return 1
    return nparts
