"""ProcessGrid sub-communicators and partial-sum layouts, on loopback ranks."""

from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from spgnn import (DistDenseMatrix, GridError, Layout, LayoutMismatch, ProcessGrid, grid_15d,
                   grid_1d, grid_2d, grid_3d, run_loopback)
from spgnn.testing.asserts import assert_dist_equal, collective_assert
from spgnn.testing.strategies_dist import grid_shapes

TIMEOUT = 15


@given(grid_shapes())
def test_subcommunicators_group_ranks_sharing_other_coords(case):
    shape, names = case

    def body(comm):
        grid = ProcessGrid(comm, shape, names)
        for k in range(1, len(names) + 1):
            for axes in combinations(names, k):
                sub = grid.comm(*axes)
                members = sub.allgather_obj(grid.rank)
                # members: every rank whose coordinates agree with mine off `axes`,
                # ordered row-major over `axes` (grid order)
                fixed = [i for i, a in enumerate(names) if a not in axes]
                want = [r for r, c in grid.ranks()
                        if all(c[i] == grid.coords[i] for i in fixed)]
                collective_assert(comm, members == want, f"{axes}: {members} != {want}")
                collective_assert(comm, sub.axis == axes and grid.comm(*reversed(axes)) is sub,
                                  f"axis tag {sub.axis} for {axes}")
        return grid.coords

    coords = run_loopback(int(np.prod(shape)), body, timeout=TIMEOUT)
    assert len(set(coords)) == len(coords)


def test_grid_constructors_and_errors():
    def body(comm):
        assert grid_1d(comm).shape == (4,)
        assert grid_15d(2, comm).axis_names == ("row", "layer")
        assert grid_2d(2, 2, comm).shape == (2, 2)
        assert grid_3d(1, 2, 2, comm).axis_names == ("x", "y", "z")
        with pytest.raises(GridError, match=r"prod\(shape\) == comm.size, but got shape=\(3,\) "
                                            r"\(prod 3\) and comm.size=4"):
            ProcessGrid(comm, (3,))
        with pytest.raises(GridError, match="c must divide comm.size=4, but got c=3"):
            grid_15d(3, comm)
        return True

    assert all(run_loopback(4, body, timeout=TIMEOUT))


@given(st.sampled_from([(2, 1), (2, 2), (1, 3), (2, 4)]), st.integers(0, 9), st.integers(0, 5),
       st.sampled_from(["plus", "max", "min"]), st.integers(0, 2**31 - 1))
def test_partial_sums_reduce_and_redistribute(grid_shape, n, f, op, seed):
    """Blocks marked partial over "layer" hold pieces; reduction combines them with the monoid."""
    p = int(np.prod(grid_shape))
    pieces = np.random.default_rng(seed).standard_normal((grid_shape[1], n, f))
    total = {"plus": np.sum, "max": np.max, "min": np.min}[op](pieces, axis=0)

    def body(comm):
        grid = ProcessGrid(comm, grid_shape, ("row", "layer"))
        lay = Layout("row", partial={"layer"})
        (r0, r1), _ = lay.bounds(grid, (n, f))
        mine = pieces[grid.axis_index("layer"), r0:r1]
        Z = DistDenseMatrix(mine.copy(), (n, f), grid, lay, backend="numpy", partial_op=op)
        R = Z.reduce_partial()
        assert_dist_equal(comm, np.array(R.layout.partial == frozenset()), np.array(True), "cleared")
        assert_dist_equal(comm, R.local, total[r0:r1], "reduced block")
        # redistribute reduces pending sums first
        G = Z.redistribute(Layout())
        assert_dist_equal(comm, G.local, total, "replicated after redistribute")
        with pytest.raises(LayoutMismatch, match="not partial"):
            Z.reduce_partial(("row",))

    run_loopback(p, body, timeout=TIMEOUT)
