"""Binary operators, the registry of user-defined operators, masks and accumulators.

A :class:`BinaryOp` is a scalar Python function ``f(x, y)`` that Numba can
compile (plain arithmetic, comparisons, ``math`` functions), plus an optional
numpy ufunc computing the same thing on arrays.  Registering one
(:func:`register_binary_op`) makes it usable by name everywhere an operator
is taken: as a semiring's multiply (:func:`register_semiring`), as a monoid
(:func:`register_monoid`), as an ``accum=``, in element-wise operations and
``apply``.  The numba backend compiles ``f`` once per operator (kernels are
specialised on it, never interpreted per element); the numpy backend uses the
ufunc, or ``f`` element by element when there is none (it is the reference).

Values are float32/float64 (the value dtypes of :class:`LocalCSR`); boolean
operators (``lor``, ``land``, ``any``, ``pair``) read non-zero as true and
give 1.0/0.0.

Masks: ``Mask(M, structure=True)`` keeps the positions of ``M``'s stored
entries, ``Mask(M)`` (a value mask) those whose value is non-zero; ``~mask``
complements.  :class:`~spgnn.core.dist_sparse.DistSparseMatrix` spells them
``M.S`` and ``M.V``, as python-graphblas does.  Local, pure: no numba here
(the backend compiles).
"""

import math
import threading
from dataclasses import dataclass, replace

import numpy as np

__all__ = ["BinaryOp", "UnaryOp", "BINARY_OPS", "UNARY_OPS", "binary_op", "unary_op",
           "register_binary_op", "register_unary_op", "Mask", "as_mask"]

_LOCK = threading.Lock()


@dataclass(frozen=True, eq=False)
class BinaryOp:
    """A named scalar operator ``func(x, y)``; ``ufunc`` is its numpy form (or ``None``).

    ``eq=False``: operators compare by identity, so a kernel compiled for one
    object is never reused for another registered under the same name.
    """

    name: str
    func: object
    ufunc: object = None

    def __call__(self, x, y):
        """Element-wise on numpy arrays (broadcasting), in the arrays' result dtype."""
        x, y = np.asarray(x), np.asarray(y)
        dt = np.result_type(x, y)
        if self.ufunc is not None:
            return np.asarray(self.ufunc(x, y)).astype(dt, copy=False)
        vec = np.frompyfunc(self.func, 2, 1)
        return np.asarray(vec(x, y), dtype=dt) if x.size or y.size else np.zeros(
            np.broadcast_shapes(x.shape, y.shape), dtype=dt)

    def reduceat(self, values, starts, axis=0):
        """``ufunc.reduceat`` of the operator along axis 0 (segments starting at ``starts``,
        each non-empty; each segment reduced from its first element, in order)."""
        values = np.asarray(values)
        if axis != 0:
            raise ValueError("BinaryOp.reduceat: only axis=0 is supported")
        if self.ufunc is not None and hasattr(self.ufunc, "reduceat"):
            return self.ufunc.reduceat(values, starts, axis=0).astype(values.dtype, copy=False)
        starts = np.asarray(starts, dtype=np.int64)
        out = np.empty((len(starts),) + values.shape[1:], dtype=values.dtype)
        ends = np.r_[starts[1:], values.shape[0]].astype(np.int64)
        for s, (a, b) in enumerate(zip(starts, ends)):
            acc = values[a]
            for v in values[a + 1:b]:
                acc = self(acc, v) if values.ndim > 1 else self.func(acc, v)
            out[s] = acc
        return out

    def __repr__(self):
        return f"BinaryOp({self.name})"


@dataclass(frozen=True, eq=False)
class UnaryOp:
    """A named scalar function ``func(x)``, or index-aware ``func(x, i, j)`` (``indexed``)."""

    name: str
    func: object
    ufunc: object = None
    indexed: bool = False

    def __call__(self, x, rows=None, cols=None):
        x = np.asarray(x)
        if self.indexed:
            vec = np.frompyfunc(self.func, 3, 1)
            return np.asarray(vec(x, rows, cols), dtype=x.dtype) if x.size else x.copy()
        if self.ufunc is not None:
            return np.asarray(self.ufunc(x)).astype(x.dtype, copy=False)
        vec = np.frompyfunc(self.func, 1, 1)
        return np.asarray(vec(x), dtype=x.dtype) if x.size else x.copy()

    def __repr__(self):
        return f"UnaryOp({self.name})"


# The built-in scalar functions (module-level so numba can compile them).
def _plus(x, y): return x + y
def _minus(x, y): return x - y
def _times(x, y): return x * y
def _div(x, y): return x / y
def _first(x, y): return x
def _second(x, y): return y
def _pair(x, y): return 1.0
def _any(x, y): return x                      # either operand is a valid answer
def _lor(x, y): return 1.0 if (x != 0 or y != 0) else 0.0
def _land(x, y): return 1.0 if (x != 0 and y != 0) else 0.0
def _lxor(x, y): return 1.0 if ((x != 0) != (y != 0)) else 0.0
def _eq(x, y): return 1.0 if x == y else 0.0


def _min(x, y):
    # NaN propagates, as np.minimum does (the numpy reference uses it)
    return y if (y < x or y != y) else x


def _max(x, y):
    return y if (y > x or y != y) else x


def _pair_ufunc(x, y):
    return np.ones(np.broadcast_shapes(np.shape(x), np.shape(y)), dtype=np.result_type(x, y))


def _bool_ufunc(f):
    def g(x, y):
        return f(np.asarray(x) != 0, np.asarray(y) != 0).astype(np.result_type(x, y))
    return g


def _first_ufunc(x, y):
    return np.broadcast_to(x, np.broadcast_shapes(np.shape(x), np.shape(y))).copy()


def _second_ufunc(x, y):
    return np.broadcast_to(y, np.broadcast_shapes(np.shape(x), np.shape(y))).copy()


class _Reducer:
    """A ufunc-like object with ``reduceat`` for operators without a numpy ufunc."""

    def __init__(self, elementwise, reduceat):
        self.elementwise, self._reduceat = elementwise, reduceat

    def __call__(self, x, y):
        return self.elementwise(x, y)

    def reduceat(self, values, starts, axis=0):
        if axis != 0:
            raise ValueError("reduceat: only axis=0 is supported")
        return self._reduceat(np.asarray(values), starts)


def _first_reduceat(values, starts):
    return values[starts]


def _bool_reduceat(ufunc):
    def f(values, starts):
        return ufunc.reduceat(values != 0, starts, axis=0).astype(values.dtype)
    return f


BINARY_OPS = {}
UNARY_OPS = {}


def register_binary_op(name, func, *, ufunc=None) -> BinaryOp:
    """Register ``func(x, y)`` (Numba-compilable) under ``name``; returns the :class:`BinaryOp`.

    ``ufunc`` (optional) is a vectorised numpy equivalent; without one the
    numpy backend calls ``func`` per element.  Re-registering a name
    replaces the operator (and everything built from it by name later).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_binary_op: name must be a non-empty string, but got {name!r}")
    if not callable(func):
        raise TypeError(f"register_binary_op: func must be callable, but got {type(func).__name__}")
    op = BinaryOp(name, func, ufunc)
    with _LOCK:
        BINARY_OPS[name] = op
    return op


def register_unary_op(name, func, *, ufunc=None, indexed=False) -> UnaryOp:
    """Register ``func(x)`` (or ``func(x, i, j)`` with global indices when ``indexed``)."""
    if not callable(func):
        raise TypeError(f"register_unary_op: func must be callable, but got {type(func).__name__}")
    op = UnaryOp(name, func, ufunc, bool(indexed))
    with _LOCK:
        UNARY_OPS[name] = op
    return op


for _name, _f, _u in (
        ("plus", _plus, np.add), ("minus", _minus, np.subtract), ("times", _times, np.multiply),
        ("div", _div, np.divide), ("min", _min, np.minimum), ("max", _max, np.maximum),
        ("first", _first, _Reducer(_first_ufunc, _first_reduceat)),
        ("second", _second, _second_ufunc), ("pair", _pair, _pair_ufunc),
        ("any", _any, _Reducer(_first_ufunc, _first_reduceat)),
        ("lor", _lor, _Reducer(_bool_ufunc(np.logical_or), _bool_reduceat(np.logical_or))),
        ("land", _land, _Reducer(_bool_ufunc(np.logical_and), _bool_reduceat(np.logical_and))),
        ("lxor", _lxor, _Reducer(_bool_ufunc(np.logical_xor), _bool_reduceat(np.logical_xor))),
        ("eq", _eq, None)):
    register_binary_op(_name, _f, ufunc=_u)


def _identity(x): return x
def _ainv(x): return -x
def _abs(x): return abs(x)
def _one(x): return 1.0
def _minv(x): return 1.0 / x
def _sqrt(x): return math.sqrt(x)


for _name, _f, _u in (("identity", _identity, np.positive), ("ainv", _ainv, np.negative),
                      ("abs", _abs, np.abs), ("one", _one, np.ones_like),
                      ("minv", _minv, np.reciprocal), ("sqrt", _sqrt, np.sqrt)):
    register_unary_op(_name, _f, ufunc=_u)


def binary_op(op) -> BinaryOp:
    """The :class:`BinaryOp` for a name or an operator (ValueError/TypeError otherwise)."""
    if isinstance(op, BinaryOp):
        return op
    if isinstance(op, str):
        try:
            return BINARY_OPS[op]
        except KeyError:
            raise ValueError(f"unknown binary operator {op!r}; expected one of "
                             f"{sorted(BINARY_OPS)} or one added by register_binary_op") from None
    if hasattr(op, "name") and isinstance(getattr(op, "name"), str) and op.name in BINARY_OPS:
        return BINARY_OPS[op.name]          # a Monoid names its operator
    raise TypeError(f"expected a BinaryOp or its name, but got {type(op).__name__}")


def unary_op(op) -> UnaryOp:
    """The :class:`UnaryOp` for a name, an operator, or a plain callable (wrapped, unnamed)."""
    if isinstance(op, UnaryOp):
        return op
    if isinstance(op, str):
        try:
            return UNARY_OPS[op]
        except KeyError:
            raise ValueError(f"unknown unary operator {op!r}; expected one of {sorted(UNARY_OPS)}"
                             f" or one added by register_unary_op") from None
    if callable(op):
        return UnaryOp(getattr(op, "__name__", "lambda"), op)
    raise TypeError(f"expected a UnaryOp, its name or a function, but got {type(op).__name__}")


@dataclass(frozen=True)
class Mask:
    """Which output positions an operation may write.

    ``matrix`` has the output's shape (and, distributed, its layout);
    ``structure=True`` allows every stored entry, else only the non-zero
    ones; ``complement`` allows exactly the positions the mask does not.
    """

    matrix: object
    structure: bool = False
    complement: bool = False

    def __invert__(self) -> "Mask":
        return replace(self, complement=not self.complement)

    @property
    def S(self) -> "Mask":
        return replace(self, structure=True)

    @property
    def V(self) -> "Mask":
        return replace(self, structure=False)

    def __repr__(self):
        kind = "S" if self.structure else "V"
        return f"{'~' if self.complement else ''}Mask({kind})"


def as_mask(mask):
    """``None``, a :class:`Mask`, or a matrix (taken as a value mask)."""
    if mask is None or isinstance(mask, Mask):
        return mask
    return Mask(mask)
