"""``GraphContext``: the only door from a GNN layer to communication.

A layer receives a context in ``forward(ctx, H)`` and ``backward(ctx, dH)``
and composes these helpers; each is backed by a core operator
(:func:`spgnn.spmm`, :func:`spgnn.core.dense_ops.matmul`) or by one
collective of the grid's communicators, and each infers what to do from the
*layouts* of its operands, so the same layer code runs on every algorithm:

=========================  ===========================  =============================================
helper                      1d / 1d-aware / 15d-aware   3d (H ``Layout(r, c)``, third axis ``t``)
=========================  ===========================  =============================================
``propagate(H)``            ``spmm(Â, H)``               ``spmm(Â[t, r], H)`` -> ``Layout(t, c)``, AR over r
``propagate_transpose(G)``  ``spmm(Âᵀ, G)``              ``spmm(Âᵀ[t, r], G)`` -> ``Layout(t, c)``, AR over r
``matmul(H, W)``            local ``H @ W`` (W replic.)  ``dense_ops.matmul`` -> ``Layout(r, t)``, AR over c
``matmul_transpose(G, W)``  local ``G @ Wᵀ``             ``dense_ops.matmul(G, Wᵀ)``, AR over W's col axis
``weight_grad(H, G, W)``    ``Hᵀ G``, AR over row axes   ``Hᵀ G``, AR (or reduce-scatter) over r
``add_bias / bias_grad``    local / AR over row axes     local / AR over r
``dropout(H, p, key)``      local (counter-based mask)   local
=========================  ===========================  =============================================

Every helper is collective over the graph's grid (all ranks call the same
helpers in the same order, as in any SPMD program) and returns matrices
whose replicas hold identical, complete values.
"""

import numpy as np

from ..core.dense_ops import matmul as dense_matmul
from ..core.dist_dense import DistDenseMatrix
from ..core.spmm import spmm
from ..core.depth import depth_counts, gather_depth, nested_splits
from ..errors import DimensionMismatch, LayoutMismatch
from ..layout import Layout
from . import functional as F
from .sparse import SparseBackedMatrix

__all__ = ["GraphContext", "DropoutMask"]


class DropoutMask:
    """The counter-based mask of one dropout call, applied without being stored. Local.

    Holds only the keys, the row ids and the column range: applying it
    re-hashes (:func:`~spgnn.gnn.functional.dropout_apply`), which is cheaper
    than keeping a float mask of the block's size between forward and
    backward.  ``np.asarray(mask)`` gives the float scale block
    (:func:`~spgnn.gnn.functional.dropout_mask`).
    """

    def __init__(self, p, keys, rows, col0, width, ncols, dtype):
        self.p, self.keys, self.rows = float(p), tuple(keys), rows
        self.col0, self.width, self.ncols = int(col0), int(width), int(ncols)
        self.dtype = np.dtype(dtype)

    def apply(self, x):
        """``x * mask`` (bit-identical to multiplying by the float mask). Local."""
        return F.dropout_apply(x, self.p, self.keys, self.rows, self.col0, self.ncols)

    def __array__(self, dtype=None, copy=None):
        cols = np.arange(self.col0, self.col0 + self.width)
        return F.dropout_mask(self.p, self.keys, self.rows, cols, self.ncols,
                              dtype=dtype or self.dtype)

    def __repr__(self):
        return f"DropoutMask(p={self.p}, keys={self.keys}, rows={len(self.rows)})"


class GraphContext:
    """What a layer may use during one forward/backward pass.

    Made by :meth:`spgnn.gnn.data.DistGraph.context`; not constructed by users.

    Attributes (local)
    ------------------
    graph : DistGraph
    training : bool
        Dropout is active only when true.
    epoch, seed : int
        Keys of the counter-based dropout masks.
    need_input_grad : bool
        Whether the layer running ``backward`` must return its input
        gradient.  False at the top (the model's input, the features, is not
        trainable); :class:`~spgnn.gnn.models.Sequential` sets it per layer,
        so the first convolution skips its input-gradient SpMM.
    """

    def __init__(self, graph, *, training=True, epoch=0, seed=0):
        self.graph = graph
        self.grid = graph.grid
        self.training = bool(training)
        self.epoch = int(epoch)
        self.seed = int(seed)
        self.need_input_grad = False

    # ------------------------------------------------------------------ helpers
    @property
    def is_3d(self) -> bool:
        return self.graph.algorithm == "3d"

    def _third(self, *axes):
        rest = [a for a in self.grid.axis_names if a not in axes]
        if len(rest) != 1:
            raise LayoutMismatch(f"GraphContext: expected a 3D layout using two of the axes "
                                 f"{self.grid.axis_names}, but got {axes}")
        return rest[0]

    def _unshard(self, H):
        """A first-layer input row-sharded over depth, ``Layout((o, d), i)``, gathered to ``Layout(o, i)``.

        Collective over ``d`` (one all-gather, as Plexus §2.4 line 2).
        """
        lay = H.layout
        if len(lay.rows) != 2:
            return H
        o, d = lay.rows
        local = gather_depth(self.grid, H.local, d, H.backend, "gnn:allgather-input",
                             depth_counts(lay, self.grid, H.shape[0], o, d))
        outer = None if lay.row_splits is None else tuple(lay.row_splits[::self.grid.axis_size(d)])
        return DistDenseMatrix(local, H.shape, self.grid,
                               Layout(o, lay.cols, row_splits=outer, col_splits=lay.col_splits),
                               backend=H.backend)

    def _roles_of(self, H, what):
        lay = H.layout
        if len(lay.rows) != 1 or len(lay.cols) != 1 or lay.partial:
            raise LayoutMismatch(f"GraphContext.{what}: expected a 3D block layout Layout(r, c), "
                                 f"but got {lay!r}")
        r, c = lay.rows[0], lay.cols[0]
        return r, c, self._third(r, c)

    def _check_rows(self, H, what):
        if H.shape[0] != self.graph.num_nodes:
            raise DimensionMismatch(f"GraphContext.{what}: expected {self.graph.num_nodes} rows "
                                    f"(one per node), but got shape {H.shape}")

    # -------------------------------------------------------------- aggregation
    def propagate(self, H):
        """``Â·H`` (one graph convolution's aggregation). Collective.

        1d / 15d: the graph's algorithm, output in H's layout.  3d: H is
        ``Layout(o, i)`` (or ``Layout((o, d), i)``, row-sharded first-layer
        input), the result is ``Layout(d, i)``.
        """
        self._check_rows(H, "propagate")
        g = self.graph
        if not self.is_3d:
            return spmm(g.A, H, algorithm=g.algorithm)
        lay = H.layout
        o = lay.rows[0]
        d = lay.rows[1] if len(lay.rows) == 2 else self._third(o, *lay.cols)
        return spmm(g.adjacency(d, o), H, algorithm="3d")

    def propagate_transpose(self, G):
        """``Âᵀ·G``: the backward of :meth:`propagate`. Collective.

        For a gradient ``G`` in :meth:`propagate`'s output layout
        ``Layout(d, i)`` the result is in its input layout ``Layout(o, i)``,
        all-reduced over ``d`` (Plexus §2.4 lines 17-18, ``l ≥ 1`` form).
        """
        self._check_rows(G, "propagate_transpose")
        g = self.graph
        if not self.is_3d:
            return spmm(g.AT, G, algorithm=g.algorithm)
        r, c, t = self._roles_of(G, "propagate_transpose")
        return spmm(g.adjacency_T(t, r), G, algorithm="3d")

    # ---------------------------------------------------------------- combination
    def _place_weight(self, W, H):
        """Place W for ``H @ W`` (on first use). Local."""
        g = self.graph
        if not self.is_3d:
            W.place(self.grid, Layout(), g.dtype, reduce_axes=H.layout.rows)
            return
        r, c, t = self._roles_of(H, "matmul")
        hoff = H.layout.offsets(self.grid, H.shape[1], 1)
        gr = self.grid.axis_size(r)
        rows_per_block = np.diff(hoff)
        if g.shard_weights and gr > 1 and np.all(rows_per_block % gr == 0):
            lay = Layout((c, r), t, row_splits=nested_splits(hoff, gr))
        else:
            lay = Layout(c, t, row_splits=H.layout.col_splits)
        W.place(self.grid, lay, g.dtype, reduce_axes=(r,))

    def _check_w(self, H, W, what):
        if H.shape[1] != W.shape[0]:
            raise DimensionMismatch(f"GraphContext.{what}: dimension mismatch (n,k),(k,m)->(n,m): "
                                    f"H.shape={H.shape}, W.shape={W.shape}")

    def matmul(self, H, W):
        """``H·W`` with a :class:`~spgnn.gnn.params.Parameter` W (placed on first use). Collective.

        1d / 15d: W replicated, local product.  3d: W is ``Layout(c, t)``
        (or row-sharded over ``r``, all-gathered first), the product is
        all-reduced over ``c`` and lands in ``Layout(r, t)``.
        """
        self._check_w(H, W, "matmul")
        H = self._unshard(H)
        self._place_weight(W, H)
        if not self.is_3d:
            if isinstance(H, SparseBackedMatrix):       # sparse features: O(nnz * m)
                return H.like(H.matmul_local(W.value), shape=(H.shape[0], W.shape[1]))
            return H.like(H.backend.matmul(H.local, W.value), shape=(H.shape[0], W.shape[1]))
        return dense_matmul(H, W.as_dist(H.backend))

    def _full_weight_block(self, W):
        """W's local block, all-gathered over depth when sharded. Collective over depth."""
        lay = W.layout
        if len(lay.rows) != 2:
            return W.value, lay.rows[0], lay.row_splits
        c, r = lay.rows
        full = gather_depth(self.grid, W.value, r, W.as_dist().backend, "gnn:allgather-W",
                            depth_counts(lay, self.grid, W.shape[0], c, r))
        return full, c, tuple(lay.row_splits[::self.grid.axis_size(r)])

    def matmul_transpose(self, G, W):
        """``G·Wᵀ``: the input gradient of :meth:`matmul`. Collective.

        3d: G is ``Layout(r, t)``; the partial product is all-reduced over
        ``t`` (Plexus §2.4 lines 14-16) and lands in H's layout ``Layout(r, c)``.
        """
        if G.shape[1] != W.shape[1]:
            raise DimensionMismatch(f"GraphContext.matmul_transpose: G.shape={G.shape} does not "
                                    f"fit W.shape={W.shape}")
        W._require_placed("matmul_transpose")
        if not self.is_3d:
            return G.like(G.backend.matmul(G.local, W.value.T), shape=(G.shape[0], W.shape[0]))
        full, c, csplits = self._full_weight_block(W)
        t = W.layout.cols[0]
        wt = DistDenseMatrix(np.ascontiguousarray(full.T), (W.shape[1], W.shape[0]), self.grid,
                             Layout(t, c, row_splits=W.layout.col_splits, col_splits=csplits),
                             backend=G.backend)
        return dense_matmul(G, wt)

    def weight_grad(self, H, G, W):
        """Accumulate ``Hᵀ·G`` into ``W.grad``, summed over the node axes of H. Collective.

        The node dimension of ``H`` is split over ``H.layout.rows``; summing
        over exactly those axes (one replica of every node) gives the
        complete gradient, identical on every replica of W's block.  1d:
        ``"row"``; 1.5D: ``"row"`` only (never ``"layer"``, whose ranks hold
        replicas: report 000 §2.7); 3d: the depth axis ``r``, by all-reduce, or
        by reduce-scatter when W is sharded over it (Plexus §2.4 line 13).
        """
        H = self._unshard(H)
        if H.shape[1] != W.shape[0] or G.shape[1] != W.shape[1] or H.shape[0] != G.shape[0]:
            raise DimensionMismatch(f"GraphContext.weight_grad: H.shape={H.shape}, "
                                    f"G.shape={G.shape} do not fit W.shape={W.shape}")
        W._require_placed("weight_grad")
        if isinstance(H, SparseBackedMatrix):
            part = H.t_matmul_local(G.local)
        else:
            part = np.ascontiguousarray(H.local.T @ G.local)
        axes = H.layout.rows
        comm = self.grid.comm(*axes) if axes else None
        if self.is_3d and len(W.layout.rows) == 2:
            c, r = W.layout.rows
            counts = depth_counts(W.layout, self.grid, W.shape[0], c, r)
            g = comm.reduce_scatter(part, counts, label="gnn:reduce-scatter-dW")
        elif comm is not None and comm.size > 1:
            g = comm.allreduce(part, label="gnn:allreduce-dW")
        else:
            g = part
        W.grad += g.astype(W.grad.dtype, copy=False)

    # ----------------------------------------------------------------------- bias
    def _place_bias(self, b, Q):
        if b.shape != (1, Q.shape[1]):
            raise DimensionMismatch(f"GraphContext.add_bias: bias shape {b.shape} must be "
                                    f"(1, {Q.shape[1]})")
        lay = Layout((), Q.layout.cols, col_splits=Q.layout.col_splits)
        b.place(self.grid, lay, self.graph.dtype, reduce_axes=Q.layout.rows)

    def add_bias(self, Q, b):
        """``Q + b`` (b a ``(1, m)`` Parameter, placed like Q's columns). Local."""
        self._place_bias(b, Q)
        return Q.like(Q.local + b.value)

    def bias_grad(self, G, b):
        """Accumulate the column sums of ``G`` into ``b.grad``. Collective over G's row axes."""
        b._require_placed("bias_grad")
        part = np.ascontiguousarray(G.local.sum(axis=0, keepdims=True))
        axes = G.layout.rows
        if axes and self.grid.comm(*axes).size > 1:
            part = self.grid.comm(*axes).allreduce(part, label="gnn:allreduce-db")
        b.grad += part.astype(b.grad.dtype, copy=False)

    # ------------------------------------------------------------------- dropout
    def dropout(self, H, p, key):
        """Inverted dropout with a mask keyed by (seed, epoch, key, node id, column). Local.

        Returns ``(H', mask)``.  ``mask`` is a :class:`DropoutMask`: apply it
        to a gradient with ``mask.apply(dH_local)`` (or multiply by it, which
        materialises the float scale block); it is ``None`` when not
        training or ``p == 0``, and then ``H' is H``.  The mask does not
        depend on P, the algorithm or the layout.  For sparse features
        (:class:`~spgnn.gnn.sparse.SparseBackedMatrix`) only the stored
        entries are hashed and ``H'`` stays sparse-backed.
        """
        if not self.training or p == 0:
            return H, None
        mask = DropoutMask(p, (self.seed, self.epoch, key), self.graph.node_ids(H.layout),
                           H.col_start, H.local_shape[1], H.shape[1], H.dtype)
        if isinstance(H, SparseBackedMatrix):
            c = H.csr
            data = F.dropout_apply_csr(c.indptr, c.indices, c.data, mask.p, mask.keys, mask.rows,
                                       mask.col0, mask.ncols)
            return H.with_data(data), mask
        return H.like(mask.apply(H.local)), mask

    # ---------------------------------------------------------------------- loss
    def _loss_args(self, logits):
        lay = logits.layout
        rows = self.grid.comm(*lay.rows) if lay.rows else None
        cols = self.grid.comm(*lay.cols) if lay.cols else None
        nodes = self.graph.node_block(lay)
        return nodes, dict(row_comm=rows, class_comm=cols, col_start=logits.col_start)

    def loss(self, logits, which="train"):
        """Masked softmax cross-entropy ``(loss, dlogits, accuracy)``. Collective.

        ``which`` names the mask (``"train"``, ``"val"``, ``"test"``).  The
        mean is over the global number of masked nodes; ``dlogits`` is in the
        logits' layout, complete on every replica.
        """
        nodes, kw = self._loss_args(logits)
        loss, grad, acc = F.softmax_cross_entropy(logits.local, nodes["label"], nodes[which], **kw)
        return loss, logits.like(grad), acc

    def scores(self, logits, which=("train", "val", "test")):
        """``{mask: (loss, accuracy, count)}`` for several masks, one reduction. Collective."""
        nodes, kw = self._loss_args(logits)
        return F.masked_scores(logits.local, nodes["label"], {w: nodes[w] for w in which}, **kw)

    def predict(self, logits):
        """Predicted class of every node, in the ORIGINAL node order, on every rank. Collective."""
        nodes, kw = self._loss_args(logits)
        _, _, _, _, pred = F._softmax_parts(logits.local, nodes["label"], kw["col_start"],
                                            kw["class_comm"])
        lay = logits.layout
        P = DistDenseMatrix(pred[:, None].astype(np.int64), (logits.shape[0], 1), self.grid,
                            Layout(lay.rows, row_splits=lay.row_splits), backend=logits.backend)
        return self.graph.to_original(P.to_global()[:, 0])
