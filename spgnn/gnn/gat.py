"""Graph attention: ``GATConv``, ``ELU`` and the ``GAT`` model (Veličković et al., ICLR 2018).

One ``GATConv`` with ``K`` heads of width ``F`` computes, for every head ``k``
and edge ``(i, j)`` of ``A + I``::

    Z = H·W                                   (n x K·F; head k: Z_k)
    [s | t] = Z·B                             (s_i^k = Z_k[i]·a_dst^k, t_j^k = Z_k[j]·a_src^k)
    e_ij = LeakyReLU_0.2(s_i + t_j)           SDDMM of [s_k, 1] and [1, t_k] on the pattern
    α = edge_softmax(e)                       softmax over each row's stored entries
    out_k = dropout(α)·Z_k                    SpMM; heads concatenated (or averaged)

``B`` is the ``(K·F, 2K)`` matrix holding ``a_dst^k`` and ``a_src^k`` on its
block diagonal, so the scores of all heads are one ``ctx.matmul`` and their
gradient one ``ctx.weight_grad`` (off-diagonal gradients are masked to 0:
they stay 0 under Adam and weight decay).

The backward is written by hand with the same operators: ``dZ_k`` gets
``αᵀ·dout_k`` (:meth:`propagate_with_transpose`), ``dα = SDDMM(dout_k, Z_k)``,
the softmax and LeakyReLU backward are local on the values, and the SDDMM's
backward gives ``ds = dE·[1, t]`` and ``dt = dEᵀ·[s, 1]`` (one SpMM each).
The layer calls only context helpers (it never communicates itself), so it
runs on every algorithm whose matrices hold whole rows (``1d``, ``1d-aware``);
the others are refused with :class:`~spgnn.errors.LayoutMismatch`.
"""

import numpy as np

from ..errors import DimensionMismatch
from .layers import Dropout, Layer
from .models import BasicGNN
from .params import Parameter, glorot, zeros_init

__all__ = ["GATConv", "ELU", "GAT"]


class GATConv(Layer):
    """Multi-head graph attention (PyG's ``GATConv`` with ``add_self_loops=True``).

    Parameters
    ----------
    in_dim, out_dim : int
        ``out_dim`` is the width of one head.
    heads : int
    concat : bool
        Concatenate the heads (output ``heads·out_dim``) or average them.
    negative_slope : float
        LeakyReLU slope of the scores.
    dropout : float
        Dropout on the attention coefficients (training only).
    bias : bool
    seed, index : int
        Glorot initialisation: ``W`` from ``(seed, 3·index)``, the source and
        destination attention vectors from ``(seed, 3·index + 1)`` and
        ``(seed, 3·index + 2)`` (``U(±sqrt(6 / (heads + out_dim)))``, PyG's).
    """

    hops = 1

    def __init__(self, in_dim, out_dim, *, heads=1, concat=True, negative_slope=0.2, dropout=0.0,
                 bias=True, seed=0, index=0):
        self.in_dim, self.out_dim, self.heads = int(in_dim), int(out_dim), int(heads)
        if min(self.in_dim, self.out_dim, self.heads) < 1:
            raise ValueError(f"GATConv: in_dim, out_dim and heads must be >= 1, but got "
                             f"{in_dim}, {out_dim}, {heads}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"GATConv: dropout must lie in [0, 1), but got {dropout}")
        self.concat, self.slope, self.p = bool(concat), float(negative_slope), float(dropout)
        K, F = self.heads, self.out_dim
        self.weight = Parameter("weight", glorot((self.in_dim, K * F), seed, 3 * index))
        # block diagonal: column k holds a_dst^k on rows of head k, column K + k a_src^k
        att = np.zeros((K * F, 2 * K))
        self._mask = np.zeros((K * F, 2 * K), dtype=bool)
        for k, vecs in enumerate(zip(glorot((K, F), seed, 3 * index + 2),
                                     glorot((K, F), seed, 3 * index + 1))):
            for side, vec in enumerate(vecs):
                att[k * F:(k + 1) * F, side * K + k] = vec
                self._mask[k * F:(k + 1) * F, side * K + k] = True
        self.att = Parameter("att", att)
        width = K * F if self.concat else F
        self.bias = Parameter("bias", zeros_init((1, width))) if bias else None

    @property
    def output_dim(self):
        return self.heads * self.out_dim if self.concat else self.out_dim

    def parameters(self):
        return [self.weight, self.att] + ([self.bias] if self.bias is not None else [])

    def _cols(self, M, arr):
        """``arr`` (my rows, any width) as a matrix of M's rows."""
        return M.like(M.backend.xp.ascontiguousarray(arr), shape=(M.shape[0], arr.shape[1]))

    def forward(self, ctx, H):
        if H.shape[1] != self.in_dim:
            raise DimensionMismatch(f"GATConv: expected {self.in_dim} input columns, but got "
                                    f"{H.shape[1]}")
        K, F = self.heads, self.out_dim
        self._h = H
        Z = ctx.matmul(H, self.weight)                         # n x K·F
        ST = ctx.matmul(Z, self.att)                           # n x 2K: [s | t]
        z, st = Z.local, ST.local
        one = Z.backend.xp.ones((z.shape[0], 1), dtype=z.dtype)      # where z lives
        self._Z, self._ST, self._heads = Z, ST, []
        outs = []
        for k in range(K):
            X = self._cols(Z, np.hstack([st[:, k:k + 1], one]))           # [s_k, 1]
            Y = self._cols(Z, np.hstack([one, st[:, K + k:K + k + 1]]))   # [1, t_k]
            E = ctx.sddmm(X, Y)                                 # s_i + t_j on A + I
            e = E.local.data
            alpha = ctx.edge_softmax(ctx.edge_values(E, np.where(e > 0, e, self.slope * e)))
            drop, scale = ctx.edge_dropout(alpha, self.p, (self.key, k))
            Zk = self._cols(Z, z[:, k * F:(k + 1) * F])
            outs.append(ctx.propagate_with(drop, Zk).local)
            self._heads.append((X, Y, e > 0, alpha, drop, scale, Zk))
        out = np.hstack(outs) if self.concat else sum(outs) / K
        Q = Z.like(Z.backend.xp.ascontiguousarray(out, dtype=z.dtype),
                   shape=(Z.shape[0], self.output_dim))
        return ctx.add_bias(Q, self.bias) if self.bias is not None else Q

    def backward(self, ctx, dQ):
        K, F = self.heads, self.out_dim
        if self.bias is not None:
            ctx.bias_grad(dQ, self.bias)
        Z = self._Z
        g = dQ.local
        dz = np.zeros_like(Z.local)
        dst = np.zeros_like(self._ST.local)
        for k, (X, Y, pos, alpha, drop, scale, Zk) in enumerate(self._heads):
            gk = g[:, k * F:(k + 1) * F] if self.concat else g / K
            Gk = self._cols(Z, gk)
            dz[:, k * F:(k + 1) * F] += ctx.propagate_with_transpose(drop, Gk).local
            da = ctx.sddmm(Gk, Zk).local.data                  # dα_ij = dout_i · Z_k[j]
            if scale is not None:
                da = da * scale
            dv = ctx.edge_softmax_backward(alpha, da).local.data
            dE = ctx.edge_values(alpha, np.where(pos, dv, self.slope * dv))
            dst[:, k] = ctx.propagate_with(dE, Y).local[:, 0]              # Σ_j dE_ij
            dst[:, K + k] = ctx.propagate_with_transpose(dE, X).local[:, 1]  # Σ_i dE_ij
        dST = self._cols(Z, dst)
        ctx.weight_grad(Z, dST, self.att)
        self.att.grad *= self._mask                            # only the block diagonal trains
        dZ = Z.like(dz + ctx.matmul_transpose(dST, self.att).local)
        ctx.weight_grad(self._h, dZ, self.weight)
        return ctx.matmul_transpose(dZ, self.weight) if ctx.need_input_grad else None

    def __repr__(self):
        return (f"GATConv({self.in_dim}, {self.out_dim}, heads={self.heads}, concat={self.concat}, "
                f"dropout={self.p}, bias={self.bias is not None})")


class ELU(Layer):
    """``x`` if ``x > 0`` else ``exp(x) - 1``: local on every rank."""

    def forward(self, ctx, H):
        x = H.local
        self._neg = x <= 0
        self._em1 = np.expm1(np.where(self._neg, x, 0))
        return H.like(np.where(self._neg, self._em1, x).astype(x.dtype, copy=False))

    def backward(self, ctx, dH):
        return dH.like(np.where(self._neg, dH.local * (self._em1 + 1), dH.local))


class GAT(BasicGNN):
    """The GAT of Veličković et al. on Cora: ``dropout → GATConv(heads, concat) → ELU → dropout
    → GATConv(1 head, average)``, repeated ``layers - 1`` times before the output layer.

    Parameters
    ----------
    in_dim, hidden, out_dim : int
        ``hidden`` is the width of one head.
    heads : int
        Heads of the hidden layers (the output layer has ``out_heads``).
    layers : int
    dropout : float
        On every layer's input and on the attention coefficients.
    """

    conv_type = GATConv

    def __init__(self, in_dim, hidden, out_dim, *, heads=8, out_heads=1, layers=2, dropout=0.6,
                 seed=0, negative_slope=0.2):
        self.heads, self.out_heads, self.negative_slope = heads, out_heads, negative_slope
        super().__init__(in_dim, hidden, out_dim, layers, dropout=dropout, seed=seed)

    def init_conv(self, in_dim, out_dim, index, last):
        return GATConv(in_dim, out_dim, heads=self.out_heads if last else self.heads,
                       concat=not last, dropout=self.dropout, seed=self.seed, index=index,
                       negative_slope=self.negative_slope)

    def before_conv(self, index):
        return [Dropout(self.dropout)]

    def after_conv(self, index, conv):
        return [ELU()]

    def param_groups(self, weight_decay=5e-4):
        """One optimizer group: L2 ``weight_decay`` on every parameter (as PyG's GAT example)."""
        return [{"params": self.parameters(), "weight_decay": float(weight_decay)}]
