"""Text edge lists read in bounded memory: fixed-size byte chunks, parsed one at a time.

:func:`iter_edge_chunks` yields the ``(u, v)`` pairs of a SNAP-style edge list
(the format of :func:`spgnn.io.load_snap_edgelist`: one pair per line,
whitespace or a comma between the ids, ``#`` comments, blank lines, an
optional header line naming the columns, LF / CRLF / CR line ends, plain or
gzip) as int64 arrays of at most about ``chunk_bytes`` of text each: the file
is never held whole, and each chunk is parsed by the same vectorised table
parser as the in-memory loader (:func:`spgnn.io._text._parse_table`), so a bad
line is the same :class:`~spgnn.errors.GraphFormatError` naming ``file:line``.

:func:`scan_edge_list` is the first pass of an out-of-core conversion
(:mod:`spgnn.partition.stream_shards`): the vertex count, the line count and a
CRC-32 of the text, in one sequential read.

Local: no communication.
"""

from __future__ import annotations

import os
import zlib

import numpy as np

from ..errors import GraphFormatError, InputTooLarge
from ._files import GZIP_MAGIC, MAX_ISOLATED, open_regular, refuse_archive
from ._text import _is_skipped, _label, _parse_table

__all__ = ["EDGE_LIST_EXTS", "is_edge_list_path", "iter_edge_chunks", "scan_edge_list",
           "EdgeListScan", "DEFAULT_CHUNK_BYTES"]

#: The file name endings read as edge lists (``.gz`` looked through), as :func:`spgnn.io.load_graph`.
EDGE_LIST_EXTS = (".txt", ".edges", ".el", ".tsv", ".csv")
#: Text per parsed chunk: the parser's transient memory is about 20 bytes per byte of text.
DEFAULT_CHUNK_BYTES = 1 << 20


def is_edge_list_path(path) -> bool:
    """Whether ``path`` is an existing file ``load_graph`` reads as a bare edge list. Local, cheap.

    By its name (``.txt .edges .el .tsv .csv``, optionally ``.gz``), and not a
    MatrixMarket file in disguise (a ``%%MatrixMarket`` banner).
    """
    name = os.fspath(path).lower()
    inner = name[:-3] if name.endswith(".gz") else name
    if not (inner.endswith(EDGE_LIST_EXTS) and os.path.isfile(path)):
        return False
    with open_regular(path) as f:
        start = f.read(64)
    if start.startswith(GZIP_MAGIC):
        try:
            start = zlib.decompressobj(wbits=31).decompress(start, 64)
        except zlib.error:
            return True      # the reader names the damage
    return not start.lstrip().startswith(b"%%MatrixMarket")


def _raw_pieces(path, label, piece=1 << 20):
    """The file's bytes in pieces, gunzipped on the fly when it starts with the gzip magic."""
    with open_regular(path, label) as f:
        data = f.read(piece)
        if not data.startswith(GZIP_MAGIC):
            refuse_archive(data[:8], label)
            while data:
                yield data
                data = f.read(piece)
            return
        d, lines = None, 1
        while True:                      # one or more gzip members, zero padding allowed
            if not data:
                data = f.read(piece)
                if not data:
                    if d is None:
                        return
                    raise GraphFormatError(f"{label}:{lines}: gzip stream ends early "
                                           f"(the file is truncated)")
            if d is None:
                if not data.strip(b"\x00"):
                    data = b""
                    continue
                if not data.startswith(GZIP_MAGIC[:len(data)]):
                    raise GraphFormatError(f"{label}: unexpected bytes after the end of the "
                                           f"gzip stream")
                d = zlib.decompressobj(wbits=31)
            try:
                out = d.decompress(data, piece)
            except zlib.error as e:
                raise GraphFormatError(f"{label}:{lines}: corrupt gzip data ({e})") from None
            if out:
                lines += out.count(b"\n")
                yield out
            if d.eof:
                data, d = d.unused_data, None
            else:
                data = d.unconsumed_tail


def _cut(buf: bytes) -> int:
    """Where to cut ``buf`` so that no line (nor a CRLF pair) is split: after the last LF,
    else after the last CR that is not the final byte; 0 if neither."""
    i = buf.rfind(b"\n")
    if i >= 0:
        return i + 1
    i = buf.rfind(b"\r", 0, len(buf) - 1)
    return i + 1 if i >= 0 else 0


def _line_breaks(text: bytes) -> int:
    return text.count(b"\n") + text.count(b"\r") - text.count(b"\r\n")


def _is_header(line: bytes) -> bool:
    from .snap import _is_header as snap_is_header
    return snap_is_header(line)


def _text_chunks(path, label, chunk_bytes):
    """``(text, first_line)``: whole lines of the (gunzipped) file, about ``chunk_bytes`` each."""
    buf, first = b"", 1
    for piece in _raw_pieces(path, label, min(chunk_bytes, 1 << 20)):
        buf += piece
        if len(buf) < chunk_bytes:
            continue
        cut = _cut(buf)
        if cut == 0:
            if len(buf) > 64 * chunk_bytes + (1 << 20):
                raise GraphFormatError(f"{label}:{first}: a line of more than {len(buf):,} "
                                       f"bytes; not an edge list")
            continue
        text, buf = buf[:cut], buf[cut:]
        yield text, first
        first += _line_breaks(text)
    if buf:
        yield buf, first


def iter_edge_chunks(path, *, chunk_bytes=DEFAULT_CHUNK_BYTES, comment="#", header=None):
    """Yield the ``(u, v)`` pairs of the edge list ``path``, chunk by chunk. Local.

    Parameters
    ----------
    path : str or os.PathLike
        A SNAP-style edge list, plain or gzip (see the module).
    chunk_bytes : int
        About how much text each chunk holds (a line is never split).
    comment : str or None
        Lines starting with it are skipped.
    header : bool or None
        Whether the first data line is a header to skip; None: when none of
        its fields is an integer (as :func:`spgnn.io.load_snap_edgelist`).

    Yields
    ------
    (pairs, first_line) : int64 array (m, 2) and the line number of the chunk's first line.

    Raises
    ------
    GraphFormatError
        ``file:line:`` of the first line that is not two integer ids, a
        damaged gzip stream; archives spgnn does not read.
    """
    chunk_bytes = max(int(chunk_bytes), 64)
    label = _label(path)
    cbytes = comment.encode() if comment else None
    seen_data = False
    for text, first in _text_chunks(path, label, chunk_bytes):
        if not seen_data:
            lines = text.splitlines(keepends=True)
            skip, pos = 0, 0
            for line in lines:
                if not _is_skipped(line, cbytes):
                    break
                skip += 1
                pos += len(line)
            if skip == len(lines):
                continue                 # blank or comment lines only, so far
            seen_data = True
            line = lines[skip].strip()
            if header or (header is None and _is_header(line)):
                cut = pos + len(lines[skip])
                first += _line_breaks(text[:cut])
                text = text[cut:]
        pairs = _parse_table(text, 2, label, comment=cbytes, first_line=first)
        if pairs.size:
            yield pairs, first


class EdgeListScan:
    """What one pass over an edge list learns: ``n`` (largest id + 1), ``lines`` (pairs),
    ``crc32`` of the text, ``raw_degree`` (int64, entries per vertex of both directions,
    duplicates and self-loops counted as they come)."""

    def __init__(self, n, lines, crc32, raw_degree):
        self.n, self.lines, self.crc32, self.raw_degree = n, lines, crc32, raw_degree


def scan_edge_list(path, *, num_nodes=None, chunk_bytes=DEFAULT_CHUNK_BYTES,
                   comment="#", header=None) -> EdgeListScan:
    """First pass: vertex count, line count, CRC-32 and raw degrees, in bounded memory. Local.

    ``num_nodes`` confirms a vertex count (ids at or above it are an error
    naming the line); without it ``n`` is the largest id + 1, and a file whose
    ids imply more than ``2 * lines + MAX_ISOLATED`` vertices is refused as
    :func:`spgnn.io.load_snap_edgelist` refuses it (:class:`InputTooLarge`).
    Negative ids are a :class:`GraphFormatError` naming their line.  Memory:
    one chunk and the ``O(n)`` degree array.
    """
    label = _label(path)
    if num_nodes is not None:
        num_nodes = int(num_nodes)
        if num_nodes < 0:
            raise ValueError(f"scan_edge_list: num_nodes must be >= 0, but got {num_nodes}")
    deg = np.zeros(0 if num_nodes is None else num_nodes, dtype=np.int64)
    crc, lines, top = 0, 0, -1
    for pairs, first in iter_edge_chunks(path, chunk_bytes=chunk_bytes, comment=comment,
                                         header=header):
        crc = zlib.crc32(pairs.tobytes(), crc)
        lo, hi = int(pairs.min()), int(pairs.max())
        if lo < 0 or (num_nodes is not None and hi >= num_nodes):
            bad = (pairs < 0).any(axis=1) if lo < 0 else (pairs >= num_nodes).any(axis=1)
            k = int(np.flatnonzero(bad)[0])
            no = _line_in_chunk(path, first, k, comment)
            if lo < 0:
                raise GraphFormatError(f"{label}:{no}: vertex ids must be non-negative "
                                       f"(or load with relabel=True), got {pairs[k].tolist()}")
            raise GraphFormatError(f"{label}:{no}: vertex id out of range for "
                                   f"num_nodes={num_nodes}: {pairs[k].tolist()}")
        top = max(top, hi)
        if top + 1 > deg.size:
            if num_nodes is None and top + 1 > 2 * (lines + pairs.shape[0]) + MAX_ISOLATED + (1 << 26):
                # do not allocate a degree array for an id space no edge count can justify
                _refuse_sparse(label, top + 1, lines + pairs.shape[0])
            grown = np.zeros(max(top + 1, deg.size + deg.size // 4), dtype=np.int64)
            grown[:deg.size] = deg
            deg = grown
        deg[:top + 1] += np.bincount(pairs.ravel(), minlength=top + 1)
        lines += pairs.shape[0]
    n = top + 1 if num_nodes is None else num_nodes
    if num_nodes is None and n > 2 * lines + MAX_ISOLATED:
        _refuse_sparse(label, n, lines)
    return EdgeListScan(n, lines, f"{crc:08x}", deg[:n].copy() if deg.size != n else deg)


def _refuse_sparse(label, n, m):
    raise InputTooLarge(
        f"{label}: the largest vertex id ({n - 1:,}) implies {n:,} vertices, but its {m:,} "
        f"edges touch at most {2 * m:,}; more than {MAX_ISOLATED:,} isolated vertices are "
        f"refused (pass --num-nodes to confirm the vertex count, or --relabel on the "
        f"in-memory path to number the distinct ids 0..n-1)")


def _line_in_chunk(path, first, k, comment):
    """The line number of the ``k``-th pair of the chunk starting at line ``first`` (slow; errors only)."""
    cbytes = comment.encode() if comment else None
    seen, header_done = -1, False
    no = 0
    for text, start in _text_chunks(path, _label(path), DEFAULT_CHUNK_BYTES):
        for no, line in enumerate(text.splitlines(), start):
            if no < first or _is_skipped(line, cbytes):
                continue
            if not header_done:
                header_done = True
                if _is_header(line.strip()):
                    continue
            seen += 1
            if seen == k:
                return no
    return no
