"""Core objects: distributed matrices and the operators on them.

Importing this package imports the operator modules, which bind the matrix
types' Python operators (``A @ X``) through :mod:`spgnn.core.dispatch`.
"""

from . import spmm  # noqa: F401  (registers DistSparseMatrix.__matmul__)
from . import algebra, assign, mxm  # noqa: F401,E402  (register the GraphBLAS expressions' functions)
