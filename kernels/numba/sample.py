"""Keyed sampling without replacement of up to ``s`` entries per CSR row.

Pure numba over plain arrays (no spgnn imports; installed as
``spgnn._kernels.numba.sample``).  Used by :mod:`spgnn.sampling`; see
``docs/sampling.md`` and ``research/003_matrix_sampling.md`` §2.3 and §9.3-9.4.

Random numbers are a pure function of a per-row 64-bit key and a per-draw
integer (SplitMix64 finalizer, :func:`hash2`), so a row's sample does not
depend on which thread, rank or bulk position processes it.

Row mapping: output row ``r`` samples from CSR row ``rows[r]`` of the input,
so the same kernel serves an explicit probability matrix ``P`` (``rows =
arange``) and the fused row-gather fast path (``P = Q A`` with one-hot rows
of ``Q`` is ``A[rows]``, never materialised).

Methods (``method`` argument):

``METHOD_FLOYD`` (0)
    Uniform only.  Floyd's algorithm draws a uniformly random ``s``-subset of
    the ``m`` row positions with exactly ``s`` keyed draws (draw ``j`` is
    keyed by ``j``), O(s^2) per row whatever the degree.
``METHOD_ES`` (1)
    Efraimidis-Spirakis keys: entry ``e`` with weight ``w > 0`` gets
    ``log(u_e) / w`` (``u_e`` keyed by the entry's column id); the ``s``
    largest keys win.  This is exactly successive sampling without
    replacement (``numpy.random.choice(p=w/sum(w), replace=False)``'s law).
    With uniform weights the key is ``u_e`` itself (same order).  O(m + s^2
    log(m/s)) per row.
``METHOD_ITS`` (2)
    Successive inverse transform sampling: ``s`` rounds, each draws ``u``
    (keyed by the round), scans the row's running float64 sum of the
    remaining weights (a per-row segmented prefix, never a global one:
    report §9.4), takes the first entry whose prefix exceeds ``u * total``
    (upper bound, so zero weights are never chosen), clamps to the row's last
    positive entry against rounding, and zeroes the chosen weight.  Same law
    as ``METHOD_ES``; O(s * m) per row.

Every method returns, per row, ``min(s, m+)`` distinct positions (``m+`` =
entries with positive weight; all entries when ``weighted`` is false) in
increasing storage order, so the sampled columns come out sorted when the
row's columns are.
"""

import numba
import numpy as np

from .splitmix import GOLDEN as _GOLDEN, INV53 as _INV53, S11 as _S11, mix64

__all__ = ["METHOD_FLOYD", "METHOD_ES", "METHOD_ITS", "mix64", "hash2", "hash_uniform",
           "hash2_array", "sample_counts", "sample_fill"]

METHOD_FLOYD = 0
METHOD_ES = 1
METHOD_ITS = 2

_ONE = np.uint64(1)

@numba.njit(cache=True, nogil=True)
def hash2(key, x):
    """Hash of a uint64 ``key`` and an integer ``x >= 0``: ``mix(key ^ mix((x+1) * golden))``."""
    return mix64(key ^ mix64((np.uint64(x) + _ONE) * _GOLDEN))


@numba.njit(cache=True, nogil=True)
def hash_uniform(key, x):
    """A uniform float64 in (0, 1) (53 bits, never 0 or 1) keyed by ``(key, x)``."""
    return (np.float64(hash2(key, x) >> _S11) + 0.5) * _INV53


@numba.njit(cache=True, nogil=True)
def hash2_array(keys, xs, out):
    """``out[i] = hash2(keys[i], xs[i])`` (tests compare it with the numpy version)."""
    for i in range(keys.shape[0]):
        out[i] = hash2(keys[i], xs[i])


@numba.njit(cache=True, nogil=True, parallel=True)
def sample_counts(indptr, data, rows, s, weighted, out_counts):
    """``out_counts[r] = min(s, m+)`` for CSR row ``rows[r]``.

    ``m+`` counts entries with ``data > 0`` when ``weighted``, else all
    entries.  O(len(rows)) unweighted, O(sum of the rows' lengths) weighted.
    """
    for r in numba.prange(rows.shape[0]):
        i = rows[r]
        lo = indptr[i]
        hi = indptr[i + 1]
        m = hi - lo
        if weighted:
            m = 0
            for e in range(lo, hi):
                if data[e] > 0:
                    m += 1
        out_counts[r] = m if m < s else s


@numba.njit(cache=True, nogil=True)
def _sort_small(a, lo, hi):
    """In-place insertion sort of ``a[lo:hi]`` (rows hold at most ``s`` entries)."""
    for q in range(lo + 1, hi):
        v = a[q]
        t = q - 1
        while t >= lo and a[t] > v:
            a[t + 1] = a[t]
            t -= 1
        a[t + 1] = v


@numba.njit(cache=True, nogil=True)
def _floyd(key, m, s, out, o):
    """Uniform ``s``-subset of ``range(m)`` (``m > s``) into ``out[o:o+s]``, sorted."""
    cnt = 0
    for j in range(m - s, m):
        t = np.int64(hash_uniform(key, j) * (j + 1))
        if t > j:
            t = j
        found = False
        for q in range(cnt):
            if out[o + q] == t:
                found = True
                break
        out[o + cnt] = j if found else t
        cnt += 1
    _sort_small(out, o, o + s)


@numba.njit(cache=True, nogil=True)
def _es(indices, data, lo, hi, key, s, weighted, kbuf, out, o):
    """Top-``s`` Efraimidis-Spirakis keys of entries ``lo..hi`` into ``out[o:o+s]``.

    ``kbuf`` (length >= s) holds the kept keys in decreasing order; ties
    (probability ~2^-53) go to the earlier position.
    """
    cnt = 0
    for e in range(lo, hi):
        if weighted:
            w = data[e]
            if not w > 0:
                continue
            k = np.log(hash_uniform(key, indices[e])) / w
        else:
            k = hash_uniform(key, indices[e])
        if cnt == s and not k > kbuf[s - 1]:
            continue
        t = cnt - 1 if cnt < s else s - 2
        while t >= 0 and kbuf[t] < k:
            kbuf[t + 1] = kbuf[t]
            out[o + t + 1] = out[o + t]
            t -= 1
        kbuf[t + 1] = k
        out[o + t + 1] = e - lo
        if cnt < s:
            cnt += 1
    _sort_small(out, o, o + cnt)


@numba.njit(cache=True, nogil=True)
def _its(data, lo, hi, key, s, weighted, wbuf, out, o):
    """Successive ITS without replacement of ``s`` entries of ``lo..hi`` into ``out[o:o+s]``."""
    m = hi - lo
    for q in range(m):
        if weighted:
            w = data[lo + q]
            wbuf[q] = w if w > 0 else 0.0
        else:
            wbuf[q] = 1.0
    for j in range(s):
        total = 0.0
        last = -1
        for q in range(m):
            if wbuf[q] > 0:
                total += wbuf[q]
                last = q
        target = hash_uniform(key, j) * total
        acc = 0.0
        pick = last                      # clamp: rounding can leave target >= acc
        for q in range(m):
            if wbuf[q] > 0:
                acc += wbuf[q]
                if acc > target:         # upper bound: zero weights never win
                    pick = q
                    break
        wbuf[pick] = 0.0
        out[o + j] = pick
    _sort_small(out, o, o + s)


@numba.njit(cache=True, nogil=True, parallel=True)
def sample_fill(indptr, indices, data, rows, row_keys, s, method, weighted, nparts,
                out_indptr, out_pos):
    """Fill ``out_pos`` with the sampled entries (absolute positions into ``indices``).

    Parameters
    ----------
    indptr, indices, data : the CSR being sampled (row columns in canonical order)
    rows : int64 array, output row ``r`` samples CSR row ``rows[r]``
    row_keys : uint64 array, one key per output row
    s : int, entries per row (at most)
    method : METHOD_FLOYD (uniform only), METHOD_ES or METHOD_ITS
    weighted : bool, use ``data`` as weights (entries ``<= 0`` never chosen)
    nparts : int >= 1, row chunks for ``prange`` (results do not depend on it)
    out_indptr : int64, prefix sum of :func:`sample_counts` (input)
    out_pos : int64, length ``out_indptr[-1]``, overwritten

    Notes
    -----
    Rows with ``m+ <= s`` take every eligible entry.  Parallel over
    contiguous row chunks; each chunk allocates its scratch once.
    """
    nrows = rows.shape[0]
    for c in numba.prange(nparts):
        r0 = nrows * c // nparts
        r1 = nrows * (c + 1) // nparts
        need = 1
        for r in range(r0, r1):
            m = indptr[rows[r] + 1] - indptr[rows[r]]
            if method == METHOD_ITS and m > need:
                need = m
        if method == METHOD_ES and s > need:
            need = s
        buf = np.empty(need, dtype=np.float64)
        for r in range(r0, r1):
            i = rows[r]
            lo = indptr[i]
            hi = indptr[i + 1]
            o = out_indptr[r]
            cnt = out_indptr[r + 1] - o
            if cnt == 0:
                continue
            m = hi - lo
            if weighted:
                mpos = 0
                for e in range(lo, hi):
                    if data[e] > 0:
                        mpos += 1
            else:
                mpos = m
            if mpos <= cnt:              # take every eligible entry
                q = 0
                for e in range(lo, hi):
                    if (not weighted) or data[e] > 0:
                        out_pos[o + q] = e
                        q += 1
                continue
            key = row_keys[r]
            if method == METHOD_FLOYD:
                _floyd(key, m, cnt, out_pos, o)
            elif method == METHOD_ES:
                _es(indices, data, lo, hi, key, cnt, weighted, buf, out_pos, o)
            else:
                _its(data, lo, hi, key, cnt, weighted, buf, out_pos, o)
            for q in range(cnt):
                out_pos[o + q] += lo
