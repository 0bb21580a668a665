"""Sharded on-disk graphs: one file per part, a versioned manifest (docs/data.md, "Shards").

A shard directory holds a graph cut into ``K`` parts, each a contiguous range
of vertex ids of the *renumbered* graph (the partition's order: part ``k`` is
rows ``offsets[k]:offsets[k+1]``), so that each rank of a parallel job reads
only its own rows (:meth:`spgnn.gnn.DistGraph.from_shards`):

``manifest.json``
    ``format`` (``"spgnn-shards"``), ``version`` (:data:`VERSION`), ``name``,
    ``source``, ``n``, ``num_features``, ``num_classes``, ``nnz`` (of ``A'``),
    ``parts`` (``K``), ``offsets`` (``K + 1`` row boundaries), ``partition``
    (``method``, ``seed``, ``pattern``), ``preprocessing`` (what the stored
    arrays are), ``dtypes``, ``counts`` (train/val/test vertices),
    ``min_edge_weight``, ``feature_form``, and ``files``: per part its file
    name, rows, ``nnz``, halo size, ``bytes`` and ``sha256``.
``part-00000.npz`` ... (uncompressed numpy archives, one per part)
    ``indptr``, ``indices``, ``data``: the part's rows of ``A'`` (the graph
    symmetrised, max of both directions, without stored self-loops; float32
    weights) in CSR with GLOBAL column ids of the renumbered graph;
    ``deg``: GCN's degrees of these rows (float64 row sums of ``A' + I``);
    ``halo``, ``halo_deg``: the sorted ids of the columns outside the part
    and their degrees (the owner of a halo vertex is the part whose offsets
    range holds it: nothing else is stored); ``x`` (dense float32 features)
    or ``x_indptr``, ``x_indices``, ``x_data`` (CSR features), raw, not
    normalised; ``label`` (int64, -1 unknown), ``train``, ``val``, ``test``
    (bool), ``orig`` (int64: each row's vertex id in the source graph).

GCN's ``D^-1/2 (A' + I) D^-1/2`` needs the degrees of a row's columns, all of
which the part stores (``deg`` and ``halo_deg``); the mean aggregator and the
row normalisation of the features are per row.  So a reader of any rows
never needs another part's file, let alone the whole graph.

Writing (:func:`write_shards`, one process: it holds the whole graph; or,
for a text edge list, :func:`spgnn.partition.stream_shards.edge_list_to_shards`
in bounded memory through the same steps :func:`begin_write`,
:func:`store_part`, :func:`manifest`, :func:`finish_write`) is atomic per file (temporary file, fsync, rename: :mod:`spgnn.atomic`) and
resumable: a progress journal (``.progress.json``) and the order
(``.order.npy``) are written first; a run interrupted after some parts keeps
the parts whose files have the journal's size and checksum, and writes the
rest.  The manifest is written last: a directory without it is incomplete.

Local: no communication.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..atomic import atomic_write
from ..errors import NonFiniteError, ShardError
from .preprocess import (feature_form, gcn_degrees, normalized_adjacency, offdiagonal_pattern,
                         undirected_weights)

__all__ = ["FORMAT", "VERSION", "MANIFEST", "is_shard_dir", "read_manifest", "write_shards",
           "read_rows", "RowBlock", "part_file", "partition_pattern", "begin_write", "store_part",
           "kept_part", "manifest", "finish_write", "savez_stored", "LazyArrays",
           "Chunked"]

FORMAT = "spgnn-shards"
#: The format version this spgnn writes and reads; another is refused (ShardError).
VERSION = 1
MANIFEST = "manifest.json"
PROGRESS = ".progress.json"
ORDER = ".order.npy"
#: The scratch folder of a streaming write (removed when it completes).
WORK = ".work"

#: What the stored arrays are (the manifest's ``preprocessing``).
PREPROCESSING = {
    "adjacency": "A' = max(A, A^T) without stored self-loops (float32 weights); GCN's "
                 "D^-1/2 (A'+I) D^-1/2 and the mean aggregator are computed when loading",
    "degrees": "deg = float64 row sums of A' + I, for the part's rows (deg) and its halo "
               "columns (halo_deg)",
    "features": "raw, as loaded (row normalisation is applied when loading)",
}


def part_file(k: int) -> str:
    """The file name of part ``k``: ``part-00003.npz``."""
    return f"part-{int(k):05d}.npz"


def is_shard_dir(path) -> bool:
    """Whether ``path`` is a directory with a shard manifest (any version). Local, cheap.

    A directory whose manifest is of another version is one (reading it then
    raises :class:`~spgnn.errors.ShardError` naming the versions), so a
    command can route ``--graph DIR`` here and report the real problem.
    """
    p = Path(path)
    m = p / MANIFEST
    if not (p.is_dir() and m.is_file()):
        return False
    try:
        with open(m, "rb") as f:
            head = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return False
    return isinstance(head, dict) and head.get("format") == FORMAT


def read_manifest(directory) -> dict:
    """The manifest of shard directory ``directory``; ShardError when missing, unreadable or another version."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        hint = (" (an interrupted 'spgnn partition': run it again to finish)"
                if (Path(directory) / PROGRESS).exists() else "")
        raise ShardError(f"{path}: no shard manifest{hint}")
    try:
        man = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ShardError(f"{path}: unreadable shard manifest: {exc}") from None
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        raise ShardError(f"{path}: not an {FORMAT} manifest (format "
                         f"{man.get('format') if isinstance(man, dict) else None!r})")
    if man.get("version") != VERSION:
        raise ShardError(f"{path}: shard format version {man.get('version')!r}, but this spgnn "
                         f"reads version {VERSION}; write the shards again with this version's "
                         f"'spgnn partition'")
    missing = [k for k in ("n", "num_features", "num_classes", "parts", "offsets", "files",
                           "counts", "feature_form") if k not in man]
    if missing:
        raise ShardError(f"{path}: manifest lacks {missing}")
    off = man["offsets"]
    if (len(off) != man["parts"] + 1 or off[0] != 0 or off[-1] != man["n"]
            or any(b < a for a, b in zip(off, off[1:])) or len(man["files"]) != man["parts"]):
        raise ShardError(f"{path}: inconsistent offsets / files for {man['parts']} parts "
                         f"of {man['n']} vertices")
    bad = [k for k, e in enumerate(man["files"])
           if not (isinstance(e, dict) and {"file", "bytes", "sha256"} <= set(e)
                   and Path(str(e["file"])).name == e["file"])]
    if bad:
        raise ShardError(f"{path}: file entry {bad[0]} lacks file / bytes / sha256 (or names a "
                         f"path outside the directory)")
    return man


# ------------------------------------------------------------------------------------ writing
def partition_pattern(graph):
    """What the partitioner sees: the off-diagonal pattern of GCN's ``Â`` of ``graph``. Local, pure.

    The pattern :class:`spgnn.gnn.DistGraph` partitions (``order`` step), so
    shards written with a method and seed have the order ``DistGraph.from_graph``
    computes with the same ones.
    """
    return offdiagonal_pattern(normalized_adjacency(graph.adj, np.float64))


def _crc(*arrays) -> str:
    c = 0
    for a in arrays:
        if a is not None:
            c = zlib.crc32(np.ascontiguousarray(a).view(np.uint8).ravel(), c)
    return f"{c:08x}"


def _fingerprint(graph, parts, method, seed):
    """What a resumed write must share with the first: the graph's content and the partition."""
    x = graph.features
    xs = (x.indptr, x.indices, x.data) if sp.issparse(x) else (x,)
    masks = [m for m in (graph.train_mask, graph.val_mask, graph.test_mask)]
    return {"format": FORMAT, "version": VERSION, "n": graph.num_nodes, "nnz": int(graph.adj.nnz),
            "parts": int(parts), "method": str(method), "seed": int(seed),
            "crc32": _crc(graph.adj.indptr, graph.adj.indices, graph.adj.data, *xs, graph.labels,
                          *masks)}


def _check_writable(graph):
    if graph.features is None or graph.labels is None:
        raise ValueError(f"write_shards: graph {graph.name!r} needs features and labels "
                         f"(give --features / --labels specs for a graph without them)")
    x = graph.features
    data = x.data if sp.issparse(x) else np.asarray(x)
    if data.size and not np.isfinite(data).all():
        raise NonFiniteError(f"{graph.name}: non-finite features; features must be finite")
    if graph.adj.nnz and not np.isfinite(graph.adj.data).all():
        raise NonFiniteError(f"{graph.name}: non-finite edge weights; edge weights must be finite")


def _sha256_file(path, chunk=1 << 22):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def _part_complete(directory, entry) -> bool:
    path = Path(directory) / entry["file"]
    try:
        if path.stat().st_size != entry["bytes"]:
            return False
    except OSError:
        return False
    return _sha256_file(path) == entry["sha256"]


def _journal(directory, state):
    atomic_write(Path(directory) / PROGRESS,
                 lambda f: f.write(json.dumps(state, indent=1).encode()))


def _part_arrays(a, deg, graph, perm, inv, lo, hi):
    """The arrays of the part holding rows ``lo:hi`` of the renumbered graph."""
    ids = perm[lo:hi]
    rows = sp.csr_array(a[ids])
    idt = np.int32 if a.shape[0] < 2**31 else np.int64
    block = sp.csr_array((rows.data.astype(np.float32), inv[rows.indices].astype(idt),
                          rows.indptr.astype(np.int64)), shape=rows.shape)
    block.sort_indices()
    cols = block.indices
    halo = np.unique(cols[(cols < lo) | (cols >= hi)]).astype(np.int64)
    # scipy widens the indices to the indptr's int64: store the manifest's dtype
    out = {"indptr": block.indptr.astype(np.int64), "indices": block.indices.astype(idt),
           "data": block.data, "deg": deg[ids], "halo": halo, "halo_deg": deg[perm[halo]]}
    x = graph.features
    if sp.issparse(x):
        xr = sp.csr_array(x[ids])
        out.update(x_indptr=xr.indptr.astype(np.int64), x_indices=xr.indices.astype(np.int64),
                   x_data=xr.data.astype(np.float32))
    else:
        out["x"] = np.ascontiguousarray(x[ids], dtype=np.float32)
    n = graph.num_nodes
    out["label"] = np.asarray(graph.labels, dtype=np.int64)[ids]
    for name in ("train", "val", "test"):
        m = getattr(graph, f"{name}_mask")
        out[name] = (np.zeros(n, dtype=bool) if m is None else np.asarray(m, dtype=bool))[ids]
    out["orig"] = ids.astype(np.int64)
    return out


def begin_write(directory, fp):
    """Prepare ``directory`` for a write with fingerprint ``fp``. Local.

    Returns the manifest when ``directory`` already holds complete shards of
    the same fingerprint, the journal of an interrupted write of it (a dict
    with ``fingerprint``, ``offsets``, ``files`` and whatever the writer
    saved), or None for a fresh write (the directory is created).  Raises
    ShardError when the directory holds anything else.
    """
    directory = Path(directory)
    state = None
    if directory.exists():
        if not directory.is_dir():
            raise ShardError(f"{directory}: exists and is not a directory")
        if (directory / MANIFEST).exists():
            man = read_manifest(directory)
            if man.get("fingerprint") == fp and all(_part_complete(directory, e)
                                                    for e in man["files"]):
                return man
            raise ShardError(f"{directory}: holds shards of another graph or partition "
                             f"(or damaged ones); remove it or choose another --out")
        if (directory / PROGRESS).exists():
            try:
                state = json.loads((directory / PROGRESS).read_text())
            except (OSError, ValueError):
                state = None
            if not isinstance(state, dict) or state.get("fingerprint") != fp:
                raise ShardError(f"{directory}: holds an interrupted write of another graph or "
                                 f"partition; remove it or choose another --out")
        elif any(not p.name.startswith((".tmp-", WORK)) for p in directory.iterdir()):
            raise ShardError(f"{directory}: exists and is not a shard directory (no {MANIFEST}); "
                             f"choose an empty or new --out")
    directory.mkdir(parents=True, exist_ok=True)
    return state


def store_part(directory, k, lo, hi, arrays, state=None) -> dict:
    """Write part ``k`` (rows ``lo:hi``) from its ``arrays``; its manifest entry. Local.

    The file is written atomically and streamed (no second copy of the part
    in memory); its size and sha256 are read back from the disk.  With a
    journal ``state``, the entry is recorded in it (and the journal saved).
    """
    name = part_file(k)
    path = Path(directory) / name
    _write_part(path, arrays)
    sizes = getattr(arrays, "sizes", None) or {k: np.asanyarray(arrays[k]).size
                                               for k in ("data", "halo")}
    entry = {"part": int(k), "file": name, "rows": [int(lo), int(hi)],
             "nnz": int(sizes["data"]), "halo": int(sizes["halo"]),
             "bytes": path.stat().st_size, "sha256": _sha256_file(path)}
    if state is not None:
        state["files"][name] = entry
        _journal(directory, state)
    return entry


def kept_part(directory, state, k):
    """The journal's entry of part ``k`` when its file is complete, else None. Local."""
    done = None if state is None else state["files"].get(part_file(k))
    return done if done is not None and _part_complete(directory, done) else None


def manifest(*, name, source, n, num_features, num_classes, nnz, parts, offsets, method, seed,
             feature_form, features_stored, min_edge_weight, counts, fingerprint, files,
             pattern="off-diagonal entries of GCN's A-hat (as DistGraph.from_graph)") -> dict:
    """The manifest of a complete write (the keys docs/data.md lists). Local, pure."""
    return {
        "format": FORMAT, "version": VERSION, "name": name,
        "source": None if source is None else str(source),
        "n": int(n), "num_features": int(num_features), "num_classes": int(num_classes),
        "nnz": int(nnz), "parts": int(parts), "offsets": [int(v) for v in offsets],
        "partition": {"method": str(method), "seed": int(seed), "pattern": pattern},
        "preprocessing": PREPROCESSING,
        "feature_form": feature_form,
        "features_stored": features_stored,
        "min_edge_weight": float(min_edge_weight),
        "counts": counts,
        "dtypes": {"indptr": "int64", "indices": str(np.dtype(np.int32 if n < 2**31 else np.int64)),
                   "data": "float32", "deg": "float64", "halo": "int64", "halo_deg": "float64",
                   "x": "float32", "label": "int64", "train": "bool", "val": "bool",
                   "test": "bool", "orig": "int64"},
        "checksum": "sha256 of each part file",
        "fingerprint": fingerprint, "files": files,
    }


def finish_write(directory, man) -> dict:
    """Write the manifest (last, atomically) and remove the journal and scratch files. Local."""
    directory = Path(directory)
    atomic_write(directory / MANIFEST, lambda f: f.write(json.dumps(man, indent=1).encode()))
    _readable(directory / MANIFEST)
    for tmp in (PROGRESS, ORDER):
        try:
            (directory / tmp).unlink()
        except OSError:
            pass
    return man


def write_shards(graph, directory, parts, order, *, method="none", seed=0, source=None,
                 progress=None) -> dict:
    """Write ``graph`` as ``parts`` shards into ``directory``; the manifest. Local, one process.

    Parameters
    ----------
    graph : spgnn.io.Graph
        With features and labels (and optionally masks; a missing mask is no
        vertex).
    directory : path
        Created if missing.  An existing directory must be empty, an
        interrupted write of the same graph and partition (resumed), or
        complete shards of them (returned unchanged); else ShardError.
    parts : int
        ``K`` >= 1, at most the vertex count.
    order : callable
        ``order(pattern) -> (perm or None, offsets)``: the renumbering
        (``perm[new] = old``) and the ``K + 1`` block boundaries, from the
        pattern :func:`partition_pattern` returns (``spgnn.partition.partition_graph``
        of ``method`` and ``seed``).  Not called when a resumed write finds
        the order it saved.
    method, seed, source : recorded in the manifest (``method`` and ``seed``
        also in the resume fingerprint).
    progress : callable, optional
        ``progress(k, kept)`` after each part (``kept``: resumed, not rewritten).

    Raises
    ------
    ShardError, ValueError, NonFiniteError, OSError
    """
    if isinstance(parts, (bool, np.bool_)) or int(parts) != parts or int(parts) < 1:
        raise ValueError(f"write_shards: parts must be an integer >= 1, but got {parts!r}")
    parts = int(parts)
    _check_writable(graph)
    n = graph.num_nodes
    if parts > max(n, 1):
        raise ValueError(f"write_shards: {parts} parts of a graph of {n} vertices; parts must be "
                         f"at most the vertex count")
    directory = Path(directory)
    fp = _fingerprint(graph, parts, method, seed)
    state = begin_write(directory, fp)
    if isinstance(state, dict) and state.get("format") == FORMAT:
        return state           # complete shards of the same graph and partition
    perm = None
    if state is not None and (directory / ORDER).exists():
        try:
            perm = np.load(directory / ORDER)
            offsets = [int(v) for v in state["offsets"]]
            if perm.shape != (n,):
                perm = None
        except (OSError, ValueError, KeyError):
            perm = None
    if perm is None:
        perm, offsets = order(partition_pattern(graph))
        perm = np.arange(n, dtype=np.int64) if perm is None else np.asarray(perm, dtype=np.int64)
        offsets = [int(v) for v in offsets]
        if len(offsets) != parts + 1 or offsets[0] != 0 or offsets[-1] != n:
            raise ValueError(f"write_shards: the order gave offsets {offsets[:4]}..., not "
                             f"{parts + 1} boundaries from 0 to {n}")
        atomic_write(directory / ORDER, lambda f: np.save(f, perm))
        state = {"fingerprint": fp, "offsets": offsets, "files": {}}
        _journal(directory, state)
    inv = np.empty(n, dtype=np.int64)
    inv[perm] = np.arange(n, dtype=np.int64)
    a = undirected_weights(graph.adj)
    deg = gcn_degrees(a, undirected=True)
    entries = []
    for k in range(parts):
        lo, hi = offsets[k], offsets[k + 1]
        done = kept_part(directory, state, k)
        if done is not None:
            entries.append(done)
            if progress:
                progress(k, True)
            continue
        arrays = _part_arrays(a, deg, graph, perm, inv, lo, hi)
        entries.append(store_part(directory, k, lo, hi, arrays, state))
        del arrays
        if progress:
            progress(k, False)
    labels = np.asarray(graph.labels)
    x = graph.features
    man = manifest(
        name=graph.name, source=source, n=n, num_features=x.shape[1],
        num_classes=int(max(labels.max(initial=-1), -1)) + 1, nnz=a.nnz, parts=parts,
        offsets=offsets, method=method, seed=seed, feature_form=feature_form(x),
        features_stored="csr" if sp.issparse(x) else "dense",
        min_edge_weight=float(graph.adj.data.min()) if graph.adj.nnz else 0.0,
        counts={k: int(np.asarray(m, dtype=bool).sum()) if m is not None else 0
                for k, m in (("train", graph.train_mask), ("val", graph.val_mask),
                             ("test", graph.test_mask))},
        fingerprint=fp, files=entries)
    return finish_write(directory, man)


def _write_part(path, arrays):
    """One part file, atomically (a seam for the tests' interruptions); readable as umask allows."""
    atomic_write(path, lambda f: savez_stored(f, arrays))
    _readable(path)


#: A fixed time stamp for the archive members: the same arrays give the same file (and sha256).
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class LazyArrays(dict):
    """Part arrays, each an array, a zero-argument callable making it when it is written, or a
    :class:`Chunked` array written piece by piece.

    :func:`savez_stored` makes and writes them one at a time, in order, and
    drops each before making the next (so a part is never whole in memory);
    ``sizes`` records each written array's element count.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sizes = {}


class Chunked:
    """A 1-D or 2-D array of known ``dtype`` and ``shape`` given as consecutive row pieces:
    ``pieces()`` yields arrays whose rows, concatenated, are the array (never whole in memory)."""

    def __init__(self, dtype, shape, pieces):
        self.dtype, self.shape, self.pieces = np.dtype(dtype), tuple(shape), pieces

    @property
    def size(self):
        return int(np.prod(self.shape))


_PIECE = 1 << 20


def _write_npy(out, val):
    """The ``.npy`` bytes of ``val`` (an array or :class:`Chunked`) into the stream ``out``, as
    ``numpy.lib.format.write_array`` writes them, in pieces of at most 1 MiB (no copy)."""
    fmt = np.lib.format
    if isinstance(val, Chunked):
        header = fmt.header_data_from_array_1_0(np.empty((0,) + val.shape[1:], val.dtype))
        header["shape"] = val.shape
        fmt.write_array_header_1_0(out, header)
        rows = 0
        for piece in val.pieces():
            piece = np.ascontiguousarray(piece, dtype=val.dtype)
            rows += piece.shape[0] if piece.ndim else 0
            _write_bytes(out, piece)
        if rows != val.shape[0]:
            raise ShardError(f"a shard array of {val.shape[0]} rows got {rows} (a damaged "
                             f"scratch file; run again)")
        return
    val = np.ascontiguousarray(val)
    fmt.write_array_header_1_0(out, fmt.header_data_from_array_1_0(val))
    _write_bytes(out, val)


def _write_bytes(out, arr):
    mv = memoryview(arr.reshape(-1).view(np.uint8)) if arr.size else memoryview(b"")
    for i in range(0, len(mv), _PIECE):
        out.write(mv[i:i + _PIECE])


def savez_stored(f, arrays) -> None:
    """``numpy.savez`` of ``arrays`` into the open binary file ``f``, reproducibly. Local.

    An uncompressed zip of ``.npy`` members (readable by ``numpy.load``),
    written array by array in 1 MiB pieces (never a second copy of the
    payload), with a fixed time stamp so that the bytes depend only on the
    arrays.  Values may be callables and :class:`Chunked` (:class:`LazyArrays`).
    """
    import zipfile

    with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key in list(arrays):
            val = arrays[key]
            if callable(val):
                val = val()
            if not isinstance(val, Chunked):
                val = np.asanyarray(val)
            if isinstance(arrays, LazyArrays):
                arrays.sizes[key] = int(val.size)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_STORED
            with zf.open(info, "w", force_zip64=True) as out:
                _write_npy(out, val)
            del val


def _readable(path):
    # mkstemp makes 0600 files; shards on a shared file system are read by the job's ranks
    mask = os.umask(0)
    os.umask(mask)
    try:
        os.chmod(path, 0o666 & ~mask)
    except OSError:
        pass


# ------------------------------------------------------------------------------------ reading
@dataclass
class RowBlock:
    """Rows ``lo:hi`` of a shard directory (global ids of the renumbered graph), as read.

    ``adj``: ``A'`` rows (float64 CSR, shape ``(hi - lo, n)``, global columns);
    ``deg``: their GCN degrees; :meth:`degree_of` the degree of any of their
    columns; ``x``: raw feature rows (dense float32 or CSR); ``label``,
    ``train``, ``val``, ``test``, ``orig``; ``files``: the part files read.
    """

    lo: int
    hi: int
    adj: sp.csr_array
    deg: np.ndarray
    x: object
    label: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    orig: np.ndarray
    files: list = field(default_factory=list)
    _keys: np.ndarray = None
    _vals: np.ndarray = None
    _table: np.ndarray = None

    def degree_of(self, ids):
        """GCN degrees of global vertex ids among these rows and their columns."""
        ids = np.asarray(ids, dtype=np.int64)
        n = self.adj.shape[1]
        if self._table is None and self._keys is not None and 0 < n <= 4 * self._keys.size:
            # the known vertices are a large share of all: one lookup table of n degrees
            # (NaN: unknown) costs at most 4x the keys and spares a binary search per entry
            self._table = np.full(n, np.nan)
            self._table[self._keys] = self._vals
        if self._table is not None:
            out = self._table[ids]
            if np.isnan(out).any():
                raise ShardError(f"shards: a column of rows {self.lo}:{self.hi} has no stored "
                                 f"degree (a damaged halo)")
            return out
        pos = np.searchsorted(self._keys, ids)
        pos = np.minimum(pos, max(self._keys.size - 1, 0))
        if ids.size and not np.array_equal(self._keys[pos], ids):
            raise ShardError(f"shards: a column of rows {self.lo}:{self.hi} has no stored degree "
                             f"(a damaged halo)")
        return self._vals[pos]


def _load_part(directory, man, k):
    """Part ``k``'s arrays, its size and sha256 checked; ShardError naming the file otherwise."""
    entry = man["files"][k]
    path = Path(directory) / entry["file"]
    # The checksum is streamed and the arrays read from the file: one copy of the part in
    # memory, not the file's bytes and then the arrays.
    try:
        size = path.stat().st_size
        if size == entry["bytes"]:
            digest = _sha256_file(path)
    except FileNotFoundError:
        raise ShardError(f"{path}: shard file missing (part {k} of {man['parts']})") from None
    except OSError as exc:
        raise ShardError(f"{path}: unreadable shard file: {exc}") from None
    if size != entry["bytes"]:
        raise ShardError(f"{path}: truncated or wrong size: {size} bytes, the manifest "
                         f"says {entry['bytes']}")
    if digest != entry["sha256"]:
        raise ShardError(f"{path}: checksum mismatch (sha256 {digest[:16]}..., the manifest "
                         f"says {entry['sha256'][:16]}...): the file is damaged")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
    except (ValueError, OSError, EOFError) as exc:
        raise ShardError(f"{path}: unreadable shard archive: {exc}") from None
    lo, hi = man["offsets"][k], man["offsets"][k + 1]
    need = ["indptr", "indices", "data", "deg", "halo", "halo_deg", "label", "train", "val",
            "test", "orig"]
    need += ["x"] if "x" in arrays else ["x_indptr", "x_indices", "x_data"]
    lacking = [a for a in need if a not in arrays]
    if lacking or arrays["indptr"].shape != (hi - lo + 1,) or arrays["deg"].shape != (hi - lo,):
        raise ShardError(f"{path}: not part {k} of this manifest (rows {lo}:{hi}; lacks "
                         f"{lacking})")
    return arrays


def read_rows(directory, man, lo, hi) -> RowBlock:
    """Rows ``lo:hi`` of the renumbered graph, reading only the parts that hold them. Local.

    Every part file read is checked against the manifest (size and sha256):
    a missing, truncated or damaged one raises :class:`~spgnn.errors.ShardError`
    naming it.
    """
    off = man["offsets"]
    n, f = man["n"], man["num_features"]
    adj, x, cols, files = [], [], {}, []
    keys, vals = [], []
    for k in range(man["parts"]):
        plo, phi = off[k], off[k + 1]
        a0, a1 = max(lo, plo), min(hi, phi)
        if a0 >= a1:
            continue
        z = _load_part(directory, man, k)
        files.append(man["files"][k]["file"])
        s0, s1 = a0 - plo, a1 - plo
        part = sp.csr_array((z["data"], z["indices"], z["indptr"]), shape=(phi - plo, n))
        adj.append(part[s0:s1])
        if "x" in z:
            x.append(z["x"][s0:s1])
        else:
            xp = sp.csr_array((z["x_data"], z["x_indices"], z["x_indptr"]), shape=(phi - plo, f))
            x.append(xp[s0:s1])
        for name in ("deg", "label", "train", "val", "test", "orig"):
            cols.setdefault(name, []).append(z[name][s0:s1])
        keys += [np.arange(plo, phi, dtype=np.int64), z["halo"].astype(np.int64)]
        vals += [z["deg"], z["halo_deg"]]
        del z
    if not adj:
        empty = sp.csr_array((0, n), dtype=np.float32)
        block = RowBlock(lo, hi, sp.csr_array(empty, dtype=np.float64), np.zeros(0),
                         np.zeros((0, f), dtype=np.float32), np.zeros(0, np.int64),
                         *(np.zeros(0, bool) for _ in range(3)), np.zeros(0, np.int64), files,
                         np.zeros(0, np.int64), np.zeros(0))
        return block
    A = sp.csr_array(sp.vstack(adj, format="csr"), dtype=np.float64)
    X = sp.csr_array(sp.vstack(x, format="csr")) if sp.issparse(x[0]) else np.concatenate(x)
    c = {name: np.concatenate(v) for name, v in cols.items()}
    k_all, first = np.unique(np.concatenate(keys), return_index=True)
    v_all = np.concatenate(vals)[first]
    return RowBlock(lo, hi, A, c["deg"], X, c["label"], c["train"], c["val"], c["test"],
                    c["orig"], files, k_all, v_all)

