"""Process grids: ranks arranged over named axes.

``ProcessGrid`` is collective to create (it splits one sub-communicator per
non-empty set of axes, eagerly, so that later lookups never communicate);
everything else about it is local.  ``AbstractGrid`` has the same shape API
with no communicator, for layout arithmetic and planning at any scale.

Ranks are numbered row-major over the axes (the last axis varies fastest),
as ``MPI_Cart_create`` does with ``reorder=False``.

Conventional axis names: 1D ``("row",)``; 1.5D ``("row", "layer")`` with the
replication factor ``c`` on ``layer``; 2D ``("row", "col")``; 3D
``("x", "y", "z")`` (Plexus).
"""

from itertools import combinations
from math import prod

from .errors import GridError

__all__ = ["AbstractGrid", "ProcessGrid", "make_grid", "grid_1d", "grid_15d", "grid_2d",
           "grid_3d", "DEFAULT_AXIS_NAMES", "AXES_3D", "rotate", "roles_for_layer", "shapes_3d",
           "default_grid_3d", "parse_grid"]

DEFAULT_AXIS_NAMES = {1: ("row",), 2: ("row", "col"), 3: ("x", "y", "z")}
#: Plexus's axis names, in grid order.
AXES_3D = DEFAULT_AXIS_NAMES[3]


class AbstractGrid:
    """A grid's shape and axis names, without a communicator.

    Parameters
    ----------
    shape : tuple of int
        Ranks along each axis; all positive.
    axis_names : tuple of str, optional
        Defaults to :data:`DEFAULT_AXIS_NAMES` for 1, 2 and 3 axes.
    """

    def __init__(self, shape, axis_names=None):
        try:
            shape = tuple(int(s) for s in shape)
        except (TypeError, ValueError):
            raise GridError(f"grid shape must be a tuple of ints, but got {shape!r}") from None
        if not shape or any(s <= 0 for s in shape):
            raise GridError(f"grid shape must be non-empty with positive entries, but got {shape}")
        if axis_names is None:
            if len(shape) not in DEFAULT_AXIS_NAMES:
                raise GridError(f"grid with {len(shape)} axes needs explicit axis_names")
            axis_names = DEFAULT_AXIS_NAMES[len(shape)]
        axis_names = tuple(axis_names)
        if len(axis_names) != len(shape):
            raise GridError(f"grid needs one axis name per dimension, but got shape={shape} "
                            f"and axis_names={axis_names}")
        if len(set(axis_names)) != len(axis_names) or not all(isinstance(a, str) for a in axis_names):
            raise GridError(f"grid axis names must be distinct strings, but got {axis_names}")
        self.shape = shape
        self.axis_names = axis_names

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _axis(self, name) -> int:
        try:
            return self.axis_names.index(name)
        except ValueError:
            raise GridError(f"grid has no axis {name!r}; its axes are {self.axis_names}") from None

    def axis_size(self, name) -> int:
        """Number of ranks along axis ``name``."""
        return self.shape[self._axis(name)]

    def coords_of(self, rank: int) -> tuple:
        """Grid coordinates of ``rank`` (row-major)."""
        if not 0 <= rank < self.size:
            raise GridError(f"rank must lie in [0, {self.size}), but got {rank}")
        out = []
        for s in reversed(self.shape):
            rank, c = divmod(rank, s)
            out.append(c)
        return tuple(reversed(out))

    def rank_of(self, coords) -> int:
        """Rank at grid ``coords``."""
        coords = tuple(coords)
        if len(coords) != self.ndim or any(not 0 <= c < s for c, s in zip(coords, self.shape)):
            raise GridError(f"coords must fit grid shape {self.shape}, but got {coords}")
        rank = 0
        for c, s in zip(coords, self.shape):
            rank = rank * s + c
        return rank

    def ranks(self):
        """All ranks with their coordinates: ``[(rank, coords), ...]``."""
        return [(r, self.coords_of(r)) for r in range(self.size)]

    def abstract(self) -> "AbstractGrid":
        return AbstractGrid(self.shape, self.axis_names)

    def __eq__(self, other):
        return (isinstance(other, AbstractGrid) and self.shape == other.shape
                and self.axis_names == other.axis_names)

    def __hash__(self):
        return hash((self.shape, self.axis_names))

    def __repr__(self):
        axes = ", ".join(f"{n}={s}" for n, s in zip(self.axis_names, self.shape))
        return f"{type(self).__name__}({axes})"


class ProcessGrid(AbstractGrid):
    """A grid over a :class:`~spgnn.comm.Communicator`.

    Collective: construction (splits the sub-communicators).  Everything
    else is local.

    Parameters
    ----------
    comm : Communicator
        Its size must equal ``prod(shape)``.
    shape, axis_names : see :class:`AbstractGrid`.

    Raises
    ------
    GridError
        ``prod(shape) != comm.size`` (on every rank, before communicating).
    """

    def __init__(self, comm, shape, axis_names=None):
        super().__init__(shape, axis_names)
        if self.size != comm.size:
            raise GridError(f"ProcessGrid requires prod(shape) == comm.size, but got shape="
                            f"{self.shape} (prod {self.size}) and comm.size={comm.size}")
        self.world = comm
        self.rank = comm.rank
        self.coords = self.coords_of(comm.rank)
        self._subcomms = {(): None}
        full = tuple(self.axis_names)
        # Every subset of axes, split eagerly in a fixed order so that all
        # ranks make the same collective calls and comm() never communicates.
        for k in range(1, self.ndim + 1):
            for axes in combinations(full, k):
                if axes == full:
                    self._subcomms[axes] = comm if comm.axis == full else comm.split(0, comm.rank, axis=full)
                    continue
                others = [a for a in full if a not in axes]
                color = self._ravel(others)
                key = self._ravel(axes)
                self._subcomms[axes] = comm.split(color, key, axis=axes)

    def _ravel(self, axes) -> int:
        idx = 0
        for a in axes:
            k = self.axis_names.index(a)
            idx = idx * self.shape[k] + self.coords[k]
        return idx

    def axis_index(self, name) -> int:
        """My coordinate along axis ``name``."""
        return self.coords[self._axis(name)]

    def comm(self, *axes):
        """The sub-communicator spanning ``axes`` (all axes if none are given). Local.

        Ranks in it are ordered row-major over ``axes`` in grid order.
        """
        if not axes:
            axes = self.axis_names
        for a in axes:
            self._axis(a)
        if len(set(axes)) != len(axes):
            raise GridError(f"grid.comm: axes must be distinct, but got {axes}")
        key = tuple(a for a in self.axis_names if a in axes)
        return self._subcomms[key]

    @property
    def ledger(self):
        """The communication ledger shared by this grid's communicators."""
        return self.world.ledger


def make_grid(shape, axis_names=None, comm=None) -> ProcessGrid:
    """Create a :class:`ProcessGrid` (collective); ``comm`` defaults to ``MPI.COMM_WORLD``."""
    if comm is None:
        from .comm import Communicator

        comm = Communicator.world()
    return ProcessGrid(comm, shape, axis_names)


def grid_1d(comm=None) -> ProcessGrid:
    """A 1-D grid of all ranks, axis ``"row"``."""
    if comm is None:
        from .comm import Communicator

        comm = Communicator.world()
    return ProcessGrid(comm, (comm.size,), ("row",))


def grid_15d(c: int, comm=None) -> ProcessGrid:
    """A ``P/c x c`` grid, axes ``("row", "layer")``; ``c`` must divide P."""
    if comm is None:
        from .comm import Communicator

        comm = Communicator.world()
    if c <= 0 or comm.size % c:
        raise GridError(f"grid_15d: replication factor c must divide comm.size={comm.size}, "
                        f"but got c={c}")
    return ProcessGrid(comm, (comm.size // c, c), ("row", "layer"))


def grid_2d(rows: int, cols: int, comm=None) -> ProcessGrid:
    """A ``rows x cols`` grid, axes ``("row", "col")``."""
    return make_grid((rows, cols), ("row", "col"), comm)


def grid_3d(x: int, y: int, z: int, comm=None) -> ProcessGrid:
    """An ``x x y x z`` grid, axes ``("x", "y", "z")`` as in Plexus."""
    return make_grid((x, y, z), ("x", "y", "z"), comm)


def parse_grid(text, ranks, ndim=3, *, what="grid"):
    """The grid shape written ``"2x2x2"``: ``ndim`` positive factors, product ``ranks``. Pure.

    ``what`` names the value in messages (a command passes e.g.
    ``"spmm: --grid"``).  Raises :class:`~spgnn.errors.GridError` (a
    ``ValueError``), the same on every rank.
    """
    example = "x".join(["2"] * ndim)
    try:
        shape = tuple(int(v) for v in str(text).lower().split("x"))
    except ValueError:
        raise GridError(f"{what} must look like {example}, but got {text!r}") from None
    if len(shape) != ndim or min(shape) < 1 or prod(shape) != ranks:
        raise GridError(f"{what} needs {ndim} positive factors whose product is the {ranks} "
                        f"ranks, but got {text!r}")
    return shape


# --------------------------------------------------------------------------------------------
# 3D grids: shapes and the per-layer roles of their axes (Plexus, Ranjan et al., SC'25)


def shapes_3d(p):
    """Every ``(x, y, z)`` with ``x * y * z == p``, by increasing ``x`` then ``y``. Pure."""
    out = []
    for x in range(1, p + 1):
        if p % x:
            continue
        for y in range(1, p // x + 1):
            if (p // x) % y == 0:
                out.append((x, y, p // x // y))
    return out


def default_grid_3d(p):
    """The most cubic ``(x, y, z)`` with ``x*y*z == p`` (ties: larger x, then y). Pure."""
    return min(shapes_3d(p), key=lambda s: (max(s) - min(s), -s[0], -s[1]))


def rotate(roles):
    """The next layer's roles: ``(o, i, d) -> (d, o, i)`` (Plexus §2.5). Pure."""
    o, i, d = roles
    return d, o, i


def roles_for_layer(layer, axes=AXES_3D):
    """``(o, i, d)`` for layer ``layer``: ``axes``, then rotated ``layer % 3`` times. Pure.

    With the default axes: layer 0 ``(x, y, z)``, layer 1 ``(z, x, y)``,
    layer 2 ``(y, z, x)``, layer 3 ``(x, y, z)`` again.
    """
    if int(layer) < 0:
        raise ValueError(f"roles_for_layer: layer must be non-negative, but got {layer}")
    roles = tuple(axes)
    if len(roles) != 3 or len(set(roles)) != 3:
        raise GridError(f"roles_for_layer: need three distinct axis names, but got {axes!r}")
    for _ in range(int(layer) % 3):
        roles = rotate(roles)
    return roles
