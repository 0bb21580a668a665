"""Row and column extraction and transposition of CSR matrices.

These reproduce scipy's results exactly, entry order included:

* ``A[rows, :]`` copies each selected row verbatim (its storage order and
  duplicates), like scipy's ``csr_row_index``;
* ``A[:, cols]`` walks each row in storage order and emits, for a nonzero
  in column ``c``, one entry per position ``p`` with ``cols[p] == c`` in
  increasing ``p`` (scipy's ``csr_column_index2``);
* ``A.T`` is a counting sort by column (scipy's ``csr_tocsc``), which yields
  sorted indices and keeps duplicates, stable in their original order.

Extraction is two-phase like SpGEMM (counts into ``out_indptr``, then a
fill), both phases ``prange`` over output rows.  Transposition is serial:
its scatter writes every output row from every input row, and a parallel
version needs one count array per thread (O(threads * ncols) extra memory)
for a memory-bound O(nnz) loop.
"""

import numba
import numpy as np

from ._ops import chunk_starts

__all__ = ["csr_extract_rows_indptr", "csr_extract_rows", "csr_extract_cols_indptr",
           "csr_extract_cols", "csr_transpose", "BAND_KINDS", "csr_band_counts", "csr_band"]


@numba.njit(cache=True, nogil=True)
def csr_extract_rows_indptr(indptr, rows, out_indptr):
    """``out_indptr`` (int64, ``len(rows) + 1``) of ``A[rows, :]``.

    ``rows`` must already be non-negative and in range (the caller
    normalises).  Serial: O(len(rows)), a prefix sum.
    """
    out_indptr[0] = 0
    for r in range(rows.shape[0]):
        i = rows[r]
        out_indptr[r + 1] = out_indptr[r] + (indptr[i + 1] - indptr[i])


@numba.njit(cache=True, nogil=True, parallel=True)
def csr_extract_rows(indptr, indices, data, rows, out_indptr, out_indices, out_data):
    """Copy rows ``rows`` (any order, repeats allowed) of ``A`` into the output.

    Parameters
    ----------
    indptr, indices, data : ``A`` in CSR
    rows : int array, normalised to ``[0, m)``
    out_indptr : int array from :func:`csr_extract_rows_indptr` (input)
    out_indices, out_data : arrays of length ``out_indptr[-1]``, overwritten

    Notes
    -----
    ``prange`` over output rows: each writes its own disjoint slot.  Cost
    O(len(rows) + nnz_out).
    """
    for r in numba.prange(rows.shape[0]):
        i = rows[r]
        src = indptr[i]
        dst = out_indptr[r]
        for q in range(indptr[i + 1] - src):
            out_indices[dst + q] = indices[src + q]
            out_data[dst + q] = data[src + q]


@numba.njit(cache=True, nogil=True, parallel=True)
def csr_extract_cols_indptr(indptr, indices, col_offsets, out_indptr):
    """``out_indptr`` (int64, ``m + 1``) of ``A[:, cols]``.

    ``col_offsets`` (int64, ``n + 1``) is the CSR-style offset array of the
    inverse map column -> positions in ``cols``: column ``c`` appears
    ``col_offsets[c + 1] - col_offsets[c]`` times in ``cols``.  Rows are
    counted in parallel, then prefix-summed serially.  Cost O(nnz + m).
    """
    m = indptr.shape[0] - 1
    out_indptr[0] = 0
    for i in numba.prange(m):
        count = 0
        for e in range(indptr[i], indptr[i + 1]):
            c = indices[e]
            count += col_offsets[c + 1] - col_offsets[c]
        out_indptr[i + 1] = count
    for i in range(m):
        out_indptr[i + 1] += out_indptr[i]


@numba.njit(cache=True, nogil=True, parallel=True)
def csr_extract_cols(indptr, indices, data, col_offsets, col_order, out_indptr,
                     out_indices, out_data):
    """Fill ``A[:, cols]``; columns are renumbered to their positions in ``cols``.

    Parameters
    ----------
    indptr, indices, data : ``A`` in CSR
    col_offsets : int64 array ``(n + 1,)``, see :func:`csr_extract_cols_indptr`
    col_order : int64 array ``(len(cols),)``, the positions of ``cols``
        stably sorted by column (``argsort(cols, kind="stable")``), so that
        ``col_order[col_offsets[c]:col_offsets[c + 1]]`` lists, increasing,
        the positions holding column ``c``
    out_indptr : int array from :func:`csr_extract_cols_indptr` (input)
    out_indices, out_data : arrays of length ``out_indptr[-1]``, overwritten

    Notes
    -----
    Same entry order as scipy (see the module docstring); output indices are
    sorted only when ``A``'s are and ``cols`` is increasing.  ``prange`` over
    rows.  Cost O(nnz + nnz_out + m).
    """
    m = indptr.shape[0] - 1
    for i in numba.prange(m):
        dst = out_indptr[i]
        for e in range(indptr[i], indptr[i + 1]):
            c = indices[e]
            v = data[e]
            for q in range(col_offsets[c], col_offsets[c + 1]):
                out_indices[dst] = col_order[q]
                out_data[dst] = v
                dst += 1


@numba.njit(cache=True, nogil=True)
def csr_transpose(indptr, indices, data, n_cols, out_indptr, out_indices, out_data):
    """``A.T`` in CSR (equivalently ``A`` in CSC): a stable counting sort by column.

    Parameters
    ----------
    indptr, indices, data : ``A`` in CSR (``m`` rows)
    n_cols : int
        Columns of ``A`` (rows of the output).
    out_indptr : int array ``(n_cols + 1,)``, overwritten
    out_indices : int array ``(nnz,)``, overwritten with row numbers of ``A``
    out_data : float array ``(nnz,)``, overwritten

    Notes
    -----
    Rows of ``A`` are scanned in order, so each output row lists its entries
    by increasing column: indices come out sorted whatever the input order.
    Duplicates are kept (adjacent, in storage order).  Serial, O(nnz + m + n).
    """
    m = indptr.shape[0] - 1
    nnz = indptr[m]
    for c in range(n_cols + 1):
        out_indptr[c] = 0
    for e in range(nnz):
        out_indptr[indices[e] + 1] += 1
    for c in range(n_cols):
        out_indptr[c + 1] += out_indptr[c]
    # next free slot per output row; a scratch copy so out_indptr stays intact
    nxt = out_indptr[:n_cols].copy()
    for i in range(m):
        for e in range(indptr[i], indptr[i + 1]):
            c = indices[e]
            dst = nxt[c]
            out_indices[dst] = i
            out_data[dst] = data[e]
            nxt[c] = dst + 1


#: Diagonal-band selectors of :func:`csr_band` (GraphBLAS's tril/triu/diag/offdiag):
#: entry ``(i, j)`` is kept when ``j - i`` is ``<=``, ``>=``, ``==`` or ``!=`` the offset.
BAND_KINDS = {"tril": 0, "triu": 1, "diag": 2, "offdiag": 3}


@numba.njit(cache=True, nogil=True, inline="always")
def _band(kind, i, offset):
    """``(lo, hi, inside)``: row ``i`` keeps column ``j`` when ``lo <= j <= hi`` equals
    ``inside`` (a branch-free test in the inner loops)."""
    d = i + offset
    big = np.int64(1) << 62
    if kind == 0:
        return -big, d, True
    if kind == 1:
        return d, big, True
    return d, d, kind == 2


@numba.njit(cache=True, nogil=True, parallel=True)
def csr_band_counts(indptr, indices, kind, offset, bounds, chunk_counts):
    """``chunk_counts[c]``: the entries ``(i, j)`` of the row chunk ``bounds[c]:bounds[c+1]``
    with ``j - i - offset`` in the band ``kind`` (:data:`BAND_KINDS` code).  Chunks in
    parallel, branch-free counting.  Cost O(nnz + m)."""
    for c in numba.prange(bounds.shape[0] - 1):
        total = 0
        for i in range(bounds[c], bounds[c + 1]):
            lo, hi, inside = _band(kind, np.int64(i), offset)
            count = 0
            for e in range(indptr[i], indptr[i + 1]):
                j = np.int64(indices[e])
                count += (lo <= j) & (j <= hi)
            total += count if inside else indptr[i + 1] - indptr[i] - count
        chunk_counts[c] = total


@numba.njit(cache=True, nogil=True, parallel=True)
def csr_band(indptr, indices, data, kind, offset, bounds, chunk_counts, out_indptr,
             out_indices, out_data):
    """Fill the band counted by :func:`csr_band_counts` (same ``bounds``), keeping each row's
    storage order (a filter: sorted rows stay sorted), and its row pointers: chunk ``c``
    starts after the entries of the chunks before it, so no pass over the rows is
    serial.  Chunks in parallel.  Cost O(nnz + m)."""
    starts = chunk_starts(chunk_counts)
    out_indptr[0] = 0
    for c in numba.prange(bounds.shape[0] - 1):
        dst = starts[c]
        for i in range(bounds[c], bounds[c + 1]):
            lo, hi, inside = _band(kind, np.int64(i), offset)
            for e in range(indptr[i], indptr[i + 1]):
                j = np.int64(indices[e])
                if ((lo <= j) & (j <= hi)) == inside:
                    out_indices[dst] = indices[e]
                    out_data[dst] = data[e]
                    dst += 1
            out_indptr[i + 1] = dst
