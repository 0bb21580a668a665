"""MatrixMarket coordinate files, with or without the banner and the size line."""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import GraphFormatError, SpgnnDataWarning
from ._files import check_vertices
from ._text import (_INT_TOKEN, _label, _last_line, _line_of_record, _parse_table, _read_bytes,
                    _show, _split_head, _stem)
from .graph import Graph, _build_adj

__all__ = ["load_matrix_market"]


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

    An entry of weight 0 (an explicit zero, or duplicates that sum to 0) is
    no edge (``Graph``: ``adj[u, v] != 0`` is an edge): it is dropped with a
    :class:`~spgnn.errors.SpgnnDataWarning` naming its line and the count
    (``scipy.io.mmread`` keeps such entries as stored zeros).  The adjacency
    holds float32, exact for integers up to 2**24: a weight it cannot hold
    exactly (an integer above 2**24, any value from 2**53, where even the
    float64 read rounds, or a value past float32's range) warns the same way.

    Raises
    ------
    GraphFormatError
        A bad banner or size line (a negative number in it), a non-square matrix, an entry line that is
        not 2 (pattern) or 3 numbers, an index outside 1..n, or fewer entries
        than the size line announces (truncated file), an index of 2**53 or
        more (not exact in a value column), an integer of 2**63 - 1 or more in magnitude.
    InputTooLarge
        A size line (or, without one, a largest index) whose n exceeds
        ``2 * nnz + 2**20``, or a graph past the input memory limit
        (:mod:`spgnn.io._files`).
    """
    label = _label(path)
    text = _read_bytes(path)
    field, symmetry = None, None
    first = 1
    if text.lstrip().startswith(b"%%MatrixMarket"):
        head, text, first = _split_head(text, 1, None)
        field, symmetry = parse_banner(label, *head[0])
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
    if size is not None and min(size) < 0:
        raise GraphFormatError(f"{label}:{head[0][0]}: the size line 'rows cols nnz' must hold "
                               f"numbers >= 0, got {_show(head[0][1])!r}")
    if size is not None and size[0] != size[1]:
        raise GraphFormatError(f"{label}:{head[0][0]}: an adjacency matrix must be square, "
                               f"but the size line says {size[0]} x {size[1]}")
    if size is not None:
        # An entry line takes at least 4 bytes: the file bounds the entries, not nnz
        # (a larger nnz is reported as a truncated file below).
        check_vertices(size[0], min(size[2], len(rest) // 4 + 1), label,
                       declared=f"the size line (line {head[0][0]})")
    what = "two integer indices 'row col'" if ncols == 2 else "three numbers 'row col value'"
    entries = parsed if parsed is not None else _parse_table(
        rest, ncols, label, comment=b"%", first_line=rest_first,
        dtype=np.int64 if ncols == 2 else np.float64, what=what)
    if ncols == 3:
        idx = entries[:, :2]
        if idx.size and np.abs(idx).max() >= 2.0**53:
            # float64 rounds such indices: the entry would land on another vertex.
            k = int(np.flatnonzero((np.abs(idx) >= 2.0**53).any(axis=1))[0])
            no = _line_of_record(rest, k, b"%", rest_first)
            raise GraphFormatError(f"{label}:{no}: row or column index {np.abs(idx[k]).max():.0f} "
                                   f"is beyond 2**53, where it cannot be read exactly")
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
        check_vertices(n, rows.size, label, declared=f"the largest index ({n:,})")
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
    if vals is not None:
        _warn_inexact(vals, label, rest, rest_first)
    if symmetric and symmetry == "skew-symmetric" and vals is not None:
        mirrored = np.concatenate([vals, -vals[rows != cols]])
        r = np.concatenate([rows, cols[rows != cols]])
        c = np.concatenate([cols, rows[rows != cols]])
        adj = _build_adj(r - 1, c - 1, n, symmetric=False, values=mirrored)
    else:
        adj = _build_adj(rows - 1, cols - 1, n, symmetric=symmetric, values=vals,
                         mirror_diagonal=False)
    zeros = int(np.count_nonzero(adj.data == 0))
    if zeros:
        k = np.flatnonzero(vals == 0)
        where = (f"first on line {_line_of_record(rest, int(k[0]), b'%', rest_first)}" if k.size
                 else "duplicates that sum to 0")
        adj.eliminate_zeros()
        warnings.warn(f"{label}: {zeros:,} stored entr{'y' if zeros == 1 else 'ies'} of weight 0 "
                      f"({where}) dropped: a weight of 0 is no edge", SpgnnDataWarning,
                      stacklevel=2)
    return Graph(adj=adj, name=name or _stem(path))


def parse_banner(label, lineno, line):
    """``(field, symmetry)`` of the banner ``line`` (bytes, stripped) at line ``lineno``. Pure.

    Raises GraphFormatError naming ``label:lineno`` for anything but
    ``%%MatrixMarket matrix coordinate pattern|real|integer|double
    general|symmetric|skew-symmetric`` (an ``array`` matrix, ``complex``
    values, ``hermitian`` symmetry are not graphs spgnn reads).
    """
    banner = line.decode("utf-8", "replace").lower().split()
    if (len(banner) != 5 or banner[1] != "matrix" or banner[2] != "coordinate"
            or banner[3] not in ("pattern", "real", "integer", "double")
            or banner[4] not in ("general", "symmetric", "skew-symmetric")):
        raise GraphFormatError(
            f"{label}:{lineno}: expected '%%MatrixMarket matrix coordinate "
            f"pattern|real|integer general|symmetric|skew-symmetric', got {_show(line)!r}")
    return banner[3], banner[4]


def _warn_inexact(vals, label, rest, rest_first):
    """Warn (SpgnnDataWarning) when a weight is not held exactly by the float32 adjacency."""
    with np.errstate(over="ignore"):
        v32 = vals.astype(np.float32)
    finite = np.isfinite(vals)
    big_int = finite & (np.abs(vals) > 2.0**24) & (vals == np.round(vals))
    lost = (big_int & ((v32 != vals) | (np.abs(vals) >= 2.0**53))) | (finite & ~np.isfinite(v32))
    if lost.any():
        k, count = int(np.flatnonzero(lost)[0]), int(lost.sum())
        no = _line_of_record(rest, k, b"%", rest_first)
        warnings.warn(f"{label}:{no}: {count:,} weight{'s' * (count != 1)} "
                      f"not held exactly (first: {vals[k]:.17g}, stored as {float(v32[k]):.17g}); "
                      f"the adjacency holds float32, exact for integers up to 2**24 "
                      f"(16,777,216), and values from 2**53 are rounded already when read",
                      SpgnnDataWarning, stacklevel=3)


def _first_record_width(text: bytes) -> int:
    head, _, _ = _split_head(text, 1, b"%")
    return len(head[0][1].split()) if head and len(head[0][1].split()) in (2, 3) else 2
