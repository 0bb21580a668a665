"""Pre, post and hybrid aggregation of cut edges: the SuperGCN exchange (paper 004 §2.5).

For one ordered pair (sender ``s`` → receiver ``r``) let ``B = A[V_r, V_s]``
be the cut block.  The receiver needs ``B·H_s``; it can get it as raw
source rows (*post*-aggregation: one message per non-empty column of
``B``), as partial sums the sender pre-aggregates (*pre*: one per non-empty
row), or mixed per edge (*hybrid*): a minimum vertex cover ``C`` of the
bipartite graph of ``B`` (König: its size is the maximum matching's) makes
every edge ``u → d`` a post edge when ``u ∈ C`` and a pre edge otherwise
(then ``d ∈ C``).  The choice factorises ``B = P·Q`` exactly, one message
per cover vertex:

* post message for source ``u``: ``Q`` row ``e_uᵀ``, ``P`` column ``B[:, u]``
  restricted to post edges;
* pre message for destination ``d``: ``Q`` row ``B[d, :]`` restricted to pre
  edges, ``P`` column ``e_d``.

The sender computes ``M = Q·H_s`` (one SpMM over all peers), one alltoallv
(optionally coded, :mod:`spgnn.core.codec`) carries it, and the receiver
computes ``[A_rr  P]·[H_r; M]`` (one SpMM).  The receiver decides (it holds
the cut edges) and ships each sender its ``Q`` entries once per plan.
Messages inside a peer segment are sorted by the global id of the node they
stand for (source for post, destination for pre; the ranges are disjoint).
"""

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_bipartite_matching

from ..local.alloc import empty as empty_output
from ..local.csr import LocalCSR
from .exchange import PeerCounts

__all__ = ["AGGREGATIONS", "min_vertex_cover_bipartite", "assign_edges", "HybridPlan",
           "predict_messages"]

#: The aggregation modes of a cut edge exchange.
AGGREGATIONS = ("post", "pre", "hybrid")


def min_vertex_cover_bipartite(src, dst, n_src, n_dst):
    """``(cover_src, cover_dst)`` boolean masks of a minimum vertex cover. Pure.

    ``src[i] → dst[i]`` are the edges (indices in ``[0, n_src)`` and
    ``[0, n_dst)``).  Hopcroft–Karp maximum matching
    (:func:`scipy.sparse.csgraph.maximum_bipartite_matching`), then König:
    ``Z`` = vertices reachable from unmatched sources by alternating paths
    (any edge source → destination, matched edge back); the cover is
    ``(sources ∖ Z) ∪ (destinations ∩ Z)``, of the matching's size.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    cover_src = np.zeros(n_src, dtype=bool)
    cover_dst = np.zeros(n_dst, dtype=bool)
    if src.size == 0:
        return cover_src, cover_dst
    g = sp.csr_array((np.ones(src.size, dtype=np.int8), (src, dst)), shape=(n_src, n_dst))
    g.sum_duplicates()
    match_of_src = maximum_bipartite_matching(g, perm_type="column")   # src -> dst or -1
    match_of_dst = np.full(n_dst, -1, dtype=np.int64)
    matched = np.flatnonzero(match_of_src >= 0)
    match_of_dst[match_of_src[matched]] = matched
    seen_src = match_of_src < 0
    seen_dst = np.zeros(n_dst, dtype=bool)
    frontier = np.flatnonzero(seen_src)
    indptr, indices = g.indptr, g.indices
    while frontier.size:
        nb = np.unique(np.concatenate([indices[indptr[u]:indptr[u + 1]] for u in frontier]))
        nb = nb[~seen_dst[nb]]
        seen_dst[nb] = True
        back = match_of_dst[nb]
        back = back[(back >= 0) & ~seen_src[np.maximum(back, 0)]]
        seen_src[back] = True
        frontier = back
    has_edge = np.zeros(n_src, dtype=bool)
    has_edge[src] = True
    cover_src[:] = ~seen_src & has_edge
    cover_dst[:] = seen_dst
    return cover_src, cover_dst


def assign_edges(src, dst, mode):
    """Boolean ``post`` per edge ``src[i] → dst[i]`` (else pre) for one cut block. Pure.

    ``src``/``dst`` are any integer ids.  ``post``: every edge; ``pre``: none;
    ``hybrid``: the minimum vertex cover's choice.
    """
    src = np.asarray(src)
    if mode == "post":
        return np.ones(src.size, dtype=bool)
    if mode == "pre":
        return np.zeros(src.size, dtype=bool)
    if mode != "hybrid":
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, but got {mode!r}")
    us, ui = np.unique(src, return_inverse=True)
    ds, di = np.unique(np.asarray(dst), return_inverse=True)
    cover_src, _ = min_vertex_cover_bipartite(ui, di, us.size, ds.size)
    return cover_src[ui]


class HybridPlan(PeerCounts):
    """The factorised exchange ``[A_rr  P]·[H; alltoallv(Q·H)]`` of one 1D row block.

    Built once per (A's pattern, X's row split, mode) by :meth:`build`
    (collective) and reused.  Attributes (local): ``send_counts`` /
    ``recv_counts`` (messages per peer), ``send_keys`` (global id each sent
    message stands for, the codec's row keys), ``Q`` (:class:`LocalCSR`,
    sent messages × my rows of X), ``compact`` (``[A_rr  P]``, my rows ×
    (my X rows + received messages)), ``max_rows``.
    """

    def __init__(self, mode, Q, compact, send_counts, recv_counts, send_keys, max_rows):
        self.mode, self.Q, self.compact = mode, Q, compact
        self.send_counts, self.recv_counts, self.send_keys = send_counts, recv_counts, send_keys
        self.max_rows = max_rows

    @classmethod
    def for_spmm_1d(cls, A, X, mode):
        """The plan of ``A``'s whole-row block for ``X``'s row split, cached on ``A``. Collective."""
        offsets = tuple(X.layout.offsets(X.grid, X.shape[0], 0))
        key = ("spmm-1d-exchange", mode, offsets)
        plan = A.cache.get(key)
        if plan is None:
            plan = cls.build(A.grid.comm(*A.layout.rows), A.local, offsets, A.backend, mode,
                             label=f"spmm-1d-{mode}:plan")
            A.cache[key] = plan
        return plan

    @classmethod
    def build(cls, comm, local, offsets, backend, mode, label):
        """Decide every cut edge and build ``Q`` and ``[A_rr  P]``. Collective over ``comm``.

        Rank ``r`` holds rows ``[offsets[r], offsets[r+1])`` of X; ``local``
        is A's block with global column ids.  Three alltoallv: message
        counts, then (per message) its key, then the ``Q`` entries.
        """
        if mode not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, but got {mode!r}")
        be = backend
        P = comm.size
        offsets = np.asarray(offsets, dtype=np.int64)
        me = comm.rank
        x0, x1 = int(offsets[me]), int(offsets[me + 1])
        nloc = x1 - x0
        indptr = np.asarray(be.to_host(local.indptr)).astype(np.int64)
        cols = np.asarray(be.to_host(local.indices)).astype(np.int64)
        vals = np.asarray(be.to_host(local.data))
        rows = np.repeat(np.arange(local.shape[0], dtype=np.int64), np.diff(indptr))
        own = (cols >= x0) & (cols < x1)
        # Cut edges grouped by owner of the source, then by (key, ...) below.
        rr, rc, rv = rows[~own], cols[~own], vals[~own]
        owner = np.searchsorted(offsets, rc, side="right") - 1
        order = np.argsort(owner, kind="stable")
        rr, rc, rv, owner = rr[order], rc[order], rv[order], owner[order]
        bounds = np.searchsorted(owner, np.arange(P + 1))
        recv_counts = np.zeros(P, dtype=np.int64)
        keys_out, qm, qu, qv = [], [], [], []        # per message / per Q entry, for the senders
        p_row, p_col, p_val = [], [], []             # P, columns numbered over all messages
        m0 = 0
        for s in range(P):
            a, b = bounds[s], bounds[s + 1]
            if a == b:
                keys_out.append(np.zeros(0, np.int64))
                continue
            d, u, v = rr[a:b], rc[a:b], rv[a:b]
            post = assign_edges(u, d, mode)
            # One message per post source and per pre destination, sorted by
            # global id (destinations: x0 + d; disjoint from s's sources).
            mk = np.unique(np.concatenate([u[post], x0 + d[~post]]))
            recv_counts[s] = mk.size
            m_post = np.searchsorted(mk, u[post])
            m_pre = np.searchsorted(mk, x0 + d[~post])
            keys_out.append(mk)
            # Q entries (message within the segment, source global id, value).
            post_src = np.unique(u[post])
            qm.append(np.concatenate([np.searchsorted(mk, post_src), m_pre]))
            qu.append(np.concatenate([post_src, u[~post]]))
            qv.append(np.concatenate([np.ones(post_src.size, vals.dtype), v[~post]]))
            pre_dst = np.unique(d[~post])
            p_row.append(np.concatenate([d[post], pre_dst]))
            p_col.append(m0 + np.concatenate([m_post, np.searchsorted(mk, x0 + pre_dst)]))
            p_val.append(np.concatenate([v[post], np.ones(pre_dst.size, vals.dtype)]))
            m0 += mk.size
        send_counts = comm.alltoall(recv_counts, label=label).astype(np.int64)
        send_keys = comm.alltoallv(np.concatenate(keys_out).astype(np.int64), recv_counts,
                                   send_counts, label=label, split=False)
        q_counts = np.array([x.size for x in qm] if qm else [], dtype=np.int64)
        q_counts_full = np.zeros(P, dtype=np.int64)
        nonempty = [s for s in range(P) if bounds[s] < bounds[s + 1]]
        q_counts_full[nonempty] = q_counts
        q_in_counts = comm.alltoall(q_counts_full, label=label).astype(np.int64)
        cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
        q_idx = comm.alltoallv(np.stack([cat(qm, np.int64), cat(qu, np.int64)], axis=1),
                               q_counts_full, q_in_counts, label=label, split=False)
        q_val = comm.alltoallv(cat(qv, vals.dtype), q_counts_full, q_in_counts, label=label,
                               split=False)
        # Sender: Q rows are my sent messages, stacked by receiver in rank order.
        seg_start = np.concatenate([[0], np.cumsum(send_counts)[:-1]])
        from_rank = np.repeat(np.arange(P), q_in_counts)
        q = sp.csr_array((q_val, (seg_start[from_rank] + q_idx[:, 0], q_idx[:, 1] - x0)),
                         shape=(int(send_counts.sum()), nloc))
        q.sort_indices()
        idt = local.indices.dtype
        Q = LocalCSR(be.from_host(q.indptr.astype(idt)), be.from_host(q.indices.astype(idt)),
                     be.from_host(q.data.astype(vals.dtype)), q.shape, check=None)
        # Receiver: [A_rr  P] over [my X rows; received messages].
        c_row = np.concatenate([rows[own]] + p_row)
        c_col = np.concatenate([cols[own] - x0] + [nloc + c for c in p_col])
        c_val = np.concatenate([vals[own]] + p_val)
        c = sp.csr_array((c_val, (c_row, c_col)), shape=(local.shape[0], nloc + m0))
        c.sort_indices()
        compact = LocalCSR(be.from_host(c.indptr.astype(idt)), be.from_host(c.indices.astype(idt)),
                           be.from_host(c.data.astype(vals.dtype)), c.shape, check=None)
        most = max(int(send_counts.sum()), int(recv_counts.sum()))
        max_rows = int(comm.allreduce(np.array([most], dtype=np.int64), op="max",
                                      label=label)[0])
        return cls(mode, Q, compact, send_counts, recv_counts, send_keys, max_rows)

    def exchange(self, comm, backend, x_local, codec=None, label="spmm-1d-exchange"):
        """``[x_local; received messages]`` (host array). Collective over ``comm``.

        The messages are ``Q·x_local``; with a codec they travel as codes
        (labels ``<label>:data`` / ``<label>:params``), else as rows of
        ``x_local``'s dtype under ``label``.
        """
        from ..local.semiring import plus_times

        x_local = np.ascontiguousarray(x_local)
        width = int(np.prod(x_local.shape[1:], dtype=np.int64))
        x2 = x_local.reshape(x_local.shape[0], width)
        if self.mode == "post":
            # Every Q row is one unit entry: a gather, bit-identical to 1d-aware.
            msgs = x2[np.asarray(backend.to_host(self.Q.indices))]
        else:
            msgs = np.asarray(backend.to_host(backend.spmm(self.Q, backend.from_host(x2),
                                                           plus_times)))
        msgs = np.ascontiguousarray(msgs, dtype=x_local.dtype)
        split = self.max_rows * width > comm.max_count
        if codec is None:
            got = comm.alltoallv(msgs, self.send_counts, self.recv_counts, label=label,
                                 split=split)
        else:
            got = codec.alltoallv(comm, backend, msgs, self.send_counts, self.recv_counts,
                                  self.send_keys, label=label, dtype=x_local.dtype, split=split)
        out = empty_output((x2.shape[0] + got.shape[0], width), x_local.dtype)
        ext = np.concatenate([x2, got.reshape(self.rows_received, width)], axis=0, out=out)
        return ext.reshape((ext.shape[0],) + x_local.shape[1:])


def predict_bytes(adj, offsets, mode, width, quantize="none", param_dtype="bf16", itemsize=4,
                  pack_axis="feature"):
    """``(data, params)`` bytes of one exchange, summed over every ordered rank pair. Pure.

    The wire formula (:func:`spgnn.core.codec.wire_bytes`) applied to the
    message rows of :func:`predict_messages`: ``itemsize·n·F`` data and no
    parameters uncoded, else the codec's code and parameter bytes per peer
    segment; equal to the ledger's ``<label>:data`` and ``<label>:params``
    (tests/unit/test_hybrid_exchange.py).  No communication.
    """
    from .codec import make_codec, wire_bytes

    codec = make_codec(quantize, param_dtype=param_dtype, pack_axis=pack_axis)
    counts = predict_messages(adj, offsets, mode).ravel()
    data, params = wire_bytes(counts, width, None if codec is None else codec.bits,
                              param_dtype, itemsize, pack_axis)
    return int(data.sum()), int(params.sum())


def predict_messages(adj, offsets, mode):
    """Message rows every ordered rank pair exchanges, without running anything. Pure.

    ``adj`` is the global aggregation pattern (scipy sparse, rows are
    destinations), ``offsets`` the contiguous row split of ``P`` ranks.
    Returns ``(P, P)`` int64 with ``[r, s]`` the messages rank ``s`` sends
    to rank ``r``: non-empty columns (post), non-empty rows (pre) or the
    maximum matching size (hybrid) of each cut block; equal to the plans'
    ``recv_counts`` (see tests/mpi/exchange_checks.py).
    """
    if mode not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, but got {mode!r}")
    a = sp.csr_array(adj)
    offsets = np.asarray(offsets, dtype=np.int64)
    P = offsets.size - 1
    out = np.zeros((P, P), dtype=np.int64)
    coo = a.tocoo()
    part = np.searchsorted(offsets, np.arange(a.shape[0] + 1), side="right") - 1
    rp, cp = part[coo.row], part[coo.col]
    cut = rp != cp
    r_, c_, rw, cl = rp[cut], cp[cut], coo.row[cut], coo.col[cut]
    pair = r_ * P + c_
    order = np.argsort(pair, kind="stable")
    pair, rw, cl = pair[order], rw[order], cl[order]
    starts = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]]) if pair.size else np.zeros(0, int)
    ends = np.r_[starts[1:], pair.size]
    for a0, b0 in zip(starts, ends):
        r, s = divmod(int(pair[a0]), P)
        d, u = rw[a0:b0], cl[a0:b0]
        if mode == "post":
            out[r, s] = np.unique(u).size
        elif mode == "pre":
            out[r, s] = np.unique(d).size
        else:
            post = assign_edges(u, d, "hybrid")
            out[r, s] = np.unique(u[post]).size + np.unique(d[~post]).size
    return out
