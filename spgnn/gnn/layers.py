"""GNN layers: explicit forward and backward over a context (:mod:`spgnn.gnn.context`).

The layer contract
------------------
* ``forward(ctx, H) -> H'`` and ``backward(ctx, dH') -> dH`` take and return
  :class:`~spgnn.core.dist_dense.DistDenseMatrix` objects.  ``ctx`` is a
  :class:`~spgnn.gnn.context.GraphContext` (the whole distributed graph) or a
  :class:`~spgnn.gnn.context.BlockContext` (one sampled minibatch); a layer
  does not know which.  ``forward``
  stores what ``backward`` needs on ``self``; ``backward`` adds parameter
  gradients into ``Parameter.grad`` (through ``ctx.weight_grad`` /
  ``ctx.bias_grad``) and returns the gradient of its input, or ``None``
  when ``ctx.need_input_grad`` is false (the first layer).
* A layer touches data only through the context helpers (``propagate``,
  ``propagate_transpose``, ``root``, ``root_transpose``, ``matmul``,
  ``matmul_transpose``, ``weight_grad``, ``add_bias``, ``bias_grad``,
  ``dropout``) and through
  elementwise numpy on ``H.local`` (``H.like(new_local)`` wraps the
  result).  It never calls a communicator: the helpers choose the
  collectives from the layouts, so one layer class runs on ``1d``,
  ``1d-aware``, ``15d-aware`` and ``3d``, and on sampled blocks.
* A layer that aggregates over the graph declares ``hops = 1`` (how many
  sampled hops it consumes); containers set its ``hop`` (which one), and it
  passes ``hop=self.hop`` to ``propagate``/``root`` and their transposes.  On
  the whole graph the hop is ignored.
* ``parameters()`` lists its :class:`~spgnn.gnn.params.Parameter` objects.
* Gradients coming in (``dH'``) and going out are *complete*: every replica
  of a block holds the full value (the backward of a forward all-reduce is
  the identity, Plexus §10.5).
"""

import numpy as np

from ..errors import LayoutMismatch
from . import functional as F
from .params import Parameter, glorot, zeros_init

__all__ = ["Layer", "GCNConv", "SAGEConv", "Linear", "ReLU", "Dropout", "LayerNorm"]


class Layer:
    """Base class.  Subclasses implement ``forward`` and ``backward``; see the module docstring."""

    #: Set by containers: the layer's position, a key of its dropout masks.
    key = 0
    #: Sampled hops this layer consumes (1 for a graph convolution).
    hops = 0
    #: Set by containers: the first hop this layer consumes.
    hop = 0

    def parameters(self):
        """The layer's parameters (default: none)."""
        return []

    def named_parameters(self, prefix=""):
        return [(prefix + p.name, p) for p in self.parameters()]

    def forward(self, ctx, H):
        raise NotImplementedError

    def backward(self, ctx, dH):
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}()"


class GCNConv(Layer):
    """Kipf & Welling's graph convolution ``Â·H·W (+ b)``.

    The multiplication order follows the widths: ``Â(HW)`` when
    ``out_dim < in_dim`` (the SpMM moves the narrower matrix: Cora's first
    layer propagates 16 columns, not 1433), ``(ÂH)W`` otherwise (Plexus's
    order); ``order="aggregate-first"`` or ``"transform-first"`` forces one.
    In 3D the two orders use different Â shards and rotate the roles
    differently; both are exact (``docs/gnn.md``).

    Parameters
    ----------
    in_dim, out_dim : int
    bias : bool
    seed, index : int
        Glorot initialisation from ``default_rng([seed, index])``.
    order : {"auto", "aggregate-first", "transform-first"}
    """

    hops = 1

    def __init__(self, in_dim, out_dim, *, bias=False, seed=0, index=0, order="auto"):
        if order not in ("auto", "aggregate-first", "transform-first"):
            raise ValueError(f"GCNConv: order must be 'auto', 'aggregate-first' or "
                             f"'transform-first', but got {order!r}")
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        self.weight = Parameter("weight", glorot((in_dim, out_dim), seed, index))
        self.bias = Parameter("bias", zeros_init((1, out_dim))) if bias else None
        if order == "auto":
            order = "transform-first" if out_dim < in_dim else "aggregate-first"
        self.order = order

    def parameters(self):
        return [self.weight] + ([self.bias] if self.bias is not None else [])

    def forward(self, ctx, H):
        if self.order == "aggregate-first":
            self._h = ctx.propagate(H, self.hop)                 # ÂH
            Q = ctx.matmul(self._h, self.weight)                 # (ÂH)W
        else:
            self._h = H
            Q = ctx.propagate(ctx.matmul(H, self.weight), self.hop)   # Â(HW)
        return ctx.add_bias(Q, self.bias) if self.bias is not None else Q

    def backward(self, ctx, dQ):
        if self.bias is not None:
            ctx.bias_grad(dQ, self.bias)
        if self.order == "aggregate-first":
            ctx.weight_grad(self._h, dQ, self.weight)          # (ÂH)ᵀ dQ
            if not ctx.need_input_grad:
                return None
            return ctx.propagate_transpose(ctx.matmul_transpose(dQ, self.weight), self.hop)
        dZ = ctx.propagate_transpose(dQ, self.hop)               # Âᵀ dQ
        ctx.weight_grad(self._h, dZ, self.weight)                # Hᵀ Âᵀ dQ
        return ctx.matmul_transpose(dZ, self.weight) if ctx.need_input_grad else None

    def __repr__(self):
        return (f"GCNConv({self.in_dim}, {self.out_dim}, bias={self.bias is not None}, "
                f"order={self.order!r})")


class SAGEConv(Layer):
    """GraphSAGE's mean aggregator: ``h'_v = h_v·W_self + mean_{u ∈ N(v)} h_u·W_neigh (+ b)``.

    Hamilton, Ying, Leskovec, *Inductive Representation Learning on Large
    Graphs* (NeurIPS 2017), in the form PyG's ``SAGEConv`` uses.  Row-vector
    convention (``H`` is nodes x features), so the weights are
    ``(in_dim, out_dim)``.  The mean is the context's :meth:`propagate`
    (a sampled block's row-normalised pattern, or ``D⁻¹A`` of the whole
    graph) and ``h_v`` its :meth:`root`; a node without neighbours
    aggregates to 0.

    Parameters
    ----------
    in_dim, out_dim : int
    bias : bool
    seed, index : int
        Glorot initialisation: ``W_self`` from ``(seed, 2·index)``,
        ``W_neigh`` from ``(seed, 2·index + 1)``.
    """

    hops = 1

    def __init__(self, in_dim, out_dim, *, bias=True, seed=0, index=0):
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        if self.in_dim < 1 or self.out_dim < 1:
            raise ValueError(f"SAGEConv: in_dim and out_dim must be >= 1, but got "
                             f"{in_dim} and {out_dim}")
        self.w_self = Parameter("w_self", glorot((self.in_dim, self.out_dim), seed, 2 * index))
        self.w_neigh = Parameter("w_neigh", glorot((self.in_dim, self.out_dim), seed,
                                                   2 * index + 1))
        self.bias = Parameter("bias", zeros_init((1, self.out_dim))) if bias else None

    def parameters(self):
        return [self.w_self, self.w_neigh] + ([self.bias] if self.bias is not None else [])

    def forward(self, ctx, H):
        self._root = ctx.root(H, self.hop)
        self._agg = ctx.propagate(H, self.hop)
        Q = ctx.matmul(self._root, self.w_self)
        Q = Q.like(Q.local + ctx.matmul(self._agg, self.w_neigh).local)
        return ctx.add_bias(Q, self.bias) if self.bias is not None else Q

    def backward(self, ctx, dQ):
        if self.bias is not None:
            ctx.bias_grad(dQ, self.bias)
        ctx.weight_grad(self._root, dQ, self.w_self)
        ctx.weight_grad(self._agg, dQ, self.w_neigh)
        if not ctx.need_input_grad:
            return None
        dH = ctx.propagate_transpose(ctx.matmul_transpose(dQ, self.w_neigh), self.hop)
        return ctx.root_transpose(ctx.matmul_transpose(dQ, self.w_self), self.hop, into=dH)

    def __repr__(self):
        return f"SAGEConv({self.in_dim}, {self.out_dim}, bias={self.bias is not None})"


class Linear(Layer):
    """``H·W (+ b)``, no propagation.  In 3D it rotates the column axis like ``matmul`` does."""

    def __init__(self, in_dim, out_dim, *, bias=True, seed=0, index=0):
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        self.weight = Parameter("weight", glorot((in_dim, out_dim), seed, index))
        self.bias = Parameter("bias", zeros_init((1, out_dim))) if bias else None

    def parameters(self):
        return [self.weight] + ([self.bias] if self.bias is not None else [])

    def forward(self, ctx, H):
        self._h = H
        Q = ctx.matmul(H, self.weight)
        return ctx.add_bias(Q, self.bias) if self.bias is not None else Q

    def backward(self, ctx, dQ):
        if self.bias is not None:
            ctx.bias_grad(dQ, self.bias)
        ctx.weight_grad(self._h, dQ, self.weight)
        return ctx.matmul_transpose(dQ, self.weight) if ctx.need_input_grad else None

    def __repr__(self):
        return f"Linear({self.in_dim}, {self.out_dim}, bias={self.bias is not None})"


class ReLU(Layer):
    """Elementwise ``max(x, 0)``: local on every rank."""

    def forward(self, ctx, H):
        y, self._mask = F.relu(H.local, backend=H.backend)
        return H.like(y)

    def backward(self, ctx, dH):
        return dH.like(F.relu_backward(dH.local, self._mask, backend=dH.backend))


class Dropout(Layer):
    """Inverted dropout with counter-based masks (identical for any P, algorithm, layout)."""

    def __init__(self, p=0.5):
        if not 0.0 <= p < 1.0:
            raise ValueError(f"Dropout: p must lie in [0, 1), but got {p}")
        self.p = float(p)

    def forward(self, ctx, H):
        out, self._mask = ctx.dropout(H, self.p, self.key)
        return out

    def backward(self, ctx, dH):
        if self._mask is None:
            return dH
        return dH.like(self._mask.apply(dH.local))      # re-hashes: no stored mask block

    def __repr__(self):
        return f"Dropout(p={self.p})"


class LayerNorm(Layer):
    """Ba, Kiros & Hinton's layer normalisation of every row: ``(h - μ)/√(σ² + ε)·γ + β``.

    ``μ`` and ``σ²`` are the mean and (biased) variance of the row's
    ``dim`` entries; ``γ`` (``"weight"``, ones) and ``β`` (``"bias"``,
    zeros) are learnable ``(1, dim)`` gains and offsets, as in
    ``torch.nn.LayerNorm(dim)``.  Local per row, so it needs whole rows on
    every rank (1d, 1d-aware, 15d layouts and sampled blocks; not 3d, whose
    columns are split): the parameter gradients are column sums
    (``bias_grad``: one all-reduce over the row axes each).
    """

    def __init__(self, dim, eps=1e-5):
        self.dim, self.eps = int(dim), float(eps)
        if self.dim < 1 or not self.eps > 0:
            raise ValueError(f"LayerNorm: dim must be >= 1 and eps > 0, but got {dim} and {eps}")
        self.weight = Parameter("weight", np.ones((1, self.dim)))
        self.bias = Parameter("bias", zeros_init((1, self.dim)))

    def parameters(self):
        return [self.weight, self.bias]

    def forward(self, ctx, H):
        if H.shape[1] != self.dim or H.local_shape[1] != self.dim:
            raise LayoutMismatch(f"LayerNorm({self.dim}): needs whole rows of {self.dim} "
                                 f"columns on every rank, but got shape {H.shape} with local "
                                 f"blocks of {H.local_shape[1]} columns")
        x = H.local                      # host or device (the ufuncs dispatch, NEP 13)
        mu = x.mean(axis=1, keepdims=True)
        xc = x - mu
        self._rstd = 1.0 / np.sqrt((xc * xc).mean(axis=1, keepdims=True) + self.eps)
        self._xhat = H.like((xc * self._rstd).astype(x.dtype, copy=False))
        return ctx.add_bias(ctx.scale_columns(self._xhat, self.weight), self.bias)

    def backward(self, ctx, dY):
        xhat = self._xhat
        ctx.bias_grad(dY, self.bias)
        ctx.bias_grad(dY.like(dY.local * xhat.local), self.weight)
        if not ctx.need_input_grad:
            return None
        # d/dx of the normalisation, per row (n = dim):
        # rstd·(g - mean(g) - xhat·mean(g·xhat)),  g = dY·γ
        g = dY.local * dY.backend.from_host(self.weight.value)   # the parameter is on the host
        gx = (g * xhat.local).mean(axis=1, keepdims=True)
        dx = self._rstd * (g - g.mean(axis=1, keepdims=True) - xhat.local * gx)
        return dY.like(dx.astype(dY.local.dtype, copy=False))

    def __repr__(self):
        return f"LayerNorm({self.dim}, eps={self.eps})"
