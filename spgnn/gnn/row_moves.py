"""Move rows the ranks already hold to the rows another layout needs: :func:`move_rows`.

``--algo auto`` on a generator spec or a shard directory ranks from 1D row
blocks (each rank draws or reads rows ``off[r]:off[r+1]``).  When it chooses
1.5D or 3D, each rank needs other rows (``row_span`` of the chosen
placement: a 1.5D replica row block, the union of a 3D rank's blocks).
Instead of drawing or reading them a second time, the ranks send each other
the rows they hold: one ``alltoallv`` of fixed-width row records (the
per-row values and each row's entry counts), one of Â's entries (column,
value), one of the feature entries when the features are sparse and, for
shards, one of the degrees of the columns the moved rows touch (a
generator's block already knows every vertex's degree).  Label
``gnn-setup:move-rows``.  The result is the
:class:`~spgnn.io.shards.RowBlock` a fresh draw or read of those rows makes,
entry for entry (same order, dtypes and values), so what is placed from it,
and training, are bit for bit the same.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..io.shards import RowBlock

__all__ = ["move_rows", "LABEL"]

LABEL = "gnn-setup:move-rows"


def _form(block, adj_only):
    """What every rank's block must share for one record layout (compared across ranks)."""
    a = block.adj
    x = block.x
    sparse_x = hasattr(x, "tocsr")
    return (int(a.shape[1]), str(a.indices.dtype), str(a.data.dtype),
            None if adj_only else (sparse_x, str(x.dtype), int(x.shape[1]),
                                   str(x.indices.dtype) if sparse_x else None,
                                   str(block.label.dtype), str(block.orig.dtype)))


def _plan(spans, targets):
    """``[(dest, lo, hi)]`` per source rank: the rows each sends to each rank, or None when the
    held rows are not disjoint ascending ranges covering every target row."""
    at = 0
    for lo, hi in spans:
        if hi < lo or (hi > lo and lo < at):
            return None
        at = max(at, hi)
    for tlo, thi in targets:
        covered = sum(max(0, min(hi, thi) - max(lo, tlo)) for lo, hi in spans)
        if covered != max(0, thi - tlo):
            return None
    return [[(d, max(lo, tlo), min(hi, thi)) for d, (tlo, thi) in enumerate(targets)
             if min(hi, thi) > max(lo, tlo)] for lo, hi in spans]


def _row_dtype(form, adj_only):
    fields = [("adj_len", np.int64), ("deg", np.float64)]
    if not adj_only:
        sparse_x, x_dtype, f, _, label_dtype, orig_dtype = form[3]
        fields += [("label", label_dtype), ("train", bool), ("val", bool), ("test", bool),
                   ("orig", orig_dtype)]
        fields += [("x_len", np.int64)] if sparse_x else [("x", x_dtype, (f,))]
    return np.dtype(fields)


def _entries(indices, data, idx_dtype, val_dtype):
    out = np.empty(indices.size, dtype=[("col", idx_dtype), ("val", val_dtype)])
    out["col"], out["val"] = indices, data
    return out


def _alltoallv_records(comm, records, counts, recvcounts=None):
    """A structured array through ``alltoallv`` as raw bytes (one row per record)."""
    raw = np.ascontiguousarray(records).view(np.uint8).reshape(len(records), records.dtype.itemsize)
    got = comm.alltoallv(raw, counts, recvcounts, label=LABEL)
    return np.ascontiguousarray(got).view(records.dtype).reshape(-1)


def move_rows(comm, block, lo, hi, *, adj_only=False):
    """This rank's rows ``lo:hi``, sent by the ranks holding them: a RowBlock, or None. Collective.

    ``block``: the :class:`~spgnn.io.shards.RowBlock` this rank holds (rows
    ``block.lo:block.hi``; every rank passes one); the ranks' held ranges
    must be disjoint and ascending in rank order and cover every rank's
    ``lo:hi`` (ranges may overlap between receivers: 1.5D replicas).
    ``adj_only``: move ``A'``'s rows and degrees only (``spmm``), the other
    fields of the result are empty.  Returns None on every rank, without
    moving anything, when the held ranges or the blocks' dtypes do not allow
    it (the caller then draws or reads the rows).  The result's ``files`` are
    the part files this rank read for ``block``.
    """
    form = _form(block, adj_only)
    n = form[0]
    full_deg = block._keys is not None and block._keys.size == n
    info = comm.allgather_obj(((int(block.lo), int(block.hi)), (int(lo), int(hi)), form,
                               full_deg), label=LABEL)
    spans = [i[0] for i in info]
    targets = [i[1] for i in info]
    plan = _plan(spans, targets)
    if plan is None or any(i[2] != form for i in info):
        return None
    full_deg = all(i[3] for i in info)
    me = plan[comm.rank]
    rdt = _row_dtype(form, adj_only)
    a = block.adj
    x = None if adj_only else block.x
    sparse_x = not adj_only and form[3][0]
    # 1. row records: per-row values and entry counts, to each receiver in rank order
    pieces, counts = [], [0] * comm.size
    for d, r0, r1 in me:
        s0, s1 = r0 - block.lo, r1 - block.lo
        rec = np.empty(s1 - s0, dtype=rdt)
        rec["adj_len"] = np.diff(a.indptr[s0:s1 + 1])
        rec["deg"] = block.deg[s0:s1]
        if not adj_only:
            for name in ("label", "train", "val", "test", "orig"):
                rec[name] = getattr(block, name)[s0:s1]
            if sparse_x:
                rec["x_len"] = np.diff(x.indptr[s0:s1 + 1])
            else:
                rec["x"] = x[s0:s1]
        pieces.append(rec)
        counts[d] = s1 - s0
    recv = [max(0, min(sh, hi) - max(sl, lo)) for sl, sh in spans]
    sources = [s for s, c in enumerate(recv) if c]
    rows = _alltoallv_records(comm, np.concatenate(pieces) if pieces else np.empty(0, rdt),
                              counts, recv)
    del pieces

    def send_entries(csr, idx_dtype, val_dtype, lens_field):
        out, cnt = [], [0] * comm.size
        for d, r0, r1 in me:
            e0, e1 = csr.indptr[r0 - block.lo], csr.indptr[r1 - block.lo]
            out.append(_entries(csr.indices[e0:e1], csr.data[e0:e1], idx_dtype,
                                val_dtype))
            cnt[d] = int(e1 - e0)
        want = [0] * comm.size
        at = 0
        for s in sources:                     # rows arrive in source order
            want[s] = int(rows[lens_field][at:at + recv[s]].sum())
            at += recv[s]
        edt = np.dtype([("col", idx_dtype), ("val", val_dtype)])
        return _alltoallv_records(comm, np.concatenate(out) if out else np.empty(0, edt), cnt,
                                  want)

    # 2. A' entries; 3. sparse feature entries
    ent = send_entries(a, form[1], form[2], "adj_len")
    indptr = np.concatenate([[0], np.cumsum(rows["adj_len"])]).astype(a.indptr.dtype)
    adj = sp.csr_array((ent["val"].copy(), ent["col"].copy(), indptr), shape=(hi - lo, n))
    del ent
    m = hi - lo
    if adj_only:
        new_x = np.zeros((m, 0), np.float32)
        fields = (np.zeros(m, np.int64), *(np.zeros(m, bool) for _ in range(3)),
                  np.arange(lo, hi, dtype=np.int64))
    else:
        if sparse_x:
            xe = send_entries(x, form[3][3], form[3][1], "x_len")
            xptr = np.concatenate([[0], np.cumsum(rows["x_len"])]).astype(x.indptr.dtype)
            new_x = sp.csr_array((xe["val"].copy(), xe["col"].copy(), xptr), shape=(m, form[3][2]))
        else:
            new_x = np.ascontiguousarray(rows["x"])
        fields = tuple(np.ascontiguousarray(rows[name])
                       for name in ("label", "train", "val", "test", "orig"))
    deg = np.ascontiguousarray(rows["deg"])
    # 4. the degrees of the columns the rows touch (a generator's block knows them all)
    if full_deg:
        keys, vals, table = block._keys, block._vals, block._table
    else:
        out, cnt = [], [0] * comm.size
        for d, r0, r1 in me:
            s0, s1 = r0 - block.lo, r1 - block.lo
            cols = np.unique(a.indices[a.indptr[s0]:a.indptr[s1]]).astype(np.int64)
            rec = np.empty(cols.size, dtype=[("id", np.int64), ("deg", np.float64)])
            rec["id"], rec["deg"] = cols, block.degree_of(cols)
            out.append(rec)
            cnt[d] = cols.size
        ddt = np.dtype([("id", np.int64), ("deg", np.float64)])
        got = _alltoallv_records(comm, np.concatenate(out) if out else np.empty(0, ddt), cnt)
        ids = np.concatenate([np.arange(lo, hi, dtype=np.int64), got["id"]])
        both = np.concatenate([deg, got["deg"]])
        keys, first = np.unique(ids, return_index=True)
        vals, table = both[first], None
    return RowBlock(lo, hi, adj, deg, new_x, *fields, list(block.files), keys, vals, table)
