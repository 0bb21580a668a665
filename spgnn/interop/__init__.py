"""Moving graphs and tensors between spgnn and PyTorch, PyTorch Geometric, networkx and scipy.

One entry point in each direction, plus the explicit converters:

* :func:`as_graph` -- anything graph-like to a :class:`spgnn.io.Graph`: a PyG
  ``Data``, a networkx graph, a torch sparse or dense adjacency, a scipy
  sparse matrix or a numpy array (an adjacency), or a Graph (returned as is);
* :func:`to_scipy` -- the adjacency of any of those as a scipy ``csr_array``.

=================  ==========================  ==========================
library            into spgnn                  out of spgnn
=================  ==========================  ==========================
PyG ``Data``       :func:`from_pyg`            :func:`to_pyg`
torch sparse       :func:`from_torch_sparse`   :func:`to_torch_sparse`
torch dense        :func:`to_numpy`            :func:`to_torch`
networkx           :func:`from_networkx`       :func:`to_networkx`
scipy              :func:`as_graph`            :func:`to_scipy`
=================  ==========================  ==========================

Dense arrays and CSR arrays cross through DLPack without a copy
(:mod:`spgnn.interop.tensors` says exactly what is shared).  From PyG to
distributed training::

    graph = spgnn.interop.from_pyg(data)                     # x, y, masks shared
    dg = DistGraph.from_graph(graph, comm, "1d-aware")
    Trainer(GCN(dg.num_features, 16, dg.num_classes), dg, Adam(...)).fit(200)

Optional dependencies are imported on first use, never by ``import spgnn``;
a missing one raises :class:`~spgnn.errors.MissingDependency` naming the
extra to install: ``spgnn[torch]``, ``spgnn[pyg]``, ``spgnn[networkx]``.
Everything here is local.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..io.graph import Graph
from ._optional import module_of
from .nx import from_networkx, to_networkx
from .pyg import from_pyg, to_pyg
from .tensors import from_torch_sparse, is_torch_tensor, to_numpy, to_torch, to_torch_sparse

__all__ = ["as_graph", "to_scipy", "from_pyg", "to_pyg", "from_networkx", "to_networkx",
           "to_torch", "to_numpy", "to_torch_sparse", "from_torch_sparse"]


def as_graph(obj, **kwargs) -> Graph:
    """A :class:`~spgnn.io.Graph` of ``obj`` (see the module's table); ``kwargs`` go to the
    converter (``from_pyg``'s ``split``, ``from_networkx``'s ``weight``, ...; for an
    adjacency: ``Graph``'s ``features``, ``labels``, masks, ``name``)."""
    if isinstance(obj, Graph):
        if kwargs:
            raise TypeError(f"as_graph: a Graph takes no options, but got {sorted(kwargs)}")
        return obj
    origin = module_of(obj)
    if origin == "torch_geometric" or (hasattr(obj, "edge_index") and hasattr(obj, "num_nodes")):
        return from_pyg(obj, **kwargs)
    if origin == "networkx":
        return from_networkx(obj, **kwargs)
    return Graph(adj=to_scipy(obj), **kwargs)


def to_scipy(obj) -> sp.csr_array:
    """The adjacency of ``obj`` -- a Graph, PyG ``Data``, networkx graph, torch tensor (sparse
    or dense), scipy sparse matrix or numpy array -- as a scipy ``csr_array``.

    A CSR tensor's arrays are shared with the result; a Graph's ``adj`` is
    returned itself.
    """
    if isinstance(obj, Graph):
        return obj.adj
    if is_torch_tensor(obj):
        return from_torch_sparse(obj)
    if sp.issparse(obj):
        return sp.csr_array(obj)
    if isinstance(obj, np.ndarray):
        if obj.ndim != 2:
            raise ValueError(f"to_scipy: a dense adjacency must be 2-D, but got shape "
                             f"{obj.shape}")
        return sp.csr_array(obj)
    if module_of(obj) in ("torch_geometric", "networkx") or hasattr(obj, "edge_index"):
        return as_graph(obj).adj
    raise TypeError(f"to_scipy: cannot convert {type(obj).__module__}.{type(obj).__name__}; "
                    f"expected a Graph, PyG Data, networkx graph, torch tensor, scipy sparse "
                    f"matrix or numpy array")
