"""Placements: how a :class:`~spgnn.gnn.data.DistGraph` lies on the ranks, as values.

One frozen dataclass per algorithm family; each checks its own fields when
made (``ValueError`` or :class:`~spgnn.errors.GridError` naming the field,
on every rank alike since it is pure), names its algorithm, makes its
process grid from a communicator and says how many row blocks the graph is
cut into and in which layouts Â, the features and the node data lie:

============ ======================== ========================================================
placement    algorithm                options
============ ======================== ========================================================
``Row1D``    ``1d-aware`` / ``1d``    ``exchange``: pre/post/hybrid aggregation and quantized
                                      exchanges (paper 004; ``1d-aware`` only)
``Rep15D``   ``15d-aware`` / ``15d``  ``c``: replication over the ``layer`` axis
``Plexus3D`` ``3d``                   ``grid``, ``permute``, ``agg_blocks``, ``shard_input``,
                                      ``shard_weights`` (Plexus, Ranjan et al., SC'25)
============ ======================== ========================================================

:func:`placement_for` makes one from an algorithm name and that family's
options (what a command line holds).  To add a placement: a frozen
dataclass here with ``algorithm``, ``make_grid``, ``nparts`` and
``layouts``, an entry in :data:`PLACEMENTS`, and the algorithm's SpMM in
:data:`spgnn.core.spmm.SPMM_ALGORITHMS` (docs/gnn.md).
"""

from dataclasses import dataclass, field, fields
from typing import NamedTuple

import numpy as np

from ..backends._quant import PARAM_DTYPES, ROUNDINGS
from ..core.codec import QUANTIZE_CHOICES, make_codec
from ..core.depth import nested_splits
from ..core.hybrid import AGGREGATIONS
from ..core.spmm_15d import layouts_15d
from ..errors import GridError
from ..grid import default_grid_3d, grid_1d, grid_15d, make_grid, roles_for_layer
from ..layout import Layout, block_offsets

__all__ = ["Exchange", "Row1D", "Rep15D", "Plexus3D", "PLACEMENTS", "PERMUTES", "Layouts",
           "placement_for", "as_placement"]

#: Row/column orders of 3d training (``Plexus3D.permute``): none, or Plexus's double permutation.
PERMUTES = ("none", "double")


def check_choice(owner, name, value, choices):
    """ValueError ``"<owner>: unknown <name> <value>; expected one of <choices>"`` unless a choice. Pure."""
    if value not in choices:
        raise ValueError(f"{owner}: unknown {name} {value!r}; expected one of {choices}")


def _flag(owner, name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{owner}: {name} must be True or False, but got {value!r}")


def _count(owner, name, value, error=ValueError):
    """``value`` as an int >= 1, or ``error`` naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or int(value) != value or int(value) < 1:
        raise error(f"{owner}: {name} must be >= 1 (an integer), but got {value!r}")
    return int(value)


class Layouts(NamedTuple):
    """Where a placement puts Â, the features and the node data (see ``layouts``)."""

    adjacency: Layout
    features: Layout
    nodes: Layout
    offsets: tuple        # row block boundaries (``DistGraph.offsets``)


@dataclass(frozen=True)
class Exchange:
    """How ``1d-aware`` aggregations exchange rows (paper 004; :mod:`spgnn.core.hybrid`, :mod:`spgnn.core.codec`).

    ``aggregation`` chooses pre/post/hybrid aggregation for every
    aggregation (forward ``A·H`` and backward ``Aᵀ·G``); ``quantize``
    codes the rows of training passes (forward messages and backward
    gradient messages) as ``b``-bit integers with ``rounding`` and
    ``param_dtype`` per-row parameters, stochastic draws keyed by ``seed``;
    evaluation passes exchange fp32 rows.  :attr:`plain` (``post``, no
    quantization) trains exactly as without it.
    """

    aggregation: str = "post"
    quantize: str = "none"
    rounding: str = "stochastic"
    seed: int = 0
    param_dtype: str = "bf16"

    def __post_init__(self):
        check_choice("Exchange", "aggregation", self.aggregation, AGGREGATIONS)
        check_choice("Exchange", "quantize", self.quantize, QUANTIZE_CHOICES)
        check_choice("Exchange", "rounding", self.rounding, ROUNDINGS)
        check_choice("Exchange", "param_dtype", self.param_dtype, PARAM_DTYPES)
        if isinstance(self.seed, (bool, np.bool_)) or int(self.seed) != self.seed:
            raise ValueError(f"Exchange: seed must be an integer, but got {self.seed!r}")

    @property
    def plain(self) -> bool:
        """``post`` and no quantization: every exchange as without options."""
        return self.aggregation == "post" and self.quantize == "none"

    def make_codec(self):
        """A fresh :class:`~spgnn.core.codec.Codec` (stateful: ``rekey``), or ``None``. Pure."""
        return make_codec(self.quantize, self.rounding, self.param_dtype, int(self.seed))


@dataclass(frozen=True)
class Row1D:
    """Rows of Â, features and node data in ``P`` blocks on a ``("row",)`` grid.

    ``aware=True`` is ``1d-aware`` (each rank receives only the feature rows
    its block references), ``False`` is ``1d`` (all-gather); only
    ``1d-aware`` takes a non-plain ``exchange``.
    """

    aware: bool = True
    exchange: Exchange = field(default_factory=Exchange)

    def __post_init__(self):
        _flag("Row1D", "aware", self.aware)
        if not isinstance(self.exchange, Exchange):
            raise ValueError(f"Row1D: exchange must be an Exchange, but got {self.exchange!r}")
        if not self.aware and not self.exchange.plain:
            raise ValueError(f"Row1D: exchange={self.exchange!r} needs the 1d-aware algorithm "
                             f"(aware=True), but aware=False is '1d'")

    @property
    def algorithm(self) -> str:
        return "1d-aware" if self.aware else "1d"

    def make_grid(self, comm):
        """``("row",)`` over every rank of ``comm``. Collective."""
        return grid_1d(comm)

    def nparts(self, grid):
        return grid.size

    def layouts(self, grid, n, splits):
        """Everything in ``Layout("row", splits)``: ``splits`` are the partition's ``P`` blocks. Pure."""
        lay = Layout("row", row_splits=tuple(splits))
        return Layouts(lay, lay, lay, tuple(splits))


@dataclass(frozen=True)
class Rep15D:
    """1.5D: ``k = P/c`` row blocks of Â, each replicated ``c`` times over the ``layer`` axis.

    Â is ``Layout("row", "layer")``; features and node data
    ``Layout("row")`` (replicated ``c``×).  ``aware`` as in :class:`Row1D`.
    """

    c: int = 2
    aware: bool = True

    def __post_init__(self):
        object.__setattr__(self, "c", _count("Rep15D", "c", self.c, GridError))
        _flag("Rep15D", "aware", self.aware)

    @property
    def algorithm(self) -> str:
        return "15d-aware" if self.aware else "15d"

    def make_grid(self, comm):
        """``(P/c, c)`` with axes ``("row", "layer")``; GridError unless ``c`` divides P. Collective."""
        if comm.size % self.c:
            raise GridError(f"Rep15D: c={self.c} must divide comm.size={comm.size}")
        return grid_15d(self.c, comm)

    def nparts(self, grid):
        return grid.axis_size("row")

    def layouts(self, grid, n, splits):
        """Â ``Layout("row", "layer")``, the rest ``Layout("row")``; ``splits``: ``k`` blocks. Pure."""
        a_layout, x_layout = layouts_15d(grid, n, row_splits=tuple(splits))
        return Layouts(a_layout, x_layout, x_layout, tuple(splits))


@dataclass(frozen=True)
class Plexus3D:
    """Plexus's 3D placement on an ``(x, y, z)`` grid (Ranjan et al., SC'25).

    Parameters
    ----------
    grid : tuple of 3 int, optional
        The grid shape (``None``: :func:`~spgnn.grid.default_grid_3d` of P).
    permute : {"none", "double"}
        ``"double"``: Plexus's double permutation (§4.1,
        :func:`spgnn.partition.double_permutation`): independent row and
        column orders ``P_r``, ``P_c``; even hops multiply by
        ``A1 = P_r Â P_cᵀ``, odd hops by ``A2 = P_c Â P_rᵀ``; the losses are
        those of the unpermuted run.  Both variants are stored.
    agg_blocks : int
        The aggregation's SpMM and its all-reduce run in this many row
        chunks (§4.2): the same bytes, smaller partial-sum buffers.
    shard_input : bool
        Row-shard the first layer's input over the depth axis (all-gathered
        in forward, Plexus §2.3).
    shard_weights : bool
        Shard the weights over each layer's depth axis (all-gathered in
        forward and backward, gradients reduce-scattered); a weight block
        whose rows do not divide evenly stays replicated.

    Â is placed from a row-split base copy (``Layout(x, y, z)``) as
    ``Layout(d, o)`` per layer on first use; features ``Layout(x, y)``
    (layer-0 roles) or ``Layout((x, z), y)`` with ``shard_input``; rows are
    cut evenly (a 3D layer splits its rows over a different axis each time).
    """

    grid: tuple = None
    permute: str = "none"
    agg_blocks: int = 1
    shard_input: bool = False
    shard_weights: bool = True

    def __post_init__(self):
        if self.grid is not None:
            try:
                shape = tuple(self.grid)
            except TypeError:
                shape = None
            if (shape is None or len(shape) != 3
                    or any(isinstance(g, (bool, np.bool_)) or int(g) != g or int(g) < 1
                           for g in shape)):
                raise GridError(f"Plexus3D: grid must be three positive ints (x, y, z), but got "
                                f"{self.grid!r}")
            object.__setattr__(self, "grid", tuple(int(g) for g in shape))
        check_choice("Plexus3D", "permute", self.permute, PERMUTES)
        object.__setattr__(self, "agg_blocks", _count("Plexus3D", "agg_blocks", self.agg_blocks))
        _flag("Plexus3D", "shard_input", self.shard_input)
        _flag("Plexus3D", "shard_weights", self.shard_weights)

    @property
    def algorithm(self) -> str:
        return "3d"

    def make_grid(self, comm):
        """``(x, y, z)`` with axes ``("x", "y", "z")``; GridError unless its size is P. Collective."""
        shape = default_grid_3d(comm.size) if self.grid is None else self.grid
        if int(np.prod(shape)) != comm.size:
            raise GridError(f"Plexus3D: grid={shape} has {int(np.prod(shape))} ranks, but "
                            f"comm.size={comm.size}")
        return make_grid(shape, ("x", "y", "z"), comm)

    def nparts(self, grid):
        return grid.size

    def layouts(self, grid, n, splits=None):
        """Even ``P`` blocks (``splits`` ignored); Â and node data row-split base copies. Pure."""
        base = Layout(tuple(grid.axis_names))
        o, i, d = roles_for_layer(0, grid.axis_names)
        if self.shard_input:
            x_layout = Layout((o, d), i, row_splits=nested_splits(
                block_offsets(n, grid.axis_size(o)), grid.axis_size(d)))
        else:
            x_layout = Layout(o, i)
        return Layouts(base, x_layout, base, tuple(block_offsets(n, grid.size)))


#: The placement families, one per algorithm family.
PLACEMENTS = (Row1D, Rep15D, Plexus3D)

#: algorithm name -> (family, fixed fields)
_BY_ALGORITHM = {"1d-aware": (Row1D, {"aware": True}), "1d": (Row1D, {"aware": False}),
                 "15d-aware": (Rep15D, {"aware": True}), "15d": (Rep15D, {"aware": False}),
                 "3d": (Plexus3D, {})}


def _options_of(family):
    return tuple(f.name for f in fields(family) if f.name != "aware")


def placement_for(algorithm, **options):
    """The placement of ``algorithm`` with that family's ``options``. Pure.

    ``algorithm`` is ``"1d"``, ``"1d-aware"``, ``"15d"``, ``"15d-aware"`` or
    ``"3d"``; ``options`` are the fields of its family (``exchange=`` for 1d,
    ``c=`` for 1.5D, ``grid=``, ``permute=``, ``agg_blocks=``,
    ``shard_input=``, ``shard_weights=`` for 3d).  An option given as
    ``None`` keeps its default.  Raises ValueError for an unknown algorithm
    or an option of another family (naming both).
    """
    if algorithm not in _BY_ALGORITHM:
        raise ValueError(f"placement_for: unknown algorithm {algorithm!r}; expected one of "
                         f"{tuple(_BY_ALGORITHM)}")
    family, fixed = _BY_ALGORITHM[algorithm]
    given = {k: v for k, v in options.items() if v is not None}
    foreign = [k for k in given if k not in _options_of(family)]
    if foreign:
        name = foreign[0]
        owners = [a for a, (fam, _) in _BY_ALGORITHM.items() if name in _options_of(fam)]
        if not owners:
            raise ValueError(f"placement_for: unknown option {name}={given[name]!r} for "
                             f"algorithm {algorithm!r}; its options are {_options_of(family)}")
        where = " or ".join(repr(a) for a in owners)
        raise ValueError(f"placement_for: options ({name}={given[name]!r}) apply to algorithm "
                         f"{where} only, not {algorithm!r}")
    return family(**fixed, **given)


def as_placement(placement):
    """``placement`` itself, or :func:`placement_for` of an algorithm name. Pure."""
    if isinstance(placement, PLACEMENTS):
        return placement
    if isinstance(placement, str):
        return placement_for(placement)
    raise ValueError(f"placement must be one of {tuple(p.__name__ for p in PLACEMENTS)} or an "
                     f"algorithm name, but got {placement!r}")
