"""Test-only: the GraphSAGE dropout masks of spgnn before issue 21, inside today's code.

``record_behaviour.py --check ... --old-sage-masks`` puts this folder on
PYTHONPATH, so every process it starts draws minibatch dropout masks as the
old ``GraphSAGE._mask`` did (``numpy.random.default_rng([seed, epoch,
minibatch id, slot]).random(shape) >= p``, slot 0 the input, slot k+1 after
layer k).  With it the behaviour record matches run for run, which shows that
unifying the GNN layers changed nothing but that mask stream.
"""

import numpy as np

import spgnn.gnn.context as _context


class _FloatMask:
    def __init__(self, m):
        self.m = m

    def apply(self, x):
        return x * self.m


def _old_dropout(self, H, p, key):
    if not self.training or p == 0:
        return H, None
    slot = key // 3          # GraphSAGE's Dropout layers sit at positions 0, 3, 6, ...
    rng = np.random.default_rng([self.seed, self.epoch, self.minibatch, slot])
    dt = H.local.dtype
    m = (rng.random(H.local.shape) >= p).astype(dt) * dt.type(1.0 / (1.0 - p))
    return H.like(H.local * m), _FloatMask(m)


_context.BlockContext.dropout = _old_dropout
