"""Monoids and semirings (GraphBLAS style).

A :class:`Semiring` is an additive :class:`Monoid` (with its identity and the
reduction collectives use) and a multiplicative operator name.  Kernels are
specialised by the semiring's ``name``; the distributed layer reduces partial
results with ``semiring.add.name`` through the communicator.

Conventions (documented in docs/architecture.md):

* A dense output entry with no contributing nonzero holds the additive
  identity (0 for plus, +inf for min, -inf for max).  The identity is neutral
  in the cross-rank reduction, which is why it is used rather than 0.
* ``mean`` is ``plus_times`` followed by division by the number of structural
  nonzeros in the row (empty rows give 0).  Distributed callers must divide by
  the *global* row count after reducing partial sums; :mod:`spgnn.core.spmm`
  does.
"""

from dataclasses import dataclass

import numpy as np

from .ops import BINARY_OPS, binary_op

__all__ = [
    "Monoid", "Semiring", "PLUS", "MIN", "MAX", "TIMES",
    "plus_times", "min_plus", "max_plus", "max_times", "min_times",
    "plus_pair", "plus_second", "max_second", "min_second", "mean",
    "SEMIRINGS", "get_semiring", "partial_semiring",
    "LOR", "LAND", "ANY", "MONOIDS", "ALL_SEMIRINGS", "lor_land", "any_pair", "plus_first",
    "min_first", "any_second", "any_first", "register_monoid", "register_semiring",
    "get_monoid",
]


@dataclass(frozen=True)
class Monoid:
    """An associative, commutative operator with an identity.

    ``name`` is its :class:`~spgnn.local.ops.BinaryOp`'s registered name; for
    ``"plus"``, ``"min"``, ``"max"``, ``"times"``, ``"lor"``, ``"land"`` the
    communicator maps it to the matching MPI reduction (other monoids are
    reduced across ranks by gathering the partial results).
    """

    name: str
    identity: float

    @property
    def op(self):
        """The :class:`~spgnn.local.ops.BinaryOp` (looked up by name, so user ones work)."""
        return binary_op(self.name)

    @property
    def ufunc(self):
        """A ufunc-like object (``__call__`` and ``reduceat``) for the numpy reference."""
        op = self.op
        return op.ufunc if op.ufunc is not None else op


PLUS = Monoid("plus", 0.0)
MIN = Monoid("min", float("inf"))
MAX = Monoid("max", float("-inf"))
TIMES = Monoid("times", 1.0)

#: Multiplicative operators a(i,k) (x) x(k,j).
MULTIPLY_OPS = ("times", "plus", "first", "second", "pair")


@dataclass(frozen=True)
class Semiring:
    """``add`` is the reduction monoid, ``multiply`` one of :data:`MULTIPLY_OPS`.

    ``first`` keeps the sparse value, ``second`` the dense value, ``pair``
    gives 1 for every structural nonzero.  ``row_mean`` divides each output
    row by its number of structural nonzeros after the reduction.
    """

    name: str
    add: Monoid
    multiply: str
    row_mean: bool = False

    def __post_init__(self):
        if self.multiply not in BINARY_OPS:
            raise ValueError(f"Semiring: multiply must be a registered binary operator "
                             f"({sorted(BINARY_OPS)}), but got {self.multiply!r}")
        if self.add.name not in BINARY_OPS:
            raise ValueError(f"Semiring: add must be a monoid of a registered binary operator, "
                             f"but got {self.add.name!r}")

    @property
    def builtin(self) -> bool:
        """The SpMM/SDDMM kernels implement it (add in plus/min/max/times, multiply in
        :data:`MULTIPLY_OPS`); every other semiring runs in the generic kernels only."""
        return self.add.name in ("plus", "min", "max", "times") and self.multiply in MULTIPLY_OPS

    def __repr__(self):
        return f"Semiring({self.name})"

    def mul(self, a, x):
        """Elementwise ``a (x) x`` on numpy arrays (broadcasting)."""
        if self.multiply == "times":
            return a * x
        if self.multiply == "plus":
            return a + x
        if self.multiply == "first":
            return a + np.zeros_like(x)
        if self.multiply == "second":
            return np.zeros_like(a) + x
        if self.multiply == "pair":
            return np.ones_like(a + x)
        return binary_op(self.multiply)(a, x)


plus_times = Semiring("plus_times", PLUS, "times")
min_plus = Semiring("min_plus", MIN, "plus")
max_plus = Semiring("max_plus", MAX, "plus")
max_times = Semiring("max_times", MAX, "times")
min_times = Semiring("min_times", MIN, "times")
plus_pair = Semiring("plus_pair", PLUS, "pair")
plus_second = Semiring("plus_second", PLUS, "second")
max_second = Semiring("max_second", MAX, "second")
min_second = Semiring("min_second", MIN, "second")
mean = Semiring("mean", PLUS, "times", row_mean=True)

#: The named semirings: name -> :class:`Semiring` (:func:`get_semiring` looks names up here).
SEMIRINGS = {s.name: s for s in (plus_times, min_plus, max_plus, max_times, min_times,
                                  plus_pair, plus_second, max_second, min_second, mean)}


LOR = Monoid("lor", 0.0)
LAND = Monoid("land", 1.0)
ANY = Monoid("any", 0.0)
#: Monoids by name: the built-in ones and those added by :func:`register_monoid`.
MONOIDS = {m.name: m for m in (PLUS, MIN, MAX, TIMES, LOR, LAND, ANY)}

lor_land = Semiring("lor_land", LOR, "land")
any_pair = Semiring("any_pair", ANY, "pair")
plus_first = Semiring("plus_first", PLUS, "first")
min_first = Semiring("min_first", MIN, "first")
any_second = Semiring("any_second", ANY, "second")
any_first = Semiring("any_first", ANY, "first")

#: Every semiring known by name: :data:`SEMIRINGS` (those the SpMM/SDDMM
#: kernels implement), the GraphBLAS ones only the generic kernels run
#: (``lor_land``, ``any_pair``, ...) and those added by
#: :func:`register_semiring`.  The masked SpGEMM, ``mxm``, ``mxv`` and the
#: element-wise operations take any of them.
ALL_SEMIRINGS = dict(SEMIRINGS)
ALL_SEMIRINGS.update({s.name: s for s in (lor_land, any_pair, plus_first, min_first,
                                          any_second, any_first)})


def register_monoid(name, op=None, identity=0.0) -> Monoid:
    """Register a monoid: the binary operator ``op`` (a name or BinaryOp; default ``name``)
    with its ``identity``.  The operator must be associative and commutative (not checked).

    A monoid is named after its operator; ``name`` differing from ``op``'s
    name registers the operator again under ``name``.
    """
    from .ops import register_binary_op

    binop = binary_op(name if op is None else op)
    if binop.name != name:
        binop = register_binary_op(name, binop.func, ufunc=binop.ufunc)
    m = Monoid(name, float(identity))
    MONOIDS[name] = m
    return m


def get_monoid(monoid) -> Monoid:
    """The :class:`Monoid` for a name or a Monoid."""
    if isinstance(monoid, Monoid):
        return monoid
    if isinstance(monoid, str) and monoid in MONOIDS:
        return MONOIDS[monoid]
    raise ValueError(f"unknown monoid {monoid!r}; expected one of {sorted(MONOIDS)} "
                     f"or one added by register_monoid")


def register_semiring(name, add, multiply) -> Semiring:
    """Register ``name`` as the semiring (``add`` monoid, ``multiply`` binary operator).

    ``add`` is a :class:`Monoid` or a monoid's name, ``multiply`` a
    :class:`~spgnn.local.ops.BinaryOp` or its name (registered first with
    :func:`~spgnn.local.ops.register_binary_op` when it is a user function).
    From then on ``get_semiring(name)`` and every generic kernel know it.
    """
    add = get_monoid(add)
    mul = binary_op(multiply)
    if BINARY_OPS.get(mul.name) is not mul:
        raise ValueError(f"register_semiring: multiply {mul!r} is not registered; "
                         f"call register_binary_op first")
    s = Semiring(name, add, mul.name)
    ALL_SEMIRINGS[name] = s
    return s


def get_semiring(semiring) -> Semiring:
    """Return the :class:`Semiring` for a name or a Semiring (TypeError/ValueError otherwise)."""
    if isinstance(semiring, Semiring):
        return semiring
    if isinstance(semiring, str):
        try:
            return ALL_SEMIRINGS[semiring]
        except KeyError:
            raise ValueError(f"unknown semiring {semiring!r}; expected one of "
                             f"{sorted(ALL_SEMIRINGS)}") from None
    raise TypeError(f"semiring must be a Semiring or a name, but got {type(semiring).__name__}")


def partial_semiring(semiring: Semiring) -> Semiring:
    """The semiring of partial products that are reduced across ranks before they are final. Pure.

    A product split over ranks by columns (1.5D, 3D) computes each rank's
    share with the ``add`` monoid and reduces the shares with the same
    monoid.  Only ``row_mean`` semirings differ: each share must stay a sum
    (not a mean of the share's terms), and the caller divides by the
    *global* row counts after the reduction.  So this is ``semiring``
    itself, or for a ``row_mean`` semiring the same monoid and operator
    without the division (named ``"<name>:partial"``).
    """
    if not semiring.row_mean:
        return semiring
    return Semiring(semiring.name + ":partial", semiring.add, semiring.multiply)
