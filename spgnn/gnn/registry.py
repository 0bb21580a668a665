"""The models the command line trains: one :class:`ModelSpec` per ``--model`` name.

Adding a model is one class (a :class:`~spgnn.gnn.models.BasicGNN` that
overrides ``init_conv``) plus one entry here: how to build it from the number
of features, the number of classes and the run's
:class:`~spgnn.gnn.config.TrainConfig`, how it trains, its defaults and the
options only it reads (:class:`ModelOption`: the command line offers each as
a flag and refuses it for other models).  ``python -m spgnn train`` reads
nothing else about a model.
"""

from dataclasses import dataclass, field
from typing import Callable

from .gat import GAT
from .models import GCN, FullBatchSAGE, GraphSAGE

__all__ = ["ModelSpec", "ModelOption", "MODELS", "TRAININGS"]

#: How a model is trained: on the whole distributed graph (:class:`Trainer`)
#: or on sampled minibatches (:class:`~spgnn.gnn.sources.Sampled`,
#: :class:`~spgnn.gnn.sources.Halo`).
TRAININGS = ("full-graph", "minibatch")


@dataclass(frozen=True)
class ModelOption:
    """An option that only one model reads (GAT's ``heads``).

    ``name`` is the :class:`~spgnn.gnn.config.TrainConfig` key and, with
    dashes, the command's flag; ``kind`` converts the flag's text; a value
    below ``minimum`` or not below ``below`` is refused, naming the flag.
    """

    name: str
    kind: Callable
    default: object
    help: str
    minimum: object = None
    below: object = None

    def check(self, value):
        """Raise ValueError naming the flag when ``value`` is out of range. Local."""
        if self.below is not None and not (self.minimum or 0) <= value < self.below:
            raise ValueError(f"train: {self.flag} must lie in [{self.minimum or 0}, "
                             f"{self.below}), but got {self.name}={value}")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"train: {self.flag} must be >= {self.minimum}, but got {value}")

    @property
    def flag(self):
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class ModelSpec:
    """How to build and train one model.

    Attributes
    ----------
    name : str
        The ``--model`` name.
    help : str
        One line for ``--help``.
    build : callable ``(num_features, num_classes, config) -> Layer``
        ``config`` is the run's :class:`~spgnn.gnn.config.TrainConfig`
        (``hidden``, ``layers``, ``dropout``, ``seed``, ``bias``, ``fanout``,
        and this model's own options through ``config.option(name)``).
    training : ``"full-graph"`` or ``"minibatch"``
    defaults : dict
        :class:`~spgnn.gnn.config.TrainConfig` values this model uses when
        the user gives none (``epochs``, ``hidden``, ``dropout``, ``layers``).
    options : tuple of ModelOption
        Options only this model reads (the command offers them as flags and
        refuses them for other models).
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


def _gcn(num_features, num_classes, c):
    return GCN(num_features, c.hidden, num_classes, layers=c.layers, dropout=c.dropout,
               seed=c.seed, bias=c.bias)


def _sage(num_features, num_classes, c):
    return GraphSAGE(num_features, c.hidden, num_classes, layers=len(c.fanout),
                     dropout=c.dropout, seed=c.seed, input_dropout=c.option("input_dropout"))


def _sage_full(num_features, num_classes, c):
    return FullBatchSAGE(num_features, c.hidden, num_classes, layers=c.layers,
                         dropout=c.dropout, seed=c.seed)


def _gat(num_features, num_classes, c):
    return GAT(num_features, c.hidden, num_classes, heads=c.option("heads"), layers=c.layers,
               dropout=c.dropout, seed=c.seed)


#: The models of ``python -m spgnn train --model NAME`` and ``TrainConfig(model=NAME)``:
#: name -> :class:`ModelSpec` (how to add one: docs/architecture.md, "How to add ...").
MODELS = {
    "gcn": ModelSpec(
        "gcn", "full-graph GCN (Kipf & Welling)", _gcn, "full-graph",
        defaults={"epochs": 200, "hidden": 16, "dropout": 0.5, "layers": 2},
        checkpoint_format="spgnn-train-gcn/2"),
    # Veličković et al.'s Cora setting: 8 heads x 8 hidden, dropout 0.6 (docs/gat.md)
    "gat": ModelSpec(
        "gat", "full-graph GAT (multi-head attention; --algo 1d or 1d-aware)", _gat,
        "full-graph", defaults={"epochs": 200, "hidden": 8, "dropout": 0.6, "layers": 2},
        options=(ModelOption("heads", int, 8, "attention heads of the hidden layers "
                                              "(default 8)", minimum=1),),
        checkpoint_format="spgnn-train-gat/2",
        algorithms=("1d", "1d-aware")),     # the edge softmax needs whole rows per rank
    # input dropout, dropout 0.6 and model selection on the validation set
    # were chosen on Cora's validation accuracy (docs/sage_training.md)
    "sage": ModelSpec(
        "sage", "GraphSAGE (mean) on sampled minibatches", _sage, "minibatch",
        defaults={"epochs": 50, "hidden": 64, "dropout": 0.6},
        options=(ModelOption("input_dropout", float, 0.5, "dropout on the input features "
                                                          "(default 0.5)", below=1),),
        checkpoint_format="spgnn-train-sage/2"),
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
