"""PyTorch Geometric ``Data`` <-> :class:`spgnn.io.Graph`.

The correspondence (PyG's message direction is source -> target, ``edge_index[0]``
the sources; a Graph's ``adj[u, v]`` is the edge u -> v):

=====================  ==============================================  =========================
PyG ``Data``            :class:`~spgnn.io.Graph`                         memory
=====================  ==============================================  =========================
``edge_index[:, k]``    ``(u, v)`` with ``adj[u, v] != 0``               built (CSR <-> COO)
``edge_weight``         ``adj`` values (``None`` when all are 1)         built
``x``                   ``features`` (dense, or a sparse CSR tensor)     shared when float32
``y``                   ``labels`` (int64, -1 unknown)                   shared when int64
``*_mask``              ``train_mask`` / ``val_mask`` / ``test_mask``    shared
``num_nodes``           ``num_nodes`` (isolated vertices included)
=====================  ==============================================  =========================

Edges without weights that appear twice collapse to one edge (as PyG's
``coalesce`` does); weighted duplicates are summed.  Self-loops are kept.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import DimensionMismatch
from ..io.graph import Graph, _build_adj
from ._optional import require
from .tensors import from_torch_sparse, to_numpy, to_torch, to_torch_sparse

__all__ = ["to_pyg", "from_pyg"]

_MASKS = (("train_mask", "train_mask"), ("val_mask", "val_mask"), ("test_mask", "test_mask"))


def to_pyg(graph: Graph, *, copy=None):
    """A ``torch_geometric.data.Data`` of ``graph`` (see the module's table). Local.

    ``x``, ``y`` and the masks share memory with the graph's arrays unless
    ``copy=True``; sparse features become a ``torch.sparse_csr`` ``x``.
    """
    torch = require("torch")
    data_cls = require("torch_geometric.data").Data
    if not isinstance(graph, Graph):
        raise TypeError(f"to_pyg: expected a spgnn.io.Graph, but got {type(graph).__name__}")
    a = graph.adj
    n = graph.num_nodes
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(a.indptr))
    edge_index = torch.from_numpy(np.vstack([rows, a.indices.astype(np.int64)]))
    kwargs = {"edge_index": edge_index, "num_nodes": n}
    if a.nnz and not np.all(a.data == 1):
        kwargs["edge_weight"] = to_torch(a.data, copy=copy)
    if graph.features is not None:
        kwargs["x"] = (to_torch_sparse(graph.features, copy=copy) if sp.issparse(graph.features)
                       else to_torch(graph.features, copy=copy))
    if graph.labels is not None:
        kwargs["y"] = to_torch(graph.labels, copy=copy)
    for attr, key in _MASKS:
        mask = getattr(graph, attr)
        if mask is not None:
            kwargs[key] = to_torch(mask, copy=copy)
    return data_cls(**kwargs)


def _node_array(value, n, what):
    """A PyG per-node attribute as numpy (zero-copy for CPU tensors)."""
    arr = to_numpy(value) if hasattr(value, "layout") else np.asarray(value)
    if arr.shape[:1] != (n,):
        raise DimensionMismatch(f"from_pyg: {what} must have {n} rows (num_nodes), but got "
                                f"shape {arr.shape}")
    return arr


def _mask(value, n, what, split):
    """A boolean mask from a bool vector, an (n, k) bool matrix (column ``split``) or indices."""
    arr = to_numpy(value) if hasattr(value, "layout") else np.asarray(value)
    if arr.dtype == bool:
        if arr.ndim == 2 and arr.shape[0] == n:
            if split is None:
                raise ValueError(f"from_pyg: {what} has {arr.shape[1]} splits (shape "
                                 f"{arr.shape}); pass split=k to pick one")
            arr = arr[:, split]
        if arr.shape != (n,):
            raise DimensionMismatch(f"from_pyg: {what} must have shape ({n},), but got "
                                    f"{arr.shape}")
        return arr
    if arr.dtype.kind in "iu" and arr.ndim == 1:        # an index vector (OGB's split_idx)
        if arr.size and (arr.min() < 0 or arr.max() >= n):
            raise ValueError(f"from_pyg: {what} holds node ids outside 0..{n - 1}")
        out = np.zeros(n, dtype=bool)
        out[arr] = True
        return out
    raise TypeError(f"from_pyg: {what} must be a bool mask or an index vector, but got dtype "
                    f"{arr.dtype} and shape {arr.shape}")


def from_pyg(data, *, name="pyg", split=None) -> Graph:
    """A :class:`~spgnn.io.Graph` of a PyG ``Data`` (see the module's table). Local.

    Parameters
    ----------
    data : torch_geometric.data.Data
        Needs ``edge_index``; ``num_nodes``, ``x``, ``y``, ``edge_weight`` (or
        a one-column ``edge_attr``) and the masks are optional.
    name : str
        ``Graph.name``.
    split : int, optional
        Column to take from (n, k) masks holding k splits (WikiCS-style).
    """
    edge_index = getattr(data, "edge_index", None)
    if edge_index is None:
        raise ValueError("from_pyg: the Data object has no edge_index")
    ei = to_numpy(edge_index) if hasattr(edge_index, "layout") else np.asarray(edge_index)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise DimensionMismatch(f"from_pyg: edge_index must have shape [2, E], but got "
                                f"{tuple(ei.shape)}")
    if ei.dtype.kind not in "iu":
        raise TypeError(f"from_pyg: edge_index must hold integers, but got {ei.dtype}")
    n = data.num_nodes
    n = int(n) if n is not None else (int(ei.max()) + 1 if ei.size else 0)
    if ei.size and (ei.min() < 0 or ei.max() >= n):
        raise ValueError(f"from_pyg: edge_index holds node ids outside 0..{n - 1} "
                         f"(num_nodes={n})")
    weights = getattr(data, "edge_weight", None)
    if weights is None:
        attr = getattr(data, "edge_attr", None)
        if attr is not None and (attr.dim() == 1 or (attr.dim() == 2 and attr.shape[1] == 1)):
            weights = attr.reshape(-1)
    values = None
    if weights is not None:
        values = to_numpy(weights).astype(np.float32, copy=False)
        if values.shape != (ei.shape[1],):
            raise DimensionMismatch(f"from_pyg: edge weights must have shape "
                                    f"({ei.shape[1]},), but got {values.shape}")
    adj = _build_adj(ei[0], ei[1], n, symmetric=False, values=values)
    features = None
    x = getattr(data, "x", None)
    if x is not None:
        if hasattr(x, "layout") and str(x.layout) != "torch.strided":     # sparse features
            features = from_torch_sparse(x)
        else:
            features = _node_array(x, n, "x")
            if features.ndim == 1:
                features = features[:, None]
    labels = None
    y = getattr(data, "y", None)
    if y is not None:
        labels = _node_array(y, n, "y")
        if labels.ndim == 2 and labels.shape[1] == 1:
            labels = labels[:, 0]
        if labels.ndim != 1:
            raise ValueError(f"from_pyg: y must hold one class per node, but got shape "
                             f"{labels.shape} (multi-label targets are not supported)")
    masks = {}
    for attr, key in _MASKS:
        value = getattr(data, key, None)
        if value is not None:
            masks[attr] = _mask(value, n, key, split)
    return Graph(adj=adj, features=features, labels=labels, name=name, **masks)
