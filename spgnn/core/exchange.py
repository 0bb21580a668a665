"""``ExchangePlan``: the sparsity-aware exchange of dense rows that one sparse block needs.

Used by the ``1d-aware`` SpMM (:mod:`spgnn.core.spmm`, A's whole-row block)
and the ``15d-aware`` one (:mod:`spgnn.core.spmm_15d`, A's column slab):
each rank receives, through one alltoallv, exactly the rows of a row-split
dense ``X`` that the non-empty columns of its block touch (Mukhopadhyay et
al., ICPP'24, Algorithms 1 and 2 corrected).  Built once per (pattern, X
row split), cached by the caller, reused every call.
"""

import numpy as np

from ..local.alloc import empty as empty_output
from ..local.csr import LocalCSR

__all__ = ["ExchangePlan"]


class PeerCounts:
    """Totals of a plan's per-peer ``send_counts`` / ``recv_counts`` (rows or messages)."""

    @property
    def rows_sent(self) -> int:
        return int(self.send_counts.sum())

    @property
    def rows_received(self) -> int:
        return int(self.recv_counts.sum())


class ExchangePlan(PeerCounts):
    """Which rows of a row-split X each rank needs for its block of A, and who sends them.

    Built once per (A's pattern, X's row split) by :meth:`for_spmm_1d`
    (collective: one alltoallv of counts and one of row ids) and reused for
    every SpMM with that matrix.

    Attributes (local)
    ------------------
    send_rows : local row indices of my X block to send, grouped by destination
    send_counts, recv_counts : rows per peer (self excluded: zero)
    local_cols : A's columns remapped to rows of ``[my X block; received rows]``
    """

    def __init__(self, send_rows, send_counts, recv_counts, compact, max_rows):
        self.send_rows = send_rows
        self.send_counts = send_counts
        self.recv_counts = recv_counts
        self.compact = compact
        # Largest number of rows any rank sends or receives: with the row
        # width it decides, identically on every rank, whether an exchange
        # needs the chunked large-message path, so no per-call agreement.
        self.max_rows = max_rows

    @classmethod
    def for_spmm_1d(cls, A, X):
        """Collective over A's row axes."""
        return cls.for_row_split(A, X.layout.offsets(X.grid, X.shape[0], 0))

    @classmethod
    def for_row_split(cls, A, offsets):
        """The plan of :meth:`for_spmm_1d` for a dense operand whose rows split at ``offsets``.

        Collective over A's row axes the first time; cached on A (the key
        starts with ``"spmm-1d-aware"``: a pattern-only plan that
        :func:`spgnn.core.edge_softmax.with_values` carries over).
        """
        key = ("spmm-1d-aware", tuple(offsets))
        plan = A.cache.get(key)
        if plan is None:
            plan = cls.build(A.grid.comm(*A.layout.rows), A.local, 0, key[1], A.backend,
                             label="spmm-1d-aware:plan")
            A.cache[key] = plan
        return plan

    @classmethod
    def build(cls, comm, local, col_start, offsets, backend, label):
        """Plan the exchange for one local block; the caller caches it.

        Collective: over ``comm``, whose rank ``r`` holds rows
        ``[offsets[r], offsets[r+1])`` of X.  ``local`` is a :class:`LocalCSR`
        whose column ``c`` is X's global row ``col_start + c`` (the 1D
        algorithm passes A's whole-row block with ``col_start = 0``; the 1.5D
        one its column slab, see :mod:`spgnn.core.spmm_15d`).
        """
        be = backend
        offsets = np.asarray(offsets, dtype=np.int64)
        me = comm.rank
        x0, x1 = offsets[me], offsets[me + 1]
        # O(nnz + columns), no sort: the distinct columns are marked in a mask, and the
        # column remap is a lookup table (the sort-based version took most of the setup of
        # a 143M-entry graph)
        cols = np.asarray(be.to_host(local.indices))
        ncols, col_start = int(local.shape[1]), int(col_start)
        seen = np.zeros(ncols, dtype=bool)
        seen[cols] = True
        needed = np.flatnonzero(seen).astype(np.int64) + col_start
        del seen
        remote = needed[(needed < x0) | (needed >= x1)]
        owner = np.searchsorted(offsets, remote, side="right") - 1
        req_counts = np.bincount(owner, minlength=comm.size).astype(np.int64)
        # Tell each owner which of its rows I need (once per plan).
        send_counts = comm.alltoall(req_counts, label=label).astype(np.int64)
        asked = comm.alltoallv(remote, req_counts, send_counts, label=label)
        send_rows = asked - x0
        # Column remap: own rows first, then received rows in (owner, id) order (remote is
        # sorted, and owners hold increasing id ranges).  Only stored columns are looked up.
        width = int(x1 - x0) + int(remote.size)
        idt = local.indices.dtype
        lut = np.empty(ncols, dtype=np.int32 if width < 2**31 else np.int64)
        own0, own1 = (min(max(int(v) - col_start, 0), ncols) for v in (x0, x1))
        lut[own0:own1] = np.arange(own0 + col_start - x0, own1 + col_start - x0)
        lut[remote - col_start] = np.arange(x1 - x0, width)
        pos = lut[cols]
        del lut
        compact = LocalCSR(local.indptr, be.from_host(pos.astype(idt, copy=False)), local.data,
                           (local.shape[0], width), check=None)
        most = max(int(send_counts.sum()), int(req_counts.sum()))
        max_rows = int(comm.allreduce(np.array([most], dtype=np.int64), op="max",
                                      label=label)[0])
        return cls(send_rows, send_counts, req_counts, compact, max_rows)

    def exchange(self, comm, x_local, label="spmm-1d-aware:exchange", xp=np):
        """Send the planned rows of ``x_local``; return ``[x_local; received]``.

        ``x_local`` is an array of module ``xp`` (numpy, or CuPy: the
        communicator moves device rows, :mod:`spgnn.comm.device`).  On the
        host the result is the next SpMM's dense operand, so it starts on a
        cache line (:func:`~spgnn.local.alloc.empty`; why: kernels/README.md).
        """
        width = int(np.prod(x_local.shape[1:], dtype=np.int64))
        rows = self.send_rows
        if xp is not np:                      # the row ids, copied to the device once
            rows = self.__dict__.get("_dev_rows")
            if rows is None:
                rows = self._dev_rows = xp.asarray(self.send_rows)
        got = comm.alltoallv(xp.ascontiguousarray(x_local[rows]), self.send_counts,
                             self.recv_counts, label=label,
                             split=self.max_rows * width > comm.max_count)
        if xp is not np:
            return xp.concatenate([x_local, got], axis=0)
        out = empty_output((x_local.shape[0] + got.shape[0],) + x_local.shape[1:], x_local.dtype)
        return np.concatenate([x_local, got], axis=0, out=out)
