"""``.npz`` archives: scipy's ``save_npz`` files and spgnn's graph layout (never unpickled)."""

from __future__ import annotations

import os
import zipfile
import zlib

import numpy as np
import scipy.sparse as sp

from ..atomic import write_npz_atomic
from ..errors import GraphFormatError, InputTooLarge
from ._files import MAX_RATIO, RATIO_FLOOR, memory_limit, open_regular
from ._text import _label, _stem
from .graph import Graph

__all__ = ["load_npz", "save_npz"]


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


def _checked_features(x, key, label):
    """``x`` when it can be a feature matrix; else GraphFormatError naming the key and why.

    Strings, bytes, records or dates are refused by name (a string array used to fail
    with numpy's "could not convert string to float: np.str_('a')"), as is a matrix
    of 0 columns, which no model can use (it used to fail deep in the planner with
    "dims needs two or more positive widths").  Other shapes and complex values are
    Graph's to check.
    """
    if x.dtype.kind not in "biufc":
        what = _KIND_NAMES.get(x.dtype.kind, "non-numbers")
        raise GraphFormatError(f"{label}: key {key!r} holds {what} (dtype {x.dtype.str}); "
                               f"features must be numbers")
    if x.ndim == 2 and x.shape[1] == 0:
        raise GraphFormatError(f"{label}: key {key!r} gives the features 0 columns (shape "
                               f"{x.shape}); features need at least one column (leave the "
                               f"key out for a graph without features)")
    return x


_KIND_NAMES = {"U": "strings", "S": "byte strings", "O": "Python objects", "V": "records",
               "M": "dates", "m": "time spans"}


def _check_archive(path, label):
    """A regular file holding a zip archive whose members fit the input limits.

    Checked before numpy opens it, so a FIFO never blocks, garbage is called
    garbage (not numpy's hint about ``allow_pickle``) and a member that
    declares gigabytes (or a ratio of a compression bomb) is refused before
    it is inflated.  zipfile never inflates past a member's declared size.
    """
    with open_regular(path, label) as f:
        head = f.read(8)
        if head.startswith(b"\x93NUMPY"):
            raise GraphFormatError(f"{label}: a .npy array, not an .npz archive")
        if not head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
            raise GraphFormatError(f"{label}: not an .npz archive (a .npz file is a zip archive, "
                                   f"but this file starts with {head[:4]!r})")
        f.seek(0)
        try:
            members = zipfile.ZipFile(f).infolist()
        except (zipfile.BadZipFile, EOFError, OSError) as e:
            raise GraphFormatError(f"{label}: not a readable .npz archive ({e})") from None
    limit = memory_limit()
    total = sum(m.file_size for m in members)
    if total > limit:
        raise InputTooLarge(f"{label}: its members expand to {total:,} bytes, more than the "
                            f"{limit:,} allowed (SPGNN_MAX_INPUT_BYTES)")
    for m in members:
        if m.file_size > max(RATIO_FLOOR, MAX_RATIO * m.compress_size):
            raise InputTooLarge(f"{label}: member {m.filename!r} expands {m.compress_size:,} "
                                f"bytes to {m.file_size:,}, beyond {MAX_RATIO}x (a compression "
                                f"bomb?)")


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
        Not a zip/npz archive, a truncated member, object arrays, features that
        are not numbers or have 0 columns, or keys that do not fit together; the
        message names the key.
    InputTooLarge
        Members that expand past the input limit or by more than
        ``MAX_RATIO`` (:mod:`spgnn.io._files`).
    """
    label = _label(path)
    _check_archive(path, label)
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
            fields["features"] = _checked_features(get("features"), "features", label)
        elif {"attr_data", "attr_indices", "attr_indptr", "attr_shape"} <= keys:
            _checked_features(get("attr_data"), "attr_data", label)
            fields["features"] = _checked_features(_csr_from_keys(_Z(), "attr", label).toarray(),
                                                   "attr_shape", label)
        for key in ("labels", "train_mask", "val_mask", "test_mask", "node_ids", "class_names"):
            if key in keys:
                fields[key] = get(key)
        gname = name or (str(get("name")) if "name" in keys else _stem(path))
    try:
        return Graph(adj=adj, name=gname, **fields)
    except InputTooLarge as e:
        raise InputTooLarge(f"{label}: {e}") from None
    except (ValueError, TypeError) as e:
        raise GraphFormatError(f"{label}: {e}") from None


def save_npz(graph: Graph, path, *, compressed=True) -> None:
    """Write ``graph`` to ``path`` in the graph layout :func:`load_npz` reads.

    ``.npz`` is appended when ``path`` lacks it, as numpy does.  The file is
    written atomically (:mod:`spgnn.atomic`): a full disk leaves no partial
    file or temporary behind, and the ``OSError`` names ``path``.  Sparse features are
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
    path = os.fspath(path)
    if not path.endswith(".npz"):   # as numpy does
        path += ".npz"
    write_npz_atomic(path, out, compressed=compressed)
