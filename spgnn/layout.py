"""Layouts: how a 2-D matrix is placed on a process grid.  Pure: no MPI.

A :class:`Layout` is a PartitionSpec for matrices (JAX's model): which grid
axes split the rows, which split the columns, the remaining axes hold
replicas, and ``partial`` axes hold pending partial sums that a reduction
along them will combine.  Block ``i`` of ``parts`` is
:func:`block_bounds` unless the layout carries explicit split offsets
(e.g. from a graph partitioner).

Example: on a ``("row", "col", "layer")`` grid, ``Layout("row", "col",
partial={"layer"})`` is a 2-D block layout whose blocks are partial sums over
the ``layer`` axis, the output of a 3-D SpMM before its reduction.
"""

from dataclasses import dataclass

from .errors import LayoutMismatch

__all__ = ["Layout", "block_bounds", "block_sizes", "block_offsets", "row_chunk_offsets", "ROW_1D",
           "REPLICATED"]


def block_bounds(n: int, parts: int, index: int) -> tuple:
    """``(start, stop)`` of block ``index`` when ``n`` items are split into ``parts``.

    The first ``n % parts`` blocks get one extra item, so sizes differ by at
    most one and blocks may be empty when ``n < parts``.
    """
    if parts <= 0:
        raise ValueError(f"block_bounds: parts must be positive, but got {parts}")
    if not 0 <= index < parts:
        raise ValueError(f"block_bounds: index must lie in [0, {parts}), but got {index}")
    q, r = divmod(int(n), parts)
    start = index * q + min(index, r)
    return start, start + q + (1 if index < r else 0)


def block_offsets(n: int, parts: int) -> tuple:
    """All ``parts + 1`` block boundaries of :func:`block_bounds`."""
    return tuple(block_bounds(n, parts, i)[0] for i in range(parts)) + (int(n),)


def block_sizes(n: int, parts: int) -> tuple:
    """The ``parts`` block lengths of :func:`block_bounds` (the first ``n % parts`` one longer).

    Examples
    --------
    >>> from spgnn.layout import block_sizes
    >>> block_sizes(10, 4)
    (3, 3, 2, 2)
    """
    off = block_offsets(n, parts)
    return tuple(off[i + 1] - off[i] for i in range(parts))


def row_chunk_offsets(m: int, k: int, align: int = 1) -> tuple:
    """The ``k + 1`` boundaries of blocked aggregation's row chunks of an ``m``-row block.

    Even in row count, every boundary but the last on a multiple of
    ``align`` (the last chunk takes the remainder; chunks are empty when
    ``m // align < k``).  One rule for the runtime
    (:func:`spgnn.core.spmm_3d.row_chunks`) and the planner
    (:func:`spgnn.plan.events.plan_gcn_3d` with ``agg_blocks``).
    """
    align = max(1, int(align))
    bounds = [align * b for b in block_offsets(int(m) // align, int(k))]
    bounds[-1] = int(m)
    return tuple(bounds)


def _axes(value, what):
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    try:
        axes = tuple(value)
    except TypeError:
        raise LayoutMismatch(f"Layout: {what} must be an axis name, a tuple of names or None, "
                             f"but got {value!r}") from None
    if not all(isinstance(a, str) for a in axes):
        raise LayoutMismatch(f"Layout: {what} must contain axis names, but got {value!r}")
    return axes


def _splits(value, what):
    if value is None:
        return None
    try:
        out = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise LayoutMismatch(f"Layout: {what} must be a sequence of ints, but got {value!r}") from None
    if len(out) < 2 or out[0] != 0 or any(b < a for a, b in zip(out, out[1:])):
        raise LayoutMismatch(f"Layout: {what} must start at 0 and be non-decreasing, but got {out}")
    return out


@dataclass(frozen=True)
class Layout:
    """Placement of a matrix on a grid (immutable, hashable).

    Parameters
    ----------
    rows, cols : str, tuple of str or None
        Grid axes splitting the row (column) dimension, outermost first;
        ``None`` means not split (replicated over the remaining axes).
    partial : iterable of str
        Axes over which local blocks are pending partial sums.
    row_splits, col_splits : sequence of int, optional
        Explicit block boundaries (``parts + 1`` offsets from 0 to n);
        default is :func:`block_bounds`.
    """

    rows: tuple = ()
    cols: tuple = ()
    partial: frozenset = frozenset()
    row_splits: tuple = None
    col_splits: tuple = None

    def __post_init__(self):
        object.__setattr__(self, "rows", _axes(self.rows, "rows"))
        object.__setattr__(self, "cols", _axes(self.cols, "cols"))
        object.__setattr__(self, "partial", frozenset(_axes(tuple(self.partial), "partial")))
        object.__setattr__(self, "row_splits", _splits(self.row_splits, "row_splits"))
        object.__setattr__(self, "col_splits", _splits(self.col_splits, "col_splits"))
        used = list(self.rows) + list(self.cols) + sorted(self.partial)
        dup = sorted({a for a in used if used.count(a) > 1})
        if dup:
            raise LayoutMismatch(f"Layout: each grid axis may be used once, but {dup} appear "
                                 f"more than once in rows={self.rows}, cols={self.cols}, "
                                 f"partial={sorted(self.partial)}")

    def __repr__(self):
        parts = [f"rows={self.rows}", f"cols={self.cols}"]
        if self.partial:
            parts.append(f"partial={sorted(self.partial)}")
        if self.row_splits is not None:
            parts.append(f"row_splits=<{len(self.row_splits) - 1} blocks>")
        if self.col_splits is not None:
            parts.append(f"col_splits=<{len(self.col_splits) - 1} blocks>")
        return "Layout(" + ", ".join(parts) + ")"

    # -- derived layouts ----------------------------------------------------
    def replace(self, **changes) -> "Layout":
        fields = dict(rows=self.rows, cols=self.cols, partial=self.partial,
                      row_splits=self.row_splits, col_splits=self.col_splits)
        fields.update(changes)
        return Layout(**fields)

    @property
    def T(self) -> "Layout":
        """The layout of the transposed matrix."""
        return Layout(self.cols, self.rows, self.partial, self.col_splits, self.row_splits)

    # -- checks and arithmetic (grid may be a ProcessGrid or AbstractGrid) ---
    def check(self, grid, shape=None) -> "Layout":
        """Raise :class:`LayoutMismatch` if ``grid`` (and ``shape``) cannot hold this layout."""
        names = tuple(grid.axis_names)
        for axis in list(self.rows) + list(self.cols) + sorted(self.partial):
            if axis not in names:
                raise LayoutMismatch(f"{self!r} uses axis {axis!r}, but the grid has axes {names}")
        for dim, (axes, splits) in enumerate(((self.rows, self.row_splits),
                                              (self.cols, self.col_splits))):
            parts = self.parts(grid, dim)
            if splits is not None:
                if len(splits) != parts + 1:
                    raise LayoutMismatch(
                        f"{self!r}: {'row' if dim == 0 else 'col'}_splits needs {parts + 1} offsets "
                        f"for {parts} blocks over axes {axes}, but got {len(splits)}")
                if shape is not None and splits[-1] != shape[dim]:
                    raise LayoutMismatch(
                        f"{self!r}: {'row' if dim == 0 else 'col'}_splits must end at "
                        f"shape[{dim}]={shape[dim]}, but ends at {splits[-1]}")
        return self

    def parts(self, grid, dim: int) -> int:
        """Number of blocks along dimension ``dim`` (0 rows, 1 cols)."""
        out = 1
        for axis in (self.rows if dim == 0 else self.cols):
            out *= grid.axis_size(axis)
        return out

    def block_index(self, grid, coords, dim: int) -> int:
        """Index of the block held at grid ``coords`` along ``dim`` (row-major over the axes)."""
        idx = 0
        for axis in (self.rows if dim == 0 else self.cols):
            k = grid.axis_names.index(axis)
            idx = idx * grid.shape[k] + coords[k]
        return idx

    def offsets(self, grid, n: int, dim: int) -> tuple:
        """All block boundaries along ``dim`` for a global extent ``n``."""
        splits = self.row_splits if dim == 0 else self.col_splits
        return splits if splits is not None else block_offsets(n, self.parts(grid, dim))

    def bounds(self, grid, shape, coords=None) -> tuple:
        """``((r0, r1), (c0, c1))``: the global block held at ``coords`` (default: mine)."""
        if coords is None:
            coords = grid.coords
        out = []
        for dim in (0, 1):
            off = self.offsets(grid, shape[dim], dim)
            b = self.block_index(grid, coords, dim)
            out.append((off[b], off[b + 1]))
        return tuple(out)

    def replicated_axes(self, grid) -> tuple:
        """Axes that neither split rows nor columns (replicas or partial sums)."""
        used = set(self.rows) | set(self.cols)
        return tuple(a for a in grid.axis_names if a not in used)


ROW_1D = Layout("row")
REPLICATED = Layout()
