"""SNAP-style edge lists (one ``u v`` pair per line), plain or gzip."""

from __future__ import annotations

import numpy as np

from ..errors import GraphFormatError
from ._text import (_header_like, _label, _line_of_record, _parse_table, _read_bytes, _split_head,
                    _stem)
from .graph import Graph, _build_adj

__all__ = ["load_snap_edgelist"]


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
