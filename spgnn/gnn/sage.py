"""GraphSAGE (mean aggregator) on sampled blocks: ``SAGEConv`` and ``GraphSAGE``.

Hamilton, Ying, Leskovec, *Inductive Representation Learning on Large
Graphs* (NeurIPS 2017), mean aggregator in the form PyG's ``SAGEConv`` uses::

    h'_v = W_self·h_v + W_neigh·mean_{u ∈ N(v)} h_u + b

computed on one :class:`~spgnn.sampling.SampledBlock` (rows = destination
vertices, columns = source vertices, see ``docs/sampling.md``).  The mean is
one backend SpMM with the *row-normalised* block ``M = D⁻¹·pattern(block)``
(every sampled edge weighs ``1/deg``; the graph's edge values are ignored, as
the mean aggregator does); the backward pass multiplies by ``Mᵀ``.  A row
without sampled neighbours aggregates to 0.

The root term ``h_v`` needs each destination vertex among the block's
columns: the ``"unique"`` GraphSAGE frontier and LADIES with
``include_batch=True`` put the rows first in each minibatch's columns;
``frontier="tree"`` needs ``include_dst=True``.  :class:`BlockOperator`
finds those positions once per block and raises ``ValueError`` otherwise.

Parameters are replicated: every rank holds the whole matrices (placed with
``Layout()``), computes gradients for its own minibatches, and
:meth:`GraphSAGE.allreduce_gradients` sums every gradient (plus a few
scalars, e.g. the number of loss terms) in **one** allreduce through the
communicator.  A deterministic optimizer then keeps the replicas identical.
The layers themselves never communicate.

Dropout masks are drawn from ``numpy.random.default_rng([seed, *key,
slot])`` (slot 0: the input features, slot ``k+1``: after layer ``k``) where the trainer passes ``key = (epoch, minibatch id)``: the mask
of a minibatch does not depend on the number of ranks or on which rank
trains it.
"""

import numpy as np

from ..backends import get_backend
from ..local.csr import LocalCSR
from ..local.semiring import plus_times
from ..errors import DimensionMismatch, DTypeError
from ..grid import AbstractGrid
from ..layout import Layout
from .params import Parameter, glorot, zeros_init

__all__ = ["BlockOperator", "SAGEConv", "GraphSAGE", "softmax_cross_entropy_sum"]


class _ReplicaGrid(AbstractGrid):
    """A one-position stand-in grid: replicated parameters need no communicator to be placed."""

    def __init__(self):
        super().__init__((1,), ("row",))
        self.coords = (0,)
        self.rank = 0


# --------------------------------------------------------------------------- #
# One sampled block, prepared for the mean aggregator
# --------------------------------------------------------------------------- #

class BlockOperator:
    """The mean-aggregation operator of one sampled block. Local.

    Parameters
    ----------
    block : SampledBlock
        Rows = destination vertices, columns = source vertices.
    dtype : numpy float dtype of the features it will multiply
    backend : backend name or instance (default: the configured default)

    Attributes
    ----------
    mean : LocalCSR (R x C)
        ``D⁻¹·pattern(block.adj)``: entry ``1/deg(r)`` for every sampled edge.
    self_index : int64 array (R,)
        Column holding row ``r``'s own vertex (the root term).
    num_dst, num_src : int
    """

    def __init__(self, block, dtype=np.float64, backend=None):
        self.backend = get_backend(backend)
        self.dtype = np.dtype(dtype)
        adj = block.adj
        R, C = adj.shape
        self.num_dst, self.num_src = int(R), int(C)
        indptr = np.asarray(adj.indptr, dtype=np.int64)
        deg = np.diff(indptr)
        # 1/deg repeated per edge; rows of degree 0 have no entry to divide
        inv = 1.0 / np.maximum(deg, 1).astype(np.float64)
        data = np.repeat(inv, deg).astype(self.dtype)
        self.mean = LocalCSR(indptr, np.asarray(adj.indices, dtype=np.int64), data, (R, C),
                             check=None)
        self._mean_t = None
        self.self_index = _self_index(block)

    @property
    def mean_t(self) -> LocalCSR:
        """``Mᵀ`` (built on first use: the backward pass only)."""
        if self._mean_t is None:
            self._mean_t = self.backend.transpose(self.mean)
        return self._mean_t

    def aggregate(self, h_src):
        """``M·h_src``: the mean over each row's sampled neighbours (0 for none). Local."""
        return self.backend.spmm(self.mean, h_src, plus_times)

    def aggregate_t(self, d_agg):
        """``Mᵀ·d_agg``: the backward of :meth:`aggregate`. Local."""
        return self.backend.spmm(self.mean_t, d_agg, plus_times)


def _self_index(block):
    """Column of each row's own vertex inside its minibatch's columns.

    Positional first (``frontier="unique"``, tree with ``include_dst``, LADIES
    with ``include_batch`` put minibatch ``i``'s rows at the front of its
    columns, in order) -- in tree mode a vertex may appear in several columns
    with different subtrees, so the position, not the id, is what identifies
    the row's own copy.  Otherwise (LADIES whose batch repeats a vertex) the
    first column of the same minibatch with the same vertex id.
    """
    row_ptr = np.asarray(block.row_ptr, dtype=np.int64)
    col_ptr = np.asarray(block.col_ptr, dtype=np.int64)
    R = block.dst_ids.size
    k = row_ptr.size - 1
    row_mb = np.repeat(np.arange(k, dtype=np.int64), np.diff(row_ptr))
    pos = col_ptr[row_mb] + (np.arange(R, dtype=np.int64) - row_ptr[row_mb])
    ok = pos < col_ptr[row_mb + 1] if R else np.zeros(0, dtype=bool)
    if R == 0 or (ok.all() and np.array_equal(block.src_ids[pos], block.dst_ids)):
        return pos
    C = block.src_ids.size
    col_mb = np.repeat(np.arange(k, dtype=np.int64), np.diff(col_ptr))
    span = np.int64(max(int(block.src_ids.max(initial=0)), int(block.dst_ids.max(initial=0))) + 1)
    ckeys = col_mb * span + block.src_ids
    order = np.argsort(ckeys, kind="stable")       # stable: the first column of a vertex wins
    skeys = ckeys[order]
    rkeys = row_mb * span + block.dst_ids
    at = np.searchsorted(skeys, rkeys)
    atc = np.minimum(at, max(C - 1, 0))
    found = (at < C) & (skeys[atc] == rkeys) if C else np.zeros(R, dtype=bool)
    if not found.all():
        raise ValueError("SAGEConv: some destination vertices are not among their block's "
                         "columns (the root term needs them): sample with "
                         "GraphSAGESampler(frontier='unique'), frontier='tree' with "
                         "include_dst=True, or LADIESSampler(include_batch=True)")
    return order[atc].astype(np.int64)


# --------------------------------------------------------------------------- #
# Layers
# --------------------------------------------------------------------------- #

class SAGEConv:
    """``h'_dst = h_dst·W_self + mean_{src ∈ N(dst)} h_src·W_neigh (+ b)`` on one block.

    Row-vector convention (``H`` is nodes x features, as everywhere in
    spgnn), so the weights are ``(in_dim, out_dim)``.  Explicit forward and
    backward; :meth:`backward` *adds* into the parameters' ``grad`` so that
    several minibatches can be accumulated before one reduction.

    Parameters
    ----------
    in_dim, out_dim : int
    bias : bool
    seed, index : int
        Glorot initialisation: ``W_self`` from ``(seed, 2·index)``,
        ``W_neigh`` from ``(seed, 2·index + 1)``.
    backend : backend for the block SpMM (default: the configured default)
    """

    def __init__(self, in_dim, out_dim, *, bias=True, seed=0, index=0, backend=None):
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        if self.in_dim < 1 or self.out_dim < 1:
            raise ValueError(f"SAGEConv: in_dim and out_dim must be >= 1, but got "
                             f"{in_dim} and {out_dim}")
        self.w_self = Parameter("w_self", glorot((self.in_dim, self.out_dim), seed, 2 * index))
        self.w_neigh = Parameter("w_neigh", glorot((self.in_dim, self.out_dim), seed,
                                                   2 * index + 1))
        self.bias = Parameter("bias", zeros_init((1, self.out_dim))) if bias else None
        self.backend = backend
        self._cache = None

    def parameters(self):
        return [self.w_self, self.w_neigh] + ([self.bias] if self.bias is not None else [])

    def named_parameters(self, prefix=""):
        return [(prefix + p.name, p) for p in self.parameters()]

    def _weights(self):
        if self.w_self.value is None:
            # Parameters are replicated and never need a grid: place them on
            # the stand-in on first use (GraphSAGE.place chooses the dtype).
            for p in self.parameters():
                p.place(_ReplicaGrid(), Layout(), np.float64)
        return self.w_self.value, self.w_neigh.value

    def combine(self, h_dst, agg):
        """``h_dst·W_self + agg·W_neigh (+ b)`` (no cache: inference). Local, pure."""
        w_self, w_neigh = self._weights()
        out = h_dst @ w_self
        out += agg @ w_neigh
        if self.bias is not None:
            out += self.bias.value
        return out

    def forward(self, block, h_src):
        """Output rows for ``block``'s destination vertices. Local.

        Parameters
        ----------
        block : BlockOperator or SampledBlock (prepared on the fly)
        h_src : ndarray (C, in_dim), one row per block column

        Returns
        -------
        ndarray (R, out_dim)
        """
        op = block if isinstance(block, BlockOperator) else \
            BlockOperator(block, h_src.dtype, self.backend)
        h_src = np.asarray(h_src)
        if h_src.ndim != 2 or h_src.shape != (op.num_src, self.in_dim):
            raise DimensionMismatch(f"SAGEConv.forward: h_src must have shape "
                                    f"({op.num_src}, {self.in_dim}) (block columns x in_dim), "
                                    f"but got {h_src.shape}")
        if h_src.dtype.kind != "f":
            raise DTypeError(f"SAGEConv.forward: h_src must be floating point, but got "
                             f"{h_src.dtype}")
        h_dst = h_src[op.self_index]
        agg = np.asarray(op.aggregate(h_src))
        self._cache = (op, h_dst, agg)
        return self.combine(h_dst, agg)

    def backward(self, d_out, need_input_grad=True):
        """Add parameter gradients; return ``dL/dh_src`` (or None). Local.

        Parameters
        ----------
        d_out : ndarray (R, out_dim), gradient of the output
        need_input_grad : bool
            False for the first layer (features need no gradient): skips the
            transposed SpMM.
        """
        if self._cache is None:
            raise RuntimeError("SAGEConv.backward called before forward")
        op, h_dst, agg = self._cache
        w_self, w_neigh = self._weights()
        self.w_self.grad += h_dst.T @ d_out
        self.w_neigh.grad += agg.T @ d_out
        if self.bias is not None:
            self.bias.grad += d_out.sum(axis=0, keepdims=True)
        self._cache = None
        if not need_input_grad:
            return None
        d_src = np.asarray(op.aggregate_t(op.backend.matmul(d_out, w_neigh.T)))
        # the root term: row r of d_out flows to column self_index[r]
        np.add.at(d_src, op.self_index, d_out @ w_self.T)
        return d_src

    def __repr__(self):
        return f"SAGEConv({self.in_dim}, {self.out_dim}, bias={self.bias is not None})"


def softmax_cross_entropy_sum(logits, labels):
    """Summed cross-entropy, its gradient and the number of correct predictions. Pure.

    Returns
    -------
    loss_sum : float (float64 accumulation)
    d_logits : ndarray like ``logits``, gradient of ``loss_sum`` (``softmax - onehot``)
    correct : int
    """
    z = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    if z.ndim != 2 or labels.shape != (z.shape[0],):
        raise DimensionMismatch(f"softmax_cross_entropy_sum: logits (m, C) and labels (m,) "
                                f"needed, but got {z.shape} and {labels.shape}")
    if z.shape[0] == 0:
        return 0.0, np.zeros_like(logits), 0
    if labels.min() < 0 or labels.max() >= z.shape[1]:
        raise ValueError(f"softmax_cross_entropy_sum: labels must lie in [0, {z.shape[1]}), "
                         f"but got range [{labels.min()}, {labels.max()}]")
    z = z - z.max(axis=1, keepdims=True)
    ez = np.exp(z)
    s = ez.sum(axis=1, keepdims=True)
    rows = np.arange(z.shape[0])
    loss = float(np.sum(np.log(s[:, 0]) - z[rows, labels]))
    d = ez / s
    d[rows, labels] -= 1.0
    correct = int(np.count_nonzero(np.argmax(z, axis=1) == labels))
    return loss, d.astype(np.asarray(logits).dtype, copy=False), correct


class GraphSAGE:
    """``layers`` × :class:`SAGEConv` (mean), ReLU and dropout between them.

    ``in_dim -> hidden -> ... -> hidden -> out_dim``.  Dropout (inverted,
    probability ``dropout``) follows each hidden ReLU, as in PyG's GraphSAGE
    example and the paper's model (report §4); ``input_dropout`` optionally
    drops input features too.  The last layer returns logits.

    Parameters
    ----------
    in_dim, hidden, out_dim : int
    layers : int (>= 1), one per sampled hop
    dropout : float in [0, 1)
    seed : int, initialisation (and, through the trainer, dropout) seed
    bias : bool
    input_dropout : float in [0, 1)
    backend : backend for the block SpMMs

    Notes
    -----
    :meth:`forward` takes the blocks in forward order (input layer first:
    ``BulkSample.forward_blocks``) and the features of the first block's
    columns.  Local; only :meth:`allreduce_gradients` communicates.
    """

    def __init__(self, in_dim, hidden, out_dim, layers=3, dropout=0.5, seed=0, *, bias=True,
                 input_dropout=0.0, backend=None):
        layers = int(layers)
        if layers < 1:
            raise ValueError(f"GraphSAGE: layers must be at least 1, but got {layers}")
        for name, p in (("dropout", dropout), ("input_dropout", input_dropout)):
            if not 0.0 <= float(p) < 1.0:
                raise ValueError(f"GraphSAGE: {name} must lie in [0, 1), but got {p}")
        self.dims = [int(in_dim)] + [int(hidden)] * (layers - 1) + [int(out_dim)]
        self.convs = [SAGEConv(self.dims[k], self.dims[k + 1], bias=bias, seed=seed, index=k,
                               backend=backend) for k in range(layers)]
        self.dropout = float(dropout)
        self.input_dropout = float(input_dropout)
        self.seed = int(seed)
        self.backend = backend
        self._masks = None

    @property
    def num_layers(self) -> int:
        return len(self.convs)

    # -- parameters -------------------------------------------------------- #
    def parameters(self):
        return [p for c in self.convs for p in c.parameters()]

    def named_parameters(self, prefix=""):
        return [item for k, c in enumerate(self.convs) for item in c.named_parameters(f"{prefix}{k}.")]

    def param_groups(self, weight_decay=0.0):
        """Optimizer groups: L2 ``weight_decay`` on the weights, none on the biases."""
        ws = [p for c in self.convs for p in (c.w_self, c.w_neigh)]
        bs = [c.bias for c in self.convs if c.bias is not None]
        groups = [{"params": ws, "weight_decay": float(weight_decay)}]
        if bs:
            groups.append({"params": bs, "weight_decay": 0.0})
        return groups

    def place(self, dtype=np.float32, grid=None):
        """Keep every parameter whole (``Layout()``) in ``dtype``. Local.

        ``grid`` (e.g. the trainer's ``grid_1d``) lets ``Parameter.to_global``
        work; without it a one-position stand-in is used.  Idempotent.
        """
        g = _ReplicaGrid() if grid is None else grid
        for p in self.parameters():
            if p.value is None:
                p.place(g, Layout(), np.dtype(dtype))
        return self

    @property
    def dtype(self):
        p = self.convs[0].w_self
        return None if p.value is None else p.value.dtype

    def zero_grad(self):
        for p in self.parameters():
            p.zero_grad()

    def state_dict(self):
        """``{name: copy of the value}``. Local."""
        return {n: np.array(p.value, copy=True) for n, p in self.named_parameters()}

    def load_state_dict(self, state):
        """Restore :meth:`state_dict`'s output into placed parameters. Local."""
        named = dict(self.named_parameters())
        if set(named) != set(state):
            raise ValueError(f"GraphSAGE.load_state_dict: parameters {sorted(named)} do not "
                             f"match {sorted(state)}")
        for n, p in named.items():
            v = np.asarray(state[n])
            if p.value is None or v.shape != p.value.shape:
                raise DimensionMismatch(f"GraphSAGE.load_state_dict: {n!r} has shape "
                                        f"{None if p.value is None else p.value.shape}, the "
                                        f"state {v.shape} (place the model first)")
            p.value[...] = v

    # -- forward / backward on sampled blocks --------------------------------- #
    def _mask(self, shape, p, key, layer, dtype):
        rng = np.random.default_rng([self.seed, *[int(k) for k in key], int(layer)])
        keep = rng.random(shape) >= p
        return keep.astype(dtype) * dtype.type(1.0 / (1.0 - p))

    def forward(self, blocks, x, *, training=False, key=(0, 0)):
        """Logits for the last block's destination vertices. Local.

        Parameters
        ----------
        blocks : list of BlockOperator or SampledBlock, forward order
            (``len(blocks) == num_layers``); block ``l+1``'s columns are
            block ``l``'s rows.
        x : ndarray (C_0, in_dim), features of ``blocks[0]``'s columns
        training : bool, apply dropout
        key : tuple of int, keys the dropout masks with the model seed
            (the trainer passes ``(epoch, minibatch id)``)

        Returns
        -------
        ndarray (R_last, out_dim)
        """
        if len(blocks) != self.num_layers:
            raise DimensionMismatch(f"GraphSAGE.forward: need {self.num_layers} blocks (one per "
                                    f"layer), but got {len(blocks)}")
        self.place(np.asarray(x).dtype if self.dtype is None else self.dtype)
        h = np.asarray(x, dtype=self.dtype)
        masks = []
        if training and self.input_dropout > 0:
            m = self._mask(h.shape, self.input_dropout, key, 0, h.dtype)
            h = h * m
            masks.append(m)
        else:
            masks.append(None)
        self._relu = []
        for k, (conv, blk) in enumerate(zip(self.convs, blocks)):
            op = blk if isinstance(blk, BlockOperator) else BlockOperator(blk, h.dtype, self.backend)
            if k > 0 and op.num_src != h.shape[0]:
                raise DimensionMismatch(f"GraphSAGE.forward: block {k} has {op.num_src} columns "
                                        f"but layer {k - 1} produced {h.shape[0]} rows")
            h = conv.forward(op, h)
            if k < self.num_layers - 1:
                pos = h > 0
                h = np.where(pos, h, 0).astype(h.dtype, copy=False)
                self._relu.append(pos)
                if training and self.dropout > 0:
                    m = self._mask(h.shape, self.dropout, key, k + 1, h.dtype)
                    h = h * m
                    masks.append(m)
                else:
                    masks.append(None)
        self._masks = masks
        return h

    def backward(self, d_logits, need_input_grad=False):
        """Add every parameter's gradient; return ``dL/dx`` when asked. Local."""
        if self._masks is None:
            raise RuntimeError("GraphSAGE.backward called before forward")
        d = np.asarray(d_logits, dtype=self.dtype)
        for k in reversed(range(self.num_layers)):
            if k < self.num_layers - 1:
                m = self._masks[k + 1]
                if m is not None:
                    d = d * m
                d = np.where(self._relu[k], d, 0).astype(d.dtype, copy=False)
            d = self.convs[k].backward(d, need_input_grad=need_input_grad or k > 0)
        if need_input_grad and self._masks[0] is not None:
            d = d * self._masks[0]
        self._masks = None
        return d if need_input_grad else None

    # -- full-neighbourhood inference ----------------------------------------- #
    def infer(self, x, aggregate):
        """Evaluation-mode forward over whole neighbourhoods (no dropout).

        Parameters
        ----------
        x : ndarray (m, in_dim), the features of the rows this rank owns
        aggregate : callable ``h (m, f) -> mean over neighbours (m, f)``
            e.g. a distributed row-normalised SpMM over the whole graph.

        Collective: whatever ``aggregate`` is (the model only multiplies).
        """
        self.place(np.asarray(x).dtype if self.dtype is None else self.dtype)
        h = np.asarray(x, dtype=self.dtype)
        for k, conv in enumerate(self.convs):
            h = conv.combine(h, np.asarray(aggregate(h), dtype=h.dtype))
            if k < self.num_layers - 1:
                h = np.maximum(h, 0)
        return h

    # -- gradient reduction --------------------------------------------------- #
    def allreduce_gradients(self, comm, extra=(), scale_by_extra=None, label="sage:allreduce"):
        """Sum every gradient (and ``extra`` scalars) over ``comm`` in one allreduce.

        Parameters
        ----------
        comm : Communicator
        extra : sequence of float, summed along (e.g. loss sum, correct, count)
        scale_by_extra : int, optional
            Divide the summed gradients by ``extra[scale_by_extra]`` after the
            reduction (the global number of loss terms: gradient of the mean
            loss).  Nothing is divided when that sum is 0.

        Returns
        -------
        ndarray of the summed ``extra`` values.

        Collective: yes -- one ``allreduce`` over ``comm`` of
        ``Σ parameter sizes + len(extra)`` elements in the parameters' dtype
        (integer counts stay exact below 2²⁴ in float32).  Every rank gets
        the same sums, so replicas stay identical.
        """
        params = self.parameters()
        dtype = params[0].grad.dtype
        flat = np.concatenate([p.grad.reshape(-1) for p in params]
                              + [np.asarray(extra, dtype=dtype).reshape(-1)])
        tot = comm.allreduce(flat, op="plus", label=label)
        ex = tot[tot.size - len(extra):] if len(extra) else tot[:0]
        scale = None
        if scale_by_extra is not None and float(ex[scale_by_extra]) > 0:
            scale = dtype.type(ex[scale_by_extra])
        at = 0
        for p in params:
            g = tot[at:at + p.grad.size].reshape(p.grad.shape)
            at += p.grad.size
            p.grad[...] = g / scale if scale is not None else g
        return ex

    def __repr__(self):
        inner = ", ".join(repr(c) for c in self.convs)
        return (f"GraphSAGE({inner}, dropout={self.dropout}, input_dropout={self.input_dropout}, "
                f"seed={self.seed})")
