"""Graph preprocessing: the one home of every transformation a model or a partitioner
applies to a loaded graph before it is distributed.

* :func:`symmetrize` -- ``A ∪ Aᵀ``, weights ``max(a_uv, a_vu)``; CSR of ``adj``'s dtype;
* :func:`without_self_loops` -- ``A`` without its diagonal; CSR of ``adj``'s dtype;
* :func:`normalized_adjacency` -- GCN's ``D^-1/2 (A' + I) D^-1/2``; CSR of ``dtype``;
* :func:`neighbour_pattern` -- GraphSAGE's neighbour graph, the pattern of
  ``A'``; CSR of float64 ones;
* :func:`mean_adjacency` -- the mean aggregator ``D^-1 S`` of a pattern ``S``;
  CSR of ``dtype``;
* :func:`symmetric_pattern` -- the pattern of ``A + Aᵀ`` off the diagonal
  (partitioners); CSR of int8 ones;
* :func:`row_normalize_features` -- features divided by their rows' L1 norms
  (the row sums for non-negative features); dense ``dtype``;
* :func:`random_projection` -- ``X R`` with ``R`` Gaussian / sqrt(dim); dense
  float64.

``A'`` is ``without_self_loops(symmetrize(A))``: the undirected graph without
stored self-loops, which every model here starts from.  The graph-level
shortcut (load a file, then symmetrise and drop self-loops) is
:func:`spgnn.io.load_adjacency`.

Every function is local and pure: it reads its arguments, never writes into
them, and returns new arrays.  Arithmetic that divides runs in float64 and is
rounded once to the requested ``dtype`` at the end, so a float32 result is
the float64 result correctly rounded, whatever the input dtype.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = [
    "SPARSE_DENSITY",
    "symmetrize",
    "without_self_loops",
    "normalized_adjacency",
    "undirected_weights",
    "gcn_degrees",
    "normalized_adjacency_rows",
    "neighbour_pattern",
    "mean_adjacency",
    "symmetric_pattern",
    "offdiagonal_pattern",
    "row_normalize_features",
    "feature_form",
    "random_projection",
]

#: :func:`row_normalize_features` works on a dense input as CSR when at most
#: this fraction of its entries is non-zero (the MUSAE loaders return dense
#: 0/1 blocks of 424 MB; no float64 dense temporaries are made for them).
SPARSE_DENSITY = 0.1


def symmetrize(adj):
    """``A ∪ Aᵀ``: the entry (u, v) is ``max(a_uv, a_vu)``. Local, pure.

    Parameters
    ----------
    adj : scipy sparse array or matrix, shape (n, n)

    Returns
    -------
    scipy.sparse.csr_array of ``adj``'s dtype.  Like every scipy element-wise
    binary operation, the maximum stores no zero it computes: a pair whose
    larger weight is 0 (``a_uv = -1``, ``a_vu`` absent) is no edge.
    """
    return sp.csr_array(adj.maximum(adj.T))


def without_self_loops(adj):
    """``adj`` with its diagonal removed (stored entries only; nothing is summed). Local, pure.

    Returns
    -------
    scipy.sparse.csr_array of ``adj``'s dtype and shape, with sorted indices.
    """
    a = adj.tocoo()
    keep = a.row != a.col
    return sp.csr_array((a.data[keep], (a.row[keep], a.col[keep])), shape=a.shape)


def normalized_adjacency(adj, dtype=np.float32):
    """GCN's propagation matrix ``Â = D^-1/2 (A' + I) D^-1/2``. Local, pure.

    The renormalisation trick of Kipf & Welling, *Semi-Supervised
    Classification with Graph Convolutional Networks* (ICLR 2017), eq. (2):
    ``A'`` is the symmetrised ``adj`` without its stored self-loops (so each
    vertex gets exactly one self-loop of weight 1), ``D`` the row sums of
    ``A' + I``.  A row whose sum is not positive gets a zero scale (no NaN).

    Parameters
    ----------
    adj : scipy sparse, shape (n, n)
        Weights are kept (a pattern gives the usual unweighted ``Â``).
    dtype : numpy dtype
        Of the result; everything is computed in float64 first.

    Returns
    -------
    scipy.sparse.csr_array of ``dtype``, symmetric, sorted indices, no
    duplicates.
    """
    a = undirected_weights(adj)
    n = a.shape[0]
    a = a + sp.eye_array(n, dtype=np.float64, format="csr")
    deg = np.asarray(a.sum(axis=1)).ravel()
    d = sp.diags_array(_inverse_sqrt(deg))
    out = sp.csr_array(d @ a @ d, dtype=dtype)
    out.sum_duplicates()
    out.sort_indices()
    return out


def _inverse_sqrt(deg):
    """``D^-1/2`` of the degrees ``deg`` (float64); a degree <= 0 gives 0 (no NaN)."""
    return np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)


def undirected_weights(adj):
    """``A'``: ``adj`` symmetrised (max of both directions) without stored self-loops. Local, pure.

    The float64 CSR every model here starts from (:func:`normalized_adjacency`
    and :func:`neighbour_pattern` begin with it); sorted indices.
    """
    return without_self_loops(symmetrize(sp.csr_array(adj, dtype=np.float64)))


def gcn_degrees(adj, *, undirected=False):
    """The degrees ``D`` of GCN's ``A' + I`` (float64 row sums), as :func:`normalized_adjacency`. Local, pure.

    The only global quantity GCN's normalisation needs: with them, any rows of
    ``Â`` follow from those rows of ``A'`` alone (:func:`normalized_adjacency_rows`).
    ``undirected=True``: ``adj`` is ``A'`` already (:func:`undirected_weights`).
    """
    a = adj if undirected else undirected_weights(adj)
    a = a + sp.eye_array(a.shape[0], dtype=np.float64, format="csr")
    return np.asarray(a.sum(axis=1)).ravel()


def normalized_adjacency_rows(rows, row_ids, deg_rows, deg_cols, dtype=np.float32, *,
                              chunk=1 << 21):
    """Rows ``row_ids`` of :func:`normalized_adjacency`, from those rows of ``A'`` and degrees. Local, pure.

    Parameters
    ----------
    rows : scipy sparse, shape (r, n)
        Rows ``row_ids`` of ``A'`` (:func:`undirected_weights`) with global
        column ids: no diagonal entries, sorted indices.
    row_ids : int array (r,)
        Their global ids (where each row's ``I`` entry goes).
    deg_rows : float64 array (r,)
        :func:`gcn_degrees` of those rows.
    deg_cols : callable
        ``deg_cols(ids)``: the degrees of the global column ids ``ids``.
    dtype : numpy dtype
    chunk : int
        Entries handled per step (bounds the float64 temporaries).

    Returns
    -------
    scipy.sparse.csr_array (r, n) of ``dtype``: bit for bit those rows of
    ``normalized_adjacency(A, dtype)`` (same products in the same order,
    ``(d_i a_ij) d_j`` in float64, products equal to 0 dropped as the sparse
    product drops them, one rounding to ``dtype``).
    """
    rows = sp.csr_array(rows)
    if not rows.has_sorted_indices:
        rows = rows.sorted_indices()
    r, n = rows.shape
    row_ids = np.asarray(row_ids, dtype=np.int64)
    indptr = rows.indptr.astype(np.int64)
    counts = np.diff(indptr)
    d_row = _inverse_sqrt(np.asarray(deg_rows, dtype=np.float64))
    diag = d_row * _inverse_sqrt(np.asarray(deg_cols(row_ids), dtype=np.float64))
    # Each row gets its I entry merged in place: the output is written once, in
    # row chunks of about `chunk` entries, so the temporaries stay small however
    # large the block (no COO copy, no re-sort: issue 37's setup memory).
    idx_dtype = np.int32 if max(n, rows.nnz + r) < np.iinfo(np.int32).max else np.int64
    out_ind = np.empty(rows.nnz + r, dtype=idx_dtype)
    out_val = np.empty(rows.nnz + r, dtype=dtype)
    zero = None            # where a product is 0 (dropped, as the sparse product drops it)
    bounds = np.searchsorted(indptr, np.arange(0, rows.nnz + chunk, chunk), side="left")
    bounds = np.unique(np.concatenate([[0], np.minimum(bounds, r), [r]]))
    for i0, i1 in zip(bounds[:-1], bounds[1:]):
        e0, e1 = indptr[i0], indptr[i1]
        rr = np.repeat(np.arange(i0, i1), counts[i0:i1])
        cols = rows.indices[e0:e1]
        after = cols > row_ids[rr]              # entries right of the diagonal shift once more
        pos = np.arange(e0, e1) + rr + after
        v = (d_row[rr] * rows.data[e0:e1].astype(np.float64)) * _inverse_sqrt(
            np.asarray(deg_cols(cols), dtype=np.float64))
        out_ind[pos] = cols
        out_val[pos] = v.astype(dtype)
        dpos = indptr[i0:i1] + np.arange(i0, i1) + np.bincount(rr[~after] - i0,
                                                               minlength=i1 - i0)
        out_ind[dpos] = row_ids[i0:i1]
        out_val[dpos] = diag[i0:i1].astype(dtype)
        if not (v.all() and diag[i0:i1].all()):
            if zero is None:
                zero = np.zeros(rows.nnz + r, dtype=bool)
            zero[pos[v == 0]] = True
            zero[dpos[diag[i0:i1] == 0]] = True
    out_ptr = indptr + np.arange(r + 1)
    if zero is not None:
        out_ptr = np.concatenate([[0], np.cumsum(np.add.reduceat(~zero, out_ptr[:-1])
                                                 if r and out_ptr[-1] else np.zeros(r, int))])
        out_ind, out_val = out_ind[~zero], out_val[~zero]
    return sp.csr_array((out_val, out_ind, out_ptr.astype(idx_dtype)), shape=(r, n))


def neighbour_pattern(adj):
    """GraphSAGE's neighbour graph: the pattern of ``A'`` (symmetrised, no self-loops). Local, pure.

    GraphSAGE aggregates over neighbours and keeps the root term separate
    (Hamilton, Ying, Leskovec, *Inductive Representation Learning on Large
    Graphs*, NeurIPS 2017), so stored self-loops are dropped; an undirected
    model on a directed file uses ``A ∪ Aᵀ``.  Weights are dropped too: the
    samplers and :func:`mean_adjacency` see an unweighted graph.

    Returns
    -------
    scipy.sparse.csr_array of float64 ones, symmetric, sorted indices, no
    explicit zeros.
    """
    out = without_self_loops(symmetrize(sp.csr_array(adj, dtype=np.float64)))
    out.eliminate_zeros()
    out.data[:] = 1.0
    return out


def mean_adjacency(pattern, dtype=np.float32):
    """The mean aggregator ``D^-1 S`` of a pattern ``S``. Local, pure.

    Row ``i`` holds ``1 / deg(i)`` at each of its entries, ``deg(i)`` being
    the number of stored entries of row ``i`` (the values of ``pattern`` are
    ignored, so pass a canonical pattern such as :func:`neighbour_pattern`
    returns).  An empty row stays empty.  ``1 / deg`` is computed in float64
    and rounded once to ``dtype``; this is GraphSAGE's mean aggregator over
    all neighbours.

    Returns
    -------
    scipy.sparse.csr_array of ``dtype`` with ``pattern``'s structure (new
    index arrays).
    """
    a = sp.csr_array(pattern)
    deg = np.diff(a.indptr)
    inv = 1.0 / np.maximum(deg, 1)
    out = sp.csr_array((np.repeat(inv, deg), a.indices.copy(), a.indptr.copy()), shape=a.shape)
    return out.astype(dtype)


def symmetric_pattern(adj):
    """The pattern of ``A + Aᵀ`` without the diagonal. Local, pure.

    METIS's input and the graph whose edge cut the partitioners report.
    Unlike :func:`neighbour_pattern` the two directions are *added*: a pair
    whose weights cancel (``a_uv = -a_vu``) is no edge, while a pair with
    only negative weights is one.  The two agree on every graph with
    non-negative weights.

    Returns
    -------
    scipy.sparse.csr_array of int8 ones, symmetric, sorted indices.
    """
    S = (adj + adj.T).tocsr()
    S.setdiag(0)
    S.eliminate_zeros()
    S.sort_indices()
    S.data = np.ones(S.nnz, dtype=np.int8)
    return S


def feature_form(x):
    """``"csr"`` or ``"dense"``: how :func:`row_normalize_features` computes on ``x``. Local, pure.

    Sparse input, and dense input with at most :data:`SPARSE_DENSITY` of its
    entries non-zero, are ``"csr"``.
    """
    if sp.issparse(x):
        return "csr"
    x = np.asarray(x)
    return "csr" if x.size and np.count_nonzero(x) <= SPARSE_DENSITY * x.size else "dense"


def offdiagonal_pattern(adj):
    """The stored entries of ``adj`` off the diagonal, as float32 ones. Local, pure.

    What :class:`spgnn.gnn.DistGraph` partitions (the pattern of ``Â`` without
    its ``I``), and so what ``spgnn partition`` partitions before writing shards:
    the two orders are the same for the same method and seed.
    """
    coo = sp.coo_array(adj)
    off = coo.row != coo.col
    return sp.csr_array((np.ones(int(off.sum()), dtype=np.float32), (coo.row[off], coo.col[off])),
                        shape=adj.shape)


def row_normalize_features(x, dtype=np.float32, *, form=None):
    """Each feature row divided by the sum of its absolute values (L1); a zero row stays 0. Local, pure.

    For non-negative features (bags of words: Planetoid, MUSAE) the divisor is
    the row sum, as in Kipf & Welling's preprocessing, and the result is bit
    for bit what dividing by the plain sum gives (``|v| = v`` term by term, the
    same additions in the same order).  For signed features (the ``sbm:``
    generator's Gaussians, projections) the plain sum can be near 0 and the
    quotients explode (rows of ~900 on ``sbm:2000:4``, where GCN then reached
    81.5 % although the raw features separate the classes); the L1 norm is
    never smaller than any entry, so every result lies in [-1, 1] and keeps
    the signs.  The rule is per row and uses that row only, so any rows of the
    result are those rows normalised alone (shards agree with the whole graph).

    Parameters
    ----------
    x : ndarray or scipy sparse, shape (n, d)
        Sparse input, and dense input with at most :data:`SPARSE_DENSITY` of
        its entries non-zero, are normalised in CSR form (no dense float64
        temporary); other dense input densely.
    dtype : numpy dtype
        Of the result.  Sums and quotients are float64, rounded once to
        ``dtype``; ``float64`` keeps them exact (for a projection that follows).
    form : {None, "csr", "dense"}
        Force the CSR or the dense computation (``None``: chosen as above).
        A reader of some rows passes the form the whole matrix would take
        (:func:`feature_form`), so that its rows are those of the whole.

    Returns
    -------
    ndarray (n, d) of ``dtype``, new.

    Notes
    -----
    The row norms run over the stored entries in CSR form and over the whole
    row (numpy's pairwise sum) in dense form.  The two orders give the same
    float64 sum whenever every partial sum is exact: always for
    integer-valued features (the bags of words of Planetoid and MUSAE), and
    for float32 features (what a :class:`~spgnn.io.Graph` stores) unless a
    row's values span more than about ``2**29 / nnz`` in magnitude.  So
    densifying first would change at most such rows' last bits.
    """
    if form not in (None, "csr", "dense"):
        raise ValueError(f"row_normalize_features: form must be None, 'csr' or 'dense', but got "
                         f"{form!r}")
    if form is None:
        form = feature_form(x)
    if form == "csr" and not sp.issparse(x):
        x = sp.csr_array(np.asarray(x))
    elif form == "dense" and sp.issparse(x):
        x = sp.csr_array(x, dtype=np.float64)
        x.sum_duplicates()
        x = x.toarray()
    if sp.issparse(x):
        x = sp.csr_array(x, dtype=np.float64, copy=True)   # sum_duplicates works in place
        x.sum_duplicates()
        s = np.repeat(np.asarray(abs(x).sum(axis=1)).ravel(), np.diff(x.indptr))
        # x / s, entry by entry, exactly as the dense branch computes it
        x.data = np.where(s != 0, x.data / np.where(s != 0, s, 1.0), 0.0)
        return x.astype(dtype).toarray()
    x = x.astype(np.float64)
    s = np.abs(x).sum(axis=1, keepdims=True)
    x = np.where(s != 0, x / np.where(s != 0, s, 1.0), 0.0)
    return x.astype(dtype, copy=False)


def random_projection(x, dim, seed=0):
    """``x · R`` with ``R`` (d x dim) standard Gaussian / sqrt(dim). Local, pure.

    Optional preprocessing for wide bag-of-words features (musae_facebook:
    4714 columns), so that fetching rows and the first layer stay cheap.  A
    Johnson-Lindenstrauss projection: it preserves the rows' inner products in
    expectation.  ``R`` is drawn from ``default_rng([seed, 7])``: it depends
    on ``seed``, ``d`` and ``dim`` only, so every rank draws the same one.

    Returns
    -------
    ndarray (n, dim) float64.
    """
    r = np.random.default_rng([int(seed), 7]).normal(size=(x.shape[1], int(dim)))
    r /= np.sqrt(dim)
    return np.asarray(x @ r, dtype=np.float64)
