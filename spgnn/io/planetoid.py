"""Planetoid ``ind.<name>.*`` pickles (Cora, CiteSeer), read with a restricted unpickler.

The unpickler builds only numpy arrays, scipy sparse matrices and adjacency
dicts, never arbitrary pickled code.
"""

from __future__ import annotations

import io as _stdio
import pickle
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import GraphFormatError, InputTooLarge
from ._files import MAX_ISOLATED, check_alloc, read_input
from ._text import _label, _parse_table, _read_bytes
from .graph import Graph, _build_adj

__all__ = ["load_planetoid"]


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
        raw = read_input(path, label, decompress=False)
    except GraphFormatError:
        raise
    try:
        return _PlanetoidUnpickler(_stdio.BytesIO(raw), label).load()
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
        if not p.exists():   # a FIFO or device is refused by name when read
            raise FileNotFoundError(f"load_planetoid: missing Planetoid file {p}")
    x = _planetoid_sparse(_unpickle(member["x"]), member["x"])
    tx = _planetoid_sparse(_unpickle(member["tx"]), member["tx"])
    allx = _planetoid_sparse(_unpickle(member["allx"]), member["allx"])
    y = _planetoid_onehot(_unpickle(member["y"]), member["y"])
    ty = _planetoid_onehot(_unpickle(member["ty"]), member["ty"])
    ally = _planetoid_onehot(_unpickle(member["ally"]), member["ally"])
    graph = _unpickle(member["graph"])

    test_idx = _parse_table(_read_bytes(member["test.index"]), 1, _label(member["test.index"]),
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
    if src.size and min(src.min(), dst.min()) < 0:
        raise GraphFormatError(f"{_label(member['graph'])}: negative node id "
                               f"{int(min(src.min(), dst.min()))}")
    if test_idx.size and test_idx.min() < 0:
        raise GraphFormatError(f"{_label(member['test.index'])}: negative node id "
                               f"{int(test_idx.min())}")
    # Every vertex has a row in allx or tx (CiteSeer's few isolated test-range
    # ids excepted): an id far beyond them is a corrupt file, not a graph to allocate.
    rows_known = allx.shape[0] + tx.shape[0]
    for key, top in (("test.index", int(test_idx.max()) if test_idx.size else -1),
                     ("graph", int(max(src.max(), dst.max())) if src.size else -1)):
        if top >= rows_known + MAX_ISOLATED:
            raise InputTooLarge(f"{_label(member[key])}: node id {top:,}, but allx and tx hold "
                                f"{rows_known:,} rows; more than {MAX_ISOLATED:,} vertices "
                                f"without features are refused")
    n = max(allx.shape[0],
            int(test_idx.max()) + 1 if test_idx.size else 0,
            int(max(src.max(), dst.max())) + 1 if src.size else 0,
            len(graph))
    check_alloc(4 * n * d + 40 * src.size, _label(member["allx"]),
                f"a graph of {n:,} vertices with {d:,} features")
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
