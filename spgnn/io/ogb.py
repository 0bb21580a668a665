"""Open Graph Benchmark node-property datasets in OGB's raw csv layout (ogbn-arxiv).

The folder an OGB archive extracts to (``arxiv/``) holds::

    raw/edge.csv.gz          one directed edge "src,dst" per line, 0-based ids
    raw/node-feat.csv.gz     one row of d comma-separated floats per node (optional)
    raw/node-label.csv.gz    one integer class per node (optional)
    raw/num-node-list.csv.gz the number of nodes
    raw/num-edge-list.csv.gz the number of edge lines
    split/<kind>/{train,valid,test}.csv.gz   node ids, one per line (optional)

Every file may be plain or gzip.  The counts in ``num-*-list`` are checked
against the other files, so a truncated or mixed-up download fails here with
a :class:`~spgnn.errors.GraphFormatError` naming the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import GraphFormatError
from ._text import _label, _parse_table, _read_bytes
from .graph import Graph, _build_adj

__all__ = ["load_ogb_node"]


def _find(folder: Path, stem: str):
    for name in (f"{stem}.csv.gz", f"{stem}.csv"):
        if (folder / name).is_file():
            return folder / name
    return None


def _column(path, what, dtype=np.int64):
    return _parse_table(_read_bytes(path), 1, _label(path), comment=None, dtype=dtype,
                        what=what)[:, 0]


def _count(raw, stem):
    path = _find(raw, stem)
    if path is None:
        raise FileNotFoundError(f"{raw / (stem + '.csv.gz')}: missing (not an OGB raw folder?)")
    values = _column(path, "one integer count")
    if values.size != 1:
        raise GraphFormatError(f"{_label(path)}: expected one count (one graph), got "
                               f"{values.size}")
    return int(values[0])


def load_ogb_node(root, *, name=None) -> Graph:
    """Load an OGB node-property dataset from its extracted folder (``.../arxiv``).

    Edges are directed as stored (``adj[src, dst] = 1``; duplicates collapse);
    features are float32, labels int64 (a NaN or missing label is -1); the
    split is the dataset's own (``split/<kind>/``, the only kind present).

    Raises
    ------
    GraphFormatError
        A malformed file, or counts that disagree with ``num-node-list`` /
        ``num-edge-list`` (a truncated download).
    FileNotFoundError
        ``raw/edge.csv.gz`` or a count file is missing.
    """
    root = Path(root)
    raw = root / "raw"
    n = _count(raw, "num-node-list")
    m = _count(raw, "num-edge-list")
    edge_path = _find(raw, "edge")
    if edge_path is None:
        raise FileNotFoundError(f"{raw / 'edge.csv.gz'}: missing (not an OGB raw folder?)")
    edges = _parse_table(_read_bytes(edge_path), 2, _label(edge_path), comment=None)
    if edges.shape[0] != m:
        raise GraphFormatError(f"{_label(edge_path)}: {edges.shape[0]:,} edges, but "
                               f"num-edge-list says {m:,} (truncated file?)")
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        raise GraphFormatError(f"{_label(edge_path)}: vertex ids must lie in 0..{n - 1}")
    adj = _build_adj(edges[:, 0], edges[:, 1], n, symmetric=False)
    features = labels = None
    feat_path = _find(raw, "node-feat")
    if feat_path is not None:
        text = _read_bytes(feat_path)
        first = text.split(b"\n", 1)[0]
        d = first.count(b",") + 1 if first.strip() else 0
        features = _parse_table(text, d, _label(feat_path), comment=None, dtype=np.float32,
                                what=f"{d} comma-separated numbers")
        if features.shape[0] != n:
            raise GraphFormatError(f"{_label(feat_path)}: {features.shape[0]:,} rows, but the "
                                   f"graph has {n:,} nodes")
    label_path = _find(raw, "node-label")
    if label_path is not None:
        y = _column(label_path, "one class id", dtype=np.float64)
        if y.shape[0] != n:
            raise GraphFormatError(f"{_label(label_path)}: {y.shape[0]:,} labels, but the "
                                   f"graph has {n:,} nodes")
        labels = np.where(np.isnan(y), -1, y).astype(np.int64)
    masks = {}
    kinds = sorted(p for p in (root / "split").glob("*") if p.is_dir())
    if len(kinds) > 1:
        raise GraphFormatError(f"{_label(root / 'split')}: several splits {[k.name for k in kinds]}")
    if kinds:
        for key, stem in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
            path = _find(kinds[0], stem)
            if path is None:
                continue
            ids = _column(path, "one node id")
            if ids.size and (ids.min() < 0 or ids.max() >= n):
                raise GraphFormatError(f"{_label(path)}: node ids must lie in 0..{n - 1}")
            mask = np.zeros(n, dtype=bool)
            mask[ids] = True
            masks[key] = mask
    return Graph(adj=adj, features=features, labels=labels, name=name or root.name, **masks)
