"""The models the command line trains: one :class:`ModelSpec` per ``--model`` name.

Adding a model is one class (a :class:`~spgnn.gnn.layers.Layer`, usually a
:class:`~spgnn.gnn.models.Sequential`) plus one entry here: how to build it
from the number of features, the number of classes and the options, which
trainer runs it, and its defaults.  ``python -m spgnn train`` reads nothing
else about a model.
"""

from dataclasses import dataclass, field
from typing import Callable

from .gat import GAT
from .models import GCN, FullBatchSAGE, GraphSAGE

__all__ = ["ModelSpec", "MODELS", "TRAININGS"]

#: How a model is trained: on the whole distributed graph (:class:`Trainer`)
#: or on sampled minibatches (:class:`MinibatchTrainer`).
TRAININGS = ("full-graph", "minibatch")


@dataclass(frozen=True)
class ModelSpec:
    """How to build and train one model.

    Attributes
    ----------
    name : str
        The ``--model`` name.
    help : str
        One line for ``--help``.
    build : callable ``(num_features, num_classes, options) -> Layer``
        ``options`` is a dict of the command's options (``hidden``,
        ``layers``, ``dropout``, ``seed``, ``bias``, ``fanout``, ...).
    training : ``"full-graph"`` or ``"minibatch"``
    defaults : dict
        Option values this model uses when the user gives none.
    options : tuple of str
        Options only this model's training reads (the command refuses them
        for other models).
    checkpoint_format : str
        The ``format`` of its training checkpoints (a resume checks it);
        ``/2``: the layout of the one training loop (``trainer`` holds
        :meth:`Trainer.gather_state`), which earlier checkpoints do not have.
    algorithms : tuple of str
        The full-graph ``--algo`` values the model can train on (``--algo
        auto`` chooses among them); empty: every distributed algorithm.
    adjacency : str
        The full-graph aggregation matrix the model's convolutions multiply
        by (:class:`~spgnn.gnn.data.DistGraph`'s ``aggregation``): ``"gcn"``
        (``Â``) or ``"mean"`` (``D⁻¹A``, GraphSAGE).
    """

    name: str
    help: str
    build: Callable
    training: str
    defaults: dict = field(default_factory=dict)
    options: tuple = ()
    checkpoint_format: str = ""
    algorithms: tuple = ()
    adjacency: str = "gcn"

    def __post_init__(self):
        if self.training not in TRAININGS:
            raise ValueError(f"ModelSpec {self.name!r}: training must be one of {TRAININGS}, but "
                             f"got {self.training!r}")


def _gcn(num_features, num_classes, o):
    return GCN(num_features, o["hidden"], num_classes, layers=o["layers"], dropout=o["dropout"],
               seed=o["seed"], bias=o["bias"])


def _sage(num_features, num_classes, o):
    return GraphSAGE(num_features, o["hidden"], num_classes, layers=len(o["fanout"]),
                     dropout=o["dropout"], seed=o["seed"], input_dropout=o["input_dropout"])


def _sage_full(num_features, num_classes, o):
    return FullBatchSAGE(num_features, o["hidden"], num_classes, layers=o["layers"],
                         dropout=o["dropout"], seed=o["seed"])


def _gat(num_features, num_classes, o):
    return GAT(num_features, o["hidden"], num_classes, heads=o["heads"], layers=o["layers"],
               dropout=o["dropout"], seed=o["seed"])


#: The minibatch options (sampling, model selection) of ``--model sage``.
MINIBATCH_OPTIONS = ("ladies_size", "input_dropout", "eval_every", "model_selection")

MODELS = {
    "gcn": ModelSpec(
        "gcn", "full-graph GCN (Kipf & Welling)", _gcn, "full-graph",
        defaults={"epochs": 200, "hidden": 16, "dropout": 0.5, "layers": 2},
        checkpoint_format="spgnn-train-gcn/2"),
    # Veličković et al.'s Cora setting: 8 heads x 8 hidden, dropout 0.6 (docs/gat.md)
    "gat": ModelSpec(
        "gat", "full-graph GAT (multi-head attention; --algo 1d or 1d-aware)", _gat,
        "full-graph", defaults={"epochs": 200, "hidden": 8, "dropout": 0.6, "layers": 2,
                                "heads": 8},
        options=("heads",), checkpoint_format="spgnn-train-gat/2",
        algorithms=("1d", "1d-aware")),     # the edge softmax needs whole rows per rank
    # input dropout, dropout 0.6 and model selection on the validation set
    # were chosen on Cora's validation accuracy (docs/sage_training.md)
    "sage": ModelSpec(
        "sage", "GraphSAGE (mean) on sampled minibatches", _sage, "minibatch",
        defaults={"epochs": 50, "hidden": 64, "dropout": 0.6, "input_dropout": 0.5,
                  "eval_every": 1, "model_selection": "best-val"},
        options=MINIBATCH_OPTIONS, checkpoint_format="spgnn-train-sage/2"),
    # paper 004's model (SuperGCN): 3 layers, hidden 256, dropout 0.5, lr 0.01
    # (its Table 3); conv -> dropout -> LayerNorm -> ReLU (docs/communication.md)
    "sage-full": ModelSpec(
        "sage-full", "full-graph GraphSAGE-mean with LayerNorm (paper 004; --algo 1d, "
                     "1d-aware, 15d or 15d-aware)", _sage_full, "full-graph",
        defaults={"epochs": 200, "hidden": 256, "dropout": 0.5, "layers": 3},
        checkpoint_format="spgnn-train-sage-full/2",
        algorithms=("1d", "1d-aware", "15d", "15d-aware"),   # LayerNorm needs whole rows
        adjacency="mean"),
}
