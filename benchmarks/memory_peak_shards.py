"""The memory model's predicted per-rank peak of ``train --graph DIR --algo 1d-aware``. Local.

Usage: ``python -m spgnn bench memory_peak_shards DIR RANKS HIDDEN`` (one process; it
holds the pattern of the whole Â, about 8 bytes per nonzero, so a few GB at products
scale).  Compare its ``peak_bytes`` with ``peak_rss_bytes.max`` of
``mpiexec -n RANKS python -m spgnn train --graph DIR --algo 1d-aware --hidden HIDDEN
--epochs 1 --json`` (docs/scale.md, "Memory model").
"""
import argparse

import numpy as np
import scipy.sparse as sp

from spgnn.gnn.data import part_blocks
from spgnn.io import shards as shard_io
from spgnn.plan.from_rows import pattern_rows
from spgnn.plan.memory import peak_bytes, resident_bytes
from spgnn.plan.model import rank_configs


def predict(d, ranks, hidden):
    """Print the 1d-aware prediction for the shard directory ``d`` at ``ranks`` ranks."""
    man = shard_io.read_manifest(d)
    off = man["offsets"]
    pieces, feats, classes = [], None, 0
    for k in range(len(off) - 1):           # part by part: only the pattern is kept
        block = shard_io.read_rows(d, man, off[k], off[k + 1])
        pieces.append(sp.csr_array(block.adj != 0, dtype=np.float32))
        feats = block.x.shape[1]
        classes = max(classes, int(np.max(block.label)) + 1)
        del block
    adj = sp.vstack(pieces, format="csr")
    del pieces
    ahat = pattern_rows(adj, 0)             # A' + I, the pattern train aggregates with
    del adj
    dims = [feats, hidden, classes]
    offsets = part_blocks(off, ranks)
    pred, = rank_configs(ahat, ranks, dims, configs=[("1d-aware", 1, None)],
                         offsets_for=lambda b: (ahat, part_blocks(off, b)))
    res = resident_bytes(ahat, pred, dims, offsets=offsets)
    print("dims", dims, "nnz(Â)", ahat.nnz, "offsets", [int(o) for o in offsets])
    print("resident (largest rank):", {k: int(np.max(v)) for k, v in res.items()})
    print("peak_bytes", peak_bytes(ahat, pred, dims, offsets=offsets))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("directory", help="a shard directory (spgnn partition)")
    ap.add_argument("ranks", type=int)
    ap.add_argument("hidden", type=int)
    args = ap.parse_args(argv)
    predict(args.directory, args.ranks, args.hidden)


if __name__ == "__main__":
    main()
