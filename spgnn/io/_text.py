"""Reading graph files as bytes: gzip, line bookkeeping, and the vectorised table parser.

Text files are parsed in one vectorised pass (``np.fromstring`` plus a
token-per-line count in numpy); only when that fast pass rejects the input is
the file walked line by line, to find and name the first bad line.  Every
error is a :class:`~spgnn.errors.GraphFormatError` whose message starts with
``file:line:``.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import numpy as np

from ..errors import GraphFormatError
from ._files import GZIP_MAGIC as _GZIP_MAGIC, read_input



def _label(path) -> str:
    return os.fspath(path)


def _read_bytes(path) -> bytes:
    """The file's bytes, gunzipped when it starts with the gzip magic (whatever its name),
    read within the limits of :mod:`spgnn.io._files` (regular files only, bounded size)."""
    return read_input(path, _label(path))


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
#: Integers the int64 tables hold: |v| < 2**63 - 1 (numpy's parser saturates to 2**63 - 1).
_INT64_MAX = np.iinfo(np.int64).max
_LONG_INT_TOKEN = re.compile(rb"[+-]?\d+\Z")


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
        # fromstring saturates on overflow (to INT64_MAX, whatever the sign) instead of
        # failing: such values take the slow pass, which names the line.
        if vals is not None and dtype == np.int64 and vals.size and (
                vals.max() >= _INT64_MAX or vals.min() <= -_INT64_MAX):
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
                    bad = _LONG_INT_TOKEN.match(t) is None
                    if not bad and abs(int(t)) >= _INT64_MAX:
                        raise GraphFormatError(
                            f"{label}:{no}: the integer {t.decode()} is out of range: ids and "
                            f"indices must lie below 2**63 - 1 ({_INT64_MAX:,}) in magnitude")
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


def _stem(path) -> str:
    name = Path(path).name
    for ext in (".gz", ".txt", ".csv", ".tsv", ".edges", ".el", ".jlg", ".lg", ".mtx", ".npz"):
        if name.lower().endswith(ext) and len(name) > len(ext):
            name = name[: -len(ext)]
    return name
