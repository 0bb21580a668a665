"""Generic kernels specialised on user operators: masked SpGEMM, element-wise maps.

The kernels call their operators as module globals (``ADD``, ``MUL``, ``F1``,
``FI``), unbound here: the factories (:func:`masked_spgemm_kernels`, ...)
return the kernels of a copy of this module specialised on the operators by
:func:`.opcache.specialise`, which numba caches on disk per operator set, so
a user operator registered once (:mod:`spgnn.local.ops`) is compiled into
each kernel once, not once per process.

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

import sys

import numba
import numpy as np

from ._ops import row_partition
from .opcache import specialise

__all__ = ["masked_spgemm_kernels", "map_binary_kernel", "map_unary_kernel",
           "map_indexed_kernel", "reduce_rows_kernel"]


@numba.njit(cache=True, nogil=True)
def _zeros_i64(n):
    return np.zeros(n, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _empty_like_dtype(n, like):
    return np.empty(n, dtype=like.dtype)


#: The operators a specialised copy of this module binds (:mod:`.opcache`); unbound here.
ADD = MUL = F1 = FI = None


@numba.njit(cache=True, nogil=True, parallel=True)
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

@numba.njit(cache=True, nogil=True, parallel=True)
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
                        acc[j] = ADD(acc[j], MUL(av, b_data[eb]))
                    elif (s == t) != complement:
                        marker[j] = t + 1
                        acc[j] = MUL(av, b_data[eb])
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


@numba.njit(cache=True, nogil=True)
def map2(x, y, out):
    """``out[e] = MUL(x[e], y[e])`` over 1-D arrays (serial)."""
    for e in range(out.shape[0]):
        out[e] = MUL(x[e], y[e])


@numba.njit(cache=True, nogil=True)
def map1(x, out):
    """``out[e] = F1(x[e])`` (serial)."""
    for e in range(out.shape[0]):
        out[e] = F1(x[e])


@numba.njit(cache=True, nogil=True)
def mapi(x, rows, cols, out):
    """``out[e] = FI(x[e], rows[e], cols[e])`` (global indices; serial)."""
    for e in range(out.shape[0]):
        out[e] = FI(x[e], rows[e], cols[e])


@numba.njit(cache=True, nogil=True)
def reduce_rows(indptr, data, out, has):
    """``out[i] = ADD-reduction of data[indptr[i]:indptr[i+1]]``; ``has[i]`` = row non-empty."""
    for i in range(indptr.shape[0] - 1):
        lo, hi = indptr[i], indptr[i + 1]
        if hi > lo:
            acc = data[lo]
            for e in range(lo + 1, hi):
                acc = ADD(acc, data[e])
            out[i] = acc
            has[i] = 1


def _this():
    return sys.modules[__name__]


def masked_spgemm_kernels(add, mul):
    """``(symbolic, numeric)`` njit kernels for the semiring ``(add, mul)`` (scalar functions).

    ``symbolic(a_indptr, a_indices, b_indptr, b_indices, m_indptr, m_indices,
    m_keep, complement, ncols, nparts, counts)`` writes each output row's
    entry count into ``counts``; ``numeric(..., out_indptr, out_indices,
    out_data, a_data, b_data)`` fills the row's sorted columns and values.
    ``m_keep[e]`` (uint8) says whether mask entry ``e`` counts (all ones for
    a structural mask).  Cached on disk per operator pair (:mod:`.opcache`).
    """
    mod = specialise(_this(), ADD=add, MUL=mul)
    return mod.symbolic, mod.numeric


def map_binary_kernel(f):
    """``out[e] = f(x[e], y[e])`` over 1-D arrays (njit, serial)."""
    return specialise(_this(), MUL=f).map2


def map_unary_kernel(f):
    """``out[e] = f(x[e])`` over a 1-D array (njit, serial)."""
    return specialise(_this(), F1=f).map1


def map_indexed_kernel(f):
    """``out[e] = f(x[e], rows[e], cols[e])`` (global indices; njit, serial)."""
    return specialise(_this(), FI=f).mapi


def reduce_rows_kernel(add):
    """``out[i] = add-reduction of data[indptr[i]:indptr[i+1]]``; ``has[i]`` = row non-empty."""
    return specialise(_this(), ADD=add).reduce_rows
