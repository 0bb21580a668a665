"""The :class:`Graph` type, and the adjacency builder every loader shares."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import DimensionMismatch, DTypeError, InputTooLarge
from .preprocess import symmetrize, without_self_loops

__all__ = ["Graph", "MAX_CLASSES", "vertex_split"]

#: class ids are below this: a label of 10**12 would size every one-hot and
#: logit matrix by it (a regression target, or a corrupt file)
MAX_CLASSES = 1 << 20


def _refuse_complex(what, dtype):
    # numpy would drop the imaginary part with only a warning: a silent change.
    if np.dtype(dtype).kind == "c":
        raise DTypeError(f"Graph: {what} must be real, but got complex dtype {dtype}")


def _check_fractions(train, val):
    if not (0 <= train <= 1 and 0 <= val <= 1 and train + val <= 1 + 1e-12):
        raise ValueError(f"random_split: train and val must be fractions with "
                         f"train + val <= 1, but got train={train}, val={val}")


#: Vertices per block of the per-vertex split's draws (as the generators' blocks).
SPLIT_BLOCK = 1 << 12


def vertex_split(labels, lo, hi, train=0.6, val=0.2, seed=0):
    """``(train, val, test)`` bool masks of vertices ``lo:hi`` by the per-vertex rule. Pure.

    Vertex ``v`` draws ``u`` uniform in [0, 1) (block ``v // 4096`` of
    ``numpy.random.default_rng([seed, 3, block])``, element ``v % 4096``) and
    goes to train when ``u < train``, to val when ``train <= u < train +
    val``, else to test; a vertex with label -1 goes to no set.  ``labels``
    are those of vertices ``lo:hi`` (or None: all known).  Not stratified:
    each class is split in the expected proportions only.  Any range gives
    the masks the whole range ``0:n`` gives for its vertices.
    """
    _check_fractions(train, val)
    lo, hi = int(lo), int(hi)
    parts = []
    for b in range(lo // SPLIT_BLOCK, (hi - 1) // SPLIT_BLOCK + 1) if hi > lo else ():
        b0 = b * SPLIT_BLOCK
        u = np.random.default_rng([int(seed), 3, b]).random(SPLIT_BLOCK)
        parts.append(u[max(lo, b0) - b0:min(hi, b0 + SPLIT_BLOCK) - b0])
    u = np.concatenate(parts) if parts else np.zeros(0)
    known = np.ones(hi - lo, bool) if labels is None else np.asarray(labels) >= 0
    tr = known & (u < train)
    va = known & (u >= train) & (u < train + val)
    te = known & ~tr & ~va
    return tr, va, te


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
        int64 class ids 0..C-1, with -1 for nodes whose label is unknown;
        C is at most :data:`MAX_CLASSES` (2**20), else ``InputTooLarge``.
        Complex ``adj`` or ``features`` raise ``DTypeError`` (never cast to
        real).
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
        _refuse_complex("adj", adj.dtype)
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
            _refuse_complex("features", f.dtype)
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
            if y.size and int(y.max()) >= MAX_CLASSES:
                v = int(np.argmax(y))
                raise InputTooLarge(f"Graph {self.name!r}: vertex {v} has class {int(y[v]):,}; "
                                    f"class ids must be below {MAX_CLASSES:,}")
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
        a self-loop counting once.  Otherwise: directed entries.  An edge is a
        non-zero entry (a stored zero is none; the loaders drop them, with a
        warning, and ``summary`` counts them apart).
        """
        nonzero = int(np.count_nonzero(self.adj.data))
        if self.is_symmetric():
            loops = int(np.count_nonzero(self.adj.diagonal()))
            return (nonzero - loops) // 2 + loops
        return nonzero

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
        return dataclasses.replace(self, adj=symmetrize(self.adj))

    def without_self_loops(self) -> "Graph":
        """The same graph with the diagonal of ``adj`` removed."""
        return dataclasses.replace(self, adj=without_self_loops(self.adj))

    def random_split(self, train=0.6, val=0.2, *, seed=0, stratify=True,
                     per_vertex=False) -> "Graph":
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
        per_vertex : bool
            The per-vertex rule instead (:func:`vertex_split`; ``stratify`` is
            then ignored): each vertex's set follows from its own uniform
            draw, so any rows' masks can be made alone (the generated graphs
            use it, whole or generated per rank).  Set sizes are then only
            about ``train * n`` and ``val * n``.
        """
        _check_fractions(train, val)
        n = self.num_nodes
        if per_vertex:
            masks = vertex_split(self.labels, 0, n, train, val, seed)
            return dataclasses.replace(self, train_mask=masks[0], val_mask=masks[1],
                                       test_mask=masks[2])
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
        zeros = int(self.adj.nnz - np.count_nonzero(self.adj.data))
        pattern = self.adj
        if zeros:
            pattern = self.adj.copy()
            pattern.eliminate_zeros()
        deg = np.diff(pattern.indptr)
        lines = [
            f"Graph {self.name!r}: {n:,} nodes, {self.num_edges:,} "
            f"{'undirected' if sym else 'directed'} edges "
            f"({self.adj.nnz:,} stored entries, {self.num_self_loops:,} self-loops"
            + (f", {zeros:,} stored zeros, which are no edges" if zeros else "") + ")",
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
