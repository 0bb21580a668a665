"""Graphs and graph loaders: one :class:`Graph` type, a loader per file format.

Formats (see ``docs/data.md`` for the details of each):

* Planetoid ``ind.<name>.*`` pickles (Cora, CiteSeer) — :func:`load_planetoid`,
  read with a restricted unpickler that builds only numpy arrays, scipy sparse
  matrices and adjacency dicts, never arbitrary pickled code;
* SNAP-style edge lists, plain or gzip — :func:`load_snap_edgelist`;
* the JuliaGraphs LG text format (``.jlg``, usually gzip) — :func:`load_jlg`;
* MatrixMarket coordinate files, with or without the banner and size line —
  :func:`load_matrix_market`;
* the MUSAE csv/json layout — :func:`load_musae`;
* ``.npz`` archives — :func:`load_npz` / :func:`save_npz`;
* and one entry point for command lines, :func:`load_graph`, which also
  builds the synthetic graphs of :mod:`spgnn.generators`.

Every loader reports a malformed, corrupted or truncated file with a
:class:`GraphFormatError` whose message starts with the file name and, for text
formats, the 1-based line number (``graph.txt:17: expected two integer vertex
ids, got 'a b'``); for binary formats it names the member or key instead.

Text files are parsed in one vectorised pass (``np.fromstring`` plus a
token-per-line count in numpy); only when that fast pass rejects the input is
the file walked line by line, to find and name the first bad line.
"""

from __future__ import annotations

import csv
import dataclasses
import io as _stdio
import json
import os
import pickle
import re
import warnings
import zipfile
import zlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .errors import DimensionMismatch, SpgnnError
from .generators import parse_generator_spec

__all__ = [
    "Graph",
    "GraphFormatError",
    "load_graph",
    "load_on_root",
    "load_planetoid",
    "load_snap_edgelist",
    "load_jlg",
    "load_matrix_market",
    "load_musae",
    "load_npz",
    "save_npz",
    "SUPPORTED_FORMATS",
]


class GraphFormatError(SpgnnError, ValueError):
    """A graph file is malformed, corrupted, truncated or of an unknown format.

    The message starts with the file, then the 1-based line number for text
    formats (``edges.txt:17: ...``) or the member / key for binary ones.
    """


SUPPORTED_FORMATS = (
    "generator spec 'rmat:SCALE[:EDGE_FACTOR[:SEED]]' or 'sbm:N[:CLASSES[:SEED]]'",
    "edge list: .txt .edges .el .tsv .csv (optionally .gz)",
    "JuliaGraphs LG: .jlg .lg (optionally .gz)",
    "MatrixMarket coordinate: .mtx (optionally .gz), with or without the header",
    "numpy archive: .npz (scipy.sparse.save_npz or spgnn.io.save_npz)",
    "Planetoid folder holding ind.<name>.{x,y,tx,ty,allx,ally,graph,test.index}",
    "MUSAE folder holding <name>_edges.csv [+ <name>_features.json, <name>_target.csv]",
)

_GZIP_MAGIC = b"\x1f\x8b"


# --------------------------------------------------------------------------- #
# The graph type
# --------------------------------------------------------------------------- #

@dataclass
class Graph:
    """A graph with optional node features, labels and a train/val/test split.

    Parameters
    ----------
    adj : scipy sparse array or matrix, shape (n, n)
        Adjacency; stored as a ``scipy.sparse.csr_array`` of float32 with sorted
        indices and no explicit duplicates.  ``adj[u, v] != 0`` is an edge
        u -> v; an undirected graph has a symmetric ``adj``.
    features : ndarray, shape (n, d), optional
        Node features as dense float32, exactly as stored in the file (no
        normalisation: callers row-normalise if their model wants it).  A
        scipy sparse matrix is kept sparse (as a float32 ``csr_array``): only
        when a loader is asked for sparse features.
    labels : ndarray, shape (n,), optional
        int64 class ids 0..C-1, with -1 for nodes whose label is unknown.
    train_mask, val_mask, test_mask : ndarray of bool, shape (n,), optional
        The split.
    name : str
        A short name for messages and summaries.
    node_ids : ndarray, shape (n,), optional
        The id each vertex had in the source file, when the loader relabelled
        arbitrary ids to 0..n-1 (vertex ``i`` was ``node_ids[i]``).
    class_names : tuple of str, optional
        ``class_names[k]`` is the name of label ``k`` when the file names its
        classes (MUSAE ``page_type``).

    Notes
    -----
    Methods that return a new Graph share the feature, label and mask arrays
    with the original; copy them before writing in place.
    """

    adj: sp.csr_array
    features: np.ndarray | None = None
    labels: np.ndarray | None = None
    train_mask: np.ndarray | None = None
    val_mask: np.ndarray | None = None
    test_mask: np.ndarray | None = None
    name: str = "graph"
    node_ids: np.ndarray | None = None
    class_names: tuple | None = None

    def __post_init__(self):
        if not sp.issparse(self.adj):
            raise TypeError(f"Graph: adj must be a scipy sparse array or matrix, "
                            f"but got {type(self.adj).__name__}")
        if self.adj.ndim != 2 or self.adj.shape[0] != self.adj.shape[1]:
            raise DimensionMismatch(f"Graph: adj must be square, but got shape {self.adj.shape}")
        adj = self.adj
        if not (isinstance(adj, sp.csr_array) and adj.dtype == np.float32):
            adj = sp.csr_array(adj, dtype=np.float32)
        if not adj.has_canonical_format:
            adj = adj.copy()
            adj.sum_duplicates()  # also sorts the indices
        self.adj = adj
        n = adj.shape[0]
        if self.features is not None:
            f = self.features
            if not sp.issparse(f):
                f = np.asarray(f)
            if f.ndim != 2 or f.shape[0] != n:
                raise DimensionMismatch(f"Graph: features must have shape (n, d) with n={n}, "
                                        f"but got {f.shape}")
            if sp.issparse(f):
                self.features = sp.csr_array(f, dtype=np.float32)
            else:
                self.features = np.ascontiguousarray(f, dtype=np.float32)
        if self.labels is not None:
            y = np.asarray(self.labels)
            if y.shape != (n,):
                raise DimensionMismatch(f"Graph: labels must have shape ({n},), but got {y.shape}")
            if y.dtype.kind not in "iu":
                raise TypeError(f"Graph: labels must be integers, but got dtype {y.dtype}")
            self.labels = y.astype(np.int64, copy=False)
        for field in ("train_mask", "val_mask", "test_mask"):
            m = getattr(self, field)
            if m is not None:
                m = np.asarray(m)
                if m.shape != (n,):
                    raise DimensionMismatch(f"Graph: {field} must have shape ({n},), "
                                            f"but got {m.shape}")
                setattr(self, field, m.astype(bool, copy=False))
        if self.node_ids is not None:
            ids = np.asarray(self.node_ids)
            if ids.shape != (n,):
                raise DimensionMismatch(f"Graph: node_ids must have shape ({n},), "
                                        f"but got {ids.shape}")
            self.node_ids = ids
        if self.class_names is not None:
            self.class_names = tuple(str(c) for c in self.class_names)

    # -- sizes ------------------------------------------------------------- #

    @property
    def num_nodes(self) -> int:
        """Number of vertices n."""
        return int(self.adj.shape[0])

    @property
    def num_edges(self) -> int:
        """Number of edges.

        For a symmetric ``adj`` (an undirected graph): unordered pairs {u, v},
        a self-loop counting once.  Otherwise: stored directed entries (nnz).
        """
        if self.is_symmetric():
            loops = int(np.count_nonzero(self.adj.diagonal()))
            return (self.adj.nnz - loops) // 2 + loops
        return int(self.adj.nnz)

    @property
    def num_self_loops(self) -> int:
        """Number of vertices with an edge to themselves."""
        return int(np.count_nonzero(self.adj.diagonal()))

    @property
    def num_features(self) -> int:
        """Feature width d (0 without features)."""
        return 0 if self.features is None else int(self.features.shape[1])

    @property
    def num_classes(self) -> int:
        """Number of classes: ``len(class_names)`` if known, else max label + 1 (0 without labels)."""
        if self.class_names is not None:
            return len(self.class_names)
        if self.labels is None or self.labels.size == 0:
            return 0
        return int(max(self.labels.max(), -1)) + 1

    def is_symmetric(self) -> bool:
        """Whether ``adj`` equals its transpose (the graph is undirected)."""
        a = self.adj
        return (a != a.T).nnz == 0

    # -- transformations --------------------------------------------------- #

    def symmetrize(self) -> "Graph":
        """The undirected graph A ∪ Aᵀ (weights: the larger of a_uv and a_vu)."""
        a = self.adj
        return dataclasses.replace(self, adj=sp.csr_array(a.maximum(a.T)))

    def without_self_loops(self) -> "Graph":
        """The same graph with the diagonal of ``adj`` removed."""
        a = self.adj.tocoo()
        keep = a.row != a.col
        adj = sp.csr_array((a.data[keep], (a.row[keep], a.col[keep])), shape=a.shape)
        return dataclasses.replace(self, adj=adj)

    def random_split(self, train=0.6, val=0.2, *, seed=0, stratify=True) -> "Graph":
        """A new Graph with random train/val/test masks.

        Parameters
        ----------
        train, val : float
            Fractions of the eligible nodes for training and validation; the
            rest (``1 - train - val``) is the test set.
        seed : int
            Seed of ``numpy.random.default_rng``; the split is a deterministic
            function of it (every rank gets the same split).
        stratify : bool
            With labels and ``stratify=True``, each class is split separately
            (``round(train * count)`` of its nodes to train, ``round(val *
            count)`` to val, the rest to test), so that class proportions
            match across the sets; nodes with label -1 go to no set.  Without
            labels, or with ``stratify=False``, all nodes are shuffled together.
        """
        if not (0 <= train <= 1 and 0 <= val <= 1 and train + val <= 1 + 1e-12):
            raise ValueError(f"random_split: train and val must be fractions with "
                             f"train + val <= 1, but got train={train}, val={val}")
        n = self.num_nodes
        rng = np.random.default_rng(seed)
        masks = [np.zeros(n, dtype=bool) for _ in range(3)]
        if self.labels is not None and stratify:
            known = self.labels >= 0
            groups = [np.flatnonzero(known & (self.labels == k))
                      for k in np.unique(self.labels[known])]
        elif self.labels is not None:
            groups = [np.flatnonzero(self.labels >= 0)]
        else:
            groups = [np.arange(n)]
        for members in groups:
            perm = rng.permutation(members)
            n_train = int(round(train * perm.size))
            n_val = min(int(round(val * perm.size)), perm.size - n_train)
            masks[0][perm[:n_train]] = True
            masks[1][perm[n_train:n_train + n_val]] = True
            masks[2][perm[n_train + n_val:]] = True
        return dataclasses.replace(self, train_mask=masks[0], val_mask=masks[1],
                                   test_mask=masks[2])

    def summary(self) -> str:
        """A few lines describing the graph: sizes, degrees, features, classes, split."""
        n = self.num_nodes
        sym = self.is_symmetric()
        deg = np.diff(self.adj.indptr)
        lines = [
            f"Graph {self.name!r}: {n:,} nodes, {self.num_edges:,} "
            f"{'undirected' if sym else 'directed'} edges "
            f"({self.adj.nnz:,} stored entries, {self.num_self_loops:,} self-loops)",
            f"  degree: mean {deg.mean() if n else 0:.2f}, max {deg.max() if n else 0:,}, "
            f"isolated {int(np.count_nonzero(deg == 0)):,}",
        ]
        if self.features is not None:
            lines.append(f"  features: {self.num_features:,} per node (float32)")
        if self.labels is not None:
            unknown = int(np.count_nonzero(self.labels < 0))
            names = f" {list(self.class_names)}" if self.class_names else ""
            lines.append(f"  classes: {self.num_classes}{names}, {unknown:,} unlabelled nodes")
        if self.train_mask is not None or self.val_mask is not None or self.test_mask is not None:
            counts = ["-" if m is None else f"{int(m.sum()):,}"
                      for m in (self.train_mask, self.val_mask, self.test_mask)]
            lines.append(f"  split: train {counts[0]} / val {counts[1]} / test {counts[2]}")
        return "\n".join(lines)


# --------------------------------------------------------------------------- #
# Reading bytes: gzip and line bookkeeping
# --------------------------------------------------------------------------- #

def _label(path) -> str:
    return os.fspath(path)


def _gunzip(raw: bytes, label: str) -> bytes:
    """Decompress one or more gzip members, naming the line where a damaged stream stops."""
    out = []
    data = raw
    chunk = 1 << 20
    while True:
        d = zlib.decompressobj(wbits=31)
        # Decompress in chunks so that, on corruption, what came out so far
        # tells the user how many lines were intact.
        for start in range(0, len(data), chunk):
            try:
                out.append(d.decompress(data[start:start + chunk]))
            except zlib.error as e:
                line = sum(b.count(b"\n") for b in out) + 1
                raise GraphFormatError(f"{label}:{line}: corrupt gzip data ({e})") from None
            if d.eof:
                break
        if not d.eof:
            out.append(d.flush())
            line = sum(b.count(b"\n") for b in out) + 1
            raise GraphFormatError(f"{label}:{line}: gzip stream ends early "
                                   f"(the file is truncated)")
        data = d.unused_data
        if not data.strip(b"\x00"):   # gzip allows trailing zero padding
            return b"".join(out)
        if not data.startswith(_GZIP_MAGIC):
            raise GraphFormatError(f"{label}: unexpected bytes after the end of the gzip stream")


def _read_bytes(path) -> bytes:
    """The file's bytes, gunzipped when it starts with the gzip magic (whatever its name)."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw.startswith(_GZIP_MAGIC):
        return _gunzip(raw, _label(path))
    return raw


_EOL = re.compile(rb"\r\n|\r|\n")


def _is_skipped(line: bytes, comment: bytes | None) -> bool:
    s = line.strip()
    return not s or (comment is not None and s.startswith(comment))


def _iter_records(text: bytes, comment: bytes | None, first_line: int = 1):
    """(line number, stripped line) of each data line: not blank, not a comment."""
    for no, line in enumerate(text.splitlines(), first_line):
        if not _is_skipped(line, comment):
            yield no, line.strip()


def _split_head(text: bytes, k: int, comment: bytes | None, first_line: int = 1):
    """Split off the first ``k`` data lines.

    Returns ``(head, rest, rest_first_line)`` where ``head`` is a list of
    (line number, stripped line) and ``rest`` the bytes after the k-th data
    line, whose first line is ``rest_first_line``.
    """
    head = []
    pos, no = 0, first_line
    while len(head) < k and pos < len(text):
        m = _EOL.search(text, pos)
        end, nxt = (m.start(), m.end()) if m else (len(text), len(text))
        line = text[pos:end]
        if not _is_skipped(line, comment):
            head.append((no, line.strip()))
        pos, no = nxt, no + 1
    return head, text[pos:], no


def _line_of_record(text: bytes, index: int, comment, first_line: int) -> int:
    """Line number of the ``index``-th data line (slow; only to word an error)."""
    for i, (no, _) in enumerate(_iter_records(text, comment, first_line)):
        if i == index:
            return no
    return first_line


def _last_line(text: bytes, first_line: int) -> int:
    return first_line + max(len(text.splitlines()) - 1, 0)


def _show(line: bytes, limit: int = 60) -> str:
    s = line.decode("utf-8", "replace")
    return s if len(s) <= limit else s[:limit] + "..."


def _strip_comment_lines(text: bytes, comment: bytes | None) -> bytes:
    if comment is None or comment not in text:
        return text
    return b"\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith(comment))


_INT_TOKEN = re.compile(rb"[+-]?\d{1,18}\Z")


def _parse_table(text: bytes, ncols: int, label: str, *, comment=b"#", first_line=1,
                 dtype=np.int64, what="two integer vertex ids"):
    """Parse whitespace- or comma-separated numbers, ``ncols`` per data line.

    Returns an array of shape (m, ncols).  Blank and comment lines are
    skipped.  On any problem, a second, line-by-line pass raises a
    :class:`GraphFormatError` naming the first bad line.
    """
    body = _strip_comment_lines(text, comment).replace(b",", b" ")
    if not body.strip():
        return np.empty((0, ncols), dtype=dtype)
    buf = np.frombuffer(body, dtype=np.uint8)
    # Tokens per line, vectorised: a token starts at a non-separator byte
    # preceded by a separator (any byte <= ' ', which covers \t \r \n).
    sep = buf <= 32
    start = ~sep
    start[1:] &= sep[:-1]
    eol = np.flatnonzero((buf == 10) | (buf == 13))
    per_line = np.bincount(np.searchsorted(eol, np.flatnonzero(start)))
    ok = bool(np.all((per_line == 0) | (per_line == ncols)))
    vals = None
    if ok:
        try:
            with warnings.catch_warnings():
                # numpy < 2.3 only warns when it stops at an unparsable token.
                warnings.simplefilter("error", DeprecationWarning)
                vals = np.fromstring(body.decode("latin-1"), dtype=dtype, sep=" ")
        except (ValueError, DeprecationWarning):
            vals = None
        n_tok = int(per_line.sum())
        if vals is not None and vals.size != n_tok:
            vals = None
        # fromstring saturates on overflow instead of failing.
        if vals is not None and dtype == np.int64 and vals.size and np.abs(vals).max() >= 1 << 62:
            vals = None
    if vals is None:
        _diagnose_table(text, ncols, label, comment, first_line, dtype, what)
    return vals.reshape(-1, ncols)


def _diagnose_table(text, ncols, label, comment, first_line, dtype, what):
    """The slow pass: find the first bad line and raise, naming it."""
    is_int = np.dtype(dtype).kind in "iu"
    for no, line in _iter_records(text, comment, first_line):
        tokens = line.replace(b",", b" ").split()
        bad = len(tokens) != ncols
        if not bad:
            for t in tokens:
                if is_int:
                    bad = _INT_TOKEN.match(t) is None
                else:
                    try:
                        float(t)
                    except ValueError:
                        bad = True
                if bad:
                    break
        if bad:
            raise GraphFormatError(f"{label}:{no}: expected {what}, got {_show(line)!r}")
    raise GraphFormatError(f"{label}: could not parse the numbers in this file")


def _header_like(line: bytes) -> bool:
    """A first line with letters in it (``id_1,id_2``, ``FromNodeId ToNodeId``) is a header."""
    return re.search(rb"[A-Za-z_]", line) is not None


def _build_adj(src, dst, n, *, symmetric, values=None, mirror_diagonal=True):
    """CSR float32 adjacency from coordinates.

    Without ``values`` duplicates collapse to one unit edge (a simple graph);
    with values they are summed, as MatrixMarket readers do.  ``symmetric``
    adds the transpose (``mirror_diagonal=False`` leaves the diagonal single,
    for one-triangle storage).
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if symmetric:
        off = src != dst if not mirror_diagonal else slice(None)
        src, dst = np.concatenate([src, dst[off]]), np.concatenate([dst, src[off]])
        if values is not None:
            values = np.concatenate([values, values[off]])
    data = np.ones(src.size, dtype=np.float32) if values is None else np.asarray(values, np.float32)
    # int32 indices when they fit keep the CSR arrays small and fast to build.
    itype = np.int32 if n < 2**31 and src.size < 2**31 else np.int64
    a = sp.csr_array((data, (src.astype(itype), dst.astype(itype))), shape=(n, n))
    a.sum_duplicates()
    if values is None:
        a.data[:] = 1
    a.sort_indices()
    return a


def _stem(path) -> str:
    name = Path(path).name
    for ext in (".gz", ".txt", ".csv", ".tsv", ".edges", ".el", ".jlg", ".lg", ".mtx", ".npz"):
        if name.lower().endswith(ext) and len(name) > len(ext):
            name = name[: -len(ext)]
    return name


# --------------------------------------------------------------------------- #
# Edge lists
# --------------------------------------------------------------------------- #

def load_snap_edgelist(path, *, directed=False, comment="#", relabel=False, num_nodes=None,
                       header=None, name=None) -> Graph:
    """Load a SNAP-style edge list: one ``u v`` pair per line.

    Parameters
    ----------
    path : str or os.PathLike
        Plain text or gzip (detected by the magic bytes, not the name).  Lines
        may end in LF, CRLF or CR; the two ids may be separated by spaces, tabs
        or a comma.
    directed : bool
        False (default): the graph is undirected, ``adj = A ∪ Aᵀ`` whether each
        edge is stored once or in both directions.  True: ``adj[u, v] = 1``
        for each line ``u v`` only.
    comment : str or None
        Lines whose first non-blank character starts with this are skipped.
    relabel : bool
        False: ids are vertex indices, ``n = max id + 1`` (ids absent from the
        file are isolated vertices).  True: the distinct ids, sorted, become
        0..n-1 and ``Graph.node_ids`` keeps the original id of each vertex —
        use this for files with arbitrary ids (Entrez gene ids, hashes).
    num_nodes : int, optional
        n, when the file leaves trailing vertices isolated (not with relabel).
    header : bool or None
        Whether the first data line is a header (``id_1,id_2``) to skip.
        None: skip it when it contains letters.
    name : str, optional
        ``Graph.name``; default the file name without extensions.

    Raises
    ------
    GraphFormatError
        ``file:line: ...`` for a line that is not two integers, a negative
        id, an id >= num_nodes; or a damaged gzip stream.
    """
    label = _label(path)
    text = _read_bytes(path)
    cbytes = comment.encode() if comment else None
    head, rest, first = _split_head(text, 1, cbytes)
    if head and (header or (header is None and _header_like(head[0][1]))):
        text = rest
    else:
        first = 1
    pairs = _parse_table(text, 2, label, comment=cbytes, first_line=first)
    src, dst = pairs[:, 0], pairs[:, 1]
    node_ids = None
    if relabel:
        if num_nodes is not None:
            raise ValueError("load_snap_edgelist: num_nodes cannot be combined with relabel=True")
        node_ids, inverse = np.unique(pairs, return_inverse=True)
        inverse = inverse.reshape(pairs.shape)
        src, dst = inverse[:, 0], inverse[:, 1]
        n = node_ids.size
    else:
        if pairs.size and pairs.min() < 0:
            k = int(np.flatnonzero((pairs < 0).any(axis=1))[0])
            no = _line_of_record(text, k, cbytes, first)
            raise GraphFormatError(f"{label}:{no}: vertex ids must be non-negative "
                                   f"(or load with relabel=True), got {pairs[k].tolist()}")
        n = int(pairs.max()) + 1 if pairs.size else 0
        if num_nodes is not None:
            if n > num_nodes:
                k = int(np.flatnonzero((pairs >= num_nodes).any(axis=1))[0])
                no = _line_of_record(text, k, cbytes, first)
                raise GraphFormatError(f"{label}:{no}: vertex id out of range for "
                                       f"num_nodes={num_nodes}: {pairs[k].tolist()}")
            n = int(num_nodes)
        elif n >= 2**31:
            raise GraphFormatError(f"{label}: largest vertex id is {n - 1}; load with "
                                   f"relabel=True to number the vertices 0..n-1")
    adj = _build_adj(src, dst, n, symmetric=not directed)
    return Graph(adj=adj, name=name or _stem(path), node_ids=node_ids)


# --------------------------------------------------------------------------- #
# JuliaGraphs LG
# --------------------------------------------------------------------------- #

def _parse_lg_header(line: bytes, label: str, no: int):
    fields = [f.strip() for f in line.decode("utf-8", "replace").split(",")]
    try:
        nv, ne = int(fields[0]), int(fields[1])
        kind = fields[2]
        gname = fields[3]
    except (IndexError, ValueError):
        raise GraphFormatError(f"{label}:{no}: expected an LG header 'nv,ne,u|d,name[,...]', "
                               f"got {_show(line)!r}") from None
    if kind not in ("u", "d") or nv < 0 or ne < 0:
        raise GraphFormatError(f"{label}:{no}: expected an LG header 'nv,ne,u|d,name[,...]' "
                               f"with u (undirected) or d (directed), got {_show(line)!r}")
    return nv, ne, kind == "d", gname


def load_jlg(path, *, graph=None, name=None) -> Graph:
    """Load a JuliaGraphs / LightGraphs LG file (``.jlg``, plain or gzip).

    The format: a header line ``nv,ne,d,name[,version,eltype,type]`` where
    ``d`` is ``u`` (undirected) or ``d`` (directed), then ``ne`` lines
    ``src,dst`` with 1-based vertex ids.  A file may hold several graphs one
    after the other; the first is loaded unless ``graph`` names another.

    Parameters
    ----------
    path : str or os.PathLike
    graph : str, optional
        The name in the header of the graph to load.
    name : str, optional
        ``Graph.name``; default the file name without extensions.

    Raises
    ------
    GraphFormatError
        A bad header, a bad edge line, an id outside 1..nv, fewer edge lines
        than the header announces (truncated file), or no graph called
        ``graph``.
    """
    label = _label(path)
    text = _read_bytes(path)
    first = 1
    found = []
    while True:
        head, rest, rest_first = _split_head(text, 1, None, first)
        if not head:
            if graph is not None:
                raise GraphFormatError(f"{label}: no graph named {graph!r} "
                                       f"(the file holds {found})")
            raise GraphFormatError(f"{label}:{first}: empty file, expected an LG header")
        hno, hline = head[0]
        nv, ne, directed, gname = _parse_lg_header(hline, label, hno)
        found.append(gname)
        try:
            # Fast path: the graph runs to the end of the file.
            pairs = _parse_table(rest, 2, label, comment=None, first_line=rest_first,
                                 what="an edge 'src,dst' of two integer vertex ids")
            body, next_text = rest, b""
        except GraphFormatError:
            pairs = None
        if pairs is None or pairs.shape[0] > ne:
            # Several graphs in the file (or a bad line): cut this one's
            # ne lines off and parse them alone, so errors name the right line.
            lines, pos, no = 0, 0, rest_first
            while lines < ne and pos < len(rest):
                m = _EOL.search(rest, pos)
                end = m.end() if m else len(rest)
                if rest[pos:end].strip():
                    lines += 1
                pos, no = end, no + 1
            body, next_text = rest[:pos], rest[pos:]
            pairs = _parse_table(body, 2, label, comment=None, first_line=rest_first,
                                 what="an edge 'src,dst' of two integer vertex ids")
        if pairs.shape[0] < ne:
            raise GraphFormatError(
                f"{label}:{_last_line(body, rest_first)}: the header (line {hno}) announces "
                f"{ne} edges but only {pairs.shape[0]} follow (the file is truncated)")
        if graph is None or gname == graph:
            break
        text, first = next_text, rest_first + len(body.splitlines())
    bad = (pairs < 1) | (pairs > nv)
    if bad.any():
        k = int(np.flatnonzero(bad.any(axis=1))[0])
        no = _line_of_record(body, k, None, rest_first)
        raise GraphFormatError(f"{label}:{no}: vertex id outside 1..{nv}: {pairs[k].tolist()}")
    adj = _build_adj(pairs[:, 0] - 1, pairs[:, 1] - 1, nv, symmetric=not directed)
    return Graph(adj=adj, name=name or _stem(path))


# --------------------------------------------------------------------------- #
# MatrixMarket
# --------------------------------------------------------------------------- #

def load_matrix_market(path, *, symmetric=None, name=None) -> Graph:
    """Load a MatrixMarket coordinate file as a graph: entry (i, j) is an edge i -> j.

    Accepts the standard file (``%%MatrixMarket matrix coordinate
    pattern|real|integer general|symmetric|skew-symmetric``, ``%`` comments, a
    size line ``rows cols nnz``) and headerless variants: a size line then
    the entries, or the entries alone (``row col`` or ``row col value``,
    1-based), as in SuiteSparse copies whose banner was stripped.

    Parameters
    ----------
    path : str or os.PathLike
        Plain text or gzip.
    symmetric : bool or None
        Whether the file stores one triangle of a symmetric matrix, to be
        mirrored.  None: the banner's symmetry field when there is a banner;
        without a banner, True exactly when every entry lies in the lower
        triangle (row >= col) or every entry in the upper one — the layout of
        symmetric matrices stored once, such as ``luxembourg_osm`` and
        ``bcsstk25``.  Pass False to keep a triangular file directed.
    name : str, optional
        ``Graph.name``; default the file name without extensions.

    Notes
    -----
    Pattern files give unit weights (duplicate entries collapse); with a
    value column the values are kept and duplicates summed.  The diagonal is
    kept (``Graph.without_self_loops`` drops it).  Without a size line,
    ``n = max(row, col)``.

    Raises
    ------
    GraphFormatError
        A bad banner or size line, a non-square matrix, an entry line that is
        not 2 (pattern) or 3 numbers, an index outside 1..n, or fewer entries
        than the size line announces (truncated file).
    """
    label = _label(path)
    text = _read_bytes(path)
    field, symmetry = None, None
    first = 1
    if text.lstrip().startswith(b"%%MatrixMarket"):
        head, text, first = _split_head(text, 1, None)
        banner = head[0][1].decode("utf-8", "replace").lower().split()
        if (len(banner) != 5 or banner[1] != "matrix" or banner[2] != "coordinate"
                or banner[3] not in ("pattern", "real", "integer", "double")
                or banner[4] not in ("general", "symmetric", "skew-symmetric")):
            raise GraphFormatError(
                f"{label}:{head[0][0]}: expected '%%MatrixMarket matrix coordinate "
                f"pattern|real|integer general|symmetric|skew-symmetric', got {_show(head[0][1])!r}")
        field, symmetry = banner[3], banner[4]
    size = None
    parsed = None   # the entries, when probing for a headerless size line parsed them
    head, rest, rest_first = _split_head(text, 1, b"%", first)
    if not head:
        raise GraphFormatError(f"{label}:{first}: no entries (empty MatrixMarket file)")
    tokens = head[0][1].split()
    if field is not None:
        # With a banner the size line is mandatory.
        if len(tokens) != 3 or not all(_INT_TOKEN.match(t) for t in tokens):
            raise GraphFormatError(f"{label}:{head[0][0]}: expected the size line "
                                   f"'rows cols nnz', got {_show(head[0][1])!r}")
        size = tuple(int(t) for t in tokens)
    ncols = 2 if field == "pattern" else 3 if field is not None else None
    if field is None:
        # Headerless: a first line 'n n nnz' is a size line when exactly nnz
        # entries follow it; otherwise the first line is already an entry.
        if len(tokens) == 3 and all(_INT_TOKEN.match(t) for t in tokens) and tokens[0] == tokens[1]:
            ncols_rest = _first_record_width(rest)
            try:
                entries = _parse_table(rest, ncols_rest, label, comment=b"%", first_line=rest_first,
                                       dtype=np.float64 if ncols_rest == 3 else np.int64,
                                       what=f"{ncols_rest} numbers 'row col{' value' if ncols_rest == 3 else ''}'")
            except GraphFormatError:
                entries = None
            if entries is not None and entries.shape[0] == int(tokens[2]):
                size = tuple(int(t) for t in tokens)
                ncols = ncols_rest
                parsed = entries
        if size is None:
            rest, rest_first = text, first
            ncols = len(tokens) if len(tokens) in (2, 3) else 2
    if size is not None and size[0] != size[1]:
        raise GraphFormatError(f"{label}:{head[0][0]}: an adjacency matrix must be square, "
                               f"but the size line says {size[0]} x {size[1]}")
    what = "two integer indices 'row col'" if ncols == 2 else "three numbers 'row col value'"
    entries = parsed if parsed is not None else _parse_table(
        rest, ncols, label, comment=b"%", first_line=rest_first,
        dtype=np.int64 if ncols == 2 else np.float64, what=what)
    if ncols == 3:
        idx = entries[:, :2]
        if not np.all(idx == np.round(idx)):
            k = int(np.flatnonzero((idx != np.round(idx)).any(axis=1))[0])
            no = _line_of_record(rest, k, b"%", rest_first)
            raise GraphFormatError(f"{label}:{no}: row and column must be integers, "
                                   f"got {idx[k].tolist()}")
        rows, cols, vals = idx[:, 0].astype(np.int64), idx[:, 1].astype(np.int64), entries[:, 2]
    else:
        rows, cols, vals = entries[:, 0], entries[:, 1], None
    if size is not None:
        n, nnz = size[0], size[2]
        if rows.size < nnz:
            raise GraphFormatError(
                f"{label}:{_last_line(rest, rest_first)}: the size line (line {head[0][0]}) "
                f"announces {nnz} entries but only {rows.size} follow (the file is truncated)")
        if rows.size > nnz:
            no = _line_of_record(rest, nnz, b"%", rest_first)
            raise GraphFormatError(f"{label}:{no}: more entries than the {nnz} the size line "
                                   f"(line {head[0][0]}) announces")
    else:
        n = int(max(rows.max(), cols.max())) if rows.size else 0
    bad = (rows < 1) | (rows > n) | (cols < 1) | (cols > n)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        no = _line_of_record(rest, k, b"%", rest_first)
        raise GraphFormatError(f"{label}:{no}: index outside 1..{n}: "
                               f"({int(rows[k])}, {int(cols[k])})")
    if symmetric is None:
        if symmetry is not None:
            symmetric = symmetry != "general"
        else:
            symmetric = bool(rows.size) and (bool(np.all(rows >= cols)) or bool(np.all(rows <= cols)))
    if symmetric and symmetry == "skew-symmetric" and vals is not None:
        mirrored = np.concatenate([vals, -vals[rows != cols]])
        r = np.concatenate([rows, cols[rows != cols]])
        c = np.concatenate([cols, rows[rows != cols]])
        adj = _build_adj(r - 1, c - 1, n, symmetric=False, values=mirrored)
    else:
        adj = _build_adj(rows - 1, cols - 1, n, symmetric=symmetric, values=vals,
                         mirror_diagonal=False)
    return Graph(adj=adj, name=name or _stem(path))


def _first_record_width(text: bytes) -> int:
    head, _, _ = _split_head(text, 1, b"%")
    return len(head[0][1].split()) if head and len(head[0][1].split()) in (2, 3) else 2


# --------------------------------------------------------------------------- #
# Planetoid
# --------------------------------------------------------------------------- #

def _planetoid_allowed():
    # Resolved from live objects rather than imported by name, so that the
    # numpy-1 module paths in the pickles ('numpy.core.multiarray') never
    # trigger an import, and nothing outside this table can be reached.
    reconstruct = np.zeros(1).__reduce__()[0]
    scalar = np.float64(0).__reduce__()[0]
    allowed = {}
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        allowed[(mod, "_reconstruct")] = reconstruct
        allowed[(mod, "scalar")] = scalar
    allowed[("numpy", "ndarray")] = np.ndarray
    allowed[("numpy", "dtype")] = np.dtype
    for fmt, cls in (("csr", sp.csr_matrix), ("csc", sp.csc_matrix)):
        for mod in (f"scipy.sparse.{fmt}", f"scipy.sparse._{fmt}", "scipy.sparse"):
            allowed[(mod, f"{fmt}_matrix")] = cls
    allowed[("collections", "defaultdict")] = defaultdict
    # Python 3 writes bytes into protocol-2 pickles as _codecs.encode(text,
    # 'latin1'); admit that one encoding only, not the general codec machinery.
    allowed[("_codecs", "encode")] = _latin1_encode
    for mod in ("__builtin__", "builtins"):
        allowed[(mod, "list")] = list
        allowed[(mod, "dict")] = dict
    return allowed


def _latin1_encode(text, encoding="latin1"):
    if not isinstance(text, str) or encoding.lower().replace("-", "") != "latin1":
        raise pickle.UnpicklingError(f"_codecs.encode is allowed only for latin1 text, "
                                     f"got encoding {encoding!r}")
    return text.encode("latin1")


class _PlanetoidUnpickler(pickle.Unpickler):
    """Builds only the numpy / scipy / dict objects the Planetoid files hold."""

    _allowed = None

    def __init__(self, file, label):
        super().__init__(file, encoding="latin1")
        self._label = label
        if _PlanetoidUnpickler._allowed is None:
            _PlanetoidUnpickler._allowed = _planetoid_allowed()

    def find_class(self, module, name):
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise GraphFormatError(
                f"{self._label}: refusing to unpickle {module}.{name}: a Planetoid file may "
                f"only hold numpy arrays, scipy sparse matrices and adjacency dicts") from None


def _unpickle(path: Path):
    label = _label(path)
    try:
        with open(path, "rb") as f:
            return _PlanetoidUnpickler(f, label).load()
    except GraphFormatError:
        raise
    except OSError:
        raise
    except Exception as e:  # UnpicklingError, EOFError, ValueError from numpy state, ...
        raise GraphFormatError(f"{label}: not a readable Planetoid pickle "
                               f"({type(e).__name__}: {e})") from None


def _planetoid_sparse(obj, path: Path):
    if not sp.issparse(obj) or obj.ndim != 2:
        raise GraphFormatError(f"{_label(path)}: expected a scipy sparse matrix, "
                               f"got {type(obj).__name__}")
    try:
        m = sp.csr_array(obj)
        m.check_format(full_check=True)
    except Exception as e:
        raise GraphFormatError(f"{_label(path)}: corrupt sparse matrix ({e})") from None
    return m


def _planetoid_onehot(obj, path: Path):
    if not isinstance(obj, np.ndarray) or obj.ndim != 2 or obj.dtype.kind not in "iufb":
        raise GraphFormatError(f"{_label(path)}: expected a 2-D numeric one-hot label array, "
                               f"got {type(obj).__name__} {getattr(obj, 'shape', '')}")
    # Rows with no class (all zero) are unknown labels: -1, where Kipf's
    # argmax would silently say class 0.
    return np.where(obj.any(axis=1), obj.argmax(axis=1), -1).astype(np.int64)


def load_planetoid(root, name, *, val_size=500) -> Graph:
    """Load a Planetoid dataset (Cora, CiteSeer, ...) with the standard split.

    Reads ``root/ind.<name>.{x,y,tx,ty,allx,ally,graph,test.index}`` — Python-2
    pickles — with a restricted unpickler: only numpy arrays and dtypes, scipy
    CSR/CSC matrices, ``collections.defaultdict``, lists and dicts can be built;
    any other class or function in the file is refused.

    The result follows Kipf & Welling's ``load_data``:

    * features: ``allx`` rows for nodes 0..len(allx)-1, ``tx[i]`` for node
      ``test.index[i]``; test-range ids with no ``tx`` row (CiteSeer has 15)
      get zero features and label -1;
    * labels: argmax of the one-hot ``ally`` / ``ty`` rows, -1 where a row is
      all zeros;
    * adjacency: the ``graph`` dict of adjacency lists, made symmetric,
      duplicates collapsed, self-loops kept as in the file (CiteSeer has 124);
    * split: train = the first ``len(y)`` nodes (20 per class), val = the next
      ``val_size`` (500; fewer if ``allx`` has fewer rows left), test = the ids
      in ``test.index`` (1000).

    Features are raw (binary bag of words), not row-normalised.

    Raises
    ------
    FileNotFoundError
        A member file is missing.
    GraphFormatError
        A member holds a forbidden class, is truncated or corrupt, or has the
        wrong type or shape; the message names that file.
    """
    root = Path(root)
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(name)):
        raise ValueError(f"load_planetoid: name must be a plain dataset name like 'cora', "
                         f"but got {name!r}")
    member = {part: root / f"ind.{name}.{part}"
              for part in ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")}
    for p in member.values():
        if not p.is_file():
            raise FileNotFoundError(f"load_planetoid: missing Planetoid file {p}")
    x = _planetoid_sparse(_unpickle(member["x"]), member["x"])
    tx = _planetoid_sparse(_unpickle(member["tx"]), member["tx"])
    allx = _planetoid_sparse(_unpickle(member["allx"]), member["allx"])
    y = _planetoid_onehot(_unpickle(member["y"]), member["y"])
    ty = _planetoid_onehot(_unpickle(member["ty"]), member["ty"])
    ally = _planetoid_onehot(_unpickle(member["ally"]), member["ally"])
    graph = _unpickle(member["graph"])

    test_idx = _parse_table(member["test.index"].read_bytes(), 1, _label(member["test.index"]),
                            comment=None, what="one integer node id").ravel()
    d = allx.shape[1]
    for key, mat, rows in (("x", x, y.size), ("tx", tx, ty.size), ("allx", allx, ally.size)):
        if mat.shape[1] != d:
            raise GraphFormatError(f"{_label(member[key])}: {mat.shape[1]} feature columns, "
                                   f"but allx has {d}")
        if mat.shape[0] != rows:
            lab = {"x": "y", "tx": "ty", "allx": "ally"}[key]
            raise GraphFormatError(f"{_label(member[key])}: {mat.shape[0]} rows, but "
                                   f"ind.{name}.{lab} has {rows} labels")
    if tx.shape[0] != test_idx.size:
        raise GraphFormatError(f"{_label(member['test.index'])}: {test_idx.size} test ids, "
                               f"but ind.{name}.tx has {tx.shape[0]} rows")
    if not isinstance(graph, dict):
        raise GraphFormatError(f"{_label(member['graph'])}: expected a dict of adjacency lists, "
                               f"got {type(graph).__name__}")
    src, dst = [], []
    try:
        for u, nbrs in graph.items():
            nbrs = [int(v) for v in nbrs]
            src.append(np.full(len(nbrs), int(u), dtype=np.int64))
            dst.append(np.asarray(nbrs, dtype=np.int64))
    except (TypeError, ValueError):
        raise GraphFormatError(f"{_label(member['graph'])}: entry {u!r} is not an integer "
                               f"node with a list of integer neighbours") from None
    src = np.concatenate(src) if src else np.empty(0, np.int64)
    dst = np.concatenate(dst) if dst else np.empty(0, np.int64)
    if (src.size and min(src.min(), dst.min()) < 0) or (test_idx.size and test_idx.min() < 0):
        raise GraphFormatError(f"{_label(member['graph'])}: negative node ids")
    n = max(allx.shape[0],
            int(test_idx.max()) + 1 if test_idx.size else 0,
            int(max(src.max(), dst.max())) + 1 if src.size else 0,
            len(graph))
    # Validation nodes come from the allx part, which holds no test ids;
    # a dataset smaller than Kipf's 500 gets what allx has.
    val_size = max(0, min(int(val_size), allx.shape[0] - y.size))
    if not np.array_equal(y, ally[: y.size]):
        raise GraphFormatError(f"{_label(member['y'])}: labels differ from the first "
                               f"{y.size} rows of ind.{name}.ally")

    features = np.zeros((n, d), dtype=np.float32)
    features[: allx.shape[0]] = allx.toarray()
    features[test_idx] = tx.toarray()
    labels = np.full(n, -1, dtype=np.int64)
    labels[: ally.size] = ally
    labels[test_idx] = ty
    train = np.zeros(n, dtype=bool)
    train[: y.size] = True
    val = np.zeros(n, dtype=bool)
    val[y.size: y.size + val_size] = True
    test = np.zeros(n, dtype=bool)
    test[test_idx] = True
    adj = _build_adj(src, dst, n, symmetric=True)
    return Graph(adj=adj, features=features, labels=labels, train_mask=train, val_mask=val,
                 test_mask=test, name=str(name))


# --------------------------------------------------------------------------- #
# MUSAE
# --------------------------------------------------------------------------- #

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


def _load_musae_features(path: Path, n_hint: int):
    label = _label(path)
    try:
        obj = json.loads(path.read_bytes())
    except json.JSONDecodeError as e:
        raise GraphFormatError(f"{label}:{e.lineno}: invalid JSON: {e.msg} "
                               f"(column {e.colno})") from None
    except UnicodeDecodeError as e:
        raise GraphFormatError(f"{label}: not UTF-8 text ({e})") from None
    if not isinstance(obj, dict):
        raise GraphFormatError(f"{label}: expected a JSON object {{node: [feature ids]}}, "
                               f"got {type(obj).__name__}")
    rows, cols = [], []
    for key, feats in obj.items():
        try:
            node = int(key)
            if node < 0 or not isinstance(feats, list):
                raise ValueError
            ids = [int(f) for f in feats]
            if any(f < 0 for f in ids) or not all(isinstance(f, int) for f in feats):
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
    return rows, cols, n, d


def _load_musae_target(path: Path, target):
    label = _label(path)
    try:
        text = path.read_bytes().decode("utf-8")
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
            except ValueError:
                raise GraphFormatError(f"{label}:{reader.line_num}: expected an integer node "
                                       f"id, got {row[id_col]!r}") from None
            values.append(row[t_col].strip())
    except csv.Error as e:
        raise GraphFormatError(f"{label}:{reader.line_num}: {e}") from None
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and ids.min() < 0:
        raise GraphFormatError(f"{label}: negative node id {int(ids.min())}")
    try:
        codes = np.asarray([int(v) for v in values], dtype=np.int64)
        names = None
    except ValueError:
        # Named classes (facebook's page_type): sorted names -> 0..C-1.
        names, codes = np.unique(np.asarray(values), return_inverse=True)
        names = tuple(str(s) for s in names)
    return ids, codes, names


def load_musae(folder_or_prefix, *, name=None, target=None, sparse_features=False) -> Graph:
    """Load a MUSAE graph (musae_facebook, musae_github, wikipedia_musae, ...).

    Files, for a prefix P: ``P_edges.csv`` (header, then ``id_1,id_2`` per
    undirected edge, each stored once), optional ``P_features.json``
    (``{"node": [feature id, ...]}``: a sparse binary bag of features) and
    optional ``P_target.csv`` (header with an ``id`` column; the target is the
    last column unless ``target`` names another).

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

    Returns
    -------
    Graph
        Undirected ``adj`` with the file's self-loops kept; features 0/1; labels
        from the target column: integers as they are, strings (facebook's
        ``page_type``) as indices into the sorted names in ``class_names``.
        Nodes absent from the target file get label -1.  No split: call
        :meth:`Graph.random_split`.  A regression target (wikipedia's monthly
        traffic) is loaded as integer labels too; bin it before classifying.
    """
    prefix = _musae_prefix(folder_or_prefix, name)
    edges = Path(f"{prefix}_edges.csv")
    feats_path = Path(f"{prefix}_features.json")
    target_path = Path(f"{prefix}_target.csv")
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
        ids, codes, names = _load_musae_target(target_path, target)
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


# --------------------------------------------------------------------------- #
# npz
# --------------------------------------------------------------------------- #

_NPZ_SCIPY_KEYS = {"format", "shape"}
_NPZ_GRAPH_KEYS = {"adj_data", "adj_indices", "adj_indptr", "adj_shape"}


def _csr_from_keys(z, prefix, label):
    try:
        shape = tuple(int(s) for s in z[f"{prefix}_shape"])
        m = sp.csr_array((z[f"{prefix}_data"], z[f"{prefix}_indices"], z[f"{prefix}_indptr"]),
                         shape=shape)
        m.check_format(full_check=True)
    except KeyError as e:
        raise GraphFormatError(f"{label}: missing key {e}") from None
    except Exception as e:
        raise GraphFormatError(f"{label}: keys {prefix}_data/{prefix}_indices/{prefix}_indptr/"
                               f"{prefix}_shape do not form a CSR matrix ({e})") from None
    return m


def load_npz(path, *, name=None) -> Graph:
    """Load a graph from an ``.npz`` archive (never unpickling: ``allow_pickle=False``).

    Two layouts are recognised:

    * ``scipy.sparse.save_npz`` files (keys ``format``, ``shape``, ``data``, ...):
      the adjacency alone;
    * graph archives, as written by :func:`save_npz` (and compatible with the
      gnn-benchmark ``.npz`` files): ``adj_data``, ``adj_indices``,
      ``adj_indptr``, ``adj_shape`` (CSR adjacency, required); features as
      dense ``features`` (n, d) or CSR ``attr_data``/``attr_indices``/
      ``attr_indptr``/``attr_shape``; ``labels`` (n,) int (-1 unknown);
      ``train_mask``, ``val_mask``, ``test_mask`` (n,) bool; ``name`` (0-d str);
      ``node_ids`` (n,); ``class_names`` (C,) str.  All but the ``adj_*`` keys
      are optional.

    Raises
    ------
    GraphFormatError
        Not a zip/npz archive, a truncated member, object arrays, or keys that
        do not fit together; the message names the key.
    """
    label = _label(path)
    try:
        z = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, EOFError) as e:
        raise GraphFormatError(f"{label}: not a readable .npz archive ({e})") from None
    except ValueError as e:
        raise GraphFormatError(f"{label}: not a readable .npz archive ({e})") from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise GraphFormatError(f"{label}: a .npy array, not an .npz archive")
    with z:
        keys = set(z.files)

        def get(key):
            try:
                return z[key]
            except ValueError as e:   # object arrays are refused by allow_pickle=False
                raise GraphFormatError(f"{label}: key {key!r}: {e}") from None
            except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as e:
                raise GraphFormatError(f"{label}: key {key!r} is corrupt or truncated "
                                       f"({e})") from None

        if _NPZ_SCIPY_KEYS <= keys and not (_NPZ_GRAPH_KEYS & keys):
            try:
                adj = sp.load_npz(path)
                if adj.ndim == 2:
                    adj = sp.csr_array(adj)
                    adj.check_format(full_check=True)
            except Exception as e:
                raise GraphFormatError(f"{label}: not a valid scipy.sparse.save_npz file "
                                       f"({type(e).__name__}: {e})") from None
            if adj.ndim != 2 or adj.shape[0] != adj.shape[1]:
                raise GraphFormatError(f"{label}: key 'shape': adjacency must be square, "
                                       f"got {adj.shape}")
            return Graph(adj=adj, name=name or _stem(path))
        if not _NPZ_GRAPH_KEYS <= keys:
            raise GraphFormatError(
                f"{label}: unknown .npz layout with keys {sorted(keys)}; expected "
                f"scipy.sparse.save_npz keys (format, shape, data, indices, indptr) or "
                f"graph keys (adj_data, adj_indices, adj_indptr, adj_shape, [features], "
                f"[labels], [train_mask, val_mask, test_mask])")

        class _Z:   # routes every member read through get() for clear errors
            def __getitem__(self, key):
                return get(key)

        adj = _csr_from_keys(_Z(), "adj", label)
        fields = {}
        if "features" in keys:
            fields["features"] = get("features")
        elif {"attr_data", "attr_indices", "attr_indptr", "attr_shape"} <= keys:
            fields["features"] = _csr_from_keys(_Z(), "attr", label).toarray()
        for key in ("labels", "train_mask", "val_mask", "test_mask", "node_ids", "class_names"):
            if key in keys:
                fields[key] = get(key)
        gname = name or (str(get("name")) if "name" in keys else _stem(path))
    try:
        return Graph(adj=adj, name=gname, **fields)
    except (ValueError, TypeError) as e:
        raise GraphFormatError(f"{label}: {e}") from None


def save_npz(graph: Graph, path, *, compressed=True) -> None:
    """Write ``graph`` to ``path`` in the graph layout :func:`load_npz` reads.

    ``numpy`` appends ``.npz`` when ``path`` lacks it.  Sparse features are
    written as ``attr_*`` keys, dense ones as ``features``.
    """
    a = graph.adj
    out = {"adj_data": a.data, "adj_indices": a.indices, "adj_indptr": a.indptr,
           "adj_shape": np.asarray(a.shape, dtype=np.int64), "name": np.asarray(graph.name)}
    if graph.features is not None:
        if sp.issparse(graph.features):
            f = sp.csr_array(graph.features)
            out.update(attr_data=f.data, attr_indices=f.indices, attr_indptr=f.indptr,
                       attr_shape=np.asarray(f.shape, dtype=np.int64))
        else:
            out["features"] = graph.features
    for key in ("labels", "train_mask", "val_mask", "test_mask", "node_ids"):
        v = getattr(graph, key)
        if v is not None:
            out[key] = v
    if graph.class_names is not None:
        out["class_names"] = np.asarray(graph.class_names, dtype=str)
    (np.savez_compressed if compressed else np.savez)(path, **out)


# --------------------------------------------------------------------------- #
# One entry point
# --------------------------------------------------------------------------- #

_EDGE_EXTS = (".txt", ".edges", ".el", ".tsv", ".csv")
_GENERATORS = ("rmat", "sbm")


def _generator_graph(spec: str, name):
    try:
        made = parse_generator_spec(spec)
    except ValueError as e:
        raise GraphFormatError(str(e)) from None
    g = Graph(adj=made["adj"], features=made["features"], labels=made["labels"], name=name or spec)
    return g if made["labels"] is None else g.random_split(seed=made["seed"])


def _unknown(label, why):
    formats = "\n  ".join(SUPPORTED_FORMATS)
    return GraphFormatError(f"{label}: {why}; supported formats:\n  {formats}")


def load_on_root(comm, load, *, root=0):
    """``load()`` on rank ``root`` (None elsewhere); a failure raises on every rank.

    For commands where one rank reads the graph and then distributes it: an
    unreadable path or malformed file (``OSError``, ``ValueError`` --
    :class:`GraphFormatError` included -- or a missing optional ``ImportError``)
    on the root is agreed through ``comm.agree`` so that every rank raises
    instead of the others waiting in the next collective.

    Collective over ``comm`` (one small allreduce).
    """
    graph, err = None, None
    if comm.rank == root:
        try:
            graph = load()
        except (OSError, ValueError, ImportError) as exc:
            err = exc
    comm.agree(err)
    return graph


def load_graph(spec, *, name=None) -> Graph:
    """Load a graph from a generator spec or a path, detecting the format.

    Parameters
    ----------
    spec : str or os.PathLike
        * ``rmat:SCALE[:EDGE_FACTOR[:SEED]]`` — R-MAT topology (Graph500
          parameters, edge factor 16, seed 0 by default);
        * ``sbm:N[:CLASSES[:SEED]]`` — stochastic block model with 32
          label-correlated features, labels and a stratified 60/20/20 split
          drawn with the same seed;
        * a file, by extension, ``.gz`` looked through: ``.txt .edges .el
          .tsv .csv`` edge lists (undirected), ``.jlg .lg``, ``.mtx`` (a
          ``%%MatrixMarket`` banner in any file also selects it), ``.npz``;
        * a folder: Planetoid (``ind.<name>.*``; ``name`` picks the dataset when
          there are several) or MUSAE (``<name>_edges.csv``).
    name : str, optional
        Dataset to pick in a folder holding several; otherwise ``Graph.name``.

    Raises
    ------
    GraphFormatError
        Unknown format (the message lists the supported ones), or any error of
        the chosen loader.
    FileNotFoundError
        ``spec`` is neither a generator spec nor an existing path.
    """
    if isinstance(spec, str) and spec.split(":", 1)[0] in _GENERATORS and ":" in spec:
        return _generator_graph(spec, name)
    path = Path(spec)
    label = _label(spec)
    if path.is_dir():
        planetoid = sorted(p.name[len("ind."): -len(".graph")] for p in path.glob("ind.*.graph"))
        if planetoid:
            if name is None and len(planetoid) > 1:
                raise GraphFormatError(f"{label}: Planetoid folder with datasets {planetoid}; "
                                       f"pass name= to choose one")
            return load_planetoid(path, name or planetoid[0])
        if any(path.glob("*_edges.csv")):
            return load_musae(path, name=name)
        raise _unknown(label, "folder holds no Planetoid or MUSAE files")
    if not path.exists():
        raise FileNotFoundError(f"load_graph: {label} is neither a generator spec "
                                f"({' or '.join(_GENERATORS)}) nor an existing file or folder")
    lower = path.name.lower()
    inner = lower[:-3] if lower.endswith(".gz") else lower
    if inner.endswith(".npz"):
        return load_npz(path, name=name)
    if inner.endswith((".jlg", ".lg")):
        return load_jlg(path, name=name)
    if inner.endswith(".mtx"):
        return load_matrix_market(path, name=name)
    if inner.endswith(_EDGE_EXTS):
        with open(path, "rb") as f:
            start = f.read(64)
        if start.startswith(_GZIP_MAGIC):
            start = zlib.decompressobj(wbits=31).decompress(start)
        if start.lstrip().startswith(b"%%MatrixMarket"):
            return load_matrix_market(path, name=name)
        return load_snap_edgelist(path, name=name)
    raise _unknown(label, f"cannot tell the format of {path.name!r} from its name")
