"""Label propagation as an input feature (UniMP masked label prediction; paper 004 §2.7).

Each training epoch, every training node joins the *propagation set* with
probability ``ratio`` (a keyed counter-based draw on its original id, so
the set does not depend on the rank count), and its one-hot label is
appended to its input features (``C`` extra columns; the first layer's
weights on them are UniMP's learnable label embedding: ``(x + E y) W =
x W + y (E W)``).  The other training nodes supervise the loss, normalised
by their global count.  The set is resampled every epoch (the authors'
code).  Evaluation embeds every training label.  Validation and test
labels are never read: the label columns are zero outside the training
mask.  Labels propagate with the features through the aggregation, which
recovers accuracy lost to quantized exchanges.
"""

import time

import numpy as np
import scipy.sparse as sp

from ..core.dist_dense import DistDenseMatrix
from ..counter_rng import counter_uniform, mix64
from . import functional as F
from .sparse import SparseBackedMatrix
from .train import Trainer, non_finite_error

__all__ = ["LabelPropagation", "LabelPropTrainer"]

_SALT = 0x4C50   # "LP": keeps these draws apart from dropout's


class LabelPropagation:
    """The label columns of a :class:`~spgnn.gnn.data.DistGraph`'s features.

    :meth:`attach` replaces ``graph.features`` by the evaluation input
    (every training label embedded) and keeps the original block; call it
    before building the model (``num_features`` grows by ``num_classes``).
    Local after the first (collective) node-block lookup.
    """

    def __init__(self, graph, ratio, seed=0):
        if not 0 <= ratio < 1:
            raise ValueError(f"label propagation: ratio must lie in [0, 1), but got {ratio}")
        self.graph, self.ratio, self.seed = graph, float(ratio), int(seed)
        self.base = graph.features
        self.nodes = graph.node_block(self.base.layout)
        self.num_classes = int(graph.num_classes)

    def attach(self):
        """Set ``graph.features`` to the evaluation input; return ``self``. Collective once."""
        self.graph.features = self.features(self.nodes["train"])
        self.graph.num_features = self.base.shape[1] + self.num_classes
        return self

    def propagation_mask(self, epoch):
        """Training nodes of my block whose label is embedded in ``epoch``. Local."""
        base = int(mix64(np.uint64((self.seed * 1000003 + _SALT) & (2**64 - 1)) ^ np.uint64(epoch)))
        u = counter_uniform(self.nodes["orig"].astype(np.uint64), base)
        return self.nodes["train"] & (u < self.ratio)

    def supervision_mask(self, epoch):
        """Training nodes that give the loss in ``epoch``: train minus propagated. Local."""
        return self.nodes["train"] & ~self.propagation_mask(epoch)

    def features(self, embed):
        """The input with one-hot labels of the ``embed`` rows (a subset of train). Local."""
        embed = np.asarray(embed, dtype=bool) & self.nodes["train"]   # never val/test
        X = self.base
        n_loc = X.local_shape[0]
        rows = np.flatnonzero(embed)
        onehot = sp.csr_array((np.ones(rows.size, X.dtype),
                               (rows, self.nodes["label"][rows].astype(np.int64))),
                              shape=(n_loc, self.num_classes))
        shape = (X.shape[0], X.shape[1] + self.num_classes)
        if isinstance(X, SparseBackedMatrix):
            csr = sp.csr_array(sp.hstack([X.csr, onehot], format="csr"), dtype=X.dtype)
            csr.sort_indices()
            return SparseBackedMatrix(csr, shape, X.grid, X.layout, backend=X.backend)
        local = np.hstack([np.asarray(X.backend.to_host(X.local)), onehot.toarray()])
        return DistDenseMatrix(X.backend.from_host(np.ascontiguousarray(local, X.dtype)), shape,
                               X.grid, X.layout, backend=X.backend)


class LabelPropTrainer(Trainer):
    """A full-graph :class:`~spgnn.gnn.train.Trainer` whose epochs embed a fresh label subset."""

    def __init__(self, model, dist_graph, optimizer, label_prop, *, seed=None):
        self.label_prop = label_prop
        super().__init__(model, dist_graph, optimizer, seed=seed)

    def train_epoch(self):
        """One epoch with this epoch's propagation set embedded. Collective."""
        g, lp = self.graph, self.label_prop
        t0 = time.perf_counter()
        ctx = g.context(training=True, epoch=self.epoch, seed=self.seed)
        x = lp.features(lp.propagation_mask(self.epoch))
        with g.comm.track("gnn-epoch") as stats:
            logits = self.model.forward(ctx, x)
            nodes, kw = ctx._loss_args(logits)
            # 1d layouts: the logits' row block is the features' (same nodes).
            sup = lp.supervision_mask(self.epoch)
            loss, grad, acc = F.softmax_cross_entropy(logits.local, nodes["label"], sup, **kw)
            self.optimizer.zero_grad()
            self.model.backward(ctx, logits.like(grad))
        self.comm.agree(non_finite_error(self.model, loss, self.epoch))
        self.optimizer.step()
        out = dict(epoch=self.epoch, loss=loss, train_acc=acc,
                   bytes=int(stats.total("bytes_sent")), seconds=time.perf_counter() - t0,
                   bytes_by_label={k: int(v["bytes_sent"]) for k, v in stats.by_label().items()})
        self.epoch += 1
        return out
