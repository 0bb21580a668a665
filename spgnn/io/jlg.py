"""The JuliaGraphs / LightGraphs LG text format (``.jlg``, ``.lg``, usually gzip)."""

from __future__ import annotations

import numpy as np

from ..errors import GraphFormatError
from ._files import check_vertices
from ._text import (_EOL, _label, _last_line, _line_of_record, _parse_table, _read_bytes, _show,
                    _split_head, _stem)
from .graph import Graph, _build_adj

__all__ = ["load_jlg"]


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


def _check_next_header(text: bytes, first: int, label: str, ne: int, hno: int) -> None:
    """What follows a graph's ``ne`` edge lines is nothing or the next graph's header:
    an extra edge line is an error, never dropped."""
    head, _, _ = _split_head(text, 1, None, first)
    if not head:
        return
    no, line = head[0]
    try:
        _parse_lg_header(line, label, no)
    except GraphFormatError:
        raise GraphFormatError(f"{label}:{no}: more edge lines than the {ne} the header "
                               f"(line {hno}) announces, got {_show(line)!r}") from None


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
        than the header announces (truncated file), more (a line after the
        announced edges that is not the next graph's header), or no graph
        called ``graph``.
    InputTooLarge
        A header whose ``nv`` exceeds ``2 * ne + 2**20`` (more isolated
        vertices than any real file holds: a corrupt header), or a graph past
        the input memory limit (:mod:`spgnn.io._files`).
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
        next_first = rest_first + len(body.splitlines())
        _check_next_header(next_text, next_first, label, ne, hno)
        if graph is None or gname == graph:
            break
        text, first = next_text, next_first
    check_vertices(nv, ne, label, declared=f"the header (line {hno})")
    bad = (pairs < 1) | (pairs > nv)
    if bad.any():
        k = int(np.flatnonzero(bad.any(axis=1))[0])
        no = _line_of_record(body, k, None, rest_first)
        raise GraphFormatError(f"{label}:{no}: vertex id outside 1..{nv}: {pairs[k].tolist()}")
    adj = _build_adj(pairs[:, 0] - 1, pairs[:, 1] - 1, nv, symmetric=not directed)
    return Graph(adj=adj, name=name or _stem(path))
