"""3D distributed SpMM on an ``X x Y x Z`` grid, as in Plexus (Ranjan et al., SC'25).

``research/002_plexus.md`` §2.3-2.7.  Each layer gives the three grid axes
the roles ``(o, i, d)`` = (outer, inner, depth); for layer ``l`` they are
:func:`spgnn.grid.roles_for_layer`: ``(x, y, z) -> (z, x, y) -> (y, z, x)``
with period 3 (``(o, i, d)_{l+1} = (d_l, o_l, i_l)``, :func:`spgnn.grid.rotate`).

Layouts for one layer (``A`` is ``N x N``, the features ``N x D``)::

    A      Layout(d, o)          N/G_d x N/G_o     replicated over i
    F_in   Layout(o, i)          N/G_o x D/G_i     replicated over d
           Layout((o, d), i)     first layer: also row-sharded over d inside
                                 each o block (``nested_splits``) -> all-gather
                                 over d before the multiply (§2.4 line 2)
    H      Layout(d, i)          N/G_d x D/G_i     spmm output: partial over o,
                                 all-reduced over o (§2.4 line 4), replicated over o
    W      Layout(i, o)          D/G_i x D'/G_o    (or Layout((i, d), o): sharded
                                 over d, all-gathered, §2.4 line 5)
    Q      Layout(d, o)          N/G_d x D'/G_o    matmul output, all-reduced over i
                                 = next layer's F_in: roles (o', i') = (d, o)

so a layer's output is already in the next layer's input layout and no
redistribution happens between layers (§2.5).  :func:`spmm_3d` is the
aggregation step ``H = A (+).(x) F`` and :func:`spgnn.core.dense_ops.matmul`
the combination step ``Q = H·W``.

Deviation from Plexus, documented: Plexus shards the first layer's features
and the weights over depth as *flat* pieces of the row-major local block
(padded); here they are sharded by whole rows inside the block, which is
expressible as a :class:`~spgnn.layout.Layout` and moves the same number of
elements when ``G_d`` divides the block's row count (no padding needed
otherwise: the all-gather is an allgatherv).

:func:`spgnn.plan.events.comm_volume_3d` is the §2.7 closed form of this
algorithm's communication (per rank, per epoch, ring collectives); the
ledger of a real run matches its forward part exactly.
"""

import numpy as np

from ..errors import LayoutMismatch
from ..layout import Layout, block_offsets, row_chunk_offsets
from ..local.csr import LocalCSR
from ..local.semiring import partial_semiring
from .depth import depth_counts, gather_depth, nested_splits
from .dist_dense import DistDenseMatrix
from .spmm_common import finish_partials, reduce_partials

__all__ = ["roles_3d", "layouts_3d", "require_3d", "spmm_3d", "row_chunks"]

SUPPORTED = ("A = Layout(d, o) and X = Layout(o, i) or Layout((o, d), i) for three distinct grid "
             "axes (o, i, d), X not partial, X's row blocks over o equal to A's column blocks; "
             "e.g. layer 0 on grid_3d: A = Layout('z', 'x'), X = Layout('x', 'y')")


def layouts_3d(grid, roles, n, d_in, d_out=None, *, shard_input=False, shard_weights=False):
    """The layouts of one 3D layer with roles ``(o, i, d)``, even splits. Local.

    Returns a dict with keys ``"A"`` (``n x n``), ``"X"`` (``n x d_in``,
    row-sharded over ``d`` when ``shard_input``), ``"H"`` (spmm output),
    ``"W"`` (``d_in x d_out``, sharded over ``d`` when ``shard_weights``)
    and ``"Q"`` (matmul output, the next layer's ``"X"``).
    """
    o, i, d = roles
    go, gi, gd = (grid.axis_size(a) for a in roles)
    out = {"A": Layout(d, o), "X": Layout(o, i), "H": Layout(d, i), "Q": Layout(d, o),
           "W": Layout(i, o)}
    if shard_input:
        out["X"] = Layout((o, d), i, row_splits=nested_splits(block_offsets(n, go), gd))
    if shard_weights:
        out["W"] = Layout((i, d), o, row_splits=nested_splits(block_offsets(d_in, gi), gd))
    return out


def _single(axes):
    return axes[0] if len(axes) == 1 else None


def roles_3d(A, X):
    """``(o, i, d, sharded)`` inferred from the layouts, or ``None``. Local.

    ``sharded`` tells whether X is row-sharded over ``d`` (first layer).
    """
    la, lx = A.layout, X.layout
    d, o = _single(la.rows), _single(la.cols)
    i = _single(lx.cols)
    if None in (d, o, i) or len({o, i, d}) != 3 or lx.partial:
        return None
    if lx.rows == (o,):
        sharded = False
    elif lx.rows == (o, d):
        sharded = True
    else:
        return None
    return o, i, d, sharded


def _outer_offsets(layout, grid, n, sharded, inner_axis):
    """The o-level (outer) row offsets of a layout split over ``(o,)`` or ``(o, d)``."""
    off = layout.offsets(grid, n, 0)
    if not sharded:
        return tuple(off)
    g = grid.axis_size(inner_axis)
    return tuple(off[::g])


def require_3d(A, X, name="3d"):
    """Validate a 3D layout pair; return ``(o, i, d, sharded)``. Local, raises LayoutMismatch."""
    got = roles_3d(A, X)
    if got is None:
        raise LayoutMismatch(f"spmm({name!r}): unsupported layouts A.layout={A.layout!r}, "
                             f"X.layout={X.layout!r}; supported: {SUPPORTED}")
    o, i, d, sharded = got
    grid = A.grid
    xo = _outer_offsets(X.layout, grid, X.shape[0], sharded, d)
    ao = tuple(A.layout.offsets(grid, A.shape[1], 1))
    if xo != ao:
        raise LayoutMismatch(f"spmm({name!r}): X's row blocks over {o!r} {xo} must equal A's "
                             f"column blocks over {o!r} {ao} (roles (o, i, d) = {(o, i, d)})")
    return got


def row_chunks(local, k, backend, align=1):
    """``[(r0, r1, csr)]``: ``local``'s rows in ``k`` chunks, even in row count. Local.

    Every member of an all-reduce group over ``o`` holds the same ``d``
    block, hence the same row count and the same chunk boundaries (report
    §9 pitfall 12): the chunks' all-reduces pair up.  Boundaries fall on
    multiples of ``align`` rows (the last chunk takes the remainder): with
    ``align`` the group size, every chunk but the last splits evenly over
    the group, so each rank's share of the chunked all-reduces (the ring
    model's ``n - ⌊n/p⌋`` or ``n - ⌈n/p⌉`` elements) adds up to its share of
    the unblocked one, byte for byte.
    """
    bounds = row_chunk_offsets(local.shape[0], k, align)
    host_ptr = np.asarray(backend.to_host(local.indptr))
    out = []
    for r0, r1 in zip(bounds[:-1], bounds[1:]):
        s, e = int(host_ptr[r0]), int(host_ptr[r1])
        out.append((r0, r1, LocalCSR(local.indptr[r0:r1 + 1] - s, local.indices[s:e],
                                     local.data[s:e], (r1 - r0, local.shape[1]), check=None)))
    return out


def _blocked_partials(A, f_local, semiring, comm_o, k):
    """Blocked aggregation (Plexus §4.2): SpMM and all-reduce over ``o`` chunk by chunk.

    Collective over ``comm_o``: ``k`` all-reduces whose sizes add up to the
    unblocked one (the same bytes; ``k`` times the messages).  The partial
    sums are written into the output's rows, so only one chunk's reduced
    copy exists beside it: the aggregation holds ``(1 + 1/k)`` output
    blocks at its peak instead of 2.
    """
    be = A.backend
    key = ("spmm-3d:row-chunks", k)
    chunks = A.cache.get(key)
    if chunks is None:
        chunks = A.cache[key] = row_chunks(A.local, k, be, align=comm_o.size)
    part = partial_semiring(semiring)
    out = be.xp.empty((A.local.shape[0], f_local.shape[1]),
                      dtype=np.result_type(A.local.data.dtype, f_local.dtype))
    for r0, r1, csr in chunks:
        y = be.spmm(csr, f_local, part, out=out[r0:r1])     # partial sums in place
        if comm_o.size > 1:
            out[r0:r1] = reduce_partials(comm_o, y, semiring.add, be, "spmm-3d")
        del y
    return out


def spmm_3d(A, X, semiring, row_blocks=1):
    """Plexus's aggregation ``H = A (+).(x) F`` for roles ``(o, i, d)`` inferred from the layouts.

    Collective: over the grid.  An all-gather over ``d`` when X is row-sharded
    over ``d`` (first layer), the local multiply, and an all-reduce over
    ``o`` with the semiring's add monoid (``mean`` reduces as plus and then
    divides by the global row counts, computed once and cached on A).
    ``row_blocks > 1``: the multiply and the all-reduce run in that many
    row chunks (:func:`_blocked_partials`; the same bytes, the same result
    bit for bit, smaller temporary buffers).  Returns H with ``Layout(d, i)``.
    """
    o, i, d, sharded = require_3d(A, X)
    grid, be = A.grid, A.backend
    f_local = X.local
    if sharded:
        f_local = gather_depth(grid, f_local, d, be, "spmm-3d:allgather",
                               depth_counts(X.layout, grid, X.shape[0], o, d))
    comm_o = grid.comm(o)
    if row_blocks > 1:
        y = _blocked_partials(A, f_local, semiring, comm_o, row_blocks)
        reduce_over = None                       # already reduced chunk by chunk
    else:
        y = be.spmm(A.local, f_local, partial_semiring(semiring))
        reduce_over = comm_o
    y = finish_partials(A, A.local, y, semiring, reduce_over, "spmm-3d",
                        ("spmm-3d:rowcounts", o), count_comm=comm_o if comm_o.size > 1 else None)
    layout = Layout(d, i, row_splits=A.layout.row_splits, col_splits=X.layout.col_splits)
    return DistDenseMatrix(y, (A.shape[0], X.shape[1]), grid, layout, backend=be)
