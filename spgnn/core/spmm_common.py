"""What the distributed SpMM algorithms share: their row-split result and the finish of partial products.

* :func:`row_split_result` wraps a local product as the output of the
  ``local``, ``1d*`` and ``15d*`` algorithms: split by rows like ``A``,
  replicated over every other axis.
* :func:`finish_partials` completes a product whose column range was split
  over ranks (1.5D over the replica axes, 3D over the outer axis): it reduces
  the ranks' partial products with the semiring's add monoid and, for a
  ``row_mean`` semiring (whose partial products were computed with
  :func:`~spgnn.local.semiring.partial_semiring`), divides by the *global*
  nonzero count of each row (empty rows give 0).
"""

import numpy as np

from ..layout import Layout
from .dist_dense import DistDenseMatrix

__all__ = ["row_split_result", "finish_partials", "reduce_partials"]


def row_split_result(A, X, y):
    """``y`` (my rows of ``A (+).(x) X``) as a DistDenseMatrix split by rows like ``A``. Local."""
    return DistDenseMatrix(y, (A.shape[0], X.shape[1]), A.grid,
                           Layout(A.layout.rows, row_splits=A.layout.row_splits), backend=A.backend)


def finish_partials(A, local, y, semiring, comm, label, key, count_comm):
    """Reduce partial products ``y`` over ``comm`` and apply ``row_mean``; return the local result.

    Parameters
    ----------
    A : DistSparseMatrix
        The sparse operand; its ``cache`` keeps the global row counts under
        ``key``.
    local : LocalCSR
        The block whose rows' nonzeros this rank counted (a column slab of
        ``A`` in 1.5D, ``A.local`` in 3D).
    y : backend array
        This rank's partial product, computed with
        :func:`~spgnn.local.semiring.partial_semiring`.
    semiring : Semiring
        The semiring the caller asked for.
    comm : Communicator or None
        The ranks sharing these output rows: ``y`` is all-reduced over it
        (label ``f"{label}:allreduce"``) when it has more than one rank.
    count_comm : Communicator or None
        Where the row counts are summed the first time (label
        ``f"{label}:plan"``); ``None``: this rank's counts are global.

    Collective: over ``comm`` when it has more than one rank, and over
    ``count_comm`` the first time a ``row_mean`` product is finished.
    """
    be = A.backend
    if comm is not None and comm.size > 1:
        y = reduce_partials(comm, y, semiring.add, be, label)
    if semiring.row_mean:
        counts = A.cache.get(key)
        if counts is None:
            counts = np.diff(np.asarray(be.to_host(local.indptr)).astype(np.int64))
            if count_comm is not None:
                counts = count_comm.allreduce(counts, label=f"{label}:plan")
            A.cache[key] = counts
        div = np.where(counts > 0, counts, 1).astype(y.dtype)
        y = y / be.from_host(div[:, None])
    return y


def reduce_partials(comm, y, monoid, be, label):
    """Combine the ranks' dense partial products with ``monoid``. Collective over ``comm``.

    MPI monoids: one allreduce (label ``f"{label}:allreduce"``).  Others
    (user-registered monoids, ``any``): one allgather (label
    ``f"{label}:allgather"``) folded in rank order with the monoid's compiled
    operator; a partial still holding the identity (no term on that rank)
    is skipped, which changes nothing for a true monoid and keeps ``any``
    from answering with the identity.
    """
    from .algebra import _MPI_MONOIDS
    if monoid.name in _MPI_MONOIDS:
        # the backend's own buffer travels: a device array is staged or passed
        # CUDA-aware by the communicator, as its setting says
        return comm.allreduce(be.xp.ascontiguousarray(y), op=monoid.name,
                              label=f"{label}:allreduce")
    # the fold runs on the host (compiled user operators); back to the backend's memory after
    parts = comm.allgather(np.ascontiguousarray(be.to_host(y)), label=f"{label}:allgather")
    out = parts[0].copy()
    op = monoid.op
    for part in parts[1:]:
        fresh = out == monoid.identity
        both = ~fresh & (part != monoid.identity)
        out[fresh] = part[fresh]
        if both.any():
            out[both] = be.map_binary(op, out[both], part[both])
    return be.from_host(out)
