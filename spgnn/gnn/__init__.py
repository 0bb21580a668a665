"""GNN layers on spgnn's distributed operators.

Layers compose :class:`~spgnn.gnn.ops.GraphContext` helpers (distributed
SpMM, dense matmul, the communicator's collectives) with explicit forward and
backward; they never communicate themselves.  See ``docs/gnn.md``.

>>> g = DistGraph.from_graph(graph, comm, algorithm="1d-aware")     # doctest: +SKIP
>>> model = GCN(g.num_features, 16, g.num_classes)                  # doctest: +SKIP
>>> trainer = Trainer(model, g, Adam(model.param_groups(5e-4), lr=0.01))  # doctest: +SKIP
>>> trainer.fit(200)                                                # doctest: +SKIP
"""

from .data import ALGORITHMS, DistGraph, default_grid_3d, normalized_adjacency
from .layers import Dropout, GCNConv, Layer, Linear, ReLU
from .models import GCN, Sequential
from .ops import GraphContext
from .optim import SGD, Adam, Optimizer
from .params import Parameter, glorot, zeros_init
from .train import Trainer

__all__ = ["DistGraph", "ALGORITHMS", "default_grid_3d", "normalized_adjacency", "GraphContext",
           "Layer", "GCNConv", "Linear", "ReLU", "Dropout", "Sequential", "GCN", "Parameter",
           "glorot", "zeros_init", "Optimizer", "SGD", "Adam", "Trainer"]
