"""The GraphBLAS-style expression API: ``C(mask=M.S, accum="plus") << A.mxm(B, "plus_pair")``.

``A.mxm(B, ...)``, ``A.ewise_add(B)``, ``A.apply(f)``, ... return an
:class:`Expr`: the name of a plain function (:mod:`spgnn.core.mxm`,
:mod:`spgnn.core.algebra`) and its arguments, not evaluated yet.
``expr.new(mask=..., replace=...)`` evaluates it into a new matrix;
``C << expr`` and ``C(mask=..., accum=..., replace=...) << expr`` evaluate it
into ``C`` under GraphBLAS's output rule.  ``C[rows, cols]`` is a
:class:`Region`: ``C[rows, cols] << A`` assigns (``A`` a matrix, an
expression or a scalar; :func:`spgnn.core.assign.assign`),
``C(mask=M.S, accum="plus", replace=True)[rows, cols] << A`` assigns under a
mask of C's shape (GrB_assign), and ``C[rows, cols].new()`` extracts.  Evaluating is collective; the
plain functions check every operand before communicating.  The functions are
found by name through :mod:`spgnn.core.dispatch` (the matrix module cannot
import the operations, which import it).
"""

from . import dispatch

__all__ = ["Expr", "Target", "Region"]


class Expr:
    """A deferred call ``dispatch.lookup(name)(*args, **kwargs)``."""

    def __init__(self, name, *args, **kwargs):
        self.name, self.args, self.kwargs = name, args, kwargs

    def new(self, *, mask=None, replace=False):
        """Evaluate into a new matrix (optionally masked). Collective."""
        return dispatch.lookup(self.name)(*self.args, mask=mask, replace=replace, **self.kwargs)

    def __repr__(self):
        return f"Expr({self.name})"


class Target:
    """``C(mask=..., accum=..., replace=...)``: where and how ``<<`` writes."""

    def __init__(self, matrix, mask=None, accum=None, replace=False):
        self.matrix, self.mask, self.accum, self.replace = matrix, mask, accum, replace

    def __lshift__(self, expr):
        if not isinstance(expr, Expr):
            raise TypeError(f"<<: expected an expression such as A.mxm(B), but got "
                            f"{type(expr).__name__}")
        dispatch.lookup(expr.name)(*expr.args, mask=self.mask, accum=self.accum,
                                   replace=self.replace, out=self.matrix, **expr.kwargs)
        return self.matrix

    def __getitem__(self, key):
        """``C(mask=..., accum=..., replace=...)[rows, cols]``: a region to assign into."""
        rows, cols = _split_key(key)
        return Region(self.matrix, rows, cols, self)


def _split_key(key):
    if not isinstance(key, tuple) or len(key) != 2:
        raise TypeError(f"index a matrix region as C[rows, cols] (None or ':' for all), but got "
                        f"{key!r}")
    return tuple(None if isinstance(k, slice) and k == slice(None) else k for k in key)


class Region:
    """``C[rows, cols]`` (global index lists; ``None`` or ``:`` for all).

    ``region << A`` assigns ``A`` (a matrix, an expression evaluated first,
    or a scalar) under the target's mask/accum/replace; ``region.new()``
    extracts the submatrix.  Both collective.
    """

    def __init__(self, matrix, rows, cols, target=None):
        self.matrix, self.rows, self.cols = matrix, rows, cols
        self.target = target if target is not None else Target(matrix)

    def __lshift__(self, value):
        if isinstance(value, Expr):
            value = value.new()
        t = self.target
        return dispatch.lookup("assign")(self.matrix, value, self.rows, self.cols, mask=t.mask,
                                         accum=t.accum, replace=t.replace)

    def new(self, *, layout=None):
        """``extract(C, rows, cols, layout)``: a new matrix. Collective."""
        return dispatch.lookup("extract")(self.matrix, self.rows, self.cols, layout=layout)
