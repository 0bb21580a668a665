"""SNAP-style edge lists (one ``u v`` pair per line), plain or gzip."""

from __future__ import annotations

import operator
import re

import numpy as np

from ..errors import GraphFormatError
from ._files import check_alloc, check_vertices
from ._text import ( _label, _line_of_record, _parse_table, _read_bytes, _split_head,
                    _stem)
from .graph import Graph, _build_adj

__all__ = ["load_snap_edgelist"]

_INT_FIELD = re.compile(rb"[+-]?\d+\Z")


def _is_header(line: bytes) -> bool:
    """A header names its columns: no field of it is an integer (fields are
    comma-separated when the line has a comma: ``Gene ID 1,Gene ID 2``)."""
    fields = [f.strip() for f in line.split(b",")] if b"," in line else line.split()
    return bool(fields) and not any(_INT_FIELD.match(f) for f in fields)


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
        None: skip it when none of its fields is an integer (``id_1,id_2``,
        ``FromNodeId ToNodeId``); a first line mixing numbers and text
        (``1 2x``, ``1,x``) is a bad data line, reported, never dropped.
    name : str, optional
        ``Graph.name``; default the file name without extensions.

    Raises
    ------
    GraphFormatError
        ``file:line: ...`` for a line that is not two integers, a negative
        id, an id >= num_nodes; or a damaged gzip stream.
    InputTooLarge
        Without ``num_nodes`` or ``relabel``: the largest id implies more than
        ``2 * edges + 2**20`` vertices (a sparse id space, or a corrupt file:
        14 bytes ``0 500000000`` would otherwise allocate gigabytes); or the
        graph's estimated memory passes the input limit
        (:mod:`spgnn.io._files`).
    """
    label = _label(path)
    text = _read_bytes(path)
    cbytes = comment.encode() if comment else None
    head, rest, first = _split_head(text, 1, cbytes)
    if head and (header or (header is None and _is_header(head[0][1]))):
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
            num_nodes = operator.index(num_nodes)
            if num_nodes < 0:
                raise ValueError(f"load_snap_edgelist: num_nodes must be >= 0, but got {num_nodes}")
            if n > num_nodes:
                k = int(np.flatnonzero((pairs >= num_nodes).any(axis=1))[0])
                no = _line_of_record(text, k, cbytes, first)
                raise GraphFormatError(f"{label}:{no}: vertex id out of range for "
                                       f"num_nodes={num_nodes}: {pairs[k].tolist()}")
            n = int(num_nodes)
            check_alloc(8 * (n + 1) + 40 * len(pairs), label,
                        f"a graph of num_nodes={n:,} vertices and {len(pairs):,} edges")
        else:
            check_vertices(n, len(pairs), label,
                           declared=f"the largest vertex id ({n - 1:,})",
                           hint="pass num_nodes= (--num-nodes) to confirm the vertex count, or "
                                "relabel=True (--relabel) to number the distinct ids 0..n-1")
    adj = _build_adj(src, dst, n, symmetric=not directed)
    return Graph(adj=adj, name=name or _stem(path), node_ids=node_ids)
