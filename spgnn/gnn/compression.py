"""Communication-reduced full-graph training (paper 004): exchange options of a DistGraph.

:func:`configure_exchange` makes every aggregation of a ``1d-aware``
:class:`~spgnn.gnn.data.DistGraph` (forward ``A·H`` and backward ``Aᵀ·G``)
use pre/post/hybrid aggregation (:mod:`spgnn.core.hybrid`) and, in training
passes only, a quantized exchange (:mod:`spgnn.core.codec`): forward
messages and backward gradient messages are both coded; evaluation passes
exchange fp32 rows.  ``post`` without quantization leaves training exactly
as it was.  Local (the plans are built, collectively, on first use).
"""

from ..core.codec import make_codec
from ..core.hybrid import AGGREGATIONS

__all__ = ["ExchangeOptions", "configure_exchange", "QUANTIZE_CHOICES"]

QUANTIZE_CHOICES = ("none", "int8", "int4", "int2")


class ExchangeOptions:
    """How a graph's aggregations exchange rows: ``aggregation`` and an optional codec."""

    def __init__(self, aggregation="post", codec=None):
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, but got "
                             f"{aggregation!r}")
        self.aggregation, self.codec = aggregation, codec

    def start(self, epoch, training):
        """A new pass: fresh stochastic-rounding draws keyed by the epoch. Local."""
        if training and self.codec is not None:
            self.codec.rekey(epoch)

    def spmm_options(self, training):
        """Keyword arguments of :func:`~spgnn.core.spmm.spmm` for one pass. Pure."""
        codec = self.codec if training else None
        if self.aggregation == "post" and codec is None:
            return {}
        return {"aggregation": self.aggregation, "codec": codec}

    def __repr__(self):
        return f"ExchangeOptions({self.aggregation!r}, {self.codec!r})"


def configure_exchange(graph, aggregation="post", quantize="none", rounding="stochastic",
                       param_dtype="bf16", seed=0):
    """Set ``graph.exchange`` (an :class:`ExchangeOptions`); return it. Local.

    Raises ValueError (every rank alike) for an unknown choice or a graph
    whose algorithm is not ``1d-aware`` when anything but plain ``post`` is
    asked for.
    """
    opts = ExchangeOptions(aggregation, make_codec(quantize, rounding, param_dtype, seed))
    if (aggregation != "post" or opts.codec is not None) and graph.algorithm != "1d-aware":
        raise ValueError(f"aggregation={aggregation!r} / quantize={quantize!r} need the "
                         f"1d-aware algorithm, but the graph is distributed for "
                         f"{graph.algorithm!r}")
    graph.exchange = opts
    return opts
