"""Move rows the ranks already hold to the rows another layout needs: :func:`move_rows`.

Setup data movement beside :meth:`spgnn.core.dist_sparse.DistSparseMatrix.redistribute`:
rows of a sparse matrix with their per-row fields, moved between the ranks
through the communicator.  The rows are a
:class:`~spgnn.io.shards.RowBlock` (duck-typed: core imports nothing from
``spgnn.io``; the result is made by the block's own type).

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


def _swap(comm, pieces, recv, empty):
    """Rows between the ranks: ``pieces[d]`` the rows for rank ``d`` (absent: none),
    ``recv[s]`` the rows rank ``s`` sends here; the rows received, concatenated in source
    order.  This rank's own piece is kept, not sent.  Collective (one ``alltoallv``)."""
    me, p = comm.rank, comm.size
    counts = [len(pieces[d]) if d != me and d in pieces else 0 for d in range(p)]
    others = [pieces[d] for d in range(p) if counts[d]]
    send = others[0] if len(others) == 1 else np.concatenate(others) if others else empty
    want = [0 if s == me else int(recv[s]) for s in range(p)]
    got = comm.alltoallv(send, counts, want, label=LABEL)
    del send, others
    out, at = [], 0
    for s in range(p):
        if s == me and me in pieces:
            out.append(pieces[me])
        elif want[s]:
            out.append(got[at:at + want[s]])
            at += want[s]
    return out[0] if len(out) == 1 else np.concatenate(out) if out else empty


def _records(rows, dtype):
    """Row records as bytes (one row each: ``alltoallv`` moves raw rows)."""
    return np.ascontiguousarray(rows).view(np.uint8).reshape(len(rows), dtype.itemsize)


def move_rows(comm, block, lo, hi, *, adj_only=False):
    """This rank's rows ``lo:hi``, sent by the ranks holding them: a block of ``block``'s type
    (a RowBlock), or None. Collective (label ``gnn-setup:move-rows``).

    ``block``: the :class:`~spgnn.io.shards.RowBlock` this rank holds (rows
    ``block.lo:block.hi``; every rank passes one); the ranks' held ranges
    must be disjoint and ascending in rank order and cover every rank's
    ``lo:hi`` (ranges may overlap between receivers: 1.5D replicas).
    ``adj_only``: move ``A'``'s rows and degrees only (``spmm``), the other
    fields of the result are empty.  Returns None on every rank, without
    moving anything, when the held ranges or the blocks' dtypes do not allow
    it (the caller then draws or reads the rows).  The result's ``files`` are
    the part files this rank read for ``block``.  A rank keeps the rows it
    holds and needs; only the others travel.
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
    mine = [(d, r0 - block.lo, r1 - block.lo) for d, r0, r1 in plan[comm.rank]]
    rdt = _row_dtype(form, adj_only)
    a = block.adj
    x = None if adj_only else block.x
    sparse_x = not adj_only and form[3][0]
    m = hi - lo
    recv = [max(0, min(sh, hi) - max(sl, lo)) for sl, sh in spans]
    # 1. row records: per-row values and entry counts
    pieces = {}
    for d, s0, s1 in mine:
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
        pieces[d] = _records(rec, rdt)
    raw = _swap(comm, pieces, recv, np.zeros((0, rdt.itemsize), np.uint8))
    rows = np.ascontiguousarray(raw).view(rdt).reshape(-1)
    del pieces, raw

    def entries(csr, lens_field, idx_dtype, val_dtype):
        """The CSR arrays of the rows, moved: ``(data, indices, indptr)``."""
        lens = rows[lens_field]
        want, at = [], 0
        for s in range(comm.size):
            want.append(int(lens[at:at + recv[s]].sum()))
            at += recv[s]
        cut = {d: (csr.indptr[s0], csr.indptr[s1]) for d, s0, s1 in mine}
        idx = _swap(comm, {d: csr.indices[e0:e1] for d, (e0, e1) in cut.items()}, want,
                    np.zeros(0, idx_dtype))
        val = _swap(comm, {d: csr.data[e0:e1] for d, (e0, e1) in cut.items()}, want,
                    np.zeros(0, val_dtype))
        indptr = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        return val, idx, indptr.astype(csr.indptr.dtype, copy=False)

    # 2. A' entries; 3. sparse feature entries
    adj = sp.csr_array(entries(a, "adj_len", form[1], form[2]), shape=(m, n))
    if adj_only:
        new_x = np.zeros((m, 0), np.float32)
        fields = (np.zeros(m, np.int64), *(np.zeros(m, bool) for _ in range(3)),
                  np.arange(lo, hi, dtype=np.int64))
    else:
        if sparse_x:
            new_x = sp.csr_array(entries(x, "x_len", form[3][3], form[3][1]),
                                 shape=(m, form[3][2]))
        else:
            new_x = np.ascontiguousarray(rows["x"])
        fields = tuple(np.ascontiguousarray(rows[name])
                       for name in ("label", "train", "val", "test", "orig"))
    deg = np.ascontiguousarray(rows["deg"])
    # 4. the degrees of the columns the rows touch (a generator's block knows them all)
    if full_deg:
        keys, vals, table = block._keys, block._vals, block._table
    else:
        ddt = np.dtype([("id", np.int64), ("deg", np.float64)])
        out = {}
        for d, s0, s1 in mine:
            cols = np.unique(a.indices[a.indptr[s0]:a.indptr[s1]]).astype(np.int64)
            rec = np.empty(cols.size, dtype=ddt)
            rec["id"], rec["deg"] = cols, block.degree_of(cols)
            out[d] = _records(rec, ddt)
        sizes = comm.alltoallv(np.array([len(out[d]) if d in out else 0
                                         for d in range(comm.size)], dtype=np.int64),
                               [1] * comm.size, label=LABEL)
        got = _swap(comm, out, sizes, np.zeros((0, ddt.itemsize), np.uint8))
        got = np.ascontiguousarray(got).view(ddt).reshape(-1)
        ids = np.concatenate([np.arange(lo, hi, dtype=np.int64), got["id"]])
        both = np.concatenate([deg, got["deg"]])
        keys, first = np.unique(ids, return_index=True)
        vals, table = both[first], None
    return type(block)(lo, hi, adj, deg, new_x, *fields, list(block.files), keys, vals, table)
