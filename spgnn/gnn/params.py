"""Trainable parameters: a local value block, its gradient, and where its replicas live.

A :class:`Parameter` starts *unplaced*: it holds the global initial value
(identical on every rank, drawn from a seed) and no layout.  The first time
a layer uses it through a context helper (:meth:`GraphContext.matmul
<spgnn.gnn.context.GraphContext.matmul>`, ``add_bias``) the helper *places* it:
it picks the layout the algorithm needs (replicated for ``1d``/``15d``, a
``Layout(i, o)`` block of the 3D grid, possibly sharded over depth) and keeps
only this rank's block.  From then on ``value`` and ``grad`` are local numpy
arrays of the block's shape.

Gradient reduction rule (see ``docs/gnn.md``): a weight's gradient
``Hᵀ·dQ`` is summed over the grid axes that split the *node* dimension of
``H`` (one replica of every node row), never over replica axes.  Those axes
are recorded in :attr:`Parameter.reduce_axes` at placement; the reduction
itself happens inside the context helper, so after ``backward`` every replica
of a block holds the same, complete gradient and a deterministic optimizer
keeps the replicas identical.
"""

import numpy as np

from ..backends import get_backend
from ..core.dist_dense import DistDenseMatrix
from ..errors import DimensionMismatch, DTypeError, LayoutMismatch
from ..layout import Layout

__all__ = ["Parameter", "glorot", "zeros_init"]


def glorot(shape, seed, index=0):
    """Glorot/Xavier-uniform matrix ``U(-r, r)``, ``r = sqrt(6 / (fan_in + fan_out))``. Pure.

    Drawn in float64 from ``numpy.random.default_rng([seed, index])``, so every
    rank (and the numpy reference, :mod:`spgnn.testing.gnn_reference`) gets the
    same matrix for the same ``(seed, index)``.
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2 or min(shape) <= 0:
        raise DimensionMismatch(f"glorot: shape must be two positive ints, but got {shape}")
    r = np.sqrt(6.0 / (shape[0] + shape[1]))
    return np.random.default_rng([int(seed), int(index)]).uniform(-r, r, size=shape)


def zeros_init(shape):
    """A float64 zero matrix of ``shape``. Pure."""
    return np.zeros(tuple(int(s) for s in shape), dtype=np.float64)


class Parameter:
    """A trainable matrix: global initial value, then a placed local block.

    Parameters
    ----------
    name : str
        Used in ``state_dict`` keys (containers prefix it with the layer path).
    init : ndarray, shape (rows, cols)
        The global initial value (float64 recommended), identical on every
        rank.  Dropped once the parameter is placed.

    Attributes (local)
    ------------------
    shape : tuple
        Global shape.
    value, grad : ndarray or None
        This rank's block and its gradient (``None`` until placed).
    layout : Layout or None
        Placement on ``grid`` (``Layout()``: replicated on every rank).
    reduce_axes : tuple of str
        Grid axes over which the gradient is summed (set by the helper).
    replica_axes : tuple of str
        Grid axes over which ``value`` is replicated (identical on every
        rank of such an axis).
    """

    def __init__(self, name, init):
        init = np.asarray(init)
        if init.ndim != 2:
            raise DimensionMismatch(f"Parameter {name!r}: init must be a 2-D array, but got "
                                    f"ndim={init.ndim}")
        if init.dtype.kind != "f":
            raise DTypeError(f"Parameter {name!r}: init must be floating point, but got "
                             f"{init.dtype}")
        self.name = str(name)
        self.shape = tuple(init.shape)
        self._init = init
        self.value = None
        self.grad = None
        self.layout = None
        self.grid = None
        self.reduce_axes = ()
        self.replica_axes = ()

    def __repr__(self):
        where = "unplaced" if self.layout is None else f"{self.layout!r}, local {self.value.shape}"
        return f"Parameter({self.name!r}, shape={self.shape}, {where})"

    @property
    def placed(self) -> bool:
        return self.layout is not None

    def place(self, grid, layout, dtype, reduce_axes=()):
        """Keep this rank's block of the initial value under ``layout``. Local.

        Calling it again with the same layout is a no-op; another layout
        raises :class:`~spgnn.errors.LayoutMismatch` (a parameter lives in one
        place: a layer used on inputs of different layouts needs two).
        """
        layout = layout if isinstance(layout, Layout) else Layout(layout)
        if self.layout is not None:
            if self.layout != layout or self.grid is not grid:
                raise LayoutMismatch(f"Parameter {self.name!r} is placed with {self.layout!r}, but "
                                     f"was asked for {layout!r}; a parameter is used with one "
                                     f"layout only")
            return self
        layout.check(grid, self.shape)
        (r0, r1), (c0, c1) = layout.bounds(grid, self.shape)
        self.value = np.array(self._init[r0:r1, c0:c1], dtype=dtype, order="C")
        self.grad = np.zeros_like(self.value)
        self.layout, self.grid = layout, grid
        self.reduce_axes = tuple(reduce_axes)
        self.replica_axes = layout.replicated_axes(grid)
        self._init = None
        return self

    def _require_placed(self, what):
        if self.layout is None:
            raise LayoutMismatch(f"Parameter {self.name!r}: {what} needs a placed parameter; run "
                                 f"one forward pass (Trainer does this on construction)")

    def zero_grad(self):
        """Set the local gradient to zero. Local."""
        if self.grad is not None:
            self.grad[...] = 0

    def as_dist(self, backend=None) -> DistDenseMatrix:
        """The value as a :class:`DistDenseMatrix` on its grid. Local.

        No copy on a CPU backend; a device backend gets a device copy (the
        value itself stays on the host, with the optimizer).
        """
        self._require_placed("as_dist")
        be = get_backend(backend)
        return DistDenseMatrix(be.from_host(self.value), self.shape, self.grid, self.layout,
                               backend=be)

    def to_global(self):
        """The whole matrix on every rank. Collective over the parameter's grid."""
        self._require_placed("to_global")
        return self.as_dist().to_global()
