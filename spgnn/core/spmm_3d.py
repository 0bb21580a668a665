"""3D distributed SpMM on an ``X x Y x Z`` grid, as in Plexus (Ranjan et al., SC'25).

``research/002_plexus.md`` §2.3-2.7.  Each layer gives the three grid axes
the roles ``(o, i, d)`` = (outer, inner, depth); for layer ``l`` they are
``roles_for_layer(l)``: ``(x, y, z) -> (z, x, y) -> (y, z, x)`` with period 3
(``(o, i, d)_{l+1} = (d_l, o_l, i_l)``, :func:`rotate`).

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

:func:`comm_volume_3d` is the §2.7 closed form (per rank, per epoch, ring
collectives) that the planner uses; the report's 65,536-row test vector
checks it, and the ledger of a real run matches its forward part exactly.
"""

from fractions import Fraction

import numpy as np

from ..errors import DimensionMismatch, GridError, LayoutMismatch
from ..layout import Layout, block_offsets
from .dist_dense import DistDenseMatrix

__all__ = ["roles_for_layer", "rotate", "roles_3d", "layouts_3d", "nested_splits", "spmm_3d",
           "comm_volume_3d", "comm_terms_3d", "AXES_3D"]

#: Plexus's axis names, in grid order.
AXES_3D = ("x", "y", "z")

SUPPORTED = ("A = Layout(d, o) and X = Layout(o, i) or Layout((o, d), i) for three distinct grid "
             "axes (o, i, d), X not partial, X's row blocks over o equal to A's column blocks; "
             "e.g. layer 0 on grid_3d: A = Layout('z', 'x'), X = Layout('x', 'y')")


def rotate(roles):
    """The next layer's roles: ``(o, i, d) -> (d, o, i)`` (Plexus §2.5). Pure."""
    o, i, d = roles
    return d, o, i


def roles_for_layer(layer, axes=AXES_3D):
    """``(o, i, d)`` for layer ``layer``: ``axes``, then rotated ``layer % 3`` times. Pure.

    With the default axes: layer 0 ``(x, y, z)``, layer 1 ``(z, x, y)``,
    layer 2 ``(y, z, x)``, layer 3 ``(x, y, z)`` again.
    """
    if int(layer) < 0:
        raise ValueError(f"roles_for_layer: layer must be non-negative, but got {layer}")
    roles = tuple(axes)
    if len(roles) != 3 or len(set(roles)) != 3:
        raise GridError(f"roles_for_layer: need three distinct axis names, but got {axes!r}")
    for _ in range(int(layer) % 3):
        roles = rotate(roles)
    return roles


def nested_splits(outer_offsets, inner_parts):
    """Row splits of ``Layout((o, d), ...)``: each ``o`` block cut into ``inner_parts`` even pieces.

    Pure.  ``outer_offsets`` are the ``o``-level block boundaries.
    """
    out = [0]
    for a, b in zip(outer_offsets, outer_offsets[1:]):
        out += [a + off for off in block_offsets(b - a, inner_parts)[1:]]
    return tuple(int(v) for v in out)


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


def gather_depth(grid, local, d, backend, label, counts=None):
    """All-gather row shards over the depth axis ``d`` (rows in ``d`` order).

    ``counts`` (rows of every shard, known from the layout) saves the counts
    exchange.  Collective: over ``d`` (nothing when ``d`` has one rank).
    """
    comm = grid.comm(d)
    if comm.size == 1:
        return local
    host = np.ascontiguousarray(backend.to_host(local))
    return backend.from_host(comm.allgatherv(host, counts, label=label))


def depth_counts(layout, grid, n, o, d):
    """Rows of each ``d`` shard inside my ``o`` block of a ``Layout((o, d), ...)``. Local."""
    off = layout.offsets(grid, n, 0)
    gd = grid.axis_size(d)
    b = grid.axis_index(o) * gd
    return np.diff(np.asarray(off[b:b + gd + 1], dtype=np.int64))


def spmm_3d(A, X, semiring):
    """Plexus's aggregation ``H = A (+).(x) F`` for roles ``(o, i, d)`` inferred from the layouts.

    Collective: over the grid.  An all-gather over ``d`` when X is row-sharded
    over ``d`` (first layer), the local multiply, and an all-reduce over
    ``o`` with the semiring's add monoid (``mean`` reduces as plus and then
    divides by the global row counts, computed once and cached on A).
    Returns H with ``Layout(d, i)``.
    """
    from .spmm_15d import _local_semiring

    o, i, d, sharded = require_3d(A, X)
    grid, be = A.grid, A.backend
    f_local = X.local
    if sharded:
        f_local = gather_depth(grid, f_local, d, be, "spmm-3d:allgather",
                               depth_counts(X.layout, grid, X.shape[0], o, d))
    y = be.spmm(A.local, f_local, _local_semiring(semiring))
    comm_o = grid.comm(o)
    if comm_o.size > 1:
        host = np.ascontiguousarray(be.to_host(y))
        y = be.from_host(comm_o.allreduce(host, op=semiring.add.name, label="spmm-3d:allreduce"))
    if semiring.row_mean:
        key = ("spmm-3d:rowcounts", o)
        counts = A.cache.get(key)
        if counts is None:
            counts = np.diff(np.asarray(be.to_host(A.local.indptr)).astype(np.int64))
            if comm_o.size > 1:
                counts = comm_o.allreduce(counts, label="spmm-3d:plan")
            A.cache[key] = counts
        div = np.where(counts > 0, counts, 1).astype(y.dtype)
        y = y / be.from_host(div[:, None])
    layout = Layout(d, i, row_splits=A.layout.row_splits, col_splits=X.layout.col_splits)
    return DistDenseMatrix(y, (A.shape[0], X.shape[1]), grid, layout, backend=be)


# --------------------------------------------------------------------------------------------
# Communication model (Plexus §2.7), pure arithmetic


def comm_terms_3d(N, dims, grid_shape, *, axes=AXES_3D, forward=True, backward=True,
                  shard_input=True, shard_weights=True):
    """Every communication step of a ``len(dims) - 1``-layer 3D GCN epoch. Pure.

    Returns a list of ``(layer, pass, step, axis, elements)`` with
    ``elements`` the per-rank volume under the ring model (all-gather and
    reduce-scatter ``(p−1)/p·M``, all-reduce ``2(p−1)/p·M`` for a full buffer
    of ``M`` elements) as an exact :class:`fractions.Fraction`.  The steps are
    the table of report §2.7, with layer ``l``'s roles ``roles_for_layer(l)``:
    forward AG F (first layer, when ``shard_input``), AR H over o, AG W over d
    (when ``shard_weights``), AR Q over i; backward RS dW over d (AR when the
    weights are replicated), AG W over d, AR dH over o, and dF over d (RS for
    the sharded first layer, AR otherwise).  Zero-volume steps are included.
    """
    N = int(N)
    dims = [int(v) for v in dims]
    if len(dims) < 2:
        raise DimensionMismatch(f"comm_terms_3d: dims needs at least two entries, but got {dims}")
    if len(grid_shape) != 3 or any(int(g) <= 0 for g in grid_shape):
        raise GridError(f"comm_terms_3d: grid_shape must be three positive ints, but got "
                        f"{grid_shape!r}")
    G = dict(zip(axes, (int(g) for g in grid_shape)))

    def ag(p, m):
        return Fraction(p - 1, p) * m

    def ar(p, m):
        return 2 * Fraction(p - 1, p) * m

    out = []
    for layer in range(len(dims) - 1):
        o, i, d = roles_for_layer(layer, axes)
        go, gi, gd = G[o], G[i], G[d]
        D, Dp = dims[layer], dims[layer + 1]
        feat_in = Fraction(N * D, go * gi)       # F block  N/Go x D/Gi
        h_blk = Fraction(N * D, gd * gi)         # H block  N/Gd x D/Gi
        q_blk = Fraction(N * Dp, gd * go)        # Q block  N/Gd x D'/Go
        w_blk = Fraction(D * Dp, gi * go)        # W block  D/Gi x D'/Go
        first = layer == 0 and shard_input
        if forward:
            if first:
                out.append((layer, "forward", "allgather F", d, ag(gd, feat_in)))
            out.append((layer, "forward", "allreduce H", o, ar(go, h_blk)))
            if shard_weights:
                out.append((layer, "forward", "allgather W", d, ag(gd, w_blk)))
            out.append((layer, "forward", "allreduce Q", i, ar(gi, q_blk)))
        if backward:
            if shard_weights:
                out.append((layer, "backward", "reduce_scatter dW", d, ag(gd, w_blk)))
                out.append((layer, "backward", "allgather W", d, ag(gd, w_blk)))
            else:
                out.append((layer, "backward", "allreduce dW", d, ar(gd, w_blk)))
            out.append((layer, "backward", "allreduce dH", o, ar(go, h_blk)))
            if first:
                out.append((layer, "backward", "reduce_scatter dF", d, ag(gd, feat_in)))
            else:
                out.append((layer, "backward", "allreduce dF", d, ar(gd, feat_in)))
    return out


def comm_volume_3d(N, dims, grid_shape, *, axes=AXES_3D, itemsize=None, **options):
    """Per-rank communication volume of a 3D GCN epoch, by grid axis (Plexus §2.7). Pure.

    Parameters
    ----------
    N : int
        Rows (vertices).
    dims : sequence of int
        Feature widths ``[D_0, ..., D_L]`` (``L`` layers).
    grid_shape : (int, int, int)
        ``(G_x, G_y, G_z)`` for ``axes``.
    itemsize : int, optional
        Bytes per element; when given the result is in bytes.
    **options
        ``forward``, ``backward``, ``shard_input``, ``shard_weights`` as in
        :func:`comm_terms_3d` (default: the full epoch with Plexus's sharding).

    Returns
    -------
    dict
        ``{axis: volume, ..., "total": volume}`` as exact Fractions (ints
        compare equal when integral).  For the report's test vector,
        ``comm_volume_3d(65536, [128, 128, 128, 32], (2, 2, 2))["total"] ==
        23_606_784``.
    """
    out = {a: Fraction(0) for a in axes}
    for *_, axis, vol in comm_terms_3d(N, dims, grid_shape, axes=axes, **options):
        out[axis] += vol
    if itemsize is not None:
        out = {a: v * int(itemsize) for a, v in out.items()}
    out["total"] = sum(out.values(), Fraction(0))
    return out
