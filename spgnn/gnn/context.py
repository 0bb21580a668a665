"""Contexts: the only door from a GNN layer to data movement.

A layer receives a context in ``forward(ctx, H)`` and ``backward(ctx, dH)``
and composes its helpers.  Two contexts implement the same helpers, so one
layer class runs on both:

* :class:`GraphContext` -- the whole graph, distributed for one algorithm
  (:class:`~spgnn.gnn.data.DistGraph`): full-graph training and
  full-neighbourhood evaluation.
* :class:`BlockContext` -- one sampled minibatch held by this rank (a list of
  :class:`~spgnn.sampling.SampledBlock`, one per hop): minibatch training.

=============================  ====================================  ================================
helper                          GraphContext                           BlockContext (hop ``h``)
=============================  ====================================  ================================
``propagate(H, hop)``           ``spmm(A, H)`` (the graph's            ``M_h·H``, ``M_h`` the block's
                                aggregation: GCN ``Â`` or ``D⁻¹A``)    row-normalised pattern
``propagate_transpose(G, hop)`` ``spmm(Aᵀ, G)``                        ``M_hᵀ·G``
``root(H, hop)``                ``H`` (every node is its own root)     rows of the block's destinations
``root_transpose(G, hop, d)``   ``d + G``                              ``d`` plus ``G`` scattered back
``matmul(H, W)`` ...            as below, on the graph's layouts       local products
``dropout(H, p, key)``          mask keyed by ``(seed, epoch, key)``   keyed by ``(seed, epoch, key,
                                and each row's original node id        minibatch id)`` and row position
``loss(logits)``                masked mean over the global mask       summed over the minibatch
=============================  ====================================  ================================

The dense helpers (:class:`Context`) infer what to do from the *layouts* of
their operands, so the same layer code runs on every algorithm:

=========================  ===========================  =============================================
helper                      1d / 1d-aware / 15d / local   3d (H ``Layout(r, c)``, third axis ``t``)
=========================  ===========================  =============================================
``propagate(H)``            ``spmm(Â, H)``               ``spmm(Â[t, r], H)`` -> ``Layout(t, c)``, AR over r
``propagate_transpose(G)``  ``spmm(Âᵀ, G)``              ``spmm(Âᵀ[t, r], G)`` -> ``Layout(t, c)``, AR over r
``matmul(H, W)``            local ``H @ W`` (W replic.)  ``dense_ops.matmul`` -> ``Layout(r, t)``, AR over c
``matmul_transpose(G, W)``  local ``G @ Wᵀ``             ``dense_ops.matmul(G, Wᵀ)``, AR over W's col axis
``weight_grad(H, G, W)``    ``Hᵀ G``, AR over row axes   ``Hᵀ G``, AR (or reduce-scatter) over r
``add_bias / bias_grad``    local / AR over row axes     local / AR over r
``dropout(H, p, key)``      local (counter-based mask)   local
=========================  ===========================  =============================================

A block context's matrices are held whole by this rank (``Layout()`` on a
one-rank grid), so its row axes are empty and its helpers never
communicate: the minibatch trainer sums the gradients of all ranks in one
all-reduce after the backward pass.  Every :class:`GraphContext` helper is
collective over the graph's grid (all ranks call the same helpers in the
same order, as in any SPMD program) and returns matrices whose replicas hold
identical, complete values.

Dropout: one scheme everywhere.  A mask entry is kept when the counter-based
hash :func:`~spgnn.gnn.functional.hash_uniform` of ``(keys, row, column)``
is at least ``p``; the context supplies the keys and the row ids.  Masks do
not depend on ``P``, the algorithm, the layout or the rank that trains a
minibatch.
"""

import numpy as np

from ..backends import get_backend
from ..comm import solo_communicator
from ..core.dense_ops import matmul as dense_matmul
from ..core.dist_dense import DistDenseMatrix
from ..core.edge_softmax import edge_softmax, edge_softmax_backward, with_values
from ..core.sddmm import sddmm
from ..core.spmm import spmm
from ..core.spmm_reverse import spmm_transpose
from ..core.depth import depth_counts, gather_depth, nested_splits
from ..errors import DimensionMismatch, DTypeError, LayoutMismatch
from ..grid import grid_1d
from ..layout import Layout
from . import functional as F
from .blocks import BlockOperator
from .sparse import SparseBackedMatrix

__all__ = ["Context", "GraphContext", "BlockContext", "DropoutMask", "local_grid"]

_LOCAL_GRID = []


def local_grid():
    """A one-rank grid over :func:`~spgnn.comm.solo_communicator` (made once per process). Local.

    Holds what one rank holds whole and alone: a sampled minibatch's
    activations, parameters trained without a graph.
    """
    if not _LOCAL_GRID:
        _LOCAL_GRID.append(grid_1d(solo_communicator()))
    return _LOCAL_GRID[0]


#: The last key of every edge-dropout mask (:meth:`GraphContext.edge_dropout`).
EDGE_DROPOUT_TAG = 0xED6E


class DropoutMask:
    """The counter-based mask of one dropout call, applied without being stored. Local.

    Holds only the keys, the row ids and the column range: applying it
    re-hashes (:func:`~spgnn.gnn.functional.dropout_apply`), which is cheaper
    than keeping a float mask of the block's size between forward and
    backward.  ``np.asarray(mask)`` gives the float scale block
    (:func:`~spgnn.gnn.functional.dropout_mask`).
    """

    def __init__(self, p, keys, rows, col0, width, ncols, dtype, backend=None):
        self.p, self.keys, self.rows = float(p), tuple(keys), rows
        self.col0, self.width, self.ncols = int(col0), int(width), int(ncols)
        self.dtype = np.dtype(dtype)
        self.backend = backend

    def apply(self, x):
        """``x * mask`` (bit-identical to multiplying by the float mask). Local."""
        return F.dropout_apply(x, self.p, self.keys, self.rows, self.col0, self.ncols,
                               backend=self.backend)

    def __array__(self, dtype=None, copy=None):
        cols = np.arange(self.col0, self.col0 + self.width)
        return F.dropout_mask(self.p, self.keys, self.rows, cols, self.ncols,
                              dtype=dtype or self.dtype)

    def __repr__(self):
        return f"DropoutMask(p={self.p}, keys={self.keys}, rows={len(self.rows)})"


class Context:
    """The helpers every context shares: dense products, parameters, bias, dropout.

    Subclasses add the graph: :meth:`propagate`, :meth:`propagate_transpose`,
    :meth:`root`, :meth:`root_transpose`, the dropout keys and row ids, and
    the loss.  Not constructed by users.

    Attributes (local)
    ------------------
    grid : ProcessGrid
        Where parameters are placed (and, for a graph, where data live).
    dtype : numpy dtype
        Parameter dtype.
    training : bool
        Dropout is active only when true.
    epoch, seed : int
        Keys of the counter-based dropout masks.
    need_input_grad : bool
        Whether the layer running ``backward`` must return its input
        gradient.  False at the top (the model's input, the features, is not
        trainable); :class:`~spgnn.gnn.models.Sequential` sets it per layer,
        so the first layer skips its input-gradient products.
    """

    #: Weights split over the depth axis of a 3D grid (GraphContext only).
    shard_weights = False

    def __init__(self, grid, dtype, *, training=True, epoch=0, seed=0):
        self.grid = grid
        self.dtype = np.dtype(dtype)
        self.training = bool(training)
        self.epoch = int(epoch)
        self.seed = int(seed)
        self.need_input_grad = False

    @property
    def is_3d(self) -> bool:
        return False

    # -------------------------------------------------------- what subclasses give
    def propagate(self, H, hop=0):
        """The neighbourhood aggregation of hop ``hop``. Collective on a graph."""
        raise NotImplementedError

    def propagate_transpose(self, G, hop=0):
        """The backward of :meth:`propagate`. Collective on a graph."""
        raise NotImplementedError

    def root(self, H, hop=0):
        """The rows of ``H`` of hop ``hop``'s destination vertices (the root term). Local."""
        raise NotImplementedError

    def root_transpose(self, G, hop=0, into=None):
        """The backward of :meth:`root`: ``G`` added into the source rows of ``into``. Local."""
        raise NotImplementedError

    def attention_pattern(self):
        """Attention (GAT) needs the whole graph: a block context has none."""
        raise LayoutMismatch(f"attention layers (GATConv) train on the whole graph only, not "
                             f"in a {type(self).__name__}")

    def _dropout_keys(self, key):
        raise NotImplementedError

    def _row_ids(self, H):
        raise NotImplementedError

    # ------------------------------------------------------------------ 3D helpers
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

    # ---------------------------------------------------------------- combination
    def _place_weight(self, W, H):
        """Place W for ``H @ W`` (on first use). Local."""
        if not self.is_3d:
            W.place(self.grid, Layout(), self.dtype, reduce_axes=H.layout.rows)
            return
        r, c, t = self._roles_of(H, "matmul")
        hoff = H.layout.offsets(self.grid, H.shape[1], 1)
        gr = self.grid.axis_size(r)
        rows_per_block = np.diff(hoff)
        if self.shard_weights and gr > 1 and np.all(rows_per_block % gr == 0):
            lay = Layout((c, r), t, row_splits=nested_splits(hoff, gr))
        else:
            lay = Layout(c, t, row_splits=H.layout.col_splits)
        W.place(self.grid, lay, self.dtype, reduce_axes=(r,))

    def _check_w(self, H, W, what):
        if H.shape[1] != W.shape[0]:
            raise DimensionMismatch(f"GraphContext.{what}: dimension mismatch (n,k),(k,m)->(n,m): "
                                    f"H.shape={H.shape}, W.shape={W.shape}")

    def matmul(self, H, W):
        """``H·W`` with a :class:`~spgnn.gnn.params.Parameter` W (placed on first use). Collective.

        1d / 15d / blocks: W replicated, local product.  3d: W is
        ``Layout(c, t)`` (or row-sharded over ``r``, all-gathered first), the
        product is all-reduced over ``c`` and lands in ``Layout(r, t)``.
        """
        self._check_w(H, W, "matmul")
        H = self._unshard(H)
        self._place_weight(W, H)
        if not self.is_3d:
            if isinstance(H, SparseBackedMatrix):       # sparse features: O(nnz * m)
                return H.like(H.matmul_local(W.value), shape=(H.shape[0], W.shape[1]))
            # parameters live on the host (small; the optimizer is numpy): copy W to the
            # backend's device for the product (a no-op on CPU backends)
            return H.like(H.backend.matmul(H.local, H.backend.from_host(W.value)),
                          shape=(H.shape[0], W.shape[1]))
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
            return G.like(G.backend.matmul(G.local, G.backend.from_host(W.value.T)),
                          shape=(G.shape[0], W.shape[0]))
        full, c, csplits = self._full_weight_block(W)
        t = W.layout.cols[0]
        wt = DistDenseMatrix(G.backend.from_host(np.ascontiguousarray(full.T)),
                             (W.shape[1], W.shape[0]), self.grid,
                             Layout(t, c, row_splits=W.layout.col_splits, col_splits=csplits),
                             backend=G.backend)
        return dense_matmul(G, wt)

    def weight_grad(self, H, G, W):
        """Accumulate ``Hᵀ·G`` into ``W.grad``, summed over the node axes of H. Collective.

        The node dimension of ``H`` is split over ``H.layout.rows``; summing
        over exactly those axes (one replica of every node) gives the
        complete gradient, identical on every replica of W's block.  1d:
        ``"row"``; 1.5D: ``"row"`` only (never ``"layer"``, whose ranks hold
        replicas); 3d: the depth axis ``r``, by all-reduce, or by
        reduce-scatter when W is sharded over it (Plexus §2.4 line 13);
        blocks: none (the minibatch trainer reduces).
        """
        H = self._unshard(H)
        if H.shape[1] != W.shape[0] or G.shape[1] != W.shape[1] or H.shape[0] != G.shape[0]:
            raise DimensionMismatch(f"GraphContext.weight_grad: H.shape={H.shape}, "
                                    f"G.shape={G.shape} do not fit W.shape={W.shape}")
        W._require_placed("weight_grad")
        if isinstance(H, SparseBackedMatrix):
            part = H.t_matmul_local(G.local)
        else:
            # computed where H lives, reduced and kept on the host with W
            part = np.ascontiguousarray(H.backend.to_host(H.local.T @ G.local))
        axes = H.layout.rows
        comm = self.grid.comm(*axes) if axes else None
        if self.is_3d and len(W.layout.rows) == 2:
            c, r = W.layout.rows
            counts = depth_counts(W.layout, self.grid, W.shape[0], c, r)
            g = comm.reduce_scatter(part, counts, label="gnn:grad-reduce-scatter-dW")
        elif comm is not None and comm.size > 1:
            g = comm.allreduce(part, label="gnn:grad-allreduce-dW")
        else:
            g = part
        W.grad += g.astype(W.grad.dtype, copy=False)

    # ----------------------------------------------------------------------- bias
    def _place_bias(self, b, Q):
        if b.shape != (1, Q.shape[1]):
            raise DimensionMismatch(f"GraphContext.add_bias: bias shape {b.shape} must be "
                                    f"(1, {Q.shape[1]})")
        lay = Layout((), Q.layout.cols, col_splits=Q.layout.col_splits)
        b.place(self.grid, lay, self.dtype, reduce_axes=Q.layout.rows)

    def add_bias(self, Q, b):
        """``Q + b`` (b a ``(1, m)`` Parameter, placed like Q's columns). Local."""
        self._place_bias(b, Q)
        return Q.like(Q.local + Q.backend.from_host(b.value))

    def scale_columns(self, Q, g):
        """``Q * g`` (g a ``(1, m)`` Parameter, placed like a bias). Local.

        A per-column gain such as LayerNorm's; its gradient is
        ``bias_grad(G * Q, g)``.
        """
        self._place_bias(g, Q)
        return Q.like(Q.local * Q.backend.from_host(g.value))

    def bias_grad(self, G, b):
        """Accumulate the column sums of ``G`` into ``b.grad``. Collective over G's row axes."""
        b._require_placed("bias_grad")
        part = np.ascontiguousarray(G.backend.to_host(G.local.sum(axis=0, keepdims=True)))
        axes = G.layout.rows
        if axes and self.grid.comm(*axes).size > 1:
            part = self.grid.comm(*axes).allreduce(part, label="gnn:grad-allreduce-db")
        b.grad += part.astype(b.grad.dtype, copy=False)

    # ------------------------------------------------------------------- dropout
    def dropout(self, H, p, key):
        """Inverted dropout with a counter-based mask keyed by the context and ``key``. Local.

        Returns ``(H', mask)``.  ``mask`` is a :class:`DropoutMask`: apply it
        to a gradient with ``mask.apply(dH_local)`` (or multiply by it, which
        materialises the float scale block); it is ``None`` when not
        training or ``p == 0``, and then ``H' is H``.  For sparse features
        (:class:`~spgnn.gnn.sparse.SparseBackedMatrix`) only the stored
        entries are hashed and ``H'`` stays sparse-backed.
        """
        if not self.training or p == 0:
            return H, None
        mask = DropoutMask(p, self._dropout_keys(key), self._row_ids(H), H.col_start,
                           H.local_shape[1], H.shape[1], H.dtype, backend=H.backend)
        if isinstance(H, SparseBackedMatrix):
            c = H.csr
            data = F.dropout_apply_csr(c.indptr, c.indices, c.data, mask.p, mask.keys, mask.rows,
                                       mask.col0, mask.ncols, backend=H.backend)
            return H.with_data(data), mask
        return H.like(mask.apply(H.local)), mask


class GraphContext(Context):
    """What a layer may use during one pass over a whole distributed graph.

    Made by :meth:`spgnn.gnn.data.DistGraph.context`; not constructed by users.
    ``graph`` is the :class:`~spgnn.gnn.data.DistGraph`; the other attributes
    are :class:`Context`'s.
    """

    def __init__(self, graph, *, training=True, epoch=0, seed=0):
        super().__init__(graph.grid, graph.dtype, training=training, epoch=epoch, seed=seed)
        self.graph = graph
        self.shard_weights = graph.shard_weights
        # Pre/post/hybrid and quantized exchanges (the placement's Exchange):
        # training passes code their rows, with fresh draws keyed by the epoch.
        self._codec = graph.codec if training else None
        if self._codec is not None:
            self._codec.rekey(epoch)
        # Row order of the latest aggregation's output (double permutation:
        # the features are in P_c order, hop h's output in P_r (h even) or
        # P_c (h odd) order); what dropout row ids and the loss's labels use.
        self.order = "c"

    def _spmm_options(self):
        """Keyword arguments of :func:`~spgnn.core.spmm.spmm` for this pass's exchanges. Local."""
        ex = self.graph.exchange
        if ex is None or (ex.aggregation == "post" and self._codec is None):
            return {}
        return {"aggregation": ex.aggregation, "codec": self._codec}

    @property
    def is_3d(self) -> bool:
        return self.graph.algorithm == "3d"

    def _check_rows(self, H, what):
        if H.shape[0] != self.graph.num_nodes:
            raise DimensionMismatch(f"GraphContext.{what}: expected {self.graph.num_nodes} rows "
                                    f"(one per node), but got shape {H.shape}")

    # -------------------------------------------------------------- aggregation
    def propagate(self, H, hop=0):
        """``A·H`` (one graph convolution's aggregation; ``hop`` is ignored). Collective.

        ``A`` is the graph's aggregation matrix: ``Â`` (GCN) or ``D⁻¹A``
        (mean).  1d / 15d: the graph's algorithm, output in H's layout.  3d:
        H is ``Layout(o, i)`` (or ``Layout((o, d), i)``, row-sharded
        first-layer input), the result is ``Layout(d, i)``.
        """
        self._check_rows(H, "propagate")
        g = self.graph
        if not self.is_3d:
            return spmm(g.A, H, algorithm=g.algorithm, **self._spmm_options())
        lay = H.layout
        o = lay.rows[0]
        d = lay.rows[1] if len(lay.rows) == 2 else self._third(o, *lay.cols)
        v = g.variant(hop)
        if g.permute == "double":
            want, out = g.variant_orders(v)
            if self.order != want:
                raise LayoutMismatch(f"GraphContext.propagate: hop {hop} multiplies rows in "
                                     f"P_{want} order (double permutation), but the input is in "
                                     f"P_{self.order} order; hops must run 0, 1, 2, ... in order")
            self.order = out
        return spmm(g.adjacency(d, o, v), H, algorithm="3d", row_blocks=g.agg_blocks)

    def propagate_transpose(self, G, hop=0):
        """``Aᵀ·G``: the backward of :meth:`propagate`. Collective.

        For a gradient ``G`` in :meth:`propagate`'s output layout
        ``Layout(d, i)`` the result is in its input layout ``Layout(o, i)``,
        all-reduced over ``d`` (Plexus §2.4 lines 17-18, ``l ≥ 1`` form).
        """
        self._check_rows(G, "propagate_transpose")
        g = self.graph
        if not self.is_3d:
            return spmm(g.AT, G, algorithm=g.algorithm, **self._spmm_options())
        r, c, t = self._roles_of(G, "propagate_transpose")
        return spmm(g.adjacency_T(t, r, g.variant(hop)), G, algorithm="3d",
                    row_blocks=g.agg_blocks)

    def root(self, H, hop=0):
        """``H`` itself: on the whole graph every node is its own destination. Local."""
        if self.is_3d:
            raise LayoutMismatch("GraphContext.root: root terms need the input and the "
                                 "aggregation in one layout, which 3d does not keep")
        return H

    def root_transpose(self, G, hop=0, into=None):
        """``into + G`` (or ``G``): the backward of :meth:`root`. Local."""
        return G if into is None else into.like(into.local + G.local)

    # ---------------------------------------------------------- attention (GAT)
    #: Algorithms whose matrices hold whole rows: what the attention helpers need.
    ATTENTION_ALGORITHMS = ("1d", "1d-aware")

    def attention_pattern(self):
        """The graph's pattern ``A + I`` with unit values: where attention lives. Collective once.

        Built on first use (the trainer's placement pass) from the
        aggregation matrix's pattern, with the original id of every stored
        entry's column (edge-dropout keys), so an epoch never builds plans.
        Only on ``1d`` / ``1d-aware`` (whole rows on every rank):
        :class:`~spgnn.errors.LayoutMismatch` otherwise.
        """
        g = self.graph
        got = g._node_cache.get("attention-pattern")
        if got is None:
            if g.algorithm not in self.ATTENTION_ALGORITHMS or g.A is None:
                raise LayoutMismatch(f"attention layers need --algo 1d or 1d-aware (whole rows "
                                     f"per rank), but the graph uses {g.algorithm!r}")
            be = g.A.backend
            P = with_values(g.A, be.from_host(np.ones(g.A.local_nnz, dtype=self.dtype)))
            cols = np.asarray(be.to_host(P.local.indices)).astype(np.int64) + P.col_start
            rows = g.node_ids(Layout(P.layout.rows, row_splits=P.layout.row_splits))
            # the edge-dropout keys live where the values do (copied to the device once)
            got = (P, be.from_host(self.graph.permutation()[cols]), be.from_host(rows))
            g._node_cache["attention-pattern"] = got
        return got[0]

    def sddmm(self, X, Y):
        """``S[i, j] = X[i]·Y[j]`` on the graph's pattern (:func:`spgnn.core.sddmm.sddmm`). Collective."""
        return sddmm(self.attention_pattern(), X, Y, algorithm=self.graph.algorithm)

    def edge_values(self, S, data):
        """``S``'s pattern with this rank's values ``data``. Local."""
        return with_values(S, data)

    def edge_softmax(self, S):
        """Softmax over each row's stored values. Local (rows are whole)."""
        return edge_softmax(S)

    def edge_softmax_backward(self, alpha, dalpha):
        """Gradient of :meth:`edge_softmax`. Local."""
        return edge_softmax_backward(alpha, dalpha)

    def edge_dropout(self, S, p, key):
        """Inverted dropout of ``S``'s stored values: ``(S', scale)``. Local.

        Keyed by ``(seed, epoch, *key, EDGE_DROPOUT_TAG)`` (``key``: an int or
        a tuple of ints) and the edge's original endpoints, so
        the mask does not depend on P or the partition.  ``scale`` (the
        per-entry ``0`` or ``1/(1-p)``) multiplies the gradient; it is
        ``None`` (and ``S' is S``) when not training or ``p == 0``.
        """
        if not self.training or p == 0:
            return S, None
        self.attention_pattern()
        _, cols, rows = self.graph._node_cache["attention-pattern"]
        be = S.backend
        loc = S.local
        ones = be.xp.ones(loc.nnz, dtype=S.dtype)
        # a tag keeps edge masks apart from node masks of the same layer key
        keys = (self.seed, self.epoch) + tuple(np.atleast_1d(key).tolist()) + (EDGE_DROPOUT_TAG,)
        # computed and kept where the values live (the device with cupy): the backward
        # multiplies the device gradient by it
        scale = F.dropout_apply_csr(loc.indptr, cols, ones, p, keys, rows, 0,
                                    self.graph.num_nodes, backend=be)
        return with_values(S, loc.data * scale), scale

    def propagate_with(self, S, H):
        """``S·H`` for a matrix on the graph's pattern (:func:`spgnn.spmm`). Collective."""
        return spmm(S, H, algorithm=self.graph.algorithm)

    def propagate_with_transpose(self, S, G):
        """``Sᵀ·G`` by the exchange plan reversed (:func:`spgnn.core.spmm_reverse.spmm_transpose`).

        Collective: one alltoallv, the forward's volume.
        """
        return spmm_transpose(S, G)

    # ------------------------------------------------------------------ dropout
    def _dropout_keys(self, key):
        return (self.seed, self.epoch, key)

    def _row_ids(self, H):
        # the input graph's node ids: the masks do not depend on the partition
        return self.graph.node_ids(H.layout, self.order)

    # ---------------------------------------------------------------------- loss
    def _loss_args(self, logits):
        lay = logits.layout
        rows = self.grid.comm(*lay.rows) if lay.rows else None
        cols = self.grid.comm(*lay.cols) if lay.cols else None
        nodes = self.graph.node_block(lay, self.order)
        return nodes, dict(row_comm=rows, class_comm=cols, col_start=logits.col_start)

    def loss(self, logits, which="train", *, mask=None):
        """Masked softmax cross-entropy ``(loss, dlogits, accuracy)``. Collective.

        ``which`` names the mask (``"train"``, ``"val"``, ``"test"``);
        ``mask`` (bool, this rank's rows of the logits) replaces it: the
        supervising nodes of an epoch (label propagation).  The mean is over
        the global number of masked nodes; ``dlogits`` is in the logits'
        layout, complete on every replica.
        """
        nodes, kw = self._loss_args(logits)
        # logits are n x classes: the loss runs on the host, its gradient goes back
        be = logits.backend
        loss, grad, acc = F.softmax_cross_entropy(be.to_host(logits.local), nodes["label"],
                                                  nodes[which] if mask is None else mask, **kw)
        return loss, logits.like(be.from_host(grad)), acc

    def scores(self, logits, which=("train", "val", "test")):
        """``{mask: (loss, accuracy, count)}`` for several masks, one reduction. Collective."""
        nodes, kw = self._loss_args(logits)
        return F.masked_scores(logits.backend.to_host(logits.local), nodes.label,
                               {w: nodes[w] for w in which}, **kw)

    def predict(self, logits):
        """Predicted class of every node, in the ORIGINAL node order, on every rank. Collective."""
        nodes, kw = self._loss_args(logits)
        pred = F.predictions(logits.backend.to_host(logits.local), kw["col_start"], kw["class_comm"])
        lay = logits.layout
        P = DistDenseMatrix(pred[:, None].astype(np.int64), (logits.shape[0], 1), self.grid,
                            Layout(lay.rows, row_splits=lay.row_splits), backend=logits.backend)
        return self.graph.to_original(P.to_global()[:, 0], self.order)


class BlockContext(Context):
    """What a layer may use during one pass over one sampled minibatch. Local.

    Parameters
    ----------
    blocks : list of SampledBlock or BlockOperator, forward order
        ``blocks[h]`` is hop ``h``'s sampled adjacency (input layer first:
        ``BulkSample.forward_blocks``); block ``h+1``'s columns are block
        ``h``'s rows.
    labels : int array, optional
        Labels of the last block's destination vertices (the minibatch),
        for :meth:`loss`.
    grid : ProcessGrid, optional
        Where parameters are placed, replicated (``Layout()``): the
        trainer's grid, so that evaluation on the whole graph finds them
        placed; default :func:`local_grid`.
    dtype : numpy float dtype of parameters and activations (default float64)
    backend : backend of the block products (default: the configured one)
    training, epoch, seed : as :class:`Context`
    minibatch : int
        The minibatch's global id: a dropout key, so a minibatch's masks do
        not depend on ``P`` or on the rank that trains it.

    Matrices are held whole by this rank (``Layout()`` on
    :func:`local_grid`); :meth:`input` wraps an array as one.  No helper
    communicates.
    """

    def __init__(self, blocks, *, labels=None, grid=None, dtype=np.float64, backend=None,
                 training=False, epoch=0, seed=0, minibatch=0):
        super().__init__(local_grid() if grid is None else grid, dtype, training=training,
                         epoch=epoch, seed=seed)
        if self.dtype.kind != "f":
            raise DTypeError(f"BlockContext: dtype must be floating point, but got {self.dtype}")
        self.blocks = [b if isinstance(b, BlockOperator) else BlockOperator(b, self.dtype, backend)
                       for b in blocks]
        self.labels = None if labels is None else np.asarray(labels, dtype=np.int64)
        self.minibatch = int(minibatch)
        self.backend = backend

    def input(self, x):
        """``x`` (this minibatch's input rows, block 0's columns) as a matrix of this context. Local."""
        x = np.asarray(x)
        if x.ndim != 2 or x.dtype.kind != "f":
            raise DTypeError(f"BlockContext.input: expected a 2-D float array, but got "
                             f"{x.dtype} of shape {x.shape}")
        x = np.ascontiguousarray(x, dtype=self.dtype)
        be = self.blocks[0].backend if self.blocks else get_backend(self.backend)
        # a device backend computes the minibatch on the device: one copy of its input rows
        return DistDenseMatrix(be.from_host(x), x.shape, local_grid(), Layout(), backend=be)

    def _block(self, hop, H, what, rows_of="num_src"):
        if not 0 <= hop < len(self.blocks):
            raise DimensionMismatch(f"BlockContext.{what}: the model asks for hop {hop}, but the "
                                    f"context holds {len(self.blocks)} blocks (one per layer)")
        op = self.blocks[hop]
        want = getattr(op, rows_of)
        if H.shape[0] != want:
            raise DimensionMismatch(f"BlockContext.{what}: hop {hop}'s block has {want} "
                                    f"{'columns' if rows_of == 'num_src' else 'rows'}, but got "
                                    f"{H.shape[0]} rows")
        return op

    def _local(self, H, y):
        return DistDenseMatrix(y, y.shape, H.grid, Layout(), backend=H.backend)

    def propagate(self, H, hop=0):
        """``M·H``: the mean over each destination's sampled neighbours (0 for none). Local."""
        op = self._block(hop, H, "propagate")
        return self._local(H, op.aggregate(H.local))

    def propagate_transpose(self, G, hop=0):
        """``Mᵀ·G``: the backward of :meth:`propagate`. Local."""
        op = self._block(hop, G, "propagate_transpose", "num_dst")
        return self._local(G, op.aggregate_t(G.local))

    def root(self, H, hop=0):
        """The rows of the hop's destination vertices among its sources. Local."""
        op = self._block(hop, H, "root")
        return self._local(H, H.local[op.self_index])

    def root_transpose(self, G, hop=0, into=None):
        """``G``'s rows added into the destinations' source rows of ``into``. Local."""
        op = self._block(hop, G, "root_transpose", "num_dst")
        xp = G.backend.xp
        if into is None:
            out = xp.zeros((op.num_src, G.shape[1]), dtype=G.dtype)
        else:
            out = into.local
        idx = op.self_index if xp is np else xp.asarray(op.self_index)
        xp.add.at(out, idx, G.local)
        return self._local(G, out)

    def _dropout_keys(self, key):
        return (self.seed, self.epoch, key, self.minibatch)

    def _row_ids(self, H):
        return np.arange(H.shape[0], dtype=np.int64)

    def loss(self, logits, which="train"):
        """Summed softmax cross-entropy over the minibatch: ``(loss_sum, dlogits, correct)``. Local.

        The gradient is that of the *sum* (the minibatch trainer divides by
        the global number of loss terms after its all-reduce); computed in
        float64 and returned in the logits' dtype.  ``which`` is ignored
        (a minibatch is made of training vertices).
        """
        if self.labels is None:
            raise ValueError("BlockContext.loss: the context was made without labels")
        z = np.asarray(logits.backend.to_host(logits.local), dtype=np.float64)
        if self.labels.shape != (z.shape[0],):
            raise DimensionMismatch(f"BlockContext.loss: {z.shape[0]} logit rows but "
                                    f"{self.labels.size} labels")
        loss, grad, correct = F.softmax_cross_entropy(z, self.labels, None, reduction="sum")
        return loss, logits.like(logits.backend.from_host(grad.astype(logits.dtype, copy=False))), \
            correct
