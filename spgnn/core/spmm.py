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

from ..local.alloc import empty as empty_output
from ..errors import DimensionMismatch, LayoutMismatch
from ..layout import Layout
from .dist_dense import DistDenseMatrix
from .dist_sparse import DistSparseMatrix
from ..local.csr import LocalCSR
from ..local.semiring import get_semiring, plus_times
from .spmm_15d import match_15d, spmm_15d, spmm_15d_aware
from .spmm_3d import roles_3d, spmm_3d
from ._dist_common import check_product

__all__ = ["spmm", "SPMM_ALGORITHMS", "ExchangePlan"]


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
    y = A.backend.spmm(A.local, X.local, semiring)
    return DistDenseMatrix(y, (A.shape[0], X.shape[1]), A.grid,
                           Layout(A.layout.rows, row_splits=A.layout.row_splits), backend=A.backend)


def _require_1d(A, X, name):
    if not _is_row_1d(A, X):
        raise LayoutMismatch(f"spmm({name!r}): needs A split by whole rows and X split by rows over "
                             f"the same axes, but got A.layout={A.layout!r}, X.layout={X.layout!r}")


def _out_1d(A, X, y):
    return DistDenseMatrix(y, (A.shape[0], X.shape[1]), A.grid,
                           Layout(A.layout.rows, row_splits=A.layout.row_splits), backend=A.backend)


def _spmm_1d(A, X, semiring):
    """Sparsity-oblivious 1D: all-gather X over the row axes, multiply locally."""
    _require_1d(A, X, "1d")
    comm = A.grid.comm(*A.layout.rows)
    be = A.backend
    # Every rank knows the row split of X: no counts exchange needed.
    counts = np.diff(np.asarray(X.layout.offsets(X.grid, X.shape[0], 0)))
    x_full = comm.allgatherv(np.ascontiguousarray(be.to_host(X.local)), counts,
                             label="spmm-1d:allgather")
    return _out_1d(A, X, be.spmm(A.local, be.from_host(x_full), semiring))


class ExchangePlan:
    """Which rows of a row-split X each rank needs for its block of A, and who sends them.

    Built once per (A's pattern, X's row split) by :meth:`for_spmm_1d`
    (collective: one alltoallv of counts and one of row ids) and reused for
    every SpMM with that matrix.

    Attributes (local)
    ------------------
    send_rows : local row indices of my X block to send, grouped by destination
    send_counts, recv_counts : rows per peer (self excluded: zero)
    local_cols : A's columns remapped to rows of ``[my X block; received rows]``
    """

    def __init__(self, send_rows, send_counts, recv_counts, compact, max_rows):
        self.send_rows = send_rows
        self.send_counts = send_counts
        self.recv_counts = recv_counts
        self.compact = compact
        # Largest number of rows any rank sends or receives: with the row
        # width it decides, identically on every rank, whether an exchange
        # needs the chunked large-message path, so no per-call agreement.
        self.max_rows = max_rows

    @property
    def rows_sent(self) -> int:
        return int(self.send_counts.sum())

    @property
    def rows_received(self) -> int:
        return int(self.recv_counts.sum())

    @classmethod
    def for_spmm_1d(cls, A, X):
        """Collective over A's row axes."""
        key = ("spmm-1d-aware", X.layout.offsets(X.grid, X.shape[0], 0))
        plan = A.cache.get(key)
        if plan is None:
            plan = cls.build(A.grid.comm(*A.layout.rows), A.local, 0, key[1], A.backend,
                             label="spmm-1d-aware:plan")
            A.cache[key] = plan
        return plan

    @classmethod
    def build(cls, comm, local, col_start, offsets, backend, label):
        """Plan the exchange for one local block; the caller caches it.

        Collective: over ``comm``, whose rank ``r`` holds rows
        ``[offsets[r], offsets[r+1])`` of X.  ``local`` is a :class:`LocalCSR`
        whose column ``c`` is X's global row ``col_start + c`` (the 1D
        algorithm passes A's whole-row block with ``col_start = 0``; the 1.5D
        one its column slab, see :mod:`spgnn.core.spmm_15d`).
        """
        be = backend
        offsets = np.asarray(offsets, dtype=np.int64)
        me = comm.rank
        x0, x1 = offsets[me], offsets[me + 1]
        indices = np.asarray(be.to_host(local.indices)).astype(np.int64) + int(col_start)
        needed = np.unique(indices)
        remote = needed[(needed < x0) | (needed >= x1)]
        owner = np.searchsorted(offsets, remote, side="right") - 1
        req_counts = np.bincount(owner, minlength=comm.size).astype(np.int64)
        # Tell each owner which of its rows I need (once per plan).
        send_counts = comm.alltoall(req_counts, label=label).astype(np.int64)
        asked = comm.alltoallv(remote, req_counts, send_counts, label=label)
        send_rows = asked - x0
        # Column remap: own rows first, then received rows in (owner, id) order.
        lut_keys = np.concatenate([np.arange(x0, x1, dtype=np.int64), remote])
        order = np.argsort(lut_keys, kind="stable")
        sorted_keys = lut_keys[order]
        pos = order[np.searchsorted(sorted_keys, indices)]
        idt = local.indices.dtype
        compact = LocalCSR(local.indptr, be.from_host(pos.astype(idt)), local.data,
                           (local.shape[0], int(lut_keys.size)), check=None)
        most = max(int(send_counts.sum()), int(req_counts.sum()))
        max_rows = int(comm.allreduce(np.array([most], dtype=np.int64), op="max",
                                      label=label)[0])
        return cls(send_rows, send_counts, req_counts, compact, max_rows)

    def exchange(self, comm, x_local, label="spmm-1d-aware:exchange"):
        """Send the planned rows of ``x_local`` (host array); return ``[x_local; received]``.

        The result is the next SpMM's dense operand, so it starts on a cache
        line (:func:`~spgnn.local.alloc.empty`; why: kernels/README.md).
        """
        width = int(np.prod(x_local.shape[1:], dtype=np.int64))
        got = comm.alltoallv(np.ascontiguousarray(x_local[self.send_rows]), self.send_counts,
                             self.recv_counts, label=label,
                             split=self.max_rows * width > comm.max_count)
        out = empty_output((x_local.shape[0] + got.shape[0],) + x_local.shape[1:], x_local.dtype)
        return np.concatenate([x_local, got], axis=0, out=out)


def _spmm_1d_aware(A, X, semiring):
    """Sparsity-aware 1D: one alltoallv of exactly the rows A's block needs."""
    _require_1d(A, X, "1d-aware")
    plan = ExchangePlan.for_spmm_1d(A, X)
    comm = A.grid.comm(*A.layout.rows)
    be = A.backend
    x_ext = plan.exchange(comm, np.asarray(be.to_host(X.local)))
    return _out_1d(A, X, be.spmm(plan.compact, be.from_host(x_ext), semiring))


SPMM_ALGORITHMS = {"local": _spmm_local, "1d": _spmm_1d, "1d-aware": _spmm_1d_aware,
                   "15d": spmm_15d, "15d-aware": spmm_15d_aware, "3d": spmm_3d}


def spmm(A, X, semiring=plus_times, *, algorithm=None, transpose_a=False):
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

    Returns
    -------
    DistDenseMatrix, shape (n, f): split by rows like A (``local``, ``1d*``,
    ``15d*``: replicated over the other axes), or ``Layout(d, i)`` (``3d``).

    Raises
    ------
    DimensionMismatch, GridMismatch, BackendMismatch, LayoutMismatch, TypeError
        On every rank, before any communication.
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
    return fn(A, X, semiring)
