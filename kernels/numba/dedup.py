"""Per-minibatch de-duplication in first-appearance order (GraphSAGE unique frontier).

Pure numba over plain arrays (no spgnn imports; installed as
``spgnn._kernels.numba.dedup``).  Used by :mod:`spgnn.sampling.local` for
``frontier="unique"`` (PyG/DGL-style blocks, ``docs/sampling.md``); it
replaces ``np.unique`` + ``argsort`` on ``minibatch * n + vertex`` keys,
which dominated the unique mode's time.

Minibatch ``i``'s items are the segment ``a[a_ptr[i]:a_ptr[i+1]]`` (a hop's
rows, or a raw batch) followed by ``b[b_ptr[i]:b_ptr[i+1]]`` (the hop's
sampled columns, in edge order).  Every distinct vertex of the minibatch
becomes one column, numbered in the order of its first appearance; the
results equal the numpy reference bit for bit and do not depend on the
number of threads or chunks.

Lookups use, per chunk of minibatches, either a dense stamp array of length
``n`` (when ``n`` is small next to the chunk's items) or an open-addressing
hash table sized to the minibatch (memory proportional to the work, whatever
``n``).
"""

import numba
import numpy as np

__all__ = ["first_appearance", "compact_columns", "sort_rows_by_column"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True)
def _pow2_at_least(x):
    c = 16
    while c < x:
        c *= 2
    return c


@numba.njit(cache=True, nogil=True)
def _mb_dense(a, a0, a1, b, b0, b1, stamp, loc, tag, col_a, col_b, tmp, t0):
    """One minibatch with a dense stamp array; returns its number of columns."""
    nc = 0
    for j in range(a0, a1):
        v = a[j]
        if stamp[v] != tag:
            stamp[v] = tag
            loc[v] = nc
            tmp[t0 + nc] = v
            nc += 1
        col_a[j] = loc[v]
    for j in range(b0, b1):
        v = b[j]
        if stamp[v] != tag:
            stamp[v] = tag
            loc[v] = nc
            tmp[t0 + nc] = v
            nc += 1
        col_b[j] = loc[v]
    return nc


@numba.njit(cache=True, nogil=True)
def _probe(keys, vals, mask, shift, v, nc, tmp, t0):
    """Column of ``v`` in the table, inserting it as column ``nc`` when new.

    Returns ``(column, inserted)``.
    """
    h = np.int64((np.uint64(v) * _GOLDEN) >> np.uint64(shift)) & mask
    while True:
        kv = keys[h]
        if kv == v:
            return vals[h], False
        if kv < 0:
            keys[h] = v
            vals[h] = nc
            tmp[t0 + nc] = v
            return nc, True
        h = (h + 1) & mask


@numba.njit(cache=True, nogil=True)
def _mb_hash(a, a0, a1, b, b0, b1, col_a, col_b, tmp, t0):
    """One minibatch with an open-addressing table (load factor <= 1/2)."""
    items = (a1 - a0) + (b1 - b0)
    cap = _pow2_at_least(2 * items)
    bits = 0
    while (1 << bits) < cap:
        bits += 1
    shift = 64 - bits
    mask = cap - 1
    keys = np.full(cap, -1, dtype=np.int64)
    vals = np.empty(cap, dtype=np.int64)
    nc = 0
    for j in range(a0, a1):
        c, new = _probe(keys, vals, mask, shift, a[j], nc, tmp, t0)
        if new:
            nc += 1
        col_a[j] = c
    for j in range(b0, b1):
        c, new = _probe(keys, vals, mask, shift, b[j], nc, tmp, t0)
        if new:
            nc += 1
        col_b[j] = c
    return nc


@numba.njit(cache=True, nogil=True, parallel=True)
def first_appearance(a, a_ptr, b, b_ptr, n, nparts, col_a, col_b, tmp, counts):
    """Per-minibatch first-appearance dedup of ``a``-segment then ``b``-segment items.

    Parameters
    ----------
    a, b : int64 vertex ids in ``[0, n)``
    a_ptr, b_ptr : int64 (k + 1,), minibatch offsets into ``a`` and ``b``
    n : int, vertex count (size of the dense stamp arrays)
    nparts : int >= 1, contiguous minibatch chunks for ``prange``
    col_a, col_b : int64 like ``a`` / ``b``, overwritten with each item's
        column LOCAL to its minibatch (0-based)
    tmp : int64 (a.size + b.size,), minibatch ``i``'s columns' vertices are
        written from ``a_ptr[i] + b_ptr[i]`` on
    counts : int64 (k,), overwritten with each minibatch's column count
    """
    k = a_ptr.shape[0] - 1
    for p in numba.prange(nparts):
        i0 = k * p // nparts
        i1 = k * (p + 1) // nparts
        if i1 <= i0:
            continue
        items = (a_ptr[i1] - a_ptr[i0]) + (b_ptr[i1] - b_ptr[i0])
        dense = n <= 8 * items
        if dense:
            stamp = np.full(n, -1, dtype=np.int64)
            loc = np.empty(n, dtype=np.int64)
        else:
            stamp = np.empty(0, dtype=np.int64)
            loc = np.empty(0, dtype=np.int64)
        for i in range(i0, i1):
            t0 = a_ptr[i] + b_ptr[i]
            if dense:
                counts[i] = _mb_dense(a, a_ptr[i], a_ptr[i + 1], b, b_ptr[i], b_ptr[i + 1],
                                      stamp, loc, i, col_a, col_b, tmp, t0)
            else:
                counts[i] = _mb_hash(a, a_ptr[i], a_ptr[i + 1], b, b_ptr[i], b_ptr[i + 1],
                                     col_a, col_b, tmp, t0)


@numba.njit(cache=True, nogil=True, parallel=True)
def compact_columns(a_ptr, b_ptr, col_ptr, tmp, col_a, col_b, src):
    """Make columns global: ``src[col_ptr[i] + c] = tmp[a_ptr[i] + b_ptr[i] + c]`` and
    ``col_a`` / ``col_b`` of minibatch ``i`` += ``col_ptr[i]`` (in place)."""
    k = a_ptr.shape[0] - 1
    for i in numba.prange(k):
        off = col_ptr[i]
        t0 = a_ptr[i] + b_ptr[i]
        for c in range(col_ptr[i + 1] - off):
            src[off + c] = tmp[t0 + c]
        for j in range(a_ptr[i], a_ptr[i + 1]):
            col_a[j] += off
        for j in range(b_ptr[i], b_ptr[i + 1]):
            col_b[j] += off


@numba.njit(cache=True, nogil=True, parallel=True)
def sort_rows_by_column(indptr, cols, vals, nparts):
    """Sort each CSR row's ``(cols, vals)`` by column, in place (insertion sort).

    Columns must be distinct within a row (then the result is unique).
    """
    nr = indptr.shape[0] - 1
    for p in numba.prange(nparts):
        r0 = nr * p // nparts
        r1 = nr * (p + 1) // nparts
        for r in range(r0, r1):
            lo = indptr[r]
            hi = indptr[r + 1]
            for e in range(lo + 1, hi):
                c = cols[e]
                x = vals[e]
                q = e - 1
                while q >= lo and cols[q] > c:
                    cols[q + 1] = cols[q]
                    vals[q + 1] = vals[q]
                    q -= 1
                cols[q + 1] = c
                vals[q + 1] = x
