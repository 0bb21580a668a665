"""The MUSAE csv/json layout: ``<name>_edges.csv``, ``_features.json``, ``_target.csv``."""

from __future__ import annotations

import csv
import io as _stdio
import json
from collections import Counter
from itertools import chain
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import GraphFormatError, InputTooLarge
from ._files import MAX_ISOLATED, check_alloc, read_input
from ._text import _label
from .graph import MAX_CLASSES as _MAX_CLASS
from .graph import Graph
from .snap import load_snap_edgelist

__all__ = ["load_musae"]



def _musae_prefix(folder_or_prefix, name):
    p = Path(folder_or_prefix)
    if p.is_dir():
        prefixes = sorted(f.name[: -len("_edges.csv")] for f in p.glob("*_edges.csv"))
        if name is not None:
            if name not in prefixes:
                raise GraphFormatError(f"{_label(p)}: no MUSAE graph {name!r} here "
                                       f"(found {prefixes})")
            return p / name
        if len(prefixes) != 1:
            raise GraphFormatError(f"{_label(p)}: expected one <name>_edges.csv, found "
                                   f"{prefixes or 'none'}; pass name= to choose")
        return p / prefixes[0]
    return p


def _json_object(path: Path, what: str):
    """``(label, dict)``: the file's JSON object ``{node: [what]}``; GraphFormatError naming
    the line for bad JSON, non-UTF-8 text or another JSON type."""
    label = _label(path)
    try:
        obj = json.loads(read_input(path, label))
    except json.JSONDecodeError as e:
        raise GraphFormatError(f"{label}:{e.lineno}: invalid JSON: {e.msg} "
                               f"(column {e.colno})") from None
    except UnicodeDecodeError as e:
        raise GraphFormatError(f"{label}: not UTF-8 text ({e})") from None
    if not isinstance(obj, dict):
        raise GraphFormatError(f"{label}: expected a JSON object {{node: [{what}]}}, "
                               f"got {type(obj).__name__}")
    return label, obj


def _load_musae_features(path: Path, n_hint: int):
    label, obj = _json_object(path, "feature ids")
    rows, cols = [], []
    for key, feats in obj.items():
        try:
            node = int(key)
            if node < 0 or not isinstance(feats, list):
                raise ValueError
            # bool is an int in Python: JSON true/false are not feature ids.
            if not all(isinstance(f, int) and not isinstance(f, bool) for f in feats):
                raise ValueError
            ids = [int(f) for f in feats]
            if any(f < 0 for f in ids):
                raise ValueError
        except (TypeError, ValueError):
            raise GraphFormatError(f"{label}: key {key!r}: expected a node id mapped to a "
                                   f"list of non-negative integer feature ids") from None
        rows.append(np.full(len(ids), node, dtype=np.int64))
        cols.append(np.asarray(ids, dtype=np.int64))
    rows = np.concatenate(rows) if rows else np.empty(0, np.int64)
    cols = np.concatenate(cols) if cols else np.empty(0, np.int64)
    n = max(n_hint, int(rows.max()) + 1 if rows.size else 0)
    d = int(cols.max()) + 1 if cols.size else 0
    if n > n_hint + MAX_ISOLATED:
        raise InputTooLarge(f"{label}: node id {n - 1:,} implies {n:,} vertices, but the edge "
                            f"file has {n_hint:,}; more than {MAX_ISOLATED:,} extra vertices "
                            f"are refused")
    check_alloc(4 * n * d, label, f"dense features of {n:,} x {d:,}")
    return rows, cols, n, d


def _load_musae_target(path: Path, target, n_hint: int):
    label = _label(path)
    try:
        text = read_input(path, label).decode("utf-8")
    except UnicodeDecodeError as e:
        raise GraphFormatError(f"{label}: not UTF-8 text ({e})") from None
    reader = csv.reader(_stdio.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise GraphFormatError(f"{label}:1: empty file, expected a CSV header") from None
    header = [h.strip() for h in header]
    id_col = header.index("id") if "id" in header else 0
    if target is None:
        t_col = len(header) - 1
    elif target in header:
        t_col = header.index(target)
    else:
        raise GraphFormatError(f"{label}:1: no column {target!r} in header {header}")
    ids, values = [], []
    try:
        for row in reader:
            if not row or not any(c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise GraphFormatError(f"{label}:{reader.line_num}: expected {len(header)} "
                                       f"fields, got {len(row)}")
            try:
                ids.append(int(row[id_col]))
                if not -2**62 < ids[-1] < 2**62:
                    raise ValueError
            except ValueError:
                raise GraphFormatError(f"{label}:{reader.line_num}: expected an integer node "
                                       f"id, got {row[id_col]!r}") from None
            values.append(row[t_col].strip())
    except csv.Error as e:
        raise GraphFormatError(f"{label}:{reader.line_num}: {e}") from None
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and ids.min() < 0:
        raise GraphFormatError(f"{label}: negative node id {int(ids.min())}")
    if ids.size and ids.max() >= n_hint + MAX_ISOLATED:
        raise InputTooLarge(f"{label}: node id {int(ids.max()):,} implies {int(ids.max()) + 1:,} "
                            f"vertices, but the edge file has {n_hint:,}; more than "
                            f"{MAX_ISOLATED:,} extra vertices are refused")
    try:
        codes = [int(v) for v in values]
        names = None
    except ValueError:
        codes = None
    if codes is not None:
        big = [i for i, c in enumerate(codes) if not -1 <= c < _MAX_CLASS]
        if big:
            raise InputTooLarge(f"{label}: node {int(ids[big[0]])}: class {codes[big[0]]} is "
                                f"outside -1..{_MAX_CLASS - 1:,} (a regression target? bin it "
                                f"into classes first)")
        codes = np.asarray(codes, dtype=np.int64)
    else:
        # Named classes (facebook's page_type): sorted names -> 0..C-1.
        names, codes = np.unique(np.asarray(values), return_inverse=True)
        names = tuple(str(s) for s in names)
    return ids, codes, names


def _load_genres(path: Path, genre, n_hint: int):
    """``(ids, 0/1 codes, class names)``: whether each listed user likes ``genre`` (default
    the genre liked by the share of users closest to one half; ties: first name)."""
    label, obj = _json_object(path, "genre names")
    ids, likes = [], []
    for key, genres in obj.items():
        try:
            ids.append(int(key))
            if ids[-1] < 0 or not isinstance(genres, list) or not all(
                    isinstance(g, str) for g in genres):
                raise ValueError
        except ValueError:
            raise GraphFormatError(f"{label}: key {key!r}: expected a node id mapped to a "
                                   f"list of genre names") from None
        likes.append(genres)
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and ids.max() >= n_hint + MAX_ISOLATED:
        raise InputTooLarge(f"{label}: node id {int(ids.max()):,} implies {int(ids.max()) + 1:,} "
                            f"vertices, but the edge file has {n_hint:,}; more than "
                            f"{MAX_ISOLATED:,} extra vertices are refused")
    # users per genre (a genre listed twice by one user counts once)
    counts = Counter(chain.from_iterable(set(gs) for gs in likes))
    if genre is None:
        if not counts:
            raise GraphFormatError(f"{label}: no user likes any genre; nothing to classify")
        genre = min(sorted(counts), key=lambda g: abs(2 * counts[g] - len(likes)))
    elif genre not in counts:
        raise GraphFormatError(f"{label}: no user likes genre {genre!r} (genres: "
                               f"{sorted(counts)[:10]}{' ...' if len(counts) > 10 else ''})")
    codes = np.fromiter((genre in gs for gs in likes), dtype=np.int64, count=len(likes))
    return ids, codes, (f"not {genre}", genre)


def load_musae(folder_or_prefix, *, name=None, target=None, sparse_features=False,
               genre=None) -> Graph:
    """Load a MUSAE graph (musae_facebook, musae_github, wikipedia_musae, ...).

    Files, for a prefix P: ``P_edges.csv`` (header, then ``id_1,id_2`` per
    undirected edge, each stored once), optional ``P_features.json``
    (``{"node": [feature id, ...]}``: a sparse binary bag of features) and
    optional ``P_target.csv`` (header with an ``id`` column; the target is the
    last column unless ``target`` names another).  Without a target csv, an
    optional ``P_genres.json`` (deezer_gemsec: ``{"node": ["genre", ...]}``,
    multi-label) gives the binary task "does the user like ``genre``".

    Parameters
    ----------
    folder_or_prefix : str or os.PathLike
        A folder holding one ``*_edges.csv`` (or several, with ``name``), or
        the prefix itself (``.../musae_facebook/facebook``).
    name : str, optional
        Which prefix to load from a folder holding several; also ``Graph.name``.
    target : str, optional
        Target column of the target csv; default the last one.
    sparse_features : bool
        Return ``features`` as a float32 ``scipy.sparse.csr_array`` instead of a
        dense array (musae_facebook dense is 22470 x 4714 float32 = 424 MB).
    genre : str, optional
        The genre of a ``P_genres.json`` task; default the one liked by the
        share of users closest to one half (the most balanced binary task:
        "Rap/Hip Hop" on deezer HU, 47.9% of users; "Dance" on RO, 50.8%;
        the most frequent, "Pop", is liked by 80% of them in both).  Label 1 = likes it; ``class_names``
        ``("not G", "G")``.

    Returns
    -------
    Graph
        Undirected ``adj`` with the file's self-loops kept; features 0/1; labels
        from the target column: integers as they are, strings (facebook's
        ``page_type``) as indices into the sorted names in ``class_names``.
        Nodes absent from the target file get label -1.  No split: call
        :meth:`Graph.random_split`.  A regression target (wikipedia's monthly
        traffic) is loaded as integer labels too; bin it before classifying
        (``train --labels quantiles:5``, :func:`spgnn.io.quantile_labels`).
        deezer_gemsec has no features: ``train --features degree``.
    """
    prefix = _musae_prefix(folder_or_prefix, name)
    edges = Path(f"{prefix}_edges.csv")
    feats_path = Path(f"{prefix}_features.json")
    target_path = Path(f"{prefix}_target.csv")
    genres_path = Path(f"{prefix}_genres.json")
    if not edges.is_file():
        raise FileNotFoundError(f"load_musae: missing MUSAE edge file {edges}")
    g = load_snap_edgelist(edges, directed=False, comment=None, header=True)
    n = g.num_nodes
    feat = None
    if feats_path.is_file():
        rows, cols, n_f, d = _load_musae_features(feats_path, n)
        n = max(n, n_f)
    ids = codes = names = None
    if target_path.is_file():
        ids, codes, names = _load_musae_target(target_path, target, n)
        n = max(n, int(ids.max()) + 1 if ids.size else 0)
    elif genres_path.is_file():
        ids, codes, names = _load_genres(genres_path, genre, n)
        n = max(n, int(ids.max()) + 1 if ids.size else 0)
    adj = g.adj
    if n > adj.shape[0]:
        adj = sp.csr_array((adj.data, adj.indices, np.concatenate(
            [adj.indptr, np.full(n - adj.shape[0], adj.indptr[-1], adj.indptr.dtype)])),
            shape=(n, n))
    if feats_path.is_file():
        feat = sp.csr_array((np.ones(rows.size, np.float32), (rows, cols)), shape=(n, d))
        feat.sum_duplicates()
        feat.data[:] = 1
        if not sparse_features:
            feat = feat.toarray()
    labels = None
    if ids is not None:
        labels = np.full(n, -1, dtype=np.int64)
        labels[ids] = codes
    return Graph(adj=adj, features=feat, labels=labels, name=name or prefix.name,
                 class_names=names)
