"""Row shards over a depth axis: ``Layout((o, d), ...)`` splits and their all-gather.

The 3D algorithms (Plexus, Ranjan et al., SC'25, §2.4 lines 2 and 5) keep the
first layer's features and the weights *sharded* over the depth axis ``d``
inside each ``o`` block, and all-gather them over ``d`` right before the
multiply.  These helpers are that sharding and that gather; the SpMM
(:mod:`spgnn.core.spmm_3d`), the dense ``matmul``
(:mod:`spgnn.core.dense_ops`) and the GNN layers use them.
"""

import numpy as np

from ..layout import block_offsets

__all__ = ["nested_splits", "gather_depth", "depth_counts"]


def nested_splits(outer_offsets, inner_parts):
    """Row splits of ``Layout((o, d), ...)``: each ``o`` block cut into ``inner_parts`` even pieces.

    Pure.  ``outer_offsets`` are the ``o``-level block boundaries.
    """
    out = [0]
    for a, b in zip(outer_offsets, outer_offsets[1:]):
        out += [a + off for off in block_offsets(b - a, inner_parts)[1:]]
    return tuple(int(v) for v in out)


def gather_depth(grid, local, d, backend, label, counts=None):
    """All-gather row shards over the depth axis ``d`` (rows in ``d`` order).

    ``counts`` (rows of every shard, known from the layout) saves the counts
    exchange.  Collective: over ``d`` (nothing when ``d`` has one rank).
    """
    comm = grid.comm(d)
    if comm.size == 1:
        return local
    # a device block stays on the device: the communicator moves it
    return comm.allgatherv(backend.xp.ascontiguousarray(local), counts, label=label)


def depth_counts(layout, grid, n, o, d):
    """Rows of each ``d`` shard inside my ``o`` block of a ``Layout((o, d), ...)``. Local."""
    off = layout.offsets(grid, n, 0)
    gd = grid.axis_size(d)
    b = grid.axis_index(o) * gd
    return np.diff(np.asarray(off[b:b + gd + 1], dtype=np.int64))
