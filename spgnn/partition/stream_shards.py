"""A text edge list or a generator spec to shards in bounded memory: ``spgnn partition``'s
streaming path.

:func:`edge_list_to_shards` never holds the text, nor the edge set: every
pass reads a file sequentially in chunks and writes what it learns to
scratch files in ``DIR/.work`` (removed at the end).
:func:`generator_to_shards` takes the same passes with the edges of a
generator spec drawn chunk by chunk instead of read (no scan: the spec
knows its vertex and edge counts); :func:`mtx_to_shards` a MatrixMarket
coordinate file (:mod:`spgnn.io.mtx_stream`: ``pattern`` takes the passes
below, ``real`` / ``integer`` carry each entry's value through them, see
:func:`_dedup_ranges_weighted`):

1. **scan** (:func:`spgnn.io.edgelist_stream.scan_edge_list`): ``n``, the line
   count, a CRC-32 of the pairs (the resume fingerprint), raw degrees;
2. **bucket by range**: each edge, in both directions, is appended to the
   bucket file of the vertex range of its source (ranges of about equal
   raw entry counts, about ``chunk_entries`` each);
3. **de-duplicate** each range bucket in turn (sort, unique, no self-loops:
   ``A' = max(A, Aᵀ)`` of an unweighted graph), appending its rows to one CSR
   file of ``A'`` in the input order (``adj.indices`` + the ``O(n)`` row counts);
4. **partition**: ``none`` / ``random`` need only ``n``; ``ldg`` streams the
   CSR file in row chunks (:func:`spgnn.partition.ldg.ldg_stream`);
   ``metis`` / ``balanced`` load ``A'`` whole (they need it: for graphs
   that fit);
5. **bucket by part**: the CSR file is read again and each row, its columns
   renumbered, appended to its part's bucket (and its synthetic feature row
   to the part's feature bucket);
6. **write** each part from its buckets: CSR (indices sorted per row),
   degrees, the halo and its degrees (from the ``O(n)`` degree array), features,
   labels, masks, original ids (:func:`spgnn.io.shards.store_part`).

Peak memory: one text chunk, the ``O(n)`` arrays (degrees, the order and
its inverse, labels and masks: about 40 bytes per vertex), and one range or
part bucket at a time.  The arrays written equal those of the in-memory path
(:func:`spgnn.partition.to_shards.partition_to_shards` of the loaded graph
with the same features, labels, split, method and seed) bit for bit.

Writes are atomic per file and resumable: an interrupted run finds the
journal; if the part buckets were complete it writes the missing parts from
them, otherwise it starts the passes again (parts already written are kept).

Local, one process.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import ShardError
from ..io import shards as shard_io
from ..io._text import _stem
from ..io.edgelist_stream import DEFAULT_CHUNK_BYTES, iter_edge_chunks, scan_edge_list
from ..io.graph import Graph, vertex_split
from ..io.preprocess import SPARSE_DENSITY
from ..io.synthetic import (FEATURE_SPECS, _random_spec, check_feature_spec, check_label_spec,
                            synthetic_labels)
from ..layout import block_offsets
from ._common import perm_offsets
from .registry import PARTITIONERS, partition_graph
from .simple import random_parts

__all__ = ["edge_list_to_shards", "mtx_to_shards", "generator_to_shards", "STREAMING_METHODS"]

#: At most this many range buckets (pass 2); each holds about ``chunk_entries`` entries.
RANGE_BUCKETS_MAX = 4096

#: Methods that never hold the graph (``metis`` and ``balanced`` load ``A'`` whole).
STREAMING_METHODS = ("none", "random", "ldg")


def _append(path, array):
    with open(path, "ab") as f:
        np.ascontiguousarray(array).tofile(f)


class _Work:
    """The scratch folder ``DIR/.work`` and its file names."""

    def __init__(self, directory):
        self.root = Path(directory) / shard_io.WORK

    def reset(self):
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)

    def range_bucket(self, b):
        return self.root / f"range-{b:05d}.pairs"

    def part_cols(self, k):
        return self.root / f"part-{k:05d}.cols"

    def part_x(self, k):
        return self.root / f"part-{k:05d}.x"

    def range_w(self, b):               # weighted (MatrixMarket real/integer) files: values
        return self.root / f"range-{b:05d}.w"

    def range_dir(self, b):             # and directions (0: A's entry, 1: Aᵀ's)
        return self.root / f"range-{b:05d}.dir"

    def part_w(self, k):
        return self.root / f"part-{k:05d}.w"

    @property
    def indices(self):
        return self.root / "adj.indices"

    @property
    def data(self):
        return self.root / "adj.data"

    @property
    def deg(self):
        return self.root / "adj.deg.npy"

    @property
    def counts(self):
        return self.root / "adj.counts.npy"


def _range_bounds(raw_degree, nbuckets):
    """``nbuckets + 1`` vertex boundaries cutting the raw entries into about equal ranges."""
    n = raw_degree.size
    csum = np.cumsum(raw_degree)
    total = int(csum[-1]) if n else 0
    targets = (np.arange(1, nbuckets) * total) // max(nbuckets, 1)
    inner = np.searchsorted(csum, targets, side="right")
    return np.unique(np.concatenate([[0], inner, [n]])).astype(np.int64)


def _bucket_by_range(edges, work, bounds, itype, chunk_entries):
    """Pass 2: each edge, both directions, appended to the bucket of its source's range.

    ``edges`` yields ``(u, v)`` id arrays (a text chunk's pairs, a generator's
    chunk).  Pairs are gathered over chunks until about ``chunk_entries``, then
    sorted by bucket and appended with one write per bucket (so a graph of
    many buckets costs one file open per bucket and flush, not per chunk).
    """
    nb = bounds.size - 1
    for b in range(nb):
        work.range_bucket(b).write_bytes(b"")
    held, count = [], 0

    def flush():
        src = np.concatenate([h[0] for h in held])
        dst = np.concatenate([h[1] for h in held])
        held.clear()
        which = np.searchsorted(bounds, src, side="right") - 1
        order = np.argsort(which, kind="stable")
        cuts = np.searchsorted(which[order], np.arange(nb + 1))
        both = np.empty((src.size, 2), dtype=itype)
        both[:, 0] = src[order]
        both[:, 1] = dst[order]
        del src, dst, which, order
        for b in range(nb):
            if cuts[b + 1] > cuts[b]:
                _append(work.range_bucket(b), both[cuts[b]:cuts[b + 1]])

    for src, dst in edges:
        keep = src != dst
        u, v = src[keep].astype(itype), dst[keep].astype(itype)
        held.append((np.concatenate([u, v]), np.concatenate([v, u])))
        count += 2 * u.size
        del src, dst, u, v, keep
        if count >= chunk_entries:
            flush()
            count = 0
    if held:
        flush()


def _dedup_ranges(work, bounds, n, itype):
    """Pass 3: each range bucket sorted and de-duplicated into the CSR file of ``A'``."""
    counts = np.zeros(n, dtype=np.int64)
    work.indices.write_bytes(b"")
    for b in range(bounds.size - 1):
        lo, hi = int(bounds[b]), int(bounds[b + 1])
        pairs = np.fromfile(work.range_bucket(b), dtype=itype).reshape(-1, 2)
        key = (pairs[:, 0].astype(np.int64) - lo) * n
        key += pairs[:, 1]
        del pairs
        key.sort()
        if key.size:
            first = np.empty(key.size, dtype=bool)
            first[0] = True
            np.not_equal(key[1:], key[:-1], out=first[1:])
            key = key[first]
            del first
        rows = key // n
        counts[lo:hi] = np.bincount(rows, minlength=hi - lo)
        del rows
        _append(work.indices, (key % n).astype(itype))
        del key
        work.range_bucket(b).unlink()
    np.save(work.counts, counts)
    return counts


def _bucket_by_range_weighted(triples, work, bounds, itype, chunk_entries):
    """Pass 2 of a weighted graph: each entry ``(s, d, w)`` of A (float32 ``w``, a symmetric
    file's mirror included) appended to the bucket of ``s`` as A's (direction 0) and, off the
    diagonal, to the bucket of ``d`` as Aᵀ's (direction 1), in the order they come (so that
    duplicates sum in the same order on both sides)."""
    nb = bounds.size - 1
    for b in range(nb):
        for f in (work.range_bucket(b), work.range_w(b), work.range_dir(b)):
            f.write_bytes(b"")
    held, count = [], 0

    def flush():
        src, dst, w, dr = (np.concatenate([h[k] for h in held]) for k in range(4))
        held.clear()
        which = np.searchsorted(bounds, src, side="right") - 1
        order = np.argsort(which, kind="stable")
        cuts = np.searchsorted(which[order], np.arange(nb + 1))
        both = np.empty((src.size, 2), dtype=itype)
        both[:, 0] = src[order]
        both[:, 1] = dst[order]
        w, dr = w[order], dr[order]
        del src, dst, which, order
        for b in range(nb):
            a, e = cuts[b], cuts[b + 1]
            if e > a:
                _append(work.range_bucket(b), both[a:e])
                _append(work.range_w(b), w[a:e])
                _append(work.range_dir(b), dr[a:e])

    for src, dst, w in triples:
        off = src != dst
        u, v = src.astype(itype), dst.astype(itype)
        held.append((np.concatenate([u, v[off]]), np.concatenate([v, u[off]]),
                     np.concatenate([w, w[off]]),
                     np.concatenate([np.zeros(u.size, np.uint8), np.ones(int(off.sum()), np.uint8)])))
        count += held[-1][0].size
        del src, dst, w, u, v, off
        if count >= chunk_entries:
            flush()
            count = 0
    if held:
        flush()


def _sum_in_order(w, group, groups):
    """Float32 sums of ``w`` by ``group`` (ascending ids), each group's values added one after
    the other in the order they come, as scipy sums an adjacency's duplicates when
    :func:`spgnn.io.graph._build_adj` builds it (``numpy.add.reduceat`` adds in another order
    and can differ in the last bit)."""
    one = sp.csr_array((w, (group, np.zeros(group.size, dtype=np.int64))), shape=(groups, 1))
    one.sum_duplicates()
    out = np.zeros(groups, dtype=np.float32)
    out[np.repeat(np.arange(groups), np.diff(one.indptr))] = one.data
    return out


def _dedup_ranges_weighted(work, bounds, n, itype):
    """Pass 3 of a weighted graph: ``A' = max(A, Aᵀ)`` without its diagonal, range by range,
    as the in-memory path makes it (:func:`spgnn.io.preprocess.undirected_weights` of the
    loaded A): duplicates of A summed in float32, A's zeros dropped, then each pair's larger
    weight, absent counting 0, a 0 result no entry.  Appends the rows to the CSR files of
    ``A'`` (``adj.indices``, ``adj.data``).  Returns ``(counts, deg, stats)``: entries per row,
    GCN's degrees (float64 row sums of ``A' + I``, by scipy on each range's rows as
    :func:`spgnn.io.preprocess.gcn_degrees` sums the whole) and ``{"zeros": A's entries of
    weight 0, "min_weight": A's smallest weight}``."""
    counts = np.zeros(n, dtype=np.int64)
    deg = np.zeros(n, dtype=np.float64)
    zeros, low = 0, np.inf
    work.indices.write_bytes(b"")
    work.data.write_bytes(b"")
    for b in range(bounds.size - 1):
        lo, hi = int(bounds[b]), int(bounds[b + 1])
        pairs = np.fromfile(work.range_bucket(b), dtype=itype).reshape(-1, 2)
        w = np.fromfile(work.range_w(b), dtype=np.float32)
        k2 = (pairs[:, 0].astype(np.int64) - lo) * n
        k2 += pairs[:, 1]
        del pairs
        k2 *= 2
        k2 += np.fromfile(work.range_dir(b), dtype=np.uint8)
        order = np.argsort(k2, kind="stable")           # duplicates in the order they came
        k2, w = k2[order], w[order]
        del order
        if k2.size:
            new = np.concatenate([[True], k2[1:] != k2[:-1]])
            group = np.cumsum(new) - 1
            k2 = k2[new]
            del new
            sums = _sum_in_order(w, group, k2.size)
            del group
        else:
            sums = w
        del w
        mine = (k2 & 1) == 0                                # A's own entries (diagonal too)
        zeros += int(np.count_nonzero(sums[mine] == 0))
        if np.any(mine & (sums != 0)):
            low = min(low, float(sums[mine & (sums != 0)].min()))
        key = k2 >> 1
        keep = (sums != 0) & (key // n + lo != key % n)     # A's zeros and diagonal dropped
        key, sums, mine = key[keep], sums[keep], mine[keep]
        del k2, keep
        first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if key.size \
            else np.zeros(0, np.int64)
        slot = np.cumsum(np.concatenate([[False], key[1:] != key[:-1]])) if key.size \
            else np.zeros(0, np.int64)
        a = np.zeros(first.size, dtype=np.float32)
        t = np.zeros(first.size, dtype=np.float32)
        a[slot[mine]] = sums[mine]
        t[slot[~mine]] = sums[~mine]
        val = np.maximum(a, t)                              # scipy's maximum, absent = 0
        key = key[first]
        nz = val != 0
        key, val = key[nz], val[nz]
        del a, t, slot, first, sums, mine, nz
        rows = key // n
        c = np.bincount(rows, minlength=hi - lo)
        counts[lo:hi] = c
        cols = (key % n).astype(itype)
        del key, rows
        indptr = np.zeros(hi - lo + 1, dtype=np.int64)
        np.cumsum(c, out=indptr[1:])
        block = sp.csr_array((val.astype(np.float64), cols, indptr), shape=(hi - lo, n))
        block = block + sp.eye_array(hi - lo, n, k=lo, dtype=np.float64, format="csr")
        deg[lo:hi] = np.asarray(block.sum(axis=1)).ravel()
        del block
        _append(work.indices, cols)
        _append(work.data, val)
        del cols, val
        for f in (work.range_bucket(b), work.range_w(b), work.range_dir(b)):
            f.unlink()
    np.save(work.counts, counts)
    np.save(work.deg, deg)
    return counts, deg, {"zeros": zeros, "min_weight": 0.0 if low == np.inf else low}


def _csr_chunks(work, counts, itype, chunk_entries, data=False):
    """``(row0, indptr, indices)`` of the CSR file of ``A'``, read sequentially in row chunks
    (``data``: ``(row0, indptr, indices, values)``, a weighted graph's)."""
    n = counts.size
    isz = np.dtype(itype).itemsize
    ends = np.cumsum(counts)
    with open(work.indices, "rb") as f, (open(work.data, "rb") if data else _Nothing()) as fd:
        row0, pos = 0, 0
        while row0 < n:
            row1 = int(np.searchsorted(ends, pos + chunk_entries, side="right"))
            row1 = min(max(row1, row0 + 1), n)
            stop = int(ends[row1 - 1])
            f.seek(pos * isz)
            indices = np.fromfile(f, dtype=itype, count=stop - pos)
            indptr = np.empty(row1 - row0 + 1, dtype=np.int64)
            indptr[0] = pos
            indptr[1:] = ends[row0:row1]
            if data:
                fd.seek(pos * 4)
                yield row0, indptr, indices, np.fromfile(fd, dtype=np.float32, count=stop - pos)
            else:
                yield row0, indptr, indices
            row0, pos = row1, stop


class _Nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _pattern_chunks(work, counts, itype, chunk_entries, deg):
    """The row chunks of what the partitioner sees (:func:`spgnn.io.shards.partition_pattern`):
    ``A'``'s entries, less, on a weighted graph (``deg``), those of a row or column whose
    degree is not positive (``Â`` scales them to 0)."""
    for row0, indptr, indices in _csr_chunks(work, counts, itype, chunk_entries):
        if deg is not None:
            lens = np.diff(indptr)
            rows = np.repeat(np.arange(row0, row0 + lens.size), lens)
            keep = (deg[rows] > 0) & (deg[indices] > 0)
            if not keep.all():
                indices = indices[keep]
                indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep] - row0,
                                                                    minlength=lens.size))])
        yield row0, indptr, indices


def _order(method, parts, seed, n, counts, work, itype, chunk_entries, ldg_options, deg=None):
    """Pass 4: ``(perm, offsets)`` of the partition (``perm[new] = old``)."""
    if method == "none":
        return np.arange(n, dtype=np.int64), np.asarray(block_offsets(n, parts), dtype=np.int64)
    if method == "random":
        return perm_offsets(random_parts(n, parts, seed), parts)
    if method == "ldg":
        from .ldg import ldg_stream
        labels = ldg_stream(n, parts, lambda: _pattern_chunks(work, counts, itype, chunk_entries,
                                                              deg), **ldg_options)
        return perm_offsets(labels.astype(np.int64), parts)
    pieces = list(_pattern_chunks(work, counts, itype, chunk_entries, deg))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.concatenate([np.diff(p[1]) for p in pieces]) if pieces else counts,
              out=indptr[1:])
    indices = np.concatenate([p[2] for p in pieces]) if pieces else np.zeros(0, itype)
    del pieces
    pattern = sp.csr_array((np.ones(indices.size, dtype=np.float32), indices, indptr),
                           shape=(n, n))
    perm, offsets, _ = partition_graph(pattern, method, parts, seed)
    perm = np.arange(n, dtype=np.int64) if perm is None else np.asarray(perm, dtype=np.int64)
    return perm, np.asarray(offsets, dtype=np.int64)


class _Features:
    """Synthetic features of a spec, row range by row range (the in-memory arrays, in pieces)."""

    def __init__(self, spec, n, counts):
        check_feature_spec(spec, "--features")
        self.spec, self.n = spec, n
        self.dense = spec.startswith("random:")
        if self.dense:
            self.dim, seed = _random_spec(spec, "features", FEATURE_SPECS[0])
            self.rng = np.random.default_rng([seed, 1])
        elif spec == "degree":
            self.col = np.floor(np.log2(1.0 + counts)).astype(np.int64)
            self.dim = int(self.col.max()) + 1 if n else 1
        else:
            self.dim = n
        self.nonzero = 0

    def rows(self, lo, hi):
        """Dense float32 rows ``lo:hi`` (random features only: drawn in order, once)."""
        x = self.rng.random((hi - lo, self.dim), dtype=np.float32)
        self.nonzero += int(np.count_nonzero(x))
        return x

    def sparse_rows(self, ids):
        """``x_indptr``, ``x_indices``, ``x_data`` of the rows ``ids`` (degree / onehot)."""
        cols = self.col[ids] if self.spec == "degree" else np.asarray(ids, dtype=np.int64)
        return {"x_indptr": np.arange(ids.size + 1, dtype=np.int64),
                "x_indices": cols.astype(np.int64),
                "x_data": np.ones(ids.size, dtype=np.float32)}

    @property
    def form(self):
        if not self.dense:
            return "csr"
        size = self.n * self.dim
        return "csr" if size and self.nonzero <= SPARSE_DENSITY * size else "dense"


def _bucket_by_part(work, counts, parts_of, inv, nparts, itype, chunk_entries, feats,
                    weighted=False):
    """Pass 5: rows of ``A'`` (columns renumbered; ``weighted``: and their values) and feature
    rows appended to their part's buckets."""
    for k in range(nparts):
        work.part_cols(k).write_bytes(b"")
        if weighted:
            work.part_w(k).write_bytes(b"")
        if feats.dense:
            work.part_x(k).write_bytes(b"")
    for row0, indptr, indices, *vals in _csr_chunks(work, counts, itype, chunk_entries,
                                                    data=weighted):
        row1 = row0 + indptr.size - 1
        rp = parts_of[row0:row1]
        ep = np.repeat(rp, np.diff(indptr))
        order = np.argsort(ep, kind="stable")
        cols = inv[indices[order]].astype(itype)
        w = vals[0][order] if weighted else None
        cuts = np.searchsorted(ep[order], np.arange(nparts + 1))
        del ep, order, vals
        for k in range(nparts):
            if cuts[k + 1] > cuts[k]:
                _append(work.part_cols(k), cols[cuts[k]:cuts[k + 1]])
                if weighted:
                    _append(work.part_w(k), w[cuts[k]:cuts[k + 1]])
        del cols, w
        if feats.dense:
            x = feats.rows(row0, row1)
            rorder = np.argsort(rp, kind="stable")
            rcuts = np.searchsorted(rp[rorder], np.arange(nparts + 1))
            for k in range(nparts):
                if rcuts[k + 1] > rcuts[k]:
                    _append(work.part_x(k), x[rorder[rcuts[k]:rcuts[k + 1]]])
            del x


def _row_chunks(indptr, chunk_entries):
    """``(row0, row1)`` ranges of about ``chunk_entries`` entries (at least one row each)."""
    r, row0 = indptr.size - 1, 0
    while row0 < r:
        row1 = int(np.searchsorted(indptr, indptr[row0] + chunk_entries, side="right")) - 1
        row1 = min(max(row1, row0 + 1), r)
        yield row0, row1
        row0 = row1


def _sort_rows(indptr, indices, n, chunk_entries):
    """Sort each row's column ids in place, a few rows at a time (bounded extra memory)."""
    for row0, row1 in _row_chunks(indptr, chunk_entries):
        a, b = int(indptr[row0]), int(indptr[row1])
        if b > a:
            rows = np.repeat(np.arange(row1 - row0, dtype=np.int64), np.diff(indptr[row0:row1 + 1]))
            key = rows * n
            del rows
            key += indices[a:b]
            key.sort()
            indices[a:b] = key % n
            del key


def _sort_rows_weighted(indptr, indices, vals, n, chunk_entries):
    """:func:`_sort_rows` moving each entry's value with it."""
    for row0, row1 in _row_chunks(indptr, chunk_entries):
        a, b = int(indptr[row0]), int(indptr[row1])
        if b > a:
            rows = np.repeat(np.arange(row1 - row0, dtype=np.int64), np.diff(indptr[row0:row1 + 1]))
            key = rows * n
            del rows
            key += indices[a:b]
            order = np.argsort(key, kind="stable")
            indices[a:b] = key[order] % n
            vals[a:b] = vals[a:b][order]
            del key, order


def _halo(indices, lo, hi, n, seen=None):
    """The sorted distinct column ids outside ``lo:hi`` (int64), marking them in an ``n``-byte
    mask ``seen`` (give the same mask over a part's chunks, then call with ``indices=None``)."""
    seen = np.zeros(n, dtype=bool) if seen is None else seen
    if indices is not None:
        seen[indices[(indices < lo) | (indices >= hi)]] = True
        return seen
    return np.flatnonzero(seen).astype(np.int64)


def _part_arrays(work, k, lo, hi, n, perm, counts, itype, feats, labels, masks, chunk_entries,
                 deg=None):
    """Part ``k``'s arrays from its buckets (those of ``shards._part_arrays``), made one at a
    time as they are written (:class:`spgnn.io.shards.LazyArrays`).  ``deg``: a weighted
    graph's degrees (its values are in the part's ``.w`` bucket); None: unweighted, ``counts
    + 1``."""
    ids = perm[lo:hi]
    # the buckets hold the part's rows in increasing original id
    arrival = np.argsort(ids, kind="stable")
    in_order = bool(np.all(arrival == np.arange(ids.size)))
    rc = counts[ids]
    indptr = np.zeros(ids.size + 1, dtype=np.int64)
    np.cumsum(rc, out=indptr[1:])
    nnz = int(indptr[-1])
    kept = {}

    weighted = deg is not None

    def indices():
        cols = np.fromfile(work.part_cols(k), dtype=itype)
        vals = np.fromfile(work.part_w(k), dtype=np.float32) if weighted else None
        if cols.size != nnz or (weighted and vals.size != nnz):
            raise ShardError(f"{work.part_cols(k)}: holds {cols.size} entries, expected {nnz} "
                             f"(a damaged scratch file; run again)")
        if not in_order:        # rows arrived by original id: put them in the part's order
            src = np.zeros(ids.size + 1, dtype=np.int64)
            np.cumsum(rc[arrival], out=src[1:])
            where = np.empty_like(arrival)
            where[arrival] = np.arange(arrival.size)
            take = np.repeat(src[where] - indptr[:-1], rc) + np.arange(nnz, dtype=np.int64)
            cols = cols[take]
            vals = vals[take] if weighted else None
            del take
        if weighted:
            _sort_rows_weighted(indptr, cols, vals, n, chunk_entries)
            kept["data"] = vals
        else:
            _sort_rows(indptr, cols, n, chunk_entries)
        kept["halo"] = _halo(None, lo, hi, n, _halo(cols, lo, hi, n))
        return cols

    def x():
        rows = np.fromfile(work.part_x(k), dtype=np.float32).reshape(-1, feats.dim)
        if rows.shape[0] != ids.size:
            raise ShardError(f"{work.part_x(k)}: holds {rows.shape[0]} feature rows, expected "
                             f"{ids.size} (a damaged scratch file; run again)")
        return rows if in_order else np.ascontiguousarray(rows[np.argsort(arrival)])

    def indices_pieces():     # rows in order: read, sort and scan the bucket a chunk at a time
        seen = np.zeros(n, dtype=bool)
        with open(work.part_cols(k), "rb") as f:
            for r0, r1 in _row_chunks(indptr, chunk_entries):
                a, b = int(indptr[r0]), int(indptr[r1])
                cols = np.fromfile(f, dtype=itype, count=b - a)
                if cols.size != b - a:
                    raise ShardError(f"{work.part_cols(k)}: ends early (a damaged scratch "
                                     f"file; run again)")
                _sort_rows(indptr[r0:r1 + 1] - a, cols, n, chunk_entries)
                _halo(cols, lo, hi, n, seen)
                yield cols
        kept["halo"] = _halo(None, lo, hi, n, seen)
        del seen

    def x_pieces():
        rows_per = max(1, (chunk_entries * 4) // max(4 * feats.dim, 1))
        with open(work.part_x(k), "rb") as f:
            for r0 in range(0, ids.size, rows_per):
                r1 = min(r0 + rows_per, ids.size)
                yield np.fromfile(f, dtype=np.float32, count=(r1 - r0) * feats.dim) \
                    .reshape(-1, feats.dim)

    def ones():
        for a in range(0, nnz, chunk_entries):
            yield np.ones(min(chunk_entries, nnz - a), dtype=np.float32)

    out = shard_io.LazyArrays()
    out["indptr"] = indptr
    if in_order and not weighted:
        out["indices"] = shard_io.Chunked(itype, (nnz,), indices_pieces)
    else:
        out["indices"] = indices
    if weighted:                # made with the indices (sorted with them)
        out["data"] = lambda: kept.pop("data")
        out["deg"] = lambda: deg[ids]
        out["halo"] = lambda: kept["halo"]
        out["halo_deg"] = lambda: deg[perm[kept.pop("halo")]]
    else:
        out["data"] = shard_io.Chunked(np.float32, (nnz,), ones)
        out["deg"] = lambda: rc.astype(np.float64) + 1.0
        out["halo"] = lambda: kept["halo"]
        out["halo_deg"] = lambda: counts[perm[kept.pop("halo")]].astype(np.float64) + 1.0
    if feats.dense:
        out["x"] = shard_io.Chunked(np.float32, (ids.size, feats.dim), x_pieces) if in_order \
            else x
    else:
        out.update(feats.sparse_rows(ids))
    out["label"] = lambda: labels[ids]
    for name, m in zip(("train", "val", "test"), masks):
        out[name] = (lambda m=m: m[ids])
    out["orig"] = lambda: ids.astype(np.int64)
    return out


class _SpecFeatures(_Features):
    """A generator spec's own features (``sbm:`` / ``plsbm:``), row range by row range."""

    def __init__(self, generator):
        self.spec, self.n = generator.text, generator.n
        self.generator, self.dense, self.dim, self.nonzero = generator, True, \
            generator.num_features, 0

    def rows(self, lo, hi):
        x = self.generator.features(lo, hi)
        self.nonzero += int(np.count_nonzero(x))
        return x


def _stratified_masks(n, labels, split, split_seed):
    g = Graph(adj=sp.csr_array((n, n), dtype=np.float32), labels=labels)
    g = g.random_split(*split, seed=split_seed)
    return g.train_mask, g.val_mask, g.test_mask


class _SyntheticNodeData:
    """The node data of a text source (edge list, MatrixMarket): labels, masks and features
    from ``--labels`` / ``--split`` / ``--features`` (the file has none)."""

    def labels(self):
        return synthetic_labels(self.n, self.label_spec)

    def masks(self, labels):
        return _stratified_masks(self.n, labels, self.split, self.split_seed)

    def features(self, counts):
        return _Features(self.feature_spec, self.n, counts)


class _EdgeListSource(_SyntheticNodeData):
    """A text edge list: scanned once (``n``, lines, CRC-32, raw degrees), then read in chunks;
    synthetic features and labels, a stratified random split."""

    def __init__(self, path, *, num_nodes, chunk_bytes, comment, features, labels, split,
                 split_seed):
        if features is None or labels is None:
            raise ValueError(f"partition: the edge list {path} has no features or labels; give "
                             f"--features and --labels specs (e.g. --features random:32 "
                             f"--labels random:4)")
        check_feature_spec(features, "--features")
        check_label_spec(labels, "--labels", alone=True)
        self.path, self.text, self.name = path, path, _stem(path)
        self.chunk_bytes, self.comment = chunk_bytes, comment
        self.feature_spec, self.label_spec = features, labels
        self.split, self.split_seed = split, split_seed
        scan = scan_edge_list(path, num_nodes=num_nodes, chunk_bytes=chunk_bytes,
                              comment=comment)
        self.n, self.lines, self.raw_degree = scan.n, scan.lines, scan.raw_degree
        self.identity = {"lines": scan.lines, "crc32": scan.crc32}

    def bounds(self, nbuckets):
        bounds = _range_bounds(self.raw_degree, nbuckets)
        self.raw_degree = None
        return bounds

    def edges(self):
        for pairs, _ in iter_edge_chunks(self.path, chunk_bytes=self.chunk_bytes,
                                         comment=self.comment):
            yield pairs[:, 0], pairs[:, 1]


class _MatrixMarketSource(_SyntheticNodeData):
    """A MatrixMarket coordinate file with its banner (:mod:`spgnn.io.mtx_stream`): scanned
    once (the checks, ``n`` from the size line, entries, CRC-32, raw degrees), then read in
    chunks.  ``pattern``: the edges of an edge list (a symmetric file's mirror adds nothing
    ``A'`` lacks); ``real`` / ``integer``: the weighted passes (``weighted``).  Synthetic
    features and labels, a stratified random split, as an edge list."""

    def __init__(self, path, *, chunk_bytes, features, labels, split, split_seed):
        import zlib

        from ..io.mtx_stream import iter_mtx_chunks

        if features is None or labels is None:
            raise ValueError(f"partition: the MatrixMarket file {path} has no features or "
                             f"labels; give --features and --labels specs (e.g. --features "
                             f"random:32 --labels random:4)")
        check_feature_spec(features, "--features")
        check_label_spec(labels, "--labels", alone=True)
        self.path, self.text, self.name = path, path, _stem(path)
        self.chunk_bytes = chunk_bytes
        self.feature_spec, self.label_spec = features, labels
        self.split, self.split_seed = split, split_seed
        chunks = iter_mtx_chunks(path, chunk_bytes=chunk_bytes)
        head = next(chunks)
        self.n, self.weighted, self.symmetry = head.n, head.weighted, head.symmetry
        deg = np.zeros(self.n, dtype=np.int64)
        crc, lines = 0, 0
        for rows, cols, vals, _ in chunks:
            for a in (rows, cols) if vals is None else (rows, cols, vals):
                crc = zlib.crc32(a.tobytes(), crc)
            deg += np.bincount(rows, minlength=self.n)
            deg += np.bincount(cols, minlength=self.n)
            lines += rows.size
        self.lines, self.raw_degree = lines, deg
        self.identity = {"lines": lines, "crc32": f"{crc:08x}",
                         "mtx": f"{head.field} {head.symmetry}"}

    def bounds(self, nbuckets):
        bounds = _range_bounds(self.raw_degree, nbuckets)
        self.raw_degree = None
        return bounds

    def _chunks(self):
        from ..io.mtx_stream import iter_mtx_chunks

        chunks = iter_mtx_chunks(self.path, chunk_bytes=self.chunk_bytes)
        next(chunks)
        return chunks

    def edges(self):
        for rows, cols, _, _ in self._chunks():
            yield rows, cols

    def triples(self):
        """A's entries ``(s, d, float32 w)`` chunk by chunk, as the in-memory reader builds A:
        values cast to float32, a symmetric file's off-diagonal entries mirrored (negated when
        skew-symmetric)."""
        sign = -1.0 if self.symmetry == "skew-symmetric" else 1.0
        for rows, cols, vals, _ in self._chunks():
            w = np.asarray(vals, dtype=np.float32)
            if self.symmetry != "general":
                off = rows != cols
                mirror = np.asarray(sign * vals[off], dtype=np.float32)
                rows, cols = np.concatenate([rows, cols[off]]), np.concatenate([cols, rows[off]])
                w = np.concatenate([w, mirror])
            yield rows, cols, w


class _GeneratorSource:
    """A generator spec drawn chunk by chunk (:class:`spgnn.io.generators.GeneratorSpec`): the
    graph ``load_graph(spec)`` builds, never held.  Its own features, labels and per-vertex
    split (sbm kinds) unless ``--features`` / ``--labels`` / ``--split`` replace them."""

    def __init__(self, spec, *, features, labels, split, split_seed):
        from ..io.generators import parse_spec

        self.generator = g = parse_spec(spec)
        if g is None:
            raise ValueError(f"partition: {spec!r} is not a generator spec")
        if not g.has_data and (features is None or labels is None):
            raise ValueError(f"partition: {spec} has no features or labels; give --features and "
                             f"--labels specs (e.g. --features random:32 --labels random:4)")
        if features is not None:
            check_feature_spec(features, "--features")
        if labels is not None:
            check_label_spec(labels, "--labels", alone=True)
        self.text = self.name = spec
        self.n, self.lines = g.n, g.m
        self.feature_spec, self.label_spec = features, labels
        self.split, self.split_seed = split, split_seed
        self.identity = {"generator": spec, "lines": g.m}

    def bounds(self, nbuckets):
        # even vertex ranges: a generator's degrees do not depend on the id (R-MAT's ids are
        # scrambled, the SBMs draw weights per vertex), so the ranges hold about equal entries
        return np.unique(np.asarray(block_offsets(self.n, nbuckets), dtype=np.int64))

    def edges(self):
        for i in range(self.generator.chunks):
            yield self.generator.chunk(i)

    def labels(self):
        if self.label_spec is None:
            return self.generator.labels(0, self.n)
        return synthetic_labels(self.n, self.label_spec)

    def masks(self, labels):
        if self.split is None and self.generator.has_data:
            # load_graph's rule for a generated graph (the per-vertex split, seeded by the
            # spec), kept by the in-memory path when --labels replaces the labels
            return vertex_split(None, 0, self.n, seed=self.generator.seed)
        return _stratified_masks(self.n, labels, self.split or (0.6, 0.2), self.split_seed)

    def features(self, counts):
        if self.feature_spec is None:
            return _SpecFeatures(self.generator)
        return _Features(self.feature_spec, self.n, counts)


def _warn_zeros(label, zeros):
    """The in-memory reader's warning: entries of weight 0 are no edges (dropped)."""
    if zeros:
        import warnings

        from ..errors import SpgnnDataWarning

        warnings.warn(f"{label}: {zeros:,} stored entr{'y' if zeros == 1 else 'ies'} of weight 0 "
                      f"dropped: a weight of 0 is no edge", SpgnnDataWarning, stacklevel=3)


def _check_args(method, parts):
    if method not in PARTITIONERS:
        raise ValueError(f"partition: unknown method {method!r}; expected one of "
                         f"{tuple(PARTITIONERS)}")
    if isinstance(parts, (bool, np.bool_)) or int(parts) != parts or int(parts) < 1:
        raise ValueError(f"partition: parts must be an integer >= 1, but got {parts!r}")
    return int(parts)


def edge_list_to_shards(path, directory, parts, method="ldg", seed=0, *, features, labels,
                        split=(0.6, 0.2), split_seed=0, num_nodes=None, name=None,
                        source=None, chunk_bytes=DEFAULT_CHUNK_BYTES, chunk_entries=1 << 20,
                        comment="#", ldg_options=None, progress=None, stages=None) -> dict:
    """Partition the text edge list ``path`` into ``parts`` shards in bounded memory. Local.

    Parameters
    ----------
    path : a SNAP-style edge list (:func:`spgnn.io.load_snap_edgelist`'s format), plain or gzip.
    directory, parts, method, seed : as :func:`spgnn.partition.to_shards.partition_to_shards`;
        ``method`` a key of :data:`spgnn.partition.PARTITIONERS` (``metis`` and
        ``balanced`` hold ``A'`` whole; the others never hold the graph).
    features, labels : str
        Synthetic specs (``random:F[:SEED]``, ``degree``, ``onehot``;
        ``random:C[:SEED]``): an edge list has neither.
    split : (train, val) fractions of the stratified random split (``Graph.random_split``).
    num_nodes : int, optional
        The vertex count (``--num-nodes``), else the largest id + 1.
    chunk_bytes : text per parsed chunk; chunk_entries : CSR entries per row chunk.
    ldg_options : dict, optional
        ``passes`` and ``slack`` of :func:`spgnn.partition.ldg.ldg_stream`.
    progress : callable, optional
        ``progress(k, kept)`` after each part.
    stages : dict, optional
        Filled with seconds per pass (scan, range, dedup, partition, bucket, write).

    Returns the manifest.  Raises GraphFormatError / InputTooLarge for a bad
    file, ValueError for bad arguments, ShardError for a ``directory`` holding
    something else.
    """
    parts = _check_args(method, parts)
    clock = time.perf_counter()
    src = _EdgeListSource(path, num_nodes=num_nodes, chunk_bytes=chunk_bytes, comment=comment,
                          features=features, labels=labels, split=split, split_seed=split_seed)
    if stages is not None:
        stages["scan"] = round(time.perf_counter() - clock, 3)
    return _stream_to_shards(src, directory, parts, method, seed, name=name, source_text=source,
                             chunk_entries=chunk_entries, ldg_options=ldg_options,
                             progress=progress, stages=stages)


def mtx_to_shards(path, directory, parts, method="ldg", seed=0, *, features, labels,
                  split=(0.6, 0.2), split_seed=0, name=None, source=None,
                  chunk_bytes=DEFAULT_CHUNK_BYTES, chunk_entries=1 << 20, ldg_options=None,
                  progress=None, stages=None) -> dict:
    """Partition the MatrixMarket coordinate file ``path`` into ``parts`` shards in bounded
    memory. Local.

    ``path``: a ``.mtx`` (or ``.mtx.gz``) file with its banner, ``pattern``,
    ``real``, ``integer`` or ``double``, ``general``, ``symmetric`` or
    ``skew-symmetric`` (:mod:`spgnn.io.mtx_stream` reads it in chunks with
    the checks of :func:`spgnn.io.mtx.load_matrix_market`).  The shards equal
    the in-memory path's (``spgnn partition --in-memory``: the loaded graph
    through :func:`spgnn.partition.to_shards.partition_to_shards`) array for
    array: a pattern file takes the passes of an edge list; a weighted one
    carries its values through them (``A' = max(A, Aᵀ)`` of the summed
    entries, its float32 values and float64 degrees).  Where three or more
    entries of one weighted (row, column) pair are not exact in float32, their
    sum may differ in the last bit (the in-memory reader's summation order is
    scipy's).  Other parameters as :func:`edge_list_to_shards` (no
    ``num_nodes``: the size line gives ``n``).  A weight of 0 dropped warns
    (:class:`~spgnn.errors.SpgnnDataWarning`) as the in-memory reader does.
    """
    parts = _check_args(method, parts)
    clock = time.perf_counter()
    src = _MatrixMarketSource(path, chunk_bytes=chunk_bytes, features=features, labels=labels,
                              split=split, split_seed=split_seed)
    if stages is not None:
        stages["scan"] = round(time.perf_counter() - clock, 3)
    return _stream_to_shards(src, directory, parts, method, seed, name=name, source_text=source,
                             chunk_entries=chunk_entries, ldg_options=ldg_options,
                             progress=progress, stages=stages)


def generator_to_shards(spec, directory, parts, method="random", seed=0, *, features=None,
                        labels=None, split=None, split_seed=0, name=None, chunk_entries=1 << 20,
                        ldg_options=None, progress=None, stages=None) -> dict:
    """Partition the generated graph of ``spec`` (``rmat:`` / ``sbm:`` / ``plsbm:``) into
    ``parts`` shards without ever holding it. Local.

    The edges are drawn chunk by chunk (the chunks ``train --graph SPEC``'s
    ranks draw, :mod:`spgnn.io.generators`) and take the streaming passes of
    :func:`edge_list_to_shards`; the shards equal those of the in-memory path
    (``spgnn partition --in-memory``: ``load_graph(spec)``, then
    :func:`spgnn.partition.to_shards.partition_to_shards`) array for array.
    An SBM spec brings its features, labels and per-vertex split; ``features`` /
    ``labels`` specs replace them (``rmat:`` needs both), ``split`` (train,
    val) draws a stratified random split instead.  Other parameters as
    :func:`edge_list_to_shards`; ``method`` ``metis`` / ``balanced`` hold
    ``A'`` whole.
    """
    parts = _check_args(method, parts)
    src = _GeneratorSource(spec, features=features, labels=labels, split=split,
                           split_seed=split_seed)
    return _stream_to_shards(src, directory, parts, method, seed, name=name, source_text=None,
                             chunk_entries=chunk_entries, ldg_options=ldg_options,
                             progress=progress, stages=stages)


def _stream_to_shards(source, directory, parts, method, seed, *, name, source_text,
                      chunk_entries, ldg_options, progress, stages):
    """The passes after the scan (module docstring) for an edge source. Local."""
    stages = {} if stages is None else stages
    clock = [time.perf_counter()]

    def lap(stage):
        now = time.perf_counter()
        stages[stage] = round(stages.get(stage, 0.0) + now - clock[0], 3)
        clock[0] = now

    n = source.n
    if parts > max(n, 1):
        raise ValueError(f"write_shards: {parts} parts of a graph of {n} vertices; parts must be "
                         f"at most the vertex count")
    split = source.split
    fp = {"format": shard_io.FORMAT, "version": shard_io.VERSION, "stream": True, "n": n,
          **source.identity, "parts": parts, "method": str(method),
          "seed": int(seed), "features": source.feature_spec, "labels": source.label_spec,
          "split": None if split is None else [float(s) for s in split],
          "split_seed": int(source.split_seed),
          "ldg": dict(ldg_options or {}) if method == "ldg" else None}
    directory = Path(directory)
    state = shard_io.begin_write(directory, fp)
    if isinstance(state, dict) and state.get("format") == shard_io.FORMAT:
        return state
    work = _Work(directory)
    itype = np.int32 if n < 2**31 else np.int64
    label_arr = source.labels()
    masks = source.masks(label_arr)
    weighted = getattr(source, "weighted", False)
    deg = None
    resumed = (state is not None and state.get("stage") == "buckets"
               and (directory / shard_io.ORDER).exists() and work.counts.exists()
               and (not weighted or work.deg.exists()))
    if resumed:
        perm = np.load(directory / shard_io.ORDER)
        offsets = [int(v) for v in state["offsets"]]
        counts = np.load(work.counts)
        deg = np.load(work.deg) if weighted else None
        min_weight = float(state.get("min_edge_weight", 1.0 if source.lines else 0.0))
        feats = source.features(counts)
        feats.nonzero = int(state.get("feature_nonzero", 0))
    else:
        work.reset()
        # a weighted entry is written once per direction, a symmetric file's twice more
        per_line = (4 if getattr(source, "symmetry", "general") != "general" else 2) \
            if weighted else 2
        nb = int(min(RANGE_BUCKETS_MAX, max(1, -(-per_line * source.lines // chunk_entries))))
        bounds = source.bounds(nb)
        if weighted:
            _bucket_by_range_weighted(source.triples(), work, bounds, itype, chunk_entries)
        else:
            _bucket_by_range(source.edges(), work, bounds, itype, chunk_entries)
        lap("range")
        if weighted:
            counts, deg, wstats = _dedup_ranges_weighted(work, bounds, n, itype)
            min_weight = wstats["min_weight"]
            _warn_zeros(source.text, wstats["zeros"])
        else:
            counts = _dedup_ranges(work, bounds, n, itype)
            min_weight = 1.0 if source.lines else 0.0
        lap("dedup")
        perm, offsets = _order(method, parts, seed, n, counts, work, itype, chunk_entries,
                               dict(ldg_options or {}), deg)
        offsets = [int(v) for v in offsets]
        lap("partition")
        shard_io.atomic_write(directory / shard_io.ORDER, lambda f: np.save(f, perm))
        files = {} if state is None else state.get("files", {})
        state = {"fingerprint": fp, "offsets": offsets, "files": files}
        shard_io._journal(directory, state)
        parts_of = np.empty(n, dtype=np.int32)
        for k in range(parts):
            parts_of[perm[offsets[k]:offsets[k + 1]]] = k
        inv = np.empty(n, dtype=itype)
        inv[perm] = np.arange(n, dtype=itype)
        feats = source.features(counts)
        _bucket_by_part(work, counts, parts_of, inv, parts, itype, chunk_entries, feats,
                        weighted)
        del parts_of, inv
        work.indices.unlink()
        if weighted:
            work.data.unlink()
        state["stage"] = "buckets"
        state["feature_nonzero"] = feats.nonzero
        state["min_edge_weight"] = min_weight
        shard_io._journal(directory, state)
        lap("bucket")
    entries = []
    for k in range(parts):
        lo, hi = offsets[k], offsets[k + 1]
        done = shard_io.kept_part(directory, state, k)
        kept = done is not None
        if not kept:
            arrays = _part_arrays(work, k, lo, hi, n, perm, counts, itype, feats, label_arr,
                                  masks, chunk_entries, deg)
            done = shard_io.store_part(directory, k, lo, hi, arrays, state)
            del arrays
        entries.append(done)
        for f in (work.part_cols(k), work.part_x(k), work.part_w(k)):
            try:
                f.unlink()
            except OSError:
                pass
        if progress:
            progress(k, kept)
    lap("write")
    man = shard_io.manifest(
        name=name or source.name, source=source.text if source_text is None else source_text,
        n=n,
        num_features=feats.dim, num_classes=int(max(label_arr.max(initial=-1), -1)) + 1,
        nnz=int(counts.sum()), parts=parts, offsets=offsets, method=method, seed=seed,
        feature_form=feats.form, features_stored="dense" if feats.dense else "csr",
        min_edge_weight=min_weight,
        counts={k: int(m.sum()) for k, m in zip(("train", "val", "test"), masks)},
        fingerprint=fp, files=entries)
    shard_io.finish_write(directory, man)
    shutil.rmtree(work.root, ignore_errors=True)
    return man
