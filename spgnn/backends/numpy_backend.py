"""The ``numpy`` backend: the scipy/numpy reference every other backend must equal.

Written for obvious correctness, vectorised so that it stays usable up to
about 1e5 nonzeros (memory is O(nnz * n) for SpMM/SDDMM and O(flops) for
SpGEMM):

* general semirings expand every term ``a[i, k] (x) x[k, :]`` into one array
  and reduce each row's consecutive terms with ``ufunc.reduceat`` (terms are
  already grouped by row in CSR order, and ``reduceat`` reduces left to
  right, i.e. in storage order, which is also the compiled kernels' order);
* ``plus_times`` SpMM is scipy's ``A @ X``;
* SpGEMM expands all ``flops`` products, stably sorts them by ``(i, j)`` and
  reduces each run; its pattern comes from scipy's product of the 0/1
  pattern matrices;
* the element-wise GNN kernels (ReLU, counter-based dropout) are numpy
  expressions, the dropout hash :func:`spgnn.counter_rng.counter_uniform`;
* first-appearance de-duplication is ``np.unique`` plus a stable
  ``argsort``, row sorting a ``lexsort``;
* keyed sampling has no numpy reference: it runs the host kernels
  (:mod:`spgnn.backends._host_kernels`), like the numba backend.
"""

import functools

import numpy as np

from ..counter_rng import counter_uniform
from ..local.csr import LocalCSR
from . import _host_kernels
from . import _validate as V
from .base import Backend

__all__ = ["NumpyBackend", "relu", "relu_backward", "first_appearance"]


def _row_ids(indptr, nrows):
    """Row number of every stored nonzero (CSR -> COO rows)."""
    return np.repeat(np.arange(nrows, dtype=np.int64), np.diff(indptr))


def _segment_reduce(ufunc, vals, indptr, nrows, identity, dtype):
    """Reduce ``vals`` (grouped by row as described by ``indptr``) per row along axis 0.

    Rows without a term get ``identity``.  ``reduceat`` would return the
    element at an empty segment's start instead, so only non-empty rows are
    given to it; consecutive non-empty starts delimit exactly one row each.
    """
    out = np.full((nrows,) + vals.shape[1:], identity, dtype=dtype)
    nonempty = np.flatnonzero(np.diff(indptr))
    if nonempty.size and vals.size:
        out[nonempty] = ufunc.reduceat(vals, np.asarray(indptr)[nonempty], axis=0)
    return out


def _quiet(func):
    """Run ``func`` without numpy's invalid/overflow warnings.

    IEEE results such as ``0 * inf = nan`` or float32 overflow are legitimate
    semiring values (the compiled kernels produce them silently); the
    reference must not warn where they do not.  A fresh ``errstate`` per call
    keeps it re-entrant and thread-safe on every numpy version.
    """
    @functools.wraps(func)
    def quiet(*args, **kwargs):
        with np.errstate(invalid="ignore", over="ignore"):
            return func(*args, **kwargs)
    return quiet


def _row_mean_divisor(indptr, dtype):
    """Per-row nonzero counts as a column in ``dtype`` (empty rows count 1, giving 0)."""
    return np.maximum(np.diff(indptr), 1).astype(dtype)[:, None]


def relu(x):
    """``Backend.relu`` in numpy: ``(where(x > 0, x, +0), x > 0)``."""
    mask = x > 0
    return np.where(mask, x, 0).astype(x.dtype, copy=False), mask


def relu_backward(dy, mask):
    """``Backend.relu_backward`` in numpy."""
    return np.where(mask, dy, 0).astype(dy.dtype, copy=False)


def first_appearance(a, a_ptr, b, b_ptr, n):
    """``Backend.first_appearance`` in numpy: ``np.unique`` of ``minibatch * n + vertex``.

    The items are put in minibatch order (each minibatch's ``a`` items, then
    its ``b`` items) by a stable sort; a vertex's column is then the rank of
    its first appearance, globally, which is per-minibatch first appearance
    with the minibatches one after the other.
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    a_ptr = np.asarray(a_ptr, dtype=np.int64)
    b_ptr = np.asarray(b_ptr, dtype=np.int64)
    k = a_ptr.size - 1
    mb = np.concatenate([_row_ids(a_ptr, k), _row_ids(b_ptr, k)])
    order = np.argsort(mb, kind="stable")
    v = np.concatenate([a, b])[order]
    nn = np.int64(max(n, 1))
    uniq, first, inv = np.unique(mb[order] * nn + v, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    col_of_uniq = np.empty(uniq.size, dtype=np.int64)
    col_of_uniq[by_first] = np.arange(uniq.size, dtype=np.int64)
    src_keys = uniq[by_first]
    col_ptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(src_keys // nn, minlength=k), out=col_ptr[1:])
    col = np.empty(order.size, dtype=np.int64)
    col[order] = col_of_uniq[inv.reshape(-1)]
    return col[:a.size], col[a.size:], src_keys % nn, col_ptr


def _drop_scale(x, u, p):
    """``scale`` where ``u >= p``, else 0, in ``x``'s dtype (the kernels' factor)."""
    return np.where(u >= p, x.dtype.type(1.0 / (1.0 - p)), x.dtype.type(0))


class NumpyBackend(Backend):
    """scipy/numpy reference backend (host memory, single threaded)."""

    name = "numpy"

    @property
    def xp(self):
        return np

    # -- SpMM ---------------------------------------------------------------
    @_quiet
    def spmm(self, a, x, semiring, out=None):
        """``Y = A (+).(x) X``; see :mod:`spgnn.backends.base` for the semantics.

        Parameters
        ----------
        a : LocalCSR ``(m, k)``
        x : ndarray ``(k, n)``, float32 or float64
        semiring : Semiring or name
        out : ndarray ``(m, n)`` of the result dtype, optional; filled and returned

        Returns
        -------
        ndarray ``(m, n)`` of ``np.result_type(a.data, x)``
        """
        x, semiring, dt = V.check_spmm(a, x, semiring)
        m, n = a.shape[0], x.shape[1]
        if out is not None:
            V.check_out(out, (m, n), dt, "spmm")
        if semiring.add.name == "plus" and semiring.multiply == "times":
            # scipy's csr_matvecs; casting first gives the result dtype for
            # mixed inputs exactly as np.result_type does
            y = np.asarray(a.to_scipy().astype(dt) @ x.astype(dt, copy=False), dtype=dt)
            y = y.reshape(m, n)
        else:
            vals = semiring.mul(a.data.astype(dt)[:, None], x.astype(dt, copy=False)[a.indices])
            y = _segment_reduce(semiring.add.ufunc, vals, a.indptr, m,
                                semiring.add.identity, dt)
        if semiring.row_mean:
            y = y / _row_mean_divisor(a.indptr, dt)
        if out is not None:
            out[...] = y
            return out
        return y

    # -- SpGEMM --------------------------------------------------------------
    def spgemm_symbolic(self, a, b):
        """Output ``indptr`` (int64, ``a.shape[0] + 1``) of ``A @ B``'s structural pattern."""
        V.check_spgemm(a, b, "spgemm_symbolic")
        return self._pattern(a, b).indptr.astype(np.int64)

    @staticmethod
    def _pattern(a, b):
        """scipy product of the 0/1 pattern matrices: counts of terms, never 0 where present."""
        import scipy.sparse as sp

        pa = sp.csr_array((np.ones(a.nnz), a.indices, a.indptr), shape=a.shape)
        pb = sp.csr_array((np.ones(b.nnz), b.indices, b.indptr), shape=b.shape)
        c = (pa @ pb).tocsr()
        c.sort_indices()
        return c

    @_quiet
    def spgemm_numeric(self, a, b, indptr, semiring):
        """``C = A (+).(x) B`` on the pattern whose row pointer ``indptr`` is.

        Returns a :class:`LocalCSR` ``(a.shape[0], b.shape[1])`` with sorted,
        duplicate-free indices, keeping structural zeros.
        """
        V.check_spgemm(a, b, "spgemm_numeric")
        semiring = V.check_semiring(semiring)
        indptr = V.check_spgemm_indptr(indptr, a)
        m, n = a.shape[0], b.shape[1]
        dt = V.result_dtype(a.data, b.data)

        # all products (i, k) x (k, j), in storage order of A then B
        a_idx = a.indices.astype(np.int64)
        b_indptr = b.indptr.astype(np.int64)
        per_a = np.diff(b_indptr)[a_idx]              # terms per nonzero of A
        total = int(per_a.sum())
        ea = np.repeat(np.arange(a.nnz, dtype=np.int64), per_a)
        within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(per_a) - per_a, per_a)
        eb = b_indptr[a_idx[ea]] + within
        i = _row_ids(a.indptr, m)[ea]
        j = b.indices.astype(np.int64)[eb]
        v = semiring.mul(a.data.astype(dt)[ea], b.data.astype(dt)[eb])

        # stable sort by (i, j): by j, then by i, both stable
        order = np.argsort(j, kind="stable")
        order = order[np.argsort(i[order], kind="stable")]
        i, j, v = i[order], j[order], v[order]
        starts = np.flatnonzero(np.r_[True, (i[1:] != i[:-1]) | (j[1:] != j[:-1])]) \
            if total else np.zeros(0, dtype=np.int64)
        data = semiring.add.ufunc.reduceat(v, starts) if total else np.zeros(0, dtype=dt)
        counts = np.bincount(i[starts], minlength=m)
        bad = int(np.count_nonzero(counts != np.diff(indptr)))
        if bad:
            raise V.indptr_mismatch(bad)
        data = data.astype(dt, copy=False)
        if semiring.row_mean:
            data = data / _row_mean_divisor(a.indptr, dt)[:, 0][i[starts]]
        idt = V.index_dtype_for(int(indptr[-1]), (m, n), a.index_dtype, b.index_dtype)
        return LocalCSR(indptr.astype(idt), j[starts].astype(idt), data, (m, n), check=None)

    # -- SDDMM ---------------------------------------------------------------
    @_quiet
    def sddmm(self, a, x, y, semiring):
        """``C.data[e] = a.data[e] (x) ((+)_k x[i, k] (x) y[j, k])`` on ``a``'s pattern.

        ``x`` is ``(m, d)``, ``y`` is ``(n, d)``; the result shares ``a``'s
        ``indptr`` and ``indices`` arrays (same pattern and order).
        """
        x, y, semiring, dt = V.check_sddmm(a, x, y, semiring)
        rows = _row_ids(a.indptr, a.shape[0])
        terms = semiring.mul(x.astype(dt, copy=False)[rows], y.astype(dt, copy=False)[a.indices])
        red = semiring.add.ufunc
        if isinstance(red, np.ufunc):
            inner = red.reduce(terms, axis=1, initial=semiring.add.identity)
        elif terms.shape[1] == 0:
            inner = np.full(terms.shape[0], semiring.add.identity, dtype=dt)
        else:
            # any other operator (user monoids, any/lor/...): reduce each row's terms from
            # its first one, as the compiled kernels do
            inner = red.reduceat(np.ascontiguousarray(terms.T), [0])[0]
        data = semiring.mul(a.data.astype(dt), inner.astype(dt, copy=False)).astype(dt, copy=False)
        return LocalCSR(a.indptr, a.indices, data, a.shape, check=None)

    # -- extraction ----------------------------------------------------------
    def extract_rows(self, a, rows):
        """``a[rows, :]`` (any order, repeats, negative and boolean selectors as scipy)."""
        V.check_csr(a, "extract_rows")
        rows = V.normalize_index(rows, a.shape[0], "extract_rows", "rows")
        indptr = a.indptr.astype(np.int64)
        counts = np.diff(indptr)[rows]
        out_indptr = np.zeros(rows.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=out_indptr[1:])
        nnz = int(out_indptr[-1])
        # source position of every output entry: its row's start + offset in the row
        src = np.repeat(indptr[rows] - out_indptr[:-1], counts) + np.arange(nnz, dtype=np.int64)
        idt = V.index_dtype_for(nnz, (rows.shape[0], a.shape[1]), a.index_dtype)
        return LocalCSR(out_indptr.astype(idt), a.indices[src].astype(idt), a.data[src],
                        (rows.shape[0], a.shape[1]), check=None)

    def extract_cols(self, a, cols):
        """``a[:, cols]`` with columns renumbered to their position in ``cols``.

        Entry order is scipy's: each row in storage order, a nonzero in
        column ``c`` giving one entry per position of ``c`` in ``cols``.
        """
        V.check_csr(a, "extract_cols")
        cols = V.normalize_index(cols, a.shape[1], "extract_cols", "cols")
        m, ncols = a.shape[0], cols.shape[0]
        col_order = np.argsort(cols, kind="stable")
        mult = np.bincount(cols, minlength=a.shape[1])
        col_offsets = np.zeros(a.shape[1] + 1, dtype=np.int64)
        np.cumsum(mult, out=col_offsets[1:])
        c = a.indices.astype(np.int64)
        k = mult[c]                                   # output entries per nonzero
        total = int(k.sum())
        e = np.repeat(np.arange(a.nnz, dtype=np.int64), k)
        within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(k) - k, k)
        new_idx = col_order[col_offsets[c[e]] + within]
        out_indptr = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(np.bincount(_row_ids(a.indptr, m)[e], minlength=m), out=out_indptr[1:])
        idt = V.index_dtype_for(total, (m, ncols), a.index_dtype)
        return LocalCSR(out_indptr.astype(idt), new_idx.astype(idt), a.data[e], (m, ncols),
                        check=None)

    def transpose(self, a):
        """``a.T`` in CSR: indices sorted, duplicates kept in storage order."""
        V.check_csr(a, "transpose")
        m, n = a.shape
        # storage order is row-major, so a stable sort by column lists each
        # column's entries by increasing row
        order = np.argsort(a.indices, kind="stable")
        out_indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(a.indices, minlength=n), out=out_indptr[1:])
        idt = V.index_dtype_for(a.nnz, (n, m), a.index_dtype)
        return LocalCSR(out_indptr.astype(idt), _row_ids(a.indptr, m)[order].astype(idt),
                        a.data[order], (n, m), check=None)

    # -- sampling --------------------------------------------------------------
    def sample_rows(self, indptr, indices, data, rows, keys, s, method, weighted):
        """Keyed sampling of up to ``s`` entries per row ``rows[r]``: the host kernels.

        No numpy reference exists (see :mod:`spgnn.backends._host_kernels`).
        """
        return _host_kernels.sample_rows(indptr, indices, data, rows, keys, s, method, weighted)

    def first_appearance(self, a, a_ptr, b, b_ptr, n):
        """Per-minibatch first-appearance columns (:func:`first_appearance`)."""
        return first_appearance(a, a_ptr, b, b_ptr, n)

    def sort_rows_by_column(self, indptr, indices, data):
        """Sort each row's ``(indices, data)`` by column, in place (columns distinct per row)."""
        order = np.lexsort((indices, _row_ids(indptr, len(indptr) - 1)))
        indices[...] = indices[order]
        data[...] = data[order]

    # -- element-wise GNN kernels ----------------------------------------------
    def relu(self, x):
        """``(max(x, 0), x > 0)``; see :mod:`spgnn.backends.base`."""
        return relu(x)

    def relu_backward(self, dy, mask):
        """``dy`` where ``mask``, else 0."""
        return relu_backward(dy, mask)

    @_quiet
    def dropout(self, x, p, base, rows, col0, ncols, out=None):
        """Counter-based inverted dropout of a dense block; see :mod:`spgnn.backends.base`."""
        p = V.check_drop_probability(p, "dropout")
        x = np.ascontiguousarray(x)
        if x.dtype.kind != "f":
            x = x.astype(np.float64)
        rows = np.asarray(rows, dtype=np.int64).astype(np.uint64)
        cols = np.uint64(int(col0)) + np.arange(x.shape[1], dtype=np.uint64)
        with np.errstate(over="ignore"):
            counters = rows[:, None] * np.uint64(int(ncols)) + cols[None, :]
        if out is None:
            out = np.empty_like(x)
        return np.multiply(x, _drop_scale(x, counter_uniform(counters, base), p), out=out)

    @_quiet
    def dropout_csr(self, indptr, indices, data, p, base, rows, col0, ncols):
        """Counter-based inverted dropout of a CSR block's stored entries: the new ``data``."""
        p = V.check_drop_probability(p, "dropout_csr")
        rows = np.asarray(rows, dtype=np.int64).astype(np.uint64)
        row_of = _row_ids(indptr, len(indptr) - 1)
        with np.errstate(over="ignore"):
            counters = (rows[row_of] * np.uint64(int(ncols)) + np.uint64(int(col0))
                        + np.asarray(indices).astype(np.uint64))
        return data * _drop_scale(data, counter_uniform(counters, base), p)
