"""Graphs and graph loaders: one :class:`Graph` type, a loader per file format.

Formats (see ``docs/data.md`` for the details of each), one module each:

* Planetoid ``ind.<name>.*`` pickles (Cora, CiteSeer) — :func:`load_planetoid`
  (``planetoid.py``), read with a restricted unpickler that builds only numpy
  arrays, scipy sparse matrices and adjacency dicts, never arbitrary pickled
  code;
* SNAP-style edge lists, plain or gzip — :func:`load_snap_edgelist`
  (``snap.py``);
* the JuliaGraphs LG text format (``.jlg``, usually gzip) — :func:`load_jlg`
  (``jlg.py``);
* MatrixMarket coordinate files, with or without the banner and size line —
  :func:`load_matrix_market` (``mtx.py``);
* the MUSAE csv/json layout — :func:`load_musae` (``musae.py``);
* ``.npz`` archives — :func:`load_npz` / :func:`save_npz` (``npz.py``);
* OGB's raw csv layout (ogbn-arxiv) — :func:`load_ogb_node` (``ogb.py``);
* shard directories (a partitioned graph, one file per part, read rank by
  rank) — :func:`is_shard_dir`, :func:`read_manifest`, :func:`write_shards`
  (``shards.py``; loaded by ``DistGraph.from_shards``);
* and one entry point for command lines, :func:`load_graph` (``load.py``),
  which also builds the synthetic graphs of :mod:`spgnn.io.generators`
  (:func:`rmat`, :func:`sbm`) and loads the named datasets of
  :mod:`spgnn.io.datasets` (``load_graph("cora")``), downloaded into a
  verified cache by :mod:`spgnn.io.download`.

:mod:`spgnn.io.preprocess` holds every transformation models and
partitioners apply to a loaded graph (normalised adjacency, neighbour
patterns, feature normalisation, ...); :mod:`spgnn.io._text` is the byte-level
parsing engine the text loaders share.

Every loader reports a malformed, corrupted or truncated file with a
:class:`~spgnn.errors.GraphFormatError` whose message starts with the file
name and, for text formats, the 1-based line number (``graph.txt:17: expected
two integer vertex ids, got 'a b'``); for binary formats it names the member
or key instead.
"""

from ..errors import ChecksumError, DownloadError, GraphFormatError
from .datasets import (DATASETS, Dataset, dataset_names, dataset_status, fetch_dataset,
                       get_dataset, load_dataset, register_dataset)
from .download import RemoteFile, cache_dir
from .generators import parse_generator_spec, rmat, sbm
from .graph import Graph
from .jlg import load_jlg
from .load import SUPPORTED_FORMATS, load_adjacency, load_graph, load_on_root
from .mtx import load_matrix_market
from .musae import load_musae
from .npz import load_npz, save_npz
from .ogb import load_ogb_node
from .planetoid import load_planetoid
from .preprocess import (mean_adjacency, neighbour_pattern, normalized_adjacency, random_projection,
                         row_normalize_features, symmetric_pattern, symmetrize, without_self_loops)
from .shards import is_shard_dir, read_manifest, write_shards
from .snap import load_snap_edgelist
from .synthetic import quantile_labels, synthetic_features, synthetic_labels, with_synthetic

__all__ = [
    # the graph type and its errors
    "Graph", "GraphFormatError", "SUPPORTED_FORMATS",
    # loading
    "load_graph", "load_on_root", "load_adjacency", "load_planetoid", "load_snap_edgelist",
    "load_jlg", "load_matrix_market", "load_musae", "load_npz", "save_npz", "load_ogb_node",
    # sharded graphs (spgnn partition; DistGraph.from_shards)
    "is_shard_dir", "read_manifest", "write_shards",
    # named datasets and the download cache
    "DATASETS", "Dataset", "RemoteFile", "dataset_names", "get_dataset", "fetch_dataset",
    "load_dataset", "dataset_status", "register_dataset", "cache_dir", "DownloadError",
    "ChecksumError",
    # synthetic graphs
    "rmat", "sbm", "parse_generator_spec",
    # features and labels for graphs without them
    "with_synthetic", "synthetic_features", "synthetic_labels", "quantile_labels",
    # preprocessing
    "symmetrize", "without_self_loops", "normalized_adjacency", "neighbour_pattern",
    "mean_adjacency", "symmetric_pattern", "row_normalize_features", "random_projection",
]
