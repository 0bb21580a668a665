"""Pure placement arithmetic: block_bounds, AbstractGrid, Layout, transfer rectangles."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from spgnn import AbstractGrid, GridError, Layout, LayoutMismatch, block_bounds
from spgnn.core._dist_common import primary_owners, transfer_rects
from spgnn.testing.strategies_dist import grid_and_layouts


@given(st.integers(0, 1000), st.integers(1, 64))
def test_block_bounds_tile_and_balance(n, parts):
    bounds = [block_bounds(n, parts, i) for i in range(parts)]
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    sizes = [b - a for a, b in bounds]
    assert max(sizes) - min(sizes) <= 1


def test_block_bounds_errors():
    with pytest.raises(ValueError, match="parts must be positive"):
        block_bounds(5, 0, 0)
    with pytest.raises(ValueError, match=r"index must lie in \[0, 3\)"):
        block_bounds(5, 3, 3)


@given(st.lists(st.integers(1, 4), min_size=1, max_size=4))
def test_abstract_grid_rank_coords_roundtrip(shape):
    names = tuple(f"a{i}" for i in range(len(shape)))
    g = AbstractGrid(shape, names)
    seen = set()
    for r in range(g.size):
        c = g.coords_of(r)
        assert g.rank_of(c) == r
        seen.add(c)
    assert len(seen) == g.size
    # row-major: the last axis varies fastest
    if g.size > 1 and shape[-1] > 1:
        assert g.coords_of(1)[-1] == 1


def test_grid_errors_name_values():
    with pytest.raises(GridError, match="positive"):
        AbstractGrid((2, 0))
    with pytest.raises(GridError, match="one axis name per dimension"):
        AbstractGrid((2, 2), ("row",))
    with pytest.raises(GridError, match="distinct"):
        AbstractGrid((2, 2), ("row", "row"))
    with pytest.raises(GridError, match="no axis 'layer'"):
        AbstractGrid((2, 2)).axis_size("layer")
    assert AbstractGrid((2, 2, 2)).axis_names == ("x", "y", "z")


def test_layout_validation():
    g = AbstractGrid((2, 3), ("row", "layer"))
    with pytest.raises(LayoutMismatch, match="used once"):
        Layout("row", "row")
    with pytest.raises(LayoutMismatch, match="uses axis 'col'"):
        Layout("row", "col").check(g)
    with pytest.raises(LayoutMismatch, match="needs 3 offsets"):
        Layout("row", row_splits=(0, 4)).check(g)
    with pytest.raises(LayoutMismatch, match="must end at shape"):
        Layout("row", row_splits=(0, 2, 4)).check(g, (5, 5))
    with pytest.raises(LayoutMismatch, match="non-decreasing"):
        Layout("row", row_splits=(0, 3, 2))
    assert Layout("row", partial={"layer"}).T == Layout(None, "row", partial={"layer"})
    assert hash(Layout("row")) == hash(Layout(("row",)))


@given(grid_and_layouts(max_ranks=8))
def test_primary_owner_blocks_tile_matrix_once(case):
    grid, shape, layout, _ = case
    cover = np.zeros(shape, dtype=np.int64)
    for r in primary_owners(grid, layout):
        (r0, r1), (c0, c1) = layout.bounds(grid, shape, grid.coords_of(r))
        cover[r0:r1, c0:c1] += 1
    assert (cover == 1).all()


@given(grid_and_layouts(max_ranks=8))
def test_transfer_rects_fill_every_destination_block_once(case):
    grid, shape, src, dst = case
    rects = transfer_rects(grid, shape, src, dst)
    for d, coords in grid.ranks():
        (r0, r1), (c0, c1) = dst.bounds(grid, shape, coords)
        cover = np.zeros((r1 - r0, c1 - c0), dtype=np.int64)
        for (s, dd), ((a0, a1), (b0, b1)) in rects.items():
            if dd != d:
                continue
            # the source really holds the rectangle
            (s0, s1), (t0, t1) = src.bounds(grid, shape, grid.coords_of(s))
            assert s0 <= a0 and a1 <= s1 and t0 <= b0 and b1 <= t1
            cover[a0 - r0:a1 - r0, b0 - c0:b1 - c0] += 1
        assert (cover == 1).all()


def test_parse_grid_one_parser_one_error_type():
    from spgnn.grid import parse_grid

    assert parse_grid("2x2x1", 4) == (2, 2, 1)
    assert parse_grid("3X1", 3, ndim=2) == (3, 1)
    for text, words in (("2x2", "3 positive factors"), ("2x0x2", "positive"), ("2x2x2", "4 ranks"),
                        ("axb", "must look like 2x2x2"), (None, "must look like")):
        with pytest.raises(GridError, match=words) as info:
            parse_grid(text, 4, what="spmm: --grid")
        assert str(info.value).startswith("spmm: --grid ")
        assert isinstance(info.value, ValueError)


def test_default_grid_3d_is_the_most_cubic_shape():
    from spgnn.grid import default_grid_3d, shapes_3d

    assert shapes_3d(4) == [(1, 1, 4), (1, 2, 2), (1, 4, 1), (2, 1, 2), (2, 2, 1), (4, 1, 1)]
    assert [default_grid_3d(p) for p in (1, 2, 4, 8, 12, 7)] == [
        (1, 1, 1), (2, 1, 1), (2, 2, 1), (2, 2, 2), (3, 2, 2), (7, 1, 1)]
