"""Helpers shared by the distributed matrix types: placement arithmetic and checks.

Placement arithmetic is pure (works on an AbstractGrid) so that planners can
evaluate any layout change without running that many ranks.
"""

import zlib

import numpy as np

from ..errors import (BackendMismatch, DimensionMismatch, DTypeError, GridError, GridMismatch,
                      LayoutMismatch, RankMismatch)
from ..grid import ProcessGrid
from ..layout import Layout

__all__ = ["as_layout", "check_shape", "transfer_rects", "same_grid", "replica_groups_key"]


def as_layout(layout) -> Layout:
    if isinstance(layout, Layout):
        return layout
    if isinstance(layout, (str, tuple)) or layout is None:
        return Layout(layout)
    raise LayoutMismatch(f"expected a Layout, but got {type(layout).__name__}")


def check_shape(shape, what="shape") -> tuple:
    try:
        shape = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise DimensionMismatch(f"{what} must be a pair of ints, but got {shape!r}") from None
    if len(shape) != 2 or min(shape) < 0:
        raise DimensionMismatch(f"{what} must be two non-negative ints, but got {shape!r}")
    return shape


def same_grid(op, *mats):
    g = mats[0].grid
    for m in mats[1:]:
        if m.grid is not g:
            if m.grid == g:
                raise GridMismatch(f"{op}: operands live on different ProcessGrid objects of the same "
                                   f"shape {g.shape}; build them on one grid")
            raise GridMismatch(f"{op}: operands live on different grids, {g!r} and {m.grid!r}")
    return g


def _intersect(a, b):
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo < hi else None


def source_rank(grid, src_layout, shape, dst_coords, row_block, col_block):
    """The replica of source block ``(row_block, col_block)`` that serves ``dst_coords``.

    A block is held by every rank whose coordinates along ``src_layout``'s
    row/col axes select it; among those replicas we pick the one whose other
    coordinates equal the destination's, so that each piece is sent exactly
    once and a replica never sends to a rank that is already its replica.
    """
    coords = list(dst_coords)
    for axes, block in ((src_layout.rows, row_block), (src_layout.cols, col_block)):
        for axis in reversed(axes):
            k = grid.axis_names.index(axis)
            block, coords[k] = divmod(block, grid.shape[k])
    return grid.rank_of(coords)


def transfer_rects(grid, shape, src_layout, dst_layout):
    """``{(src, dst): ((r0, r1), (c0, c1))}``: the global rectangles to move.

    Pure; O(P * blocks) work.  Pieces a rank already holds are included with
    ``src == dst`` (copied locally, never sent).
    """
    rects = {}
    src_roff = src_layout.offsets(grid, shape[0], 0)
    src_coff = src_layout.offsets(grid, shape[1], 1)
    for dst, coords in grid.ranks():
        (r0, r1), (c0, c1) = dst_layout.bounds(grid, shape, coords)
        for i in range(len(src_roff) - 1):
            rows = _intersect((r0, r1), (src_roff[i], src_roff[i + 1]))
            if rows is None:
                continue
            for j in range(len(src_coff) - 1):
                cols = _intersect((c0, c1), (src_coff[j], src_coff[j + 1]))
                if cols is None:
                    continue
                rects[(source_rank(grid, src_layout, shape, coords, i, j), dst)] = (rows, cols)
    return rects


def replica_groups_key(grid, layout):
    """Axes spanning one full copy of a matrix (its row and column axes, grid order)."""
    used = set(layout.rows) | set(layout.cols)
    return tuple(a for a in grid.axis_names if a in used)


def check_grid(op, grid):
    if not isinstance(grid, ProcessGrid):
        raise GridError(f"{op}: expected a ProcessGrid, but got {type(grid).__name__}")


def dense_dtype(x, op):
    dt = np.dtype(x.dtype)
    if dt.kind not in "fiub":
        raise DTypeError(f"{op}: expected a numeric array, but got dtype {dt}")
    return dt


def primary_owners(grid, layout):
    """Ranks holding one full copy: coordinate 0 on every axis the layout does not split.

    Sorted by rank; the blocks they hold tile the matrix exactly once.
    """
    used = set(layout.rows) | set(layout.cols)
    return [r for r, coords in grid.ranks()
            if all(c == 0 for a, c in zip(grid.axis_names, coords) if a not in used)]


def check_product(op, names, left, right, signature):
    """Checks every rank can make for ``left @ right``: same grid, inner dimension, backend.

    ``names`` are the operands' names in messages, ``signature`` e.g.
    ``"(n,k),(k,f)->(n,f)"``.  Local; raises GridMismatch, DimensionMismatch
    or BackendMismatch.
    """
    a, b = names
    same_grid(op, left, right)
    if left.shape[1] != right.shape[0]:
        raise DimensionMismatch(f"{op}: dimension mismatch with signature {signature}: "
                                f"{a}.shape={left.shape}, {b}.shape={right.shape}")
    if left.backend.name != right.backend.name:
        raise BackendMismatch(f"{op}: {a} uses backend {left.backend.name!r} but {b} uses "
                              f"{right.backend.name!r}; convert one explicitly")


def fingerprint(*arrays):
    """A cheap identity of arrays: shapes, dtypes and a CRC-32 of their bytes. Local.

    One pass at memory speed (``zlib.crc32``); equal arrays give equal
    fingerprints on every machine, different ones almost surely differ.
    """
    out = []
    for a in arrays:
        a = np.ascontiguousarray(a)
        out.append((a.shape, a.dtype.str, zlib.crc32(a.view(np.uint8).reshape(-1))))
    return tuple(out)


def same_on_every_rank(comm, value, what, noun):
    """Raise :class:`RankMismatch` on every rank unless every rank of ``comm`` passed an equal ``value``.

    Collective: one small all-gather (label ``check:same``).  Every rank sees
    the same gathered list, so every rank decides alike.
    """
    values = comm.allgather_obj(value, label="check:same")
    bad = [r for r, v in enumerate(values) if v != values[0]]
    if bad:
        comm.raise_together(RankMismatch(
            f"{what}: every rank must pass the same {noun}, but rank {bad[0]} differs from "
            f"rank 0 ({values[bad[0]]!r} vs {values[0]!r})"))
