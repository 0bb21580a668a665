"""Late binding of the matrix types' Python operators to the operations that implement them.

``DistSparseMatrix.__matmul__`` is :func:`spgnn.core.spmm.spmm`, but
:mod:`spgnn.core.spmm` imports :mod:`spgnn.core.dist_sparse` (it checks its
operands' types), so the matrix module cannot import the operation.  Instead
each operator module registers its implementation here when it is imported,
and importing :mod:`spgnn.core` imports every operator module
(``spgnn/core/__init__.py``), so by the time a distributed matrix exists its
operators are bound.  The import graph stays a tree: matrix modules and
operator modules both import this module, never each other in a circle.
"""

__all__ = ["register", "lookup"]

_OPERATIONS = {}


def register(name, fn):
    """Bind operator ``name`` (e.g. ``"matmul"``) to ``fn``. Local."""
    _OPERATIONS[name] = fn
    return fn


def lookup(name):
    """The function bound to operator ``name``. Local.

    Raises ``RuntimeError`` when nothing registered it, i.e. when
    :mod:`spgnn.core` was bypassed (it cannot be: importing any of its
    submodules runs ``spgnn/core/__init__.py`` first).
    """
    try:
        return _OPERATIONS[name]
    except KeyError:
        raise RuntimeError(f"spgnn.core: no implementation registered for operator {name!r}; "
                           f"import spgnn.core") from None
