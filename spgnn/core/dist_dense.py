"""``DistDenseMatrix``: a local dense block plus global metadata.

Constructors and operations are collective over the grid; properties are
local and never communicate.
"""

import numpy as np

from ..backends import get_backend
from ..errors import DimensionMismatch, LayoutMismatch
from ..layout import Layout
from ._dist_common import (as_layout, check_grid, check_shape, dense_dtype, fingerprint,
                           primary_owners, same_on_every_rank, transfer_rects)
from .row_gather import gather_rows

__all__ = ["DistDenseMatrix"]


class DistDenseMatrix:
    """A dense matrix placed on a :class:`~spgnn.grid.ProcessGrid` by a :class:`Layout`.

    Attributes (local, free)
    ------------------------
    shape : global shape; ``local`` : this rank's block (a backend array);
    ``layout``, ``grid``, ``row_start``/``col_start``, ``local_shape``,
    ``dtype``, ``backend``, ``partial_op`` (the monoid name that reduces
    pending partial sums, when ``layout.partial`` is not empty).
    """

    def __init__(self, local, shape, grid, layout, *, backend=None, partial_op="plus", _checked=False):
        check_grid("DistDenseMatrix", grid)
        self.grid = grid
        self.layout = as_layout(layout)
        self.shape = check_shape(shape)
        self.layout.check(grid, self.shape)
        self.backend = get_backend(backend)
        self.partial_op = partial_op
        (self.row_start, r1), (self.col_start, c1) = self.layout.bounds(grid, self.shape)
        self.local = local
        if not _checked:
            want = (r1 - self.row_start, c1 - self.col_start)
            if getattr(local, "ndim", None) != 2 or tuple(local.shape) != want:
                raise DimensionMismatch(
                    f"DistDenseMatrix: rank {grid.rank} at coords {grid.coords} must hold a block of "
                    f"shape {want} under {self.layout!r}, but got "
                    f"{getattr(local, 'shape', type(local).__name__)}")

    # -- properties ------------------------------------------------------------
    @property
    def local_shape(self):
        return tuple(self.local.shape)

    @property
    def dtype(self):
        return self.local.dtype

    def __repr__(self):
        return (f"DistDenseMatrix(shape={self.shape}, dtype={self.dtype}, {self.layout!r}, "
                f"grid={self.grid!r}, local_shape={self.local_shape})")

    # -- construction (collective) -------------------------------------------------
    @classmethod
    def from_global(cls, x, grid, layout=Layout("row"), *, backend=None, root=None,
                    check_same=True):
        """Place a global array.

        Collective.  With ``root=None`` every rank passes the same ``x`` and
        slices its block; ``check_same`` (default) first compares a
        fingerprint of every rank's ``x`` (one pass, one small all-gather)
        and raises :class:`~spgnn.errors.RankMismatch` on every rank if one
        differs; ``check_same=False`` skips it (then nothing is communicated).
        With ``root=r`` only rank ``r`` needs ``x`` (others may pass
        ``None``); blocks are scattered through one alltoallv.

        Examples
        --------
        >>> import numpy as np
        >>> from spgnn import DistDenseMatrix, grid_1d
        >>> from spgnn.comm import solo_communicator
        >>> X = DistDenseMatrix.from_global(np.eye(3, 2, dtype=np.float32),
        ...                                 grid_1d(solo_communicator()))
        >>> X.shape, X.local.shape
        ((3, 2), (3, 2))
        """
        check_grid("DistDenseMatrix.from_global", grid)
        layout = as_layout(layout)
        comm = grid.world
        if root is None:
            x = np.asarray(x)
            if x.ndim != 2:
                raise DimensionMismatch(f"DistDenseMatrix.from_global: expected a 2-D array, "
                                        f"but got ndim={x.ndim}")
            dense_dtype(x, "DistDenseMatrix.from_global")
            if check_same and comm.size > 1:
                same_on_every_rank(comm, fingerprint(x), "DistDenseMatrix.from_global(root=None)",
                                   "array")
            layout.check(grid, x.shape)
            (r0, r1), (c0, c1) = layout.bounds(grid, x.shape)
            be = get_backend(backend)
            return cls(be.from_host(np.ascontiguousarray(x[r0:r1, c0:c1])), x.shape, grid, layout,
                       backend=be)
        meta = None
        if comm.rank == root:
            x = np.asarray(x)
            meta = (x.shape, x.dtype.str) if x.ndim == 2 else ("bad", x.ndim)
        meta = comm.bcast_obj(meta, root=root, label="from_global:meta")
        if meta[0] == "bad":
            raise DimensionMismatch(f"DistDenseMatrix.from_global: expected a 2-D array on root "
                                    f"{root}, but got ndim={meta[1]}")
        shape, dtype = tuple(meta[0]), np.dtype(meta[1])
        layout.check(grid, shape)
        sendparts, sendcounts = [], np.zeros(comm.size, dtype=np.int64)
        if comm.rank == root:
            for dst in range(comm.size):
                (r0, r1), (c0, c1) = layout.bounds(grid, shape, grid.coords_of(dst))
                block = np.ascontiguousarray(x[r0:r1, c0:c1], dtype=dtype).ravel()
                sendparts.append(block)
                sendcounts[dst] = block.size
        recvcounts = np.zeros(comm.size, dtype=np.int64)
        (r0, r1), (c0, c1) = layout.bounds(grid, shape)
        recvcounts[root] = (r1 - r0) * (c1 - c0)
        sendbuf = np.concatenate(sendparts) if sendparts else np.zeros(0, dtype=dtype)
        got = comm.alltoallv(sendbuf, sendcounts, recvcounts, label="from_global:scatter")
        be = get_backend(backend)
        return cls(be.from_host(got.reshape(r1 - r0, c1 - c0)), shape, grid, layout, backend=be)

    @classmethod
    def from_local(cls, local, shape, grid, layout=Layout("row"), *, backend=None):
        """Wrap blocks each rank already holds.

        Collective: ranks agree on whether every block has the shape the
        layout demands, so a wrong block on one rank raises on all ranks.
        """
        check_grid("DistDenseMatrix.from_local", grid)
        err = None
        try:
            out = cls(local, shape, grid, layout, backend=backend)
        except (ValueError, TypeError) as exc:
            err, out = exc, None
        grid.world.agree(err)
        same_on_every_rank(grid.world, (check_shape(shape), as_layout(layout)),
                           "DistDenseMatrix.from_local", "global shape and layout")
        return out

    @classmethod
    def zeros(cls, shape, grid, layout=Layout("row"), dtype=np.float64, *, backend=None):
        """A zero matrix (no communication)."""
        shape = check_shape(shape)
        layout = as_layout(layout).check(grid, shape)
        (r0, r1), (c0, c1) = layout.bounds(grid, shape)
        be = get_backend(backend)
        return cls(be.xp.zeros((r1 - r0, c1 - c0), dtype=dtype), shape, grid, layout, backend=be)

    def like(self, local, layout=None, shape=None) -> "DistDenseMatrix":
        """A matrix on the same grid and backend with another local block (local)."""
        return DistDenseMatrix(local, shape or self.shape, self.grid, layout or self.layout,
                               backend=self.backend)

    # -- collective operations -------------------------------------------------------
    def reduce_partial(self, axes=None) -> "DistDenseMatrix":
        """Combine pending partial sums along ``axes`` (default: all partial axes).

        Collective over those axes: one allreduce with ``partial_op``.
        """
        axes = tuple(sorted(self.layout.partial)) if axes is None else tuple(axes)
        bad = [a for a in axes if a not in self.layout.partial]
        if bad:
            raise LayoutMismatch(f"reduce_partial: axes {bad} are not partial in {self.layout!r}")
        if not axes:
            return self
        comm = self.grid.comm(*axes)
        # a device block stays on the device: the communicator moves it
        summed = comm.allreduce(self.backend.xp.ascontiguousarray(self.local), op=self.partial_op,
                                label="reduce_partial")
        layout = self.layout.replace(partial=self.layout.partial - set(axes))
        return DistDenseMatrix(summed, self.shape, self.grid, layout, backend=self.backend)

    def redistribute(self, layout) -> "DistDenseMatrix":
        """Move to another layout. Collective: one alltoallv (pending sums are reduced first)."""
        layout = as_layout(layout).check(self.grid, self.shape)
        if layout.partial:
            raise LayoutMismatch(f"redistribute: target layout must not be partial, but got {layout!r}")
        src = self.reduce_partial() if self.layout.partial else self
        if layout == src.layout:
            return src
        grid, comm = self.grid, self.grid.world
        rects = transfer_rects(grid.abstract(), self.shape, src.layout, layout)
        host = np.ascontiguousarray(self.backend.to_host(src.local))
        me = comm.rank
        (r0, r1), (c0, c1) = layout.bounds(grid, self.shape)
        out = np.empty((r1 - r0, c1 - c0), dtype=host.dtype)
        sendparts, sendcounts = [], np.zeros(comm.size, dtype=np.int64)
        recvcounts = np.zeros(comm.size, dtype=np.int64)
        for (s, d), ((a0, a1), (b0, b1)) in sorted(rects.items(), key=lambda kv: kv[0][1]):
            if s == me:
                piece = host[a0 - src.row_start:a1 - src.row_start, b0 - src.col_start:b1 - src.col_start]
                if d == me:
                    out[a0 - r0:a1 - r0, b0 - c0:b1 - c0] = piece
                else:
                    sendparts.append(np.ascontiguousarray(piece).ravel())
                    sendcounts[d] += piece.size
            elif d == me:
                recvcounts[s] += (a1 - a0) * (b1 - b0)
        sendbuf = np.concatenate(sendparts) if sendparts else np.zeros(0, dtype=host.dtype)
        got = comm.alltoallv(sendbuf, sendcounts, recvcounts, label="redistribute")
        pos = 0
        for s in range(comm.size):
            rect = rects.get((s, me))
            if rect is None or s == me:
                continue
            (a0, a1), (b0, b1) = rect
            n = (a1 - a0) * (b1 - b0)
            out[a0 - r0:a1 - r0, b0 - c0:b1 - c0] = got[pos:pos + n].reshape(a1 - a0, b1 - b0)
            pos += n
        return DistDenseMatrix(self.backend.from_host(out), self.shape, self.grid, layout,
                               backend=self.backend)

    def gather_rows(self, global_ids, *, validate=True, label="gather-rows"):
        """Global rows ``global_ids`` on this rank, fetched sparsity-aware. Collective.

        See :func:`spgnn.core.row_gather.gather_rows` (layouts, ledger, errors).
        """
        return gather_rows(self, global_ids, validate=validate, label=label)

    def to_global(self, root=None):
        """Gather the whole matrix. Collective.

        Returns the global numpy array on every rank (``root=None``, one
        redistribution to the replicated layout) or on ``root`` only (one
        alltoallv into root; others get ``None``).
        """
        if root is None:
            full = self.redistribute(Layout())
            return np.asarray(self.backend.to_host(full.local))
        src = self.reduce_partial() if self.layout.partial else self
        grid, comm = self.grid, self.grid.world
        host = np.ascontiguousarray(self.backend.to_host(src.local))
        owners = primary_owners(grid, src.layout)
        sendcounts = np.zeros(comm.size, dtype=np.int64)
        recvcounts = np.zeros(comm.size, dtype=np.int64)
        if comm.rank in owners:
            sendcounts[root] = host.size
        if comm.rank == root:
            for r in owners:
                (a0, a1), (b0, b1) = src.layout.bounds(grid, self.shape, grid.coords_of(r))
                recvcounts[r] = (a1 - a0) * (b1 - b0)
        got = comm.alltoallv(host.ravel() if comm.rank in owners else host.ravel()[:0],
                             sendcounts, recvcounts, label="to_global:gather")
        if comm.rank != root:
            return None
        out = np.empty(self.shape, dtype=host.dtype)
        pos = 0
        for r in owners:
            (a0, a1), (b0, b1) = src.layout.bounds(grid, self.shape, grid.coords_of(r))
            n = (a1 - a0) * (b1 - b0)
            out[a0:a1, b0:b1] = got[pos:pos + n].reshape(a1 - a0, b1 - b0)
            pos += n
        return out
