"""networkx graphs <-> :class:`spgnn.io.Graph`.

Vertex ``i`` of the Graph is the ``i``-th node of ``G.nodes`` (insertion
order); when those nodes are not exactly ``0..n-1`` in order, ``Graph.node_ids``
keeps them and :func:`to_networkx` gives them back.  An undirected
``nx.Graph`` becomes a symmetric ``adj``, a ``DiGraph`` keeps its direction;
a self-loop is one diagonal entry; multigraph edges between the same pair
are summed (networkx's ``to_scipy_sparse_array`` does it).  Edge weights come
from the ``weight`` attribute (1 when absent).

networkx is imported on first use (``pip install "spgnn[networkx]"``).
Local, pure.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..io.graph import Graph
from ..io.preprocess import symmetrize
from ._optional import require

__all__ = ["to_networkx", "from_networkx"]


def from_networkx(G, *, weight="weight", features=None, labels=None, name=None) -> Graph:
    """A :class:`~spgnn.io.Graph` of the networkx graph ``G``.

    Parameters
    ----------
    weight : str or None
        Edge attribute holding the weight (None: every edge weighs 1).
    features, labels : str, optional
        Node attributes holding a feature vector / an integer class; every
        node must have them.
    name : str, optional
        ``Graph.name`` (default ``G.name`` or ``"networkx"``).
    """
    nx = require("networkx")
    if not isinstance(G, nx.Graph):
        raise TypeError(f"from_networkx: expected a networkx graph, but got {type(G).__name__}")
    nodes = list(G.nodes)
    n = len(nodes)
    if n:
        adj = nx.to_scipy_sparse_array(G, nodelist=nodes, weight=weight, dtype=np.float32,
                                       format="csr")
    else:
        adj = sp.csr_array((0, 0), dtype=np.float32)
    node_ids = None if nodes == list(range(n)) else np.asarray(nodes)

    def attribute(key, what):
        missing = [v for v in nodes if key not in G.nodes[v]]
        if missing:
            raise ValueError(f"from_networkx: {len(missing)} node(s) have no {what} attribute "
                             f"{key!r} (first: {missing[0]!r})")
        return [G.nodes[v][key] for v in nodes]

    x = None
    if features is not None:
        x = np.asarray(attribute(features, "feature"), dtype=np.float32).reshape(n, -1)
    y = None
    if labels is not None:
        y = np.asarray(attribute(labels, "label"), dtype=np.int64)
    return Graph(adj=adj, features=x, labels=y, name=name or G.name or "networkx",
                 node_ids=node_ids)


def to_networkx(graph: Graph, *, directed=None, weight="weight", node_attrs=()):
    """A networkx graph of ``graph``: ``nx.Graph`` when ``adj`` is symmetric, else ``nx.DiGraph``.

    Parameters
    ----------
    directed : bool, optional
        Force the kind (``False`` on a non-symmetric ``adj`` stores A ∪ Aᵀ,
        weights the larger of the two).
    weight : str or None
        Edge attribute to store the weight under (None: no attribute).
    node_attrs : iterable of str
        Per-node data to attach: ``"x"`` (the feature row), ``"y"`` (the
        label), ``"train_mask"`` / ``"val_mask"`` / ``"test_mask"``.

    Nodes are ``graph.node_ids`` when set, else ``0..n-1``.
    """
    nx = require("networkx")
    if not isinstance(graph, Graph):
        raise TypeError(f"to_networkx: expected a spgnn.io.Graph, but got {type(graph).__name__}")
    if directed is None:
        directed = not graph.is_symmetric()
    G = nx.DiGraph() if directed else nx.Graph()
    G.name = graph.name
    n = graph.num_nodes
    names = list(range(n)) if graph.node_ids is None else graph.node_ids.tolist()
    G.add_nodes_from(names)
    a = graph.adj if directed or graph.is_symmetric() else symmetrize(graph.adj)
    a = a.tocoo()
    rows, cols, vals = a.row, a.col, a.data
    if not directed:
        keep = rows <= cols
        rows, cols, vals = rows[keep], cols[keep], vals[keep]
    if weight is None:
        G.add_edges_from((names[u], names[v]) for u, v in zip(rows.tolist(), cols.tolist()))
    else:
        G.add_weighted_edges_from(((names[u], names[v], w) for u, v, w in
                                   zip(rows.tolist(), cols.tolist(), vals.tolist())),
                                  weight=weight)
    sources = {"x": graph.features, "y": graph.labels, "train_mask": graph.train_mask,
               "val_mask": graph.val_mask, "test_mask": graph.test_mask}
    for key in node_attrs:
        if key not in sources:
            raise ValueError(f"to_networkx: unknown node attribute {key!r}; choose from "
                             f"{sorted(sources)}")
        values = sources[key]
        if values is None:
            continue
        if sp.issparse(values):
            values = values.toarray()
        values = values.tolist()
        nx.set_node_attributes(G, {names[i]: values[i] for i in range(n)}, key)
    return G
