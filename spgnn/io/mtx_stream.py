"""MatrixMarket coordinate files read in bounded memory: the banner and size line, then the
entries in fixed-size text chunks, parsed one at a time.

The streaming counterpart of :func:`spgnn.io.mtx.load_matrix_market` for
``spgnn partition`` (:func:`spgnn.partition.stream_shards.mtx_to_shards`):
the same file is never held whole.  Only files with the banner stream
(``%%MatrixMarket matrix coordinate pattern|real|integer|double
general|symmetric|skew-symmetric``, then ``%`` comments and the size line
``rows cols nnz``); a headerless file is read whole (its layout is guessed
from all its entries).  Every check of the in-memory reader is made chunk by
chunk, with the same :class:`~spgnn.errors.GraphFormatError` naming
``file:line``: the banner, the size line (integers >= 0, square), an entry
line of the wrong width, an index that is not an integer, beyond 2**53 or
outside ``1..n``, more entries than announced, and fewer (a truncated file).

Local: no communication.
"""

from __future__ import annotations

import os
import zlib

import numpy as np

from ..errors import GraphFormatError, InputTooLarge
from ._files import GZIP_MAGIC, MAX_ISOLATED, open_regular
from ._text import _INT_TOKEN, _label, _line_of_record, _parse_table, _show, _split_head
from .edgelist_stream import DEFAULT_CHUNK_BYTES, _line_breaks, _text_chunks
from .mtx import parse_banner

__all__ = ["is_mtx_stream_path", "MtxHeader", "iter_mtx_chunks"]


def is_mtx_stream_path(path) -> bool:
    """Whether ``path`` is an existing file :func:`spgnn.io.load_graph` reads as MatrixMarket
    that starts with a ``%%MatrixMarket`` banner (the files :func:`iter_mtx_chunks` streams):
    a ``.mtx``, or an edge-list name (``.txt`` ...) holding a banner, optionally ``.gz``.
    Local, cheap."""
    from .edgelist_stream import EDGE_LIST_EXTS

    name = os.fspath(path).lower()
    inner = name[:-3] if name.endswith(".gz") else name
    if not (inner.endswith((".mtx",) + EDGE_LIST_EXTS) and os.path.isfile(path)):
        return False
    with open_regular(path) as f:
        start = f.read(256)
    if start.startswith(GZIP_MAGIC):
        try:
            start = zlib.decompressobj(wbits=31).decompress(start, 256)
        except zlib.error:
            return False      # the in-memory reader names the damage
    return start.lstrip().startswith(b"%%MatrixMarket")


class MtxHeader:
    """The banner's ``field`` (pattern, real, integer, double) and ``symmetry`` (general,
    symmetric, skew-symmetric), the size line's ``n`` and ``nnz`` and its line number."""

    def __init__(self, field, symmetry, n, nnz, size_line):
        self.field, self.symmetry, self.n, self.nnz = field, symmetry, n, nnz
        self.size_line = size_line

    @property
    def weighted(self):
        return self.field != "pattern"


def _size(label, lineno, line, file_bytes):
    tokens = line.split()
    if len(tokens) != 3 or not all(_INT_TOKEN.match(t) for t in tokens):
        raise GraphFormatError(f"{label}:{lineno}: expected the size line 'rows cols nnz', got "
                               f"{_show(line)!r}")
    rows, cols, nnz = (int(t) for t in tokens)
    if min(rows, cols, nnz) < 0:
        raise GraphFormatError(f"{label}:{lineno}: the size line 'rows cols nnz' must hold "
                               f"numbers >= 0, got {_show(line)!r}")
    if rows != cols:
        raise GraphFormatError(f"{label}:{lineno}: an adjacency matrix must be square, but the "
                               f"size line says {rows} x {cols}")
    # an entry line takes at least 4 bytes (gzip: at most ~1032x its size): the file bounds
    # the entries, not nnz, before the O(n) arrays are made
    m = min(nnz, file_bytes + 1)
    if rows > 2 * m + MAX_ISOLATED:
        raise InputTooLarge(f"{label}: the size line (line {lineno}) implies {rows:,} vertices, "
                            f"but its {m:,} entries touch at most {2 * m:,}; more than "
                            f"{MAX_ISOLATED:,} isolated vertices are refused")
    return rows, nnz


def _file_entry_bound(path):
    size = os.path.getsize(path)
    with open_regular(path) as f:
        gz = f.read(2) == GZIP_MAGIC[:2]
    return size * 1032 // 4 if gz else size // 4


def iter_mtx_chunks(path, *, chunk_bytes=DEFAULT_CHUNK_BYTES):
    """The header, then the entries of the MatrixMarket file ``path``, chunk by chunk. Local.

    Yields first an :class:`MtxHeader`, then ``(rows, cols, values, first_line)``
    per chunk of about ``chunk_bytes`` of text: 0-based int64 ``rows`` and
    ``cols`` as stored (one triangle of a symmetric file), float64 ``values``
    (None for ``pattern``), and the chunk's first line number.

    Raises
    ------
    GraphFormatError
        As :func:`spgnn.io.mtx.load_matrix_market` (the module says which).
    InputTooLarge
        A size line whose ``n`` more than ``2 * entries + MAX_ISOLATED``.
    """
    label = _label(path)
    chunk_bytes = max(int(chunk_bytes), 64)
    bound = _file_entry_bound(path)
    banner = header = None
    seen, last = 0, 1
    for text, first in _text_chunks(path, label, chunk_bytes):
        last = first + _line_breaks(text)
        if header is None:
            if banner is None:
                head, text, first = _split_head(text, 1, None, first)
                if not head:
                    continue
                if not head[0][1].startswith(b"%%MatrixMarket"):
                    raise GraphFormatError(f"{label}:{head[0][0]}: expected a '%%MatrixMarket' "
                                           f"banner, got {_show(head[0][1])!r}")
                banner = (head[0][0],) + parse_banner(label, *head[0])
            head, text, first = _split_head(text, 1, b"%", first)
            if not head:
                continue
            n, nnz = _size(label, head[0][0], head[0][1], bound)
            header = MtxHeader(banner[1], banner[2], n, nnz, head[0][0])
            yield header
        if not text:
            continue
        pattern = header.field == "pattern"
        what = "two integer indices 'row col'" if pattern else "three numbers 'row col value'"
        entries = _parse_table(text, 2 if pattern else 3, label, comment=b"%", first_line=first,
                               dtype=np.int64 if pattern else np.float64, what=what)
        if not entries.shape[0]:
            continue
        if seen + entries.shape[0] > header.nnz:
            no = _line_of_record(text, header.nnz - seen, b"%", first)
            raise GraphFormatError(f"{label}:{no}: more entries than the {header.nnz} the size "
                                   f"line (line {header.size_line}) announces")
        if pattern:
            rows, cols, vals = entries[:, 0], entries[:, 1], None
        else:
            idx = entries[:, :2]
            big = (np.abs(idx) >= 2.0**53).any(axis=1)
            if big.any():
                k = int(np.flatnonzero(big)[0])
                raise GraphFormatError(f"{label}:{_line_of_record(text, k, b'%', first)}: row or "
                                       f"column index {np.abs(idx[k]).max():.0f} is beyond "
                                       f"2**53, where it cannot be read exactly")
            frac = (idx != np.round(idx)).any(axis=1)
            if frac.any():
                k = int(np.flatnonzero(frac)[0])
                raise GraphFormatError(f"{label}:{_line_of_record(text, k, b'%', first)}: row and "
                                       f"column must be integers, got {idx[k].tolist()}")
            rows, cols = idx[:, 0].astype(np.int64), idx[:, 1].astype(np.int64)
            vals = np.ascontiguousarray(entries[:, 2])
        del entries
        n = header.n
        bad = (rows < 1) | (rows > n) | (cols < 1) | (cols > n)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise GraphFormatError(f"{label}:{_line_of_record(text, k, b'%', first)}: index "
                                   f"outside 1..{n}: ({int(rows[k])}, {int(cols[k])})")
        seen += rows.size
        yield rows - 1, cols - 1, vals, first
    if header is None:
        what = "a '%%MatrixMarket' banner" if banner is None else "the size line 'rows cols nnz'"
        raise GraphFormatError(f"{label}:{last}: the file ends before {what} (empty or "
                               f"truncated MatrixMarket file)")
    if seen < header.nnz:
        raise GraphFormatError(f"{label}:{last}: the size line (line {header.size_line}) "
                               f"announces {header.nnz} entries but only {seen} follow (the "
                               f"file is truncated)")
