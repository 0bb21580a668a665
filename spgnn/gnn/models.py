"""Containers and the GCN model."""

import numpy as np

from .layers import Dropout, GCNConv, Layer, ReLU

__all__ = ["Sequential", "GCN"]


class Sequential(Layer):
    """Layers applied in order; backward in reverse.

    Sets each child's ``key`` to its position (dropout masks are keyed by
    it) and tells the first layer that the input needs no gradient.
    """

    def __init__(self, *layers):
        self.layers = list(layers)
        for k, layer in enumerate(self.layers):
            if not isinstance(layer, Layer):
                raise TypeError(f"Sequential: item {k} is a {type(layer).__name__}, not a Layer")
            layer.key = k

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
                from ..errors import DimensionMismatch

                raise DimensionMismatch(f"load_state_dict: {name!r} has local shape "
                                        f"{p.value.shape}, the state {v.shape}")
            p.value[...] = v

    def __repr__(self):
        inner = ", ".join(repr(layer) for layer in self.layers)
        return f"{type(self).__name__}({inner})"


class GCN(Sequential):
    """Kipf & Welling's GCN: ``[Dropout, GCNConv, ReLU] * (layers-1), Dropout, GCNConv``.

    Dropout is applied to every convolution's input (the features too), as in
    the reference implementation; no bias by default (``bias=False``, as in
    Kipf's code).  Weights are Glorot-uniform from ``(seed, layer index)``.

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

    def __init__(self, in_dim, hidden, out_dim, layers=2, dropout=0.5, seed=0, *, bias=False,
                 order="auto"):
        if int(layers) < 1:
            raise ValueError(f"GCN: layers must be at least 1, but got {layers}")
        dims = [int(in_dim)] + [int(hidden)] * (int(layers) - 1) + [int(out_dim)]
        mods = []
        for k in range(int(layers)):
            if dropout:
                mods.append(Dropout(dropout))
            mods.append(GCNConv(dims[k], dims[k + 1], bias=bias, seed=seed, index=k, order=order))
            if k < int(layers) - 1:
                mods.append(ReLU())
        super().__init__(*mods)
        self.seed = int(seed)
        self.dims = dims

    @property
    def convs(self):
        return [m for m in self.layers if isinstance(m, GCNConv)]

    def param_groups(self, weight_decay=5e-4):
        """Optimizer groups with L2 ``weight_decay`` on the first convolution's weight only (Kipf)."""
        first = [self.convs[0].weight]
        rest = [p for p in self.parameters() if p is not self.convs[0].weight]
        return [{"params": first, "weight_decay": weight_decay},
                {"params": rest, "weight_decay": 0.0}]
