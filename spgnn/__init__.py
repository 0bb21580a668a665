"""spgnn: distributed sparse linear algebra for graph neural networks.

Importing spgnn initialises neither MPI nor Numba, and imports none of the
optional libraries (torch, torch_geometric, networkx): MPI starts when the
first communicator is made (``Communicator.world()``, ``make_grid``), Numba
kernels compile (or load from the on-disk cache) on first use, and
:mod:`spgnn.interop` imports the library a conversion needs when it runs.
"""

#: The package version (also ``python -m spgnn info``).
__version__ = "0.1.0"

from .errors import (BackendMismatch, BackendUnavailable, DimensionMismatch, DTypeError,
                     GraphFormatError, GridError, GridMismatch, InvalidSparseStructure,
                     LayoutMismatch, RemoteError, SpgnnEfficiencyWarning, SpgnnError)
from .layout import Layout, block_bounds
from .grid import (AbstractGrid, ProcessGrid, grid_1d, grid_15d, grid_2d, grid_3d, make_grid,
                   roles_for_layer, rotate)
from .comm import Communicator, CommStats, run_loopback
from .backends import available_backends, get_backend, set_default_backend
from .local.semiring import (Semiring, get_semiring, max_plus, max_second, max_times, mean,
                            min_plus, min_second, min_times, plus_pair, plus_second, plus_times)
from .local.csr import LocalCSR
from .core.dist_dense import DistDenseMatrix
from .core.dist_sparse import DistSparseMatrix
from .core.spmm import spmm
from .core.sddmm import sddmm
from .core.spmm_15d import layouts_15d
from .core.spmm_3d import layouts_3d
from .core.dense_ops import matmul
from .core import local_ops
from .core.mxm import mxm, mxv, vxm
from .core.algebra import (apply, ewise_add, ewise_mult, extract, reduce_cols, reduce_rows,
                           reduce_scalar, select)
from .core.assign import assign
from .local.ops import Mask, register_binary_op, register_unary_op
from .local.semiring import any_pair, lor_land, plus_first, register_monoid, register_semiring
from .io import Graph, load_graph, rmat, sbm
from . import datasets, interop  # noqa: E402  (torch, PyG and networkx load on first use)
from .plan import plan_mxm, plan_spmm

__all__ = [
    "__version__",
    # errors
    "SpgnnError", "DimensionMismatch", "LayoutMismatch", "GridError", "GridMismatch",
    "InvalidSparseStructure", "DTypeError", "BackendUnavailable", "BackendMismatch",
    "RemoteError", "SpgnnEfficiencyWarning",
    # placement
    "Layout", "block_bounds", "AbstractGrid", "ProcessGrid", "make_grid", "grid_1d", "grid_15d",
    "grid_2d", "grid_3d",
    # communication
    "Communicator", "CommStats", "run_loopback",
    # backends and semirings
    "available_backends", "get_backend", "set_default_backend", "Semiring", "get_semiring",
    "plus_times", "min_plus", "max_plus", "max_times", "min_times", "plus_pair", "plus_second",
    "max_second", "min_second", "mean",
    # matrices and operators
    "LocalCSR", "DistDenseMatrix", "DistSparseMatrix", "spmm", "sddmm", "matmul", "local_ops",
    "layouts_15d", "layouts_3d", "roles_for_layer", "rotate", "plan_spmm",
    # GraphBLAS algebra (docs/graphblas.md)
    "mxm", "mxv", "vxm", "ewise_add", "ewise_mult", "apply", "select", "reduce_rows",
    "reduce_cols", "reduce_scalar", "extract", "assign", "Mask", "register_binary_op", "register_unary_op",
    "register_monoid", "register_semiring", "lor_land", "any_pair", "plus_first", "plan_mxm",
    # graphs
    "Graph", "GraphFormatError", "load_graph", "rmat", "sbm",
    # named datasets, and other libraries' graphs and tensors
    "datasets", "interop",
]
