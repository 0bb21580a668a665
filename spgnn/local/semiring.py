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

__all__ = [
    "Monoid", "Semiring", "PLUS", "MIN", "MAX", "TIMES",
    "plus_times", "min_plus", "max_plus", "max_times", "min_times",
    "plus_pair", "plus_second", "max_second", "min_second", "mean",
    "SEMIRINGS", "get_semiring", "partial_semiring",
]


@dataclass(frozen=True)
class Monoid:
    """An associative, commutative operator with an identity.

    ``name`` is one of ``"plus"``, ``"min"``, ``"max"``, ``"times"``; the
    communicator maps it to the matching MPI reduction.
    """

    name: str
    identity: float

    @property
    def ufunc(self) -> np.ufunc:
        return {"plus": np.add, "min": np.minimum, "max": np.maximum,
                "times": np.multiply}[self.name]


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
        if self.multiply not in MULTIPLY_OPS:
            raise ValueError(f"Semiring: multiply must be one of {MULTIPLY_OPS}, "
                             f"but got {self.multiply!r}")

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
        return np.ones_like(a + x)


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

SEMIRINGS = {s.name: s for s in (plus_times, min_plus, max_plus, max_times, min_times,
                                  plus_pair, plus_second, max_second, min_second, mean)}


def get_semiring(semiring) -> Semiring:
    """Return the :class:`Semiring` for a name or a Semiring (TypeError/ValueError otherwise)."""
    if isinstance(semiring, Semiring):
        return semiring
    if isinstance(semiring, str):
        try:
            return SEMIRINGS[semiring]
        except KeyError:
            raise ValueError(f"unknown semiring {semiring!r}; expected one of "
                             f"{sorted(SEMIRINGS)}") from None
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
