"""Fetch arbitrary rows of a row-distributed dense matrix: sparsity-aware, de-duplicated.

``gather_rows(X, ids)`` returns the global rows ``X[ids]`` on the calling
rank, for ids that differ from rank to rank (a minibatch's input vertices,
a halo).  Each rank sends every owner the distinct ids it needs from it and
receives exactly those rows, so the volume is the number of distinct remote
rows, never the whole matrix (the dynamic counterpart of the precomputed
:class:`~spgnn.core.spmm.ExchangePlan` of the 1D sparsity-aware SpMM).

Which rank owns a row
---------------------
``X``'s layout must split rows only (``Layout(rows=..., cols=None)``, no
partial sums).  Rows are fetched within the calling rank's group along the
row axes, ``grid.comm(*layout.rows)``: on a ``P/c × c`` grid with
``Layout("row")`` the ``c`` replicas each serve their own group, as in the
1.5D algorithms; with ``Layout()`` (replicated) nothing moves.
"""

import numpy as np

from ..errors import DimensionMismatch, DTypeError, InvalidSparseStructure, LayoutMismatch

__all__ = ["gather_rows", "row_owner_table"]


def row_owner_table(x):
    """``(offsets, block_of)`` for ``x``'s row blocks within a row-axis group. Local, pure.

    ``offsets`` are the ``parts + 1`` row-block boundaries; ``block_of[s]`` is
    the block held by rank ``s`` of ``x.grid.comm(*x.layout.rows)``.  That
    communicator orders ranks row-major over the axes in *grid* order, while
    the layout numbers blocks row-major in the order of ``layout.rows``; the
    table reconciles the two.
    """
    grid, layout = x.grid, x.layout
    offsets = np.asarray(layout.offsets(grid, x.shape[0], 0), dtype=np.int64)
    axes = [a for a in grid.axis_names if a in layout.rows]            # comm order
    sizes = [grid.axis_size(a) for a in axes]
    block_of = np.empty(int(np.prod(sizes, dtype=np.int64)), dtype=np.int64)
    for s in range(block_of.size):
        coord = dict(zip(axes, np.unravel_index(s, sizes) if sizes else ()))
        b = 0
        for a in layout.rows:                                         # layout order
            b = b * grid.axis_size(a) + int(coord[a])
        block_of[s] = b
    return offsets, block_of


def gather_rows(x, global_ids, *, validate=True, label="gather-rows"):
    """Rows ``global_ids`` of the global matrix ``x`` (any order, repeats), in request order.

    Collective over ``x.grid``: every rank calls it, possibly with no ids.

    Parameters
    ----------
    x : DistDenseMatrix
        Rows split over some grid axes, columns not split, no partial sums.
    global_ids : 1-D int array
    validate : bool
        Check ``0 <= id < n`` on every rank together (one small allreduce
        through :meth:`Communicator.agree`).  Skip it
        for ids valid by construction (sampler output).
    label : str
        Ledger label prefix: ``<label>:ids`` and ``<label>:rows``.

    Returns
    -------
    numpy array ``(len(global_ids), x.shape[1])`` of ``x.dtype``.

    Notes
    -----
    The ids are de-duplicated; each owner gets the distinct ids it owns (an
    alltoall of counts, then one alltoallv of int64 ids) and answers with
    exactly those rows (one alltoallv); own rows are copied locally.  Ledger
    per rank, under ``<label>:ids``: ``8·(G-1)`` bytes of counts each way
    (``G`` the group size) and ``8·|distinct remote ids|`` bytes sent; under
    ``<label>:rows``: ``|distinct remote ids| · row bytes`` received.  No
    large-message agreement round: no exchange can exceed ``n·f`` elements,
    which every rank knows.

    Raises
    ------
    LayoutMismatch
        Columns split or partial sums pending (every rank: layouts are global).
    DimensionMismatch, DTypeError
        ``global_ids`` not 1-D or not integers (this rank's own input).
    InvalidSparseStructure
        An id outside ``[0, n)`` on any rank, raised on every rank (``validate``).
    """
    layout = x.layout
    if layout.cols or layout.partial:
        raise LayoutMismatch(f"gather_rows: needs a layout that splits rows only, but got "
                             f"{layout!r}")
    ids = np.asarray(global_ids)
    if ids.ndim != 1:
        raise DimensionMismatch(f"gather_rows: ids must be 1-D, but got shape {ids.shape}")
    if ids.dtype.kind not in "iu" and ids.size:
        raise DTypeError(f"gather_rows: ids must be integers, but got {ids.dtype}")
    ids = ids.astype(np.int64, copy=False)
    n, f = x.shape
    local = np.asarray(x.backend.to_host(x.local))
    if validate:
        err = None
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            err = InvalidSparseStructure(f"gather_rows: ids must lie in [0, {n}), but got "
                                         f"range [{ids.min()}, {ids.max()}]")
        x.grid.world.agree(err)                              # local data: raise together
    if not layout.rows:                                      # replicated: all rows are here
        return np.ascontiguousarray(local[ids])
    comm = x.grid.comm(*layout.rows)
    offsets, block_of = row_owner_table(x)
    rank_of = np.empty_like(block_of)
    rank_of[block_of] = np.arange(block_of.size)
    me, p = comm.rank, comm.size
    start = offsets[block_of[me]]

    uniq, inv = np.unique(ids, return_inverse=True)
    owner = rank_of[np.searchsorted(offsets, uniq, side="right") - 1]
    remote = owner != me
    order = np.argsort(owner[remote], kind="stable")          # group requests by owner rank
    r_ids = uniq[remote][order]
    req = np.bincount(owner[remote], minlength=p).astype(np.int64)
    split = False if n * max(f, 1) <= comm.max_count else None
    asked_counts = comm.alltoall(req, label=f"{label}:ids").astype(np.int64)
    asked = comm.alltoallv(r_ids, req, asked_counts, label=f"{label}:ids", split=split)
    rows = local[asked - start] if asked.size else np.empty((0, f), dtype=local.dtype)
    got = comm.alltoallv(np.ascontiguousarray(rows), asked_counts, req, label=f"{label}:rows",
                         split=split)
    table = np.empty((uniq.size, f), dtype=local.dtype)
    remote_pos = np.flatnonzero(remote)[order]
    table[remote_pos] = got
    mine = ~remote
    table[mine] = local[uniq[mine] - start]
    return table[inv.reshape(-1)]
