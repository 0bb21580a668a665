"""Generic kernels specialised on user operators: masked SpGEMM, element-wise maps.

Every kernel here is built by a factory from Numba-compiled scalar functions
(``add``, ``mul``, ``f``) and cached per function object, so a user operator
registered once (:mod:`spgnn.local.ops`) is compiled into each kernel once
per process (not on disk: closures over user functions cannot be cached).

Masked SpGEMM ``C<M> = A (+).(x) B`` (Gustavson, symbolic then numeric),
*mask-driven*: row ``i`` first marks the allowed columns of ``M[i, :]`` in a
per-worker int64 marker, and a product ``a(i,k) b(k,j)`` is only formed into
the accumulator when column ``j`` is allowed -- masked-out entries are never
accumulated nor stored.  Marker states of row ``i``, with ``t = 3 (i + 1)``
(rows are distinct, so a marker never needs clearing):

* ``t``     -- column ``j`` is in the mask row (allowed; or, complemented,
  forbidden),
* ``t + 1`` -- column ``j`` already holds a value in row ``i``.

Without complement the output row is the mask row's allowed columns that got
a product, emitted in the mask row's order (sorted: the caller canonicalises
the mask).  With complement (or no mask: an empty complemented mask) the
output columns are collected in a per-worker list and sorted.

Rows are split into ``nparts`` chunks balanced by ``A``'s nonzeros
(:func:`_ops.row_partition`); each chunk allocates its own scratch (one
marker and one accumulator of ``B.shape[1]`` entries).
"""

import numba
import numpy as np

from ._ops import row_partition

__all__ = ["masked_spgemm_kernels", "map_binary_kernel", "map_unary_kernel",
           "map_indexed_kernel", "reduce_rows_kernel"]

_CACHE = {}


@numba.njit(cache=True, nogil=True)
def _zeros_i64(n):
    return np.zeros(n, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _empty_like_dtype(n, like):
    return np.empty(n, dtype=like.dtype)


def masked_spgemm_kernels(add, mul):
    """``(symbolic, numeric)`` njit kernels for the semiring ``(add, mul)`` (compiled scalar functions).

    ``symbolic(a_indptr, a_indices, b_indptr, b_indices, m_indptr, m_indices,
    m_keep, complement, ncols, nparts, counts)`` writes each output row's
    entry count into ``counts``; ``numeric(..., out_indptr, out_indices,
    out_data, a_data, b_data)`` fills the row's sorted columns and values.
    ``m_keep[e]`` (uint8) says whether mask entry ``e`` counts (all ones for
    a structural mask).
    """
    key = ("spgemm", add, mul)
    got = _CACHE.get(key)
    if got is not None:
        return got

    @numba.njit(nogil=True, parallel=True)
    def symbolic(a_indptr, a_indices, b_indptr, b_indices, m_indptr, m_indices, m_keep,
                 complement, ncols, nparts, counts):
        m = a_indptr.shape[0] - 1
        bounds = row_partition(a_indptr, nparts)
        for w in numba.prange(nparts):
            marker = _zeros_i64(ncols)
            for i in range(bounds[w], bounds[w + 1]):
                t = 3 * (np.int64(i) + 1)
                for e in range(m_indptr[i], m_indptr[i + 1]):
                    if m_keep[e]:
                        marker[m_indices[e]] = t
                c = 0
                for ea in range(a_indptr[i], a_indptr[i + 1]):
                    k = a_indices[ea]
                    for eb in range(b_indptr[k], b_indptr[k + 1]):
                        j = b_indices[eb]
                        s = marker[j]
                        if complement:
                            if s != t and s != t + 1:
                                marker[j] = t + 1
                                c += 1
                        elif s == t:
                            marker[j] = t + 1
                            c += 1
                counts[i] = c
        return m

    @numba.njit(nogil=True, parallel=True)
    def numeric(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, m_indptr, m_indices,
                m_keep, complement, ncols, nparts, out_indptr, out_indices, out_data):
        bounds = row_partition(a_indptr, nparts)
        for w in numba.prange(nparts):
            marker = _zeros_i64(ncols)
            acc = _empty_like_dtype(ncols, out_data)
            cols = _zeros_i64(ncols if complement else 0)
            for i in range(bounds[w], bounds[w + 1]):
                t = 3 * (np.int64(i) + 1)
                for e in range(m_indptr[i], m_indptr[i + 1]):
                    if m_keep[e]:
                        marker[m_indices[e]] = t
                r = 0
                for ea in range(a_indptr[i], a_indptr[i + 1]):
                    k = a_indices[ea]
                    av = a_data[ea]
                    for eb in range(b_indptr[k], b_indptr[k + 1]):
                        j = b_indices[eb]
                        s = marker[j]
                        if s == t + 1:
                            acc[j] = add(acc[j], mul(av, b_data[eb]))
                        elif (s == t) != complement:
                            marker[j] = t + 1
                            acc[j] = mul(av, b_data[eb])
                            if complement:
                                cols[r] = j
                                r += 1
                p = out_indptr[i]
                if complement:
                    row = cols[:r]
                    row.sort()
                    for q in range(r):
                        out_indices[p + q] = row[q]
                        out_data[p + q] = acc[row[q]]
                else:
                    for e in range(m_indptr[i], m_indptr[i + 1]):
                        j = m_indices[e]
                        if m_keep[e] and marker[j] == t + 1:
                            out_indices[p] = j
                            out_data[p] = acc[j]
                            marker[j] = t + 2      # emitted: a repeated mask column is not
                            p += 1
        return 0

    _CACHE[key] = (symbolic, numeric)
    return symbolic, numeric


def map_binary_kernel(f):
    """``out[e] = f(x[e], y[e])`` over 1-D arrays (njit, serial)."""
    key = ("map2", f)
    if key not in _CACHE:
        @numba.njit(nogil=True)
        def map2(x, y, out):
            for e in range(out.shape[0]):
                out[e] = f(x[e], y[e])
        _CACHE[key] = map2
    return _CACHE[key]


def map_unary_kernel(f):
    """``out[e] = f(x[e])`` over a 1-D array (njit, serial)."""
    key = ("map1", f)
    if key not in _CACHE:
        @numba.njit(nogil=True)
        def map1(x, out):
            for e in range(out.shape[0]):
                out[e] = f(x[e])
        _CACHE[key] = map1
    return _CACHE[key]


def map_indexed_kernel(f):
    """``out[e] = f(x[e], rows[e], cols[e])`` (global indices; njit, serial)."""
    key = ("mapi", f)
    if key not in _CACHE:
        @numba.njit(nogil=True)
        def mapi(x, rows, cols, out):
            for e in range(out.shape[0]):
                out[e] = f(x[e], rows[e], cols[e])
        _CACHE[key] = mapi
    return _CACHE[key]


def reduce_rows_kernel(add):
    """``out[i] = add-reduction of data[indptr[i]:indptr[i+1]]``; ``has[i]`` = row non-empty."""
    key = ("rowreduce", add)
    if key not in _CACHE:
        @numba.njit(nogil=True)
        def reduce_rows(indptr, data, out, has):
            for i in range(indptr.shape[0] - 1):
                lo, hi = indptr[i], indptr[i + 1]
                if hi > lo:
                    acc = data[lo]
                    for e in range(lo + 1, hi):
                        acc = add(acc, data[e])
                    out[i] = acc
                    has[i] = 1
        _CACHE[key] = reduce_rows
    return _CACHE[key]
