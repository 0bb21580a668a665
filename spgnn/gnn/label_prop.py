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

import numpy as np
import scipy.sparse as sp

from ..core.dist_dense import DistDenseMatrix
from ..counter_rng import counter_uniform, mix64
from .sparse import SparseBackedMatrix

__all__ = ["LabelPropagation"]

_SALT = 0x4C50   # "LP": keeps these draws apart from dropout's


class LabelPropagation:
    """The label columns of a :class:`~spgnn.gnn.data.DistGraph`'s features: a transform.

    The ``transform`` of :class:`~spgnn.gnn.sources.FullGraph`: it returns
    the input of each training epoch and its supervision mask
    (:meth:`train_input`) and the evaluation input (:attr:`eval_features`,
    every training label embedded); the graph is never changed.  Build the
    model with :attr:`num_features` (the graph's plus ``num_classes``).
    Construction is collective (one node-block lookup); the rest is local.
    """

    def __init__(self, graph, ratio, seed=0):
        if not 0 <= ratio < 1:
            raise ValueError(f"label propagation: ratio must lie in [0, 1), but got {ratio}")
        self.graph, self.ratio, self.seed = graph, float(ratio), int(seed)
        self.base = graph.features
        self.nodes = graph.node_block(self.base.layout)
        self.num_classes = int(graph.num_classes)
        self.num_features = int(self.base.shape[1]) + self.num_classes
        #: The evaluation input: every training label embedded.
        self.eval_features = self.features(self.nodes["train"])

    def train_input(self, epoch):
        """``(features, supervision mask)`` of training epoch ``epoch``. Local.

        The features embed the labels of :meth:`propagation_mask`; the mask
        (this rank's rows of the features' layout, which the 1D logits share)
        is :meth:`supervision_mask`.
        """
        return self.features(self.propagation_mask(epoch)), self.supervision_mask(epoch)

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
