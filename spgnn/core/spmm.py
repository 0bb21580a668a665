"""Distributed SpMM ``Y = A (+).(x) X`` over a semiring.

``spmm`` validates what every rank knows (grids, shapes, semiring, layouts,
backends) before any communication, then dispatches to an algorithm chosen
by name or by the layouts of ``A`` and ``X``.  Each algorithm is a plain
function written against ``grid.comm(axes)`` and the backend's local kernels.

Algorithms
----------
``local``
    Everything on one rank (grid of size 1, or A and X fully replicated).
``1d`` (sparsity-oblivious block-row, CAGNET's baseline)
    A split by rows with whole rows per rank, X split by rows over the same
    axes.  Every rank all-gathers all of X, then multiplies its block.
    Rank ``i`` receives ``(n - n_i) * f`` elements.
``1d-aware`` (Mukhopadhyay et al., ICPP'24, Algorithm 1 corrected)
    Same layouts; each rank receives only the rows of X that its block's
    non-empty columns need, through one alltoallv.  The exchange plan is built
    once per (matrix, X row split) and cached on the matrix.
``15d`` / ``15d-aware`` (CAGNET 1.5D; ICPP'24 Algorithm 2 corrected)
    A split by rows over the row axes R and by columns over the replica axes
    C (``Layout("row", "layer")`` on ``grid_15d(c)``), X split by rows over R
    and replicated over C.  Inside each process column the needed rows of X
    are broadcast whole (``15d``) or exchanged sparsity-aware in one
    alltoallv (``15d-aware``); the partial products are all-reduced over C.
    See :mod:`spgnn.core.spmm_15d`.
``3d`` (Plexus, Agarwal's 3D algorithm)
    Roles ``(o, i, d)`` from the layouts: A ``Layout(d, o)``, X
    ``Layout(o, i)`` (or row-sharded over d, first layer: all-gather over d);
    output ``Layout(d, i)`` after an all-reduce over o.  See
    :mod:`spgnn.core.spmm_3d` and :func:`spgnn.core.dense_ops.matmul`.

Automatic selection (``algorithm=None``): ``local``, then ``1d-aware``, then
``15d-aware`` (A split by columns over axes that X does not use), then
``3d``; anything else raises :class:`~spgnn.errors.LayoutMismatch` naming
the supported layouts.  ``15d``/``15d-aware`` also accept A with whole block
rows replicated over C when named explicitly.
"""

import numpy as np

from ..errors import DimensionMismatch, LayoutMismatch
from ..local.semiring import get_semiring, plus_times
from . import dispatch
from ._dist_common import check_product
from .dist_dense import DistDenseMatrix
from .dist_sparse import DistSparseMatrix
from .exchange import ExchangePlan
from .hybrid import AGGREGATIONS, HybridPlan
from .spmm_15d import match_15d, spmm_15d, spmm_15d_aware
from .spmm_3d import roles_3d, spmm_3d
from .spmm_common import row_split_result

__all__ = ["spmm", "SPMM_ALGORITHMS", "DISTRIBUTED_ALGORITHMS"]


def _check_operands(A, X, semiring):
    if not isinstance(A, DistSparseMatrix):
        raise TypeError(f"spmm: expected A to be a DistSparseMatrix, but got {type(A).__name__}")
    if not isinstance(X, DistDenseMatrix):
        raise TypeError(f"spmm: expected X to be a DistDenseMatrix, but got {type(X).__name__}")
    check_product("spmm", ("A", "X"), A, X, "(n,k),(k,f)->(n,f)")
    return get_semiring(semiring)


def _is_row_1d(A, X):
    """A holds whole rows split over some axes; X is split by rows over the same axes."""
    la, lx = A.layout, X.layout
    return (bool(la.rows) and not la.cols and la.rows == lx.rows and not lx.cols
            and not lx.partial)


def _select(A, X):
    # 3D first: even on one rank its output layout Layout(d, i) is what the
    # next layer (and dense_ops.matmul) expects, unlike local's.
    if roles_3d(A, X) is not None:
        return "3d"
    if A.grid.size == 1 or (not A.layout.rows and not A.layout.cols
                            and not X.layout.rows and not X.layout.cols and not X.layout.partial):
        return "local"
    if _is_row_1d(A, X):
        return "1d-aware"
    if A.layout.cols and match_15d(A, X) is not None:
        return "15d-aware"
    raise LayoutMismatch(f"spmm: no algorithm for A.layout={A.layout!r} and X.layout={X.layout!r}; "
                         f"supported: both split by rows over the same axes with whole rows of A "
                         f"(1d, 1d-aware); A = Layout(R, C) with X = Layout(R), e.g. "
                         f"Layout('row', 'layer') and Layout('row') on grid_15d (15d, 15d-aware); "
                         f"A = Layout(d, o) with X = Layout(o, i) or Layout((o, d), i) for three "
                         f"distinct axes, e.g. Layout('z', 'x') and Layout('x', 'y') on grid_3d "
                         f"(3d); or everything replicated (local)")


def _spmm_local(A, X, semiring):
    if X.layout.partial:
        X = X.reduce_partial()
    return row_split_result(A, X, A.backend.spmm(A.local, X.local, semiring))


def _require_1d(A, X, name):
    if not _is_row_1d(A, X):
        raise LayoutMismatch(f"spmm({name!r}): needs A split by whole rows and X split by rows over "
                             f"the same axes, but got A.layout={A.layout!r}, X.layout={X.layout!r}")


def _spmm_1d(A, X, semiring):
    """Sparsity-oblivious 1D: all-gather X over the row axes, multiply locally."""
    _require_1d(A, X, "1d")
    comm = A.grid.comm(*A.layout.rows)
    be = A.backend
    # Every rank knows the row split of X: no counts exchange needed.
    counts = np.diff(np.asarray(X.layout.offsets(X.grid, X.shape[0], 0)))
    # X.local may live on the device: the communicator moves it (staged or CUDA-aware)
    x_full = comm.allgatherv(be.xp.ascontiguousarray(X.local), counts, label="spmm-1d:allgather")
    return row_split_result(A, X, be.spmm(A.local, x_full, semiring))


def _spmm_1d_aware(A, X, semiring, aggregation="post", codec=None):
    """Sparsity-aware 1D: one alltoallv of exactly the rows A's block needs.

    ``aggregation`` ``pre``/``hybrid`` or a ``codec`` use the factorised
    exchange of :mod:`spgnn.core.hybrid` (paper 004); plain ``post`` without
    a codec is the original row exchange.
    """
    _require_1d(A, X, "1d-aware")
    comm = A.grid.comm(*A.layout.rows)
    be = A.backend
    if aggregation != "post" or codec is not None:
        plan = HybridPlan.for_spmm_1d(A, X, aggregation)
        x_ext = plan.exchange(comm, be, np.asarray(be.to_host(X.local)), codec,
                              label=f"spmm-1d-{aggregation}:exchange")
        return row_split_result(A, X, be.spmm(plan.compact, be.from_host(x_ext), semiring))
    plan = ExchangePlan.for_spmm_1d(A, X)
    x_ext = plan.exchange(comm, X.local, xp=be.xp)
    return row_split_result(A, X, be.spmm(plan.compact, x_ext, semiring))


def _check_exchange(semiring, aggregation="post", codec=None):
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"spmm: aggregation must be one of {AGGREGATIONS}, but got "
                         f"{aggregation!r}")
    if aggregation != "post" and semiring.name != "plus_times":
        raise ValueError(f"spmm: pre/hybrid aggregation sends partial sums, which needs "
                         f"the plus_times semiring, but got {semiring!r}")


def _check_row_blocks(semiring, row_blocks=1):
    if not isinstance(row_blocks, (int, np.integer)) or row_blocks < 1:
        raise ValueError(f"spmm: row_blocks must be an int >= 1, but got {row_blocks!r}")


#: Every SpMM algorithm by name: the registry ``spmm(algorithm=...)`` looks up.
SPMM_ALGORITHMS = {"local": _spmm_local, "1d": _spmm_1d, "1d-aware": _spmm_1d_aware,
                   "15d": spmm_15d, "15d-aware": spmm_15d_aware, "3d": spmm_3d}

#: The options an algorithm takes beyond its operands: ``{algorithm: (defaults, check)}``.
#: ``check(semiring, **options)`` validates them before any communication; an option
#: given to another algorithm is refused by name (:func:`spmm`).
SPMM_OPTIONS = {"1d-aware": ({"aggregation": "post", "codec": None}, _check_exchange),
                "3d": ({"row_blocks": 1}, _check_row_blocks)}
_NEUTRAL = {k: v for defaults, _ in SPMM_OPTIONS.values() for k, v in defaults.items()}

#: The distributed algorithms, in registry order: what a GNN trains on and
#: the commands (``spmm``, ``plan``, ``train``) offer.  ``local`` is not one.
DISTRIBUTED_ALGORITHMS = tuple(name for name in SPMM_ALGORITHMS if name != "local")


def spmm(A, X, semiring=plus_times, *, algorithm=None, transpose_a=False, **options):
    """``Y = A (+).(x) X`` for a distributed sparse A and dense X.

    Collective over the grid of A and X.

    Parameters
    ----------
    A : DistSparseMatrix, shape (n, k)
    X : DistDenseMatrix, shape (k, f)
    semiring : Semiring or name
    algorithm : str, optional
        One of :data:`SPMM_ALGORITHMS`; chosen from the layouts when omitted.
    transpose_a : bool
        Multiply by ``Aᵀ`` instead (A square): uses :meth:`DistSparseMatrix.transposed`,
        built once and cached with its own exchange plans (the backward pass).
    **options
        The algorithm's own options (:data:`SPMM_OPTIONS`); one given to an
        algorithm that does not take it is refused by name:

    aggregation : {"post", "pre", "hybrid"}
        ``1d-aware`` only: how cut edges are exchanged (:mod:`spgnn.core.hybrid`):
        raw source rows (post, the default), partial sums (pre), or per edge by
        a minimum vertex cover of each pair's cut graph (hybrid).
    codec : spgnn.core.codec.Codec, optional
        ``1d-aware`` only: the exchanged rows travel quantized.
    row_blocks : int
        ``3d`` only: multiply and all-reduce in this many row chunks
        (Plexus's blocked aggregation, :func:`spgnn.core.spmm_3d.spmm_3d`).

    Returns
    -------
    DistDenseMatrix, shape (n, f): split by rows like A (``local``, ``1d*``,
    ``15d*``: replicated over the other axes), or ``Layout(d, i)`` (``3d``).

    Raises
    ------
    DimensionMismatch, GridMismatch, BackendMismatch, LayoutMismatch, TypeError
        On every rank, before any communication.

    Examples
    --------
    One process (a solo communicator); under ``mpiexec`` the same lines with
    ``grid_1d()`` split the rows over the ranks:

    >>> import numpy as np, scipy.sparse as sp
    >>> from spgnn import DistDenseMatrix, DistSparseMatrix, grid_1d, spmm
    >>> from spgnn.comm import solo_communicator
    >>> grid = grid_1d(solo_communicator())
    >>> a = sp.csr_array(np.array([[0., 1, 0], [2, 0, 3], [0, 0, 4]]))
    >>> A = DistSparseMatrix.from_global(a, grid, backend="numpy")
    >>> X = DistDenseMatrix.from_global(np.ones((3, 2)), grid, backend="numpy")
    >>> spmm(A, X).to_global()
    array([[1., 1.],
           [5., 5.],
           [4., 4.]])
    >>> spmm(A, X, "max_times").to_global()   # any semiring
    array([[1., 1.],
           [3., 3.],
           [4., 4.]])
    """
    if transpose_a and isinstance(A, DistSparseMatrix):
        if A.shape[0] != A.shape[1]:
            raise DimensionMismatch(f"spmm(transpose_a=True): A must be square, but got "
                                    f"A.shape={A.shape}")
        semiring = _check_operands(A, X, semiring)
        A = A.transposed()
    semiring = _check_operands(A, X, semiring)
    if algorithm is None:
        algorithm = _select(A, X)
    try:
        fn = SPMM_ALGORITHMS[algorithm]
    except KeyError:
        raise ValueError(f"spmm: unknown algorithm {algorithm!r}; expected one of "
                         f"{sorted(SPMM_ALGORITHMS)}") from None
    # Checked before any communication: every rank knows all of it.  An option at
    # its neutral value (post, no codec, one row block) is as if not given.
    unknown = sorted(set(options) - set(_NEUTRAL))
    if unknown:
        raise TypeError(f"spmm: unknown option(s) {unknown}; the algorithms' options are "
                        f"{sorted(_NEUTRAL)}")
    given = {k: v for k, v in options.items()
             if not (v is _NEUTRAL[k] or (_NEUTRAL[k] is not None and v == _NEUTRAL[k]))}
    defaults, check = SPMM_OPTIONS.get(algorithm, ({}, None))
    foreign = sorted(set(given) - set(defaults))
    if foreign:
        takes = sorted(a for a, (d, _) in SPMM_OPTIONS.items() if set(foreign) & set(d))
        raise ValueError(f"spmm: {', '.join(f'{k}={given[k]!r}' for k in foreign)} "
                         f"need{'s' if len(foreign) == 1 else ''} algorithm "
                         f"{' or '.join(repr(a) for a in takes)}, but got {algorithm!r}")
    if check is not None:
        check(semiring, **given)
    return fn(A, X, semiring, **given)


# ``DistSparseMatrix @ DistDenseMatrix`` is this function (dist_sparse cannot
# import it: this module imports dist_sparse).
dispatch.register("matmul", spmm)
