"""Hypothesis strategies for grids, layouts and distributed inputs.

Seed-driven: Hypothesis draws small parameters (shapes, densities, a seed)
and numpy's ``default_rng(seed)`` fills the arrays, so shrinking acts on the
parameters and examples stay cheap.
"""

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st

from ..grid import AbstractGrid
from ..layout import Layout

__all__ = ["grid_shapes", "layouts_for", "splits_for", "grid_and_layouts", "random_sparse",
           "sparse_params"]


def _factorizations(p, k):
    if k == 1:
        return [(p,)]
    out = []
    for d in range(1, p + 1):
        if p % d == 0:
            out += [(d,) + rest for rest in _factorizations(p // d, k - 1)]
    return out


@st.composite
def grid_shapes(draw, sizes=(1, 2, 3, 4, 8), max_ndim=3):
    """``(shape, axis_names)`` with prod(shape) drawn from ``sizes`` (P=1 and prime P included)."""
    p = draw(st.sampled_from(sizes))
    k = draw(st.integers(1, max_ndim))
    shape = draw(st.sampled_from(_factorizations(p, k)))
    names = ("row", "col", "layer")[:k]
    return shape, names


@st.composite
def splits_for(draw, n, parts):
    """Explicit block boundaries with possibly empty blocks, or ``None`` (even split)."""
    if draw(st.booleans()):
        return None
    cuts = sorted(draw(st.lists(st.integers(0, n), min_size=parts - 1, max_size=parts - 1)))
    return tuple([0] + cuts + [n])


@st.composite
def layouts_for(draw, grid, shape, allow_partial=False):
    """A random Layout the grid can hold: each axis splits rows, cols, or neither."""
    rows, cols, partial = [], [], []
    for axis in grid.axis_names:
        role = draw(st.sampled_from(["rows", "cols", "none"] + (["partial"] if allow_partial else [])))
        {"rows": rows, "cols": cols, "none": [], "partial": partial}[role].append(axis)
    if draw(st.booleans()):
        rows.reverse()
    lay = Layout(tuple(rows), tuple(cols), frozenset(partial))
    rs = draw(splits_for(shape[0], lay.parts(grid, 0)))
    cs = draw(splits_for(shape[1], lay.parts(grid, 1)))
    return lay.replace(row_splits=rs, col_splits=cs)


@st.composite
def grid_and_layouts(draw, max_ranks=8, max_dim=12):
    """``(AbstractGrid, shape, layout_a, layout_b)`` including n < P and empty blocks."""
    sizes = tuple(s for s in (1, 2, 3, 4, 8) if s <= max_ranks)
    shape, names = draw(grid_shapes(sizes))
    grid = AbstractGrid(shape, names)
    mshape = (draw(st.integers(0, max_dim)), draw(st.integers(0, max_dim)))
    return grid, mshape, draw(layouts_for(grid, mshape)), draw(layouts_for(grid, mshape))


def sparse_params():
    """``(density, seed)`` for :func:`random_sparse`."""
    return st.tuples(st.sampled_from([0.0, 0.05, 0.2, 0.6]), st.integers(0, 2**31 - 1))


def random_sparse(shape, density, seed, dtype=np.float64):
    """A deterministic random CSR matrix (values in [-1, 1), no explicit zeros)."""
    rng = np.random.default_rng(seed)
    m = sp.random_array(shape, density=density, format="csr", dtype=dtype, rng=rng,
                        data_sampler=lambda size: rng.uniform(0.1, 1.0, size) * rng.choice([-1, 1], size))
    return sp.csr_array(m)
