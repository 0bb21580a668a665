"""The GraphBLAS-style expression API: ``C(mask=M.S, accum="plus") << A.mxm(B, "plus_pair")``.

``A.mxm(B, ...)``, ``A.ewise_add(B)``, ``A.apply(f)``, ... return an
:class:`Expr`: the name of a plain function (:mod:`spgnn.core.mxm`,
:mod:`spgnn.core.algebra`) and its arguments, not evaluated yet.
``expr.new(mask=..., replace=...)`` evaluates it into a new matrix;
``C << expr`` and ``C(mask=..., accum=..., replace=...) << expr`` evaluate it
into ``C`` under GraphBLAS's output rule.  Evaluating is collective; the
plain functions check every operand before communicating.  The functions are
found by name through :mod:`spgnn.core.dispatch` (the matrix module cannot
import the operations, which import it).
"""

from . import dispatch

__all__ = ["Expr", "Target"]


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
