"""One sampled block prepared for the mean aggregator: :class:`BlockOperator`.

A :class:`~spgnn.sampling.SampledBlock` (rows = destination vertices,
columns = source vertices) becomes the row-normalised operator
``M = D⁻¹·pattern(block)`` (every sampled edge weighs ``1/deg``; the graph's
edge values are ignored, as the mean aggregator does) and the position of
each destination among the columns (the root term).  The root term needs
each destination vertex among the block's columns: the ``"unique"``
GraphSAGE frontier and LADIES with ``include_batch=True`` put the rows first
in each minibatch's columns; ``frontier="tree"`` needs ``include_dst=True``.
:class:`BlockOperator` finds those positions once per block and raises
``ValueError`` otherwise.  Everything here is local.
"""

import numpy as np

from ..backends import get_backend
from ..local.csr import LocalCSR
from ..local.semiring import plus_times

__all__ = ["BlockOperator"]


class BlockOperator:
    """The mean-aggregation operator of one sampled block. Local.

    Parameters
    ----------
    block : SampledBlock
        Rows = destination vertices, columns = source vertices.
    dtype : numpy float dtype of the features it will multiply
    backend : backend name or instance (default: the configured default)

    Attributes
    ----------
    mean : LocalCSR (R x C)
        ``D⁻¹·pattern(block.adj)``: entry ``1/deg(r)`` for every sampled edge.
    self_index : int64 array (R,)
        Column holding row ``r``'s own vertex (the root term).
    num_dst, num_src : int
    """

    def __init__(self, block, dtype=np.float64, backend=None):
        self.backend = get_backend(backend)
        self.dtype = np.dtype(dtype)
        adj = block.adj
        R, C = adj.shape
        self.num_dst, self.num_src = int(R), int(C)
        indptr = np.asarray(adj.indptr, dtype=np.int64)
        deg = np.diff(indptr)
        # 1/deg repeated per edge; rows of degree 0 have no entry to divide
        inv = 1.0 / np.maximum(deg, 1).astype(np.float64)
        data = np.repeat(inv, deg).astype(self.dtype)
        self.mean = LocalCSR(indptr, np.asarray(adj.indices, dtype=np.int64), data, (R, C),
                             check=None)
        self._mean_t = None
        self.self_index = _self_index(block)

    @property
    def mean_t(self) -> LocalCSR:
        """``Mᵀ`` (built on first use: the backward pass only)."""
        if self._mean_t is None:
            self._mean_t = self.backend.transpose(self.mean)
        return self._mean_t

    def aggregate(self, h_src):
        """``M·h_src``: the mean over each row's sampled neighbours (0 for none). Local."""
        return self.backend.spmm(self.mean, h_src, plus_times)

    def aggregate_t(self, d_agg):
        """``Mᵀ·d_agg``: the backward of :meth:`aggregate`. Local."""
        return self.backend.spmm(self.mean_t, d_agg, plus_times)


def _self_index(block):
    """Column of each row's own vertex inside its minibatch's columns.

    Positional first (``frontier="unique"``, tree with ``include_dst``, LADIES
    with ``include_batch`` put minibatch ``i``'s rows at the front of its
    columns, in order) -- in tree mode a vertex may appear in several columns
    with different subtrees, so the position, not the id, is what identifies
    the row's own copy.  Otherwise (LADIES whose batch repeats a vertex) the
    first column of the same minibatch with the same vertex id.
    """
    row_ptr = np.asarray(block.row_ptr, dtype=np.int64)
    col_ptr = np.asarray(block.col_ptr, dtype=np.int64)
    R = block.dst_ids.size
    k = row_ptr.size - 1
    row_mb = np.repeat(np.arange(k, dtype=np.int64), np.diff(row_ptr))
    pos = col_ptr[row_mb] + (np.arange(R, dtype=np.int64) - row_ptr[row_mb])
    ok = pos < col_ptr[row_mb + 1] if R else np.zeros(0, dtype=bool)
    if R == 0 or (ok.all() and np.array_equal(block.src_ids[pos], block.dst_ids)):
        return pos
    C = block.src_ids.size
    col_mb = np.repeat(np.arange(k, dtype=np.int64), np.diff(col_ptr))
    span = np.int64(max(int(block.src_ids.max(initial=0)), int(block.dst_ids.max(initial=0))) + 1)
    ckeys = col_mb * span + block.src_ids
    order = np.argsort(ckeys, kind="stable")       # stable: the first column of a vertex wins
    skeys = ckeys[order]
    rkeys = row_mb * span + block.dst_ids
    at = np.searchsorted(skeys, rkeys)
    atc = np.minimum(at, max(C - 1, 0))
    found = (at < C) & (skeys[atc] == rkeys) if C else np.zeros(R, dtype=bool)
    if not found.all():
        raise ValueError("SAGEConv: some destination vertices are not among their block's "
                         "columns (the root term needs them): sample with "
                         "GraphSAGESampler(frontier='unique'), frontier='tree' with "
                         "include_dst=True, or LADIESSampler(include_batch=True)")
    return order[atc].astype(np.int64)
