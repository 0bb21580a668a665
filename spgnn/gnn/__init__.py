"""GNN layers, models and training on spgnn's distributed operators.

One layer contract for every model: a :class:`Layer` computes ``forward(ctx,
H)`` and ``backward(ctx, dH)`` against a context -- :class:`GraphContext`
(the whole distributed graph) or :class:`BlockContext` (one sampled
minibatch) -- whose helpers (distributed SpMM, dense products, the
communicator's collectives) are the only way it touches data; it never
communicates itself.  One training loop: :class:`Trainer` over a batch
source (:class:`FullGraph`, :class:`Sampled` minibatches, partitioned
:class:`Halo` batches), with ``fit``, hooks, evaluation and one state
format.  Models share one base (:class:`BasicGNN`); :data:`MODELS` names the
models the command line offers, and :class:`TrainConfig` holds every setting
of a run, its defaults and checks.  See ``docs/gnn.md``.

>>> g = DistGraph.from_graph(graph, comm, "1d-aware")               # doctest: +SKIP
>>> model = GCN(g.num_features, 16, g.num_classes)                  # doctest: +SKIP
>>> trainer = Trainer(model, g, Adam(model.param_groups(5e-4), lr=0.01))  # doctest: +SKIP
>>> trainer.fit(200)                                                # doctest: +SKIP
"""

from .blocks import BlockOperator
from .context import BlockContext, Context, GraphContext, local_grid
from .data import ADJACENCIES, ALGORITHMS, DistGraph, default_grid_3d
from .gat import ELU, GAT, GATConv
from .hooks import Checkpoint, EvaluateEvery, Hook, Metrics, ProgressBar
from .layers import Dropout, GCNConv, Layer, LayerNorm, Linear, ReLU, SAGEConv
from .minibatch import FeatureStore, MinibatchGraph
from .config import TrainConfig
from .models import GCN, BasicGNN, FullBatchSAGE, GraphSAGE, Sequential
from .optim import SGD, Adam, Optimizer
from .params import Parameter, glorot, zeros_init
from .placement import PLACEMENTS, Exchange, Plexus3D, Rep15D, Row1D, placement_for
from .registry import MODELS, ModelOption, ModelSpec
from .sources import FullGraph, Halo, Sampled
from .train import Trainer

__all__ = ["DistGraph", "ALGORITHMS", "ADJACENCIES", "default_grid_3d", "Row1D", "Rep15D",
           "Plexus3D", "Exchange", "PLACEMENTS", "placement_for", "Context",
           "GraphContext", "BlockContext", "BlockOperator", "local_grid", "Layer", "GCNConv",
           "SAGEConv", "Linear", "ReLU", "Dropout", "LayerNorm", "FullBatchSAGE", "GATConv", "ELU",
           "GAT", "Sequential", "BasicGNN", "GCN", "GraphSAGE", "TrainConfig", "ModelOption",
           "Parameter", "glorot", "zeros_init", "Optimizer", "SGD", "Adam", "Trainer",
           "FullGraph", "Sampled", "Halo", "MinibatchGraph", "FeatureStore", "Hook", "Metrics",
           "EvaluateEvery", "ProgressBar", "Checkpoint", "MODELS", "ModelSpec"]
