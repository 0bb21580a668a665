"""Containers and models: ``Sequential``, the ``BasicGNN`` base, ``GCN``, ``GraphSAGE``, ``FullBatchSAGE``.

Every model is a :class:`BasicGNN`: a stack of ``layers`` graph convolutions
``in_dim -> hidden -> ... -> hidden -> out_dim`` with the same frame (seed,
dropout check, ``dims``, ``convs``); a model says only what differs, as PyG's
``BasicGNN`` subclasses do: :meth:`BasicGNN.init_conv` (its convolution) and
the layers around each convolution (:meth:`BasicGNN.before_conv`,
:meth:`BasicGNN.after_conv`, :meth:`BasicGNN.head`), plus its optimizer groups.
"""

import numpy as np

from ..errors import DimensionMismatch
from ..layout import Layout
from .layers import Dropout, GCNConv, Layer, LayerNorm, ReLU, SAGEConv

__all__ = ["Sequential", "BasicGNN", "GCN", "GraphSAGE", "FullBatchSAGE"]


class Sequential(Layer):
    """Layers applied in order; backward in reverse.

    Sets each child's ``key`` to its position (dropout masks are keyed by
    it) and its ``hop`` (graph layers consume the sampled hops in order:
    the first convolution hop 0, the next hop 1, ...), and tells the first
    layer that the input needs no gradient.
    """

    def __init__(self, *layers):
        self.layers = list(layers)
        self._hop = 0
        self.hops = 0
        for k, layer in enumerate(self.layers):
            if not isinstance(layer, Layer):
                raise TypeError(f"Sequential: item {k} is a {type(layer).__name__}, not a Layer")
            layer.key = k
            self.hops += layer.hops
        self.hop = 0

    @property
    def hop(self):
        return self._hop

    @hop.setter
    def hop(self, value):
        """The first hop of this container; its layers take the following ones."""
        self._hop = int(value)
        h = self._hop
        for layer in self.layers:
            layer.hop = h
            h += layer.hops

    def __iter__(self):
        return iter(self.layers)

    def __len__(self):
        return len(self.layers)

    def __getitem__(self, k):
        return self.layers[k]

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]

    def named_parameters(self, prefix=""):
        out = []
        for k, layer in enumerate(self.layers):
            out += layer.named_parameters(f"{prefix}{k}.")
        return out

    def forward(self, ctx, H):
        """Collective (whatever the layers call)."""
        for layer in self.layers:
            H = layer.forward(ctx, H)
        return H

    def backward(self, ctx, dH):
        """Collective.  Returns the input gradient, or ``None`` when ``ctx.need_input_grad`` is false.

        With ``ctx.need_input_grad`` false (the model's input is the graph's
        features, which are not trainable) the first layer with parameters
        skips its input gradient and the layers before it do not run.
        """
        outer = ctx.need_input_grad
        first = -1 if outer else self._first_param_layer()
        for k in reversed(range(len(self.layers))):
            if k < first:
                break
            ctx.need_input_grad = outer or k > first
            dH = self.layers[k].backward(ctx, dH)
        ctx.need_input_grad = outer
        return dH if outer else None

    def _first_param_layer(self):
        for k, layer in enumerate(self.layers):
            if layer.parameters():
                return k
        return len(self.layers)

    def zero_grad(self):
        for p in self.parameters():
            p.zero_grad()

    def place(self, dtype=np.float32, grid=None):
        """Place every unplaced parameter whole on every rank (``Layout()``) in ``dtype``. Local.

        What replicated training needs (1D/1.5D and minibatch training place
        the same way on first use); ``grid`` defaults to
        :func:`~spgnn.gnn.context.local_grid`.  3D placements are chosen by
        the context on first use instead.  Idempotent; returns ``self``.
        """
        if grid is None:
            from .context import local_grid

            grid = local_grid()
        for p in self.parameters():
            if p.value is None:
                p.place(grid, Layout(), np.dtype(dtype))
        return self

    @property
    def dtype(self):
        """The placed parameters' dtype (``None`` before placement)."""
        params = self.parameters()
        return None if not params or params[0].value is None else params[0].value.dtype

    def state_dict(self):
        """``{name: copy of the local block}``. Local."""
        return {name: np.array(p.value, copy=True) for name, p in self.named_parameters()}

    def load_state_dict(self, state):
        """Restore :meth:`state_dict`'s output into placed parameters. Local."""
        named = dict(self.named_parameters())
        if set(named) != set(state):
            raise ValueError(f"load_state_dict: parameters {sorted(named)} do not match "
                             f"{sorted(state)}")
        for name, p in named.items():
            p._require_placed("load_state_dict")
            v = np.asarray(state[name])
            if v.shape != p.value.shape:
                raise DimensionMismatch(f"load_state_dict: {name!r} has local shape "
                                        f"{p.value.shape}, the state {v.shape}")
            p.value[...] = v

    def __repr__(self):
        inner = ", ".join(repr(layer) for layer in self.layers)
        return f"{type(self).__name__}({inner})"


class BasicGNN(Sequential):
    """``layers`` graph convolutions made by :meth:`init_conv`, with the model's layers around them.

    The stack is ``head() + [before_conv(k), conv_k, after_conv(k, conv_k)]``
    for ``k < layers - 1``, then ``before_conv(last), conv_last``: the last
    convolution returns logits.  Layer positions key the dropout masks, so a
    subclass keeps its stack's shape fixed for given arguments.  Local.

    Parameters
    ----------
    in_dim, hidden, out_dim : int
    layers : int (>= 1)
    dropout : float in [0, 1)
    seed : int
        Initialisation seed; the trainer also keys the dropout masks by it.

    Attributes
    ----------
    dims : list of int
        ``[in_dim, hidden, ..., hidden, out_dim]`` (one entry per convolution
        boundary; a convolution may widen its output, as GAT's heads do).
    conv_type : type
        The class :attr:`convs` collects.
    """

    conv_type = Layer

    def __init__(self, in_dim, hidden, out_dim, layers, *, dropout=0.0, seed=0):
        name = type(self).__name__
        layers = int(layers)
        if layers < 1:
            raise ValueError(f"{name}: layers must be at least 1, but got {layers}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"{name}: dropout must lie in [0, 1), but got {dropout}")
        self.dropout, self.seed = float(dropout), int(seed)
        self.dims = [int(in_dim)] + [int(hidden)] * (layers - 1) + [int(out_dim)]
        mods, width = list(self.head()), self.dims[0]
        for k in range(layers):
            last = k == layers - 1
            mods += self.before_conv(k)
            conv = self.init_conv(width, self.dims[k + 1], k, last)
            mods.append(conv)
            if not last:
                mods += self.after_conv(k, conv)
            width = getattr(conv, "output_dim", self.dims[k + 1])
        super().__init__(*mods)

    # ----------------------------------------------------- what a model says
    def init_conv(self, in_dim, out_dim, index, last):
        """The ``index``-th convolution (``last``: the output layer). Subclasses override it."""
        raise NotImplementedError(f"{type(self).__name__}.init_conv")

    def head(self):
        """Layers before the first convolution's ``before_conv`` (default none)."""
        return []

    def before_conv(self, index):
        """Layers in front of convolution ``index`` (default none)."""
        return []

    def after_conv(self, index, conv):
        """Layers after hidden convolution ``index`` (default none)."""
        return []

    # ------------------------------------------------------------ shared
    @property
    def convs(self):
        return [m for m in self.layers if isinstance(m, self.conv_type)]

    def _weights_groups(self, weights, weight_decay):
        """Two optimizer groups: L2 ``weight_decay`` on ``weights``, none on the rest."""
        mine = {id(p) for p in weights}
        rest = [p for p in self.parameters() if id(p) not in mine]
        return [{"params": list(weights), "weight_decay": float(weight_decay)},
                {"params": rest, "weight_decay": 0.0}]


class GCN(BasicGNN):
    """Kipf & Welling's GCN: ``[Dropout, GCNConv, ReLU] * (layers-1), Dropout, GCNConv``.

    Dropout is applied to every convolution's input (the features too), as in
    the reference implementation (no dropout layer at all when ``dropout`` is
    0); no bias by default (``bias=False``, as in Kipf's code).  Weights are
    Glorot-uniform from ``(seed, layer index)``.

    Parameters
    ----------
    in_dim, hidden, out_dim : int
    layers : int
        Number of graph convolutions (>= 1).
    dropout : float
    seed : int
        Initialisation seed; :class:`~spgnn.gnn.train.Trainer` also keys the
        dropout masks by it.
    bias : bool
    order : str
        Passed to every :class:`GCNConv`.
    """

    conv_type = GCNConv

    def __init__(self, in_dim, hidden, out_dim, layers=2, dropout=0.5, seed=0, *, bias=False,
                 order="auto"):
        self.bias, self.order = bool(bias), order
        super().__init__(in_dim, hidden, out_dim, layers, dropout=dropout, seed=seed)

    def init_conv(self, in_dim, out_dim, index, last):
        return GCNConv(in_dim, out_dim, bias=self.bias, seed=self.seed, index=index,
                       order=self.order)

    def before_conv(self, index):
        return [Dropout(self.dropout)] if self.dropout else []

    def after_conv(self, index, conv):
        return [ReLU()]

    def param_groups(self, weight_decay=5e-4):
        """Optimizer groups with L2 ``weight_decay`` on the first convolution's weight only (Kipf)."""
        return self._weights_groups([self.convs[0].weight], weight_decay)


class GraphSAGE(BasicGNN):
    """``layers`` × :class:`~spgnn.gnn.layers.SAGEConv` (mean), ReLU and dropout between them.

    ``in_dim -> hidden -> ... -> hidden -> out_dim``:
    ``[Dropout(input_dropout), SAGEConv, ReLU, Dropout(dropout), SAGEConv, ...,
    SAGEConv]`` -- dropout follows each hidden ReLU, as in PyG's GraphSAGE
    example and the paper's model; ``input_dropout`` optionally drops input
    features too.  The last layer returns logits.  Every dropout layer is
    present even with ``p = 0`` (it is then the identity), so positions,
    hence dropout keys, do not depend on the rates.

    One model for both contexts: on a :class:`~spgnn.gnn.context.BlockContext`
    (sampled minibatches, one hop per convolution) and on a
    :class:`~spgnn.gnn.context.GraphContext` over a graph distributed with
    ``adjacency="mean"`` (full-batch training, full-neighbourhood
    evaluation).

    Parameters
    ----------
    in_dim, hidden, out_dim : int
    layers : int (>= 1), one per sampled hop
    dropout : float in [0, 1)
    seed : int, initialisation seed (trainers also key the dropout masks by it)
    bias : bool
    input_dropout : float in [0, 1)

    Parameter names are ``"{k}.{name}"`` for the ``k``-th convolution
    (``"0.w_self"``, ``"0.w_neigh"``, ``"0.bias"``, ...).
    """

    conv_type = SAGEConv

    def __init__(self, in_dim, hidden, out_dim, layers=3, dropout=0.5, seed=0, *, bias=True,
                 input_dropout=0.0):
        if not 0.0 <= float(input_dropout) < 1.0:
            raise ValueError(f"GraphSAGE: input_dropout must lie in [0, 1), but got "
                             f"{input_dropout}")
        self.bias, self.input_dropout = bool(bias), float(input_dropout)
        super().__init__(in_dim, hidden, out_dim, layers, dropout=dropout, seed=seed)

    def init_conv(self, in_dim, out_dim, index, last):
        return SAGEConv(in_dim, out_dim, bias=self.bias, seed=self.seed, index=index)

    def head(self):
        return [Dropout(self.input_dropout)]

    def after_conv(self, index, conv):
        return [ReLU(), Dropout(self.dropout)]

    @property
    def num_layers(self) -> int:
        return len(self.convs)

    def named_parameters(self, prefix=""):
        return [(f"{prefix}{k}.{p.name}", p) for k, c in enumerate(self.convs)
                for p in c.parameters()]

    def param_groups(self, weight_decay=0.0):
        """Optimizer groups: L2 ``weight_decay`` on the weights, none on the biases."""
        ws = [p for c in self.convs for p in (c.w_self, c.w_neigh)]
        bs = [c.bias for c in self.convs if c.bias is not None]
        groups = [{"params": ws, "weight_decay": float(weight_decay)}]
        if bs:
            groups.append({"params": bs, "weight_decay": 0.0})
        return groups

    def __repr__(self):
        inner = ", ".join(repr(c) for c in self.convs)
        return (f"GraphSAGE({inner}, dropout={self.dropout}, input_dropout={self.input_dropout}, "
                f"seed={self.seed})")


class FullBatchSAGE(BasicGNN):
    """Paper 004's model (SuperGCN): full-batch GraphSAGE-mean with LayerNorm.

    ``[SAGEConv, Dropout, LayerNorm, ReLU] * (layers-1), SAGEConv``: each
    hidden layer is conv → dropout → LayerNorm → ReLU, the order of the
    authors' code (report 004 §2.2, §8.13); the last convolution returns
    logits (softmax cross-entropy = their log_softmax + NLL).  Every
    convolution is ``h_v·W_self + mean_{u ∈ N(v)} h_u·W_neigh + b``
    (:class:`~spgnn.gnn.layers.SAGEConv`): on a
    :class:`~spgnn.gnn.data.DistGraph` distributed with
    ``adjacency="mean"`` the mean is one distributed SpMM with ``D⁻¹A``
    (no self-loops, ``deg`` the global in-degree, clamped to >= 1), so the
    pre/post/hybrid and quantized exchanges of a ``1d-aware`` placement
    apply to it unchanged: messages are the layer's *input* rows (aggregate
    first), forward and backward.  Every dropout layer is present even with
    ``p = 0`` (positions, hence dropout keys, do not depend on the rate).

    Parameters
    ----------
    in_dim, hidden, out_dim : int
    layers : int (>= 1)
    dropout : float in [0, 1)
    seed : int
        Initialisation seed (the trainer also keys the dropout masks by it).
    bias : bool
        Biases in the convolutions (default True, as PyG's ``SAGEConv``).

    Parameter names are ``"{position}.{name}"``: ``"0.w_self"``,
    ``"0.w_neigh"``, ``"0.bias"``, ``"2.weight"`` / ``"2.bias"`` (the first
    LayerNorm's ``γ`` / ``β``), ...
    """

    conv_type = SAGEConv

    def __init__(self, in_dim, hidden, out_dim, layers=3, dropout=0.5, seed=0, *, bias=True):
        self.bias = bool(bias)
        super().__init__(in_dim, hidden, out_dim, layers, dropout=dropout, seed=seed)

    def init_conv(self, in_dim, out_dim, index, last):
        return SAGEConv(in_dim, out_dim, bias=self.bias, seed=self.seed, index=index)

    def after_conv(self, index, conv):
        return [Dropout(self.dropout), LayerNorm(conv.out_dim), ReLU()]

    def param_groups(self, weight_decay=0.0):
        """Optimizer groups: L2 ``weight_decay`` on the convolution weights only."""
        return self._weights_groups([p for c in self.convs for p in (c.w_self, c.w_neigh)],
                                    weight_decay)
