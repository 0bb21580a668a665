"""Matrix-based bulk sampling on one process: GraphSAGE and LADIES.

Tripathy, Yelick, Buluç, *Distributed Matrix-Based Sampling for Graph Neural
Network Training* (MLSys 2024); ``research/003_matrix_sampling.md`` (the
"report") §2.  Each hop is Algorithm 1 (§2.2)::

    P      <- Q A                  selection matrix times adjacency (SpGEMM or row gather)
    P      <- NORM(P)              row-wise
    S      <- SAMPLE(P, s)         min(s, support) distinct nonzeros per row
    A^hop  <- EXTRACT(A, Q, S)     row / column extraction

and ``k`` minibatches are sampled at once by stacking their ``Q`` (§2.4
"Bulk"): row block ``i`` of every stacked matrix belongs to minibatch ``i``,
recorded by the offsets ``row_ptr`` / ``col_ptr``.

Orientation (report §9.11): row ``v`` of ``A`` lists the vertices ``v``
aggregates *from*.  :class:`spgnn.io.Graph` stores ``adj[u, v]`` for an edge
``u -> v``, so for a directed graph pass ``graph.adj.T`` to sample
in-neighbours (undirected graphs are symmetric).

Which product is used (``P = Q A``, report §2.4, §8.1):

* **row gather** whenever every row of ``Q`` has exactly one nonzero equal
  to 1 -- GraphSAGE's ``Q`` and LADIES' row-extraction ``Q_R``: ``P`` is
  then ``A[rows]``, and the GraphSAGE hot path does not even materialise it
  (the sampling kernel reads the rows of ``A`` in place);
* **SpGEMM** (the backend's ``spgemm``) otherwise -- LADIES' ``Q`` has ``b``
  nonzeros per row, and the product sums the columns (§2.5).

:func:`probability_matrix` exposes the choice (``path="auto"``); the tests
check that both paths agree.
"""

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..backends import get_backend
from ..errors import DimensionMismatch, DTypeError, InvalidSparseStructure
from ..local.csr import LocalCSR
from ..local.semiring import plus_times
from .rng import row_keys

__all__ = ["SampledBlock", "BulkSample", "GraphSAGESampler", "LADIESSampler", "LocalGraph",
           "selection_matrix", "set_selection_matrix", "probability_matrix", "row_normalize",
           "sample_rows", "ladies_probabilities", "BackendOps", "normalize_batches",
           "LADIES_PROBS", "SAMPLE_METHODS", "FRONTIERS"]

#: LADIES probability formulas (report §2.5, §9.1), keyed by their names.
#: ``"sum_of_squares"``: p_v ∝ Σ_{u∈S} A_uv² = Q (A∘A) -- Zou et al.'s LADIES
#: and the final CAGNET code (e_v for binary A).  ``"square_of_sum"``:
#: p_v ∝ (Σ_{u∈S} A_uv)² = (Q A)∘2 -- the paper's text and Figure 1 (e_v²).
LADIES_PROBS = ("sum_of_squares", "square_of_sum")
_LADIES_ALIASES = {"zou": "sum_of_squares", "paper": "square_of_sum"}

#: Sampling methods (see :meth:`spgnn.backends.Backend.sample_rows`).  ``"auto"``
#: is ``"floyd"`` for GraphSAGE (uniform) and ``"es"`` for LADIES (weighted).
SAMPLE_METHODS = ("auto", "floyd", "es", "its")

#: GraphSAGE frontier modes (report §2.4, §9.6).
FRONTIERS = ("tree", "unique")

# --------------------------------------------------------------------------- #
# Results
# --------------------------------------------------------------------------- #

@dataclass
class SampledBlock:
    """The sampled adjacency of one hop for a bulk of ``k`` minibatches.

    ``adj`` is block diagonal: rows ``row_ptr[i]:row_ptr[i+1]`` (the hop's
    destination vertices ``dst_ids``) and columns ``col_ptr[i]:col_ptr[i+1]``
    (its source vertices ``src_ids``) belong to minibatch ``i``; no entry
    leaves its diagonal block.  Values are ``A``'s values of the sampled
    edges.  The next hop's rows are this hop's columns
    (``dst_ids`` of hop ``t+1`` == ``src_ids`` of hop ``t``).

    Attributes
    ----------
    hop : int
        0 is the hop from the batch (fanout[0]); the forward pass consumes the
        blocks in reverse (report §2.1, §9.8).
    adj : LocalCSR, shape (R, C), int64 indices, float64 values, sorted rows
    dst_ids, src_ids : int64 arrays of global vertex ids, lengths R and C
    row_ptr, col_ptr : int64 arrays of length k + 1
    prob : LocalCSR or None
        LADIES only, with ``keep_prob=True``: the row-normalised probability
        matrix ``P`` (k x n) this hop sampled from.
    """

    hop: int
    adj: LocalCSR
    dst_ids: np.ndarray
    src_ids: np.ndarray
    row_ptr: np.ndarray
    col_ptr: np.ndarray
    prob: LocalCSR = None

    @property
    def num_edges(self) -> int:
        return self.adj.nnz

    def to_scipy(self):
        return self.adj.to_scipy()

    def minibatch(self, i) -> "SampledBlock":
        """Block ``i`` alone, columns renumbered from 0 (k = 1). Local."""
        return self.minibatches(i, i + 1)

    def minibatches(self, lo, hi) -> "SampledBlock":
        """Minibatches ``lo..hi-1`` as a stacked block, columns renumbered from 0. Local."""
        r0, r1 = int(self.row_ptr[lo]), int(self.row_ptr[hi])
        c0, c1 = int(self.col_ptr[lo]), int(self.col_ptr[hi])
        e0, e1 = int(self.adj.indptr[r0]), int(self.adj.indptr[r1])
        adj = LocalCSR(self.adj.indptr[r0:r1 + 1] - e0, self.adj.indices[e0:e1] - c0,
                       self.adj.data[e0:e1], (r1 - r0, c1 - c0), check=None)
        prob = None
        if self.prob is not None:
            p0, p1 = int(self.prob.indptr[lo]), int(self.prob.indptr[hi])
            prob = LocalCSR(self.prob.indptr[lo:hi + 1] - p0, self.prob.indices[p0:p1],
                            self.prob.data[p0:p1], (hi - lo, self.prob.shape[1]), check=None)
        return SampledBlock(self.hop, adj, self.dst_ids[r0:r1], self.src_ids[c0:c1],
                            self.row_ptr[lo:hi + 1] - r0, self.col_ptr[lo:hi + 1] - c0, prob)

    def same_as(self, other) -> bool:
        """Bitwise equality of every array (``prob`` excluded). Local."""
        arrays = ("dst_ids", "src_ids", "row_ptr", "col_ptr")
        return (self.hop == other.hop and self.adj.shape == other.adj.shape
                and all(np.array_equal(getattr(self, a), getattr(other, a)) for a in arrays)
                and np.array_equal(self.adj.indptr, other.adj.indptr)
                and np.array_equal(self.adj.indices, other.adj.indices)
                and np.array_equal(self.adj.data, other.adj.data))


@dataclass
class BulkSample:
    """Every hop's :class:`SampledBlock` for a bulk of minibatches.

    Attributes
    ----------
    kind : ``"sage"`` or ``"ladies"``
    minibatch_ids : int64 array (k,), the GLOBAL id of each minibatch (the RNG key)
    blocks : list of SampledBlock, hop order (``blocks[0]`` touches the batch)
    """

    kind: str
    minibatch_ids: np.ndarray
    blocks: list = field(default_factory=list)

    @property
    def k(self) -> int:
        return int(self.minibatch_ids.shape[0])

    @property
    def num_edges(self) -> int:
        """Sampled edges over every hop and minibatch."""
        return sum(b.num_edges for b in self.blocks)

    @property
    def forward_blocks(self) -> list:
        """The blocks in forward (input-layer first) order."""
        return self.blocks[::-1]

    def position(self, minibatch_id) -> int:
        """Index in this bulk of global minibatch ``minibatch_id``."""
        hit = np.flatnonzero(self.minibatch_ids == int(minibatch_id))
        if hit.size == 0:
            raise KeyError(f"minibatch {minibatch_id} is not in this bulk "
                           f"(ids {self.minibatch_ids.tolist()})")
        return int(hit[0])

    def minibatch(self, i) -> "BulkSample":
        """Minibatch at position ``i`` as a bulk of one. Local."""
        return self.minibatches(i, i + 1)

    def minibatches(self, lo, hi) -> "BulkSample":
        """Minibatches at positions ``lo..hi-1`` as a bulk. Local."""
        return BulkSample(self.kind, self.minibatch_ids[lo:hi],
                          [b.minibatches(lo, hi) for b in self.blocks])

    def same_as(self, other) -> bool:
        """Bitwise equality of every block. Local."""
        return (self.kind == other.kind and np.array_equal(self.minibatch_ids, other.minibatch_ids)
                and len(self.blocks) == len(other.blocks)
                and all(a.same_as(b) for a, b in zip(self.blocks, other.blocks)))


# --------------------------------------------------------------------------- #
# The graph held on this process, and the matrix building blocks
# --------------------------------------------------------------------------- #

def _canonical(a) -> LocalCSR:
    """Coalesced CSR, sorted indices, int64 indices, float64 values (report §9.5)."""
    if isinstance(a, LocalCSR):
        a = a.to_scipy()
    if not sp.issparse(a):
        raise TypeError(f"sampling: expected a scipy sparse matrix or LocalCSR, but got "
                        f"{type(a).__name__}")
    if a.shape[0] != a.shape[1]:
        raise DimensionMismatch(f"sampling: A must be square (n x n), but got shape {a.shape}")
    m = sp.csr_array(a, dtype=np.float64, copy=True)
    m.sum_duplicates()
    m.sort_indices()
    return LocalCSR(m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data, m.shape)


class BackendOps:
    """The backend's sampling kernels as the samplers call them: host arrays in and out.

    The samplers' bookkeeping (minibatch offsets, keys, column numbering)
    is numpy on the host; the kernels run on the graph's backend, which on
    the ``cupy`` backend means the device.  Each call copies its inputs to
    the backend's memory (``from_host``) and its results back
    (``to_host``): explicit copies, as CuPy demands (it refuses implicit
    conversion), and no-ops on the CPU backends.  Outputs are bit-identical
    on every backend (the kernels are).  Mixed into :class:`LocalGraph` and
    :class:`~spgnn.sampling.distributed.PartitionedGraph` (both set
    ``self.backend``).  Local.
    """

    def _host(self, *arrays):
        h = self.backend.to_host
        return tuple(h(a) for a in arrays)

    def sample_rows(self, indptr, indices, data, rows, keys, s, method, weighted):
        """:meth:`spgnn.backends.Backend.sample_rows`; ``(out_indptr, positions)`` on the host."""
        return self._host(*self.backend.sample_rows(indptr, indices, data, rows, keys, s,
                                                    method, weighted))

    def first_appearance(self, a, a_ptr, b, b_ptr, n):
        """:meth:`spgnn.backends.Backend.first_appearance`; four host arrays."""
        return self._host(*self.backend.first_appearance(a, a_ptr, b, b_ptr, n))

    def sort_rows_by_column(self, indptr, indices, data):
        """Sort each row's host ``(indices, data)`` by column in place, on the backend."""
        be = self.backend
        di, dd = be.from_host(indices), be.from_host(data)
        be.sort_rows_by_column(be.from_host(indptr), di, dd)
        if di is not indices:            # the backend sorted its own copies: bring them back
            indices[...] = be.to_host(di)
            data[...] = be.to_host(dd)

    def host64(self, m: LocalCSR) -> LocalCSR:
        """A backend result ``m`` as a host CSR with int64 indices and float64 values."""
        ip, ix, d = self._host(m.indptr, m.indices, m.data)
        return LocalCSR(np.asarray(ip, dtype=np.int64), np.asarray(ix, dtype=np.int64),
                        np.asarray(d, dtype=np.float64), m.shape, check=None)


class LocalGraph(BackendOps):
    """``A`` held whole on this process (graph-replicated mode, report §3.1).

    Canonicalised once (duplicates summed, indices sorted, int64 indices,
    float64 values) so that every mode sees identical rows.  Implements the
    three products a sampler needs; :class:`spgnn.sampling.distributed`
    provides the same three for a 1.5D-partitioned ``A``.
    """

    def __init__(self, a, backend=None):
        self.a = _canonical(a)
        self.n = self.a.shape[0]
        self.backend = get_backend(backend)
        self._squared = None

    def gather(self, vertices):
        """Fused row gather: ``(indptr, indices, data, rows)`` with ``P[r] = A[rows[r]]``. Local."""
        return self.a.indptr, self.a.indices, self.a.data, vertices

    def rows(self, vertices) -> LocalCSR:
        """``A[vertices]`` materialised (``Q_R A`` for one-hot ``Q_R``). Local."""
        if vertices.size == 0:
            return LocalCSR.empty((0, self.n))
        return self.host64(self.backend.extract_rows(self.a, vertices))

    def multiply(self, q: LocalCSR, square: bool) -> LocalCSR:
        """``Q A`` (or ``Q (A∘A)`` when ``square``) by the backend's SpGEMM. Local."""
        b = self.a
        if square:
            if self._squared is None:
                self._squared = LocalCSR(b.indptr, b.indices, b.data * b.data, b.shape, check=None)
            b = self._squared
        if q.shape[0] == 0:
            return LocalCSR.empty((0, self.n))
        return self.host64(self.backend.spgemm(q, b, plus_times))


def _as64(m: LocalCSR) -> LocalCSR:
    return LocalCSR(np.asarray(m.indptr, dtype=np.int64), np.asarray(m.indices, dtype=np.int64),
                    np.asarray(m.data, dtype=np.float64), m.shape, check=None)


def selection_matrix(vertices, n) -> LocalCSR:
    """One-hot rows: ``Q[r, vertices[r]] = 1`` (GraphSAGE's Q, LADIES' Q_R). Local."""
    v = np.asarray(vertices, dtype=np.int64)
    return LocalCSR(np.arange(v.size + 1, dtype=np.int64), v.copy(), np.ones(v.size),
                    (v.size, int(n)))


def set_selection_matrix(vertices, row_ptr, n) -> LocalCSR:
    """``Q[i, v] = 1`` for every ``v`` in ``vertices[row_ptr[i]:row_ptr[i+1]]`` (LADIES' Q).

    Repeated vertices within a row are merged (a set, report §9.6); columns
    sorted.  Local.
    """
    v = np.asarray(vertices, dtype=np.int64)
    row_ptr = np.asarray(row_ptr, dtype=np.int64)
    k = row_ptr.size - 1
    mb = np.repeat(np.arange(k, dtype=np.int64), np.diff(row_ptr))
    keys = np.unique(mb * int(n) + v)
    rows, cols = np.divmod(keys, int(n)) if int(n) else (keys, keys)
    indptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=k), out=indptr[1:])
    return LocalCSR(indptr, cols.astype(np.int64), np.ones(cols.size), (k, int(n)))


def probability_matrix(A, Q, path="auto", square=False, backend=None) -> LocalCSR:
    """``P = Q A`` (``Q (A∘A)`` when ``square``), unnormalised. Local.

    Parameters
    ----------
    A : scipy sparse, LocalCSR or LocalGraph
    Q : LocalCSR or scipy sparse, shape (R, n)
    path : ``"auto"``, ``"gather"`` or ``"spgemm"``
        ``"gather"`` requires exactly one nonzero equal to 1 per row of ``Q``
        and returns ``A[Q.indices]``; ``"auto"`` takes it when that holds,
        the backend SpGEMM otherwise.
    """
    g = A if isinstance(A, LocalGraph) else LocalGraph(A, backend)
    if sp.issparse(Q):
        Q = LocalCSR.from_scipy(sp.csr_array(Q, dtype=np.float64), index_dtype=np.int64)
    if Q.shape[1] != g.n:
        raise DimensionMismatch(f"probability_matrix: Q must have n={g.n} columns, but got "
                                f"Q.shape={Q.shape}")
    one_hot = bool(np.all(np.diff(Q.indptr) == 1) and np.all(Q.data == 1))
    if path not in ("auto", "gather", "spgemm"):
        raise ValueError(f"probability_matrix: path must be 'auto', 'gather' or 'spgemm', "
                         f"but got {path!r}")
    if path == "gather" and not one_hot:
        raise ValueError("probability_matrix: path='gather' needs one nonzero equal to 1 "
                         "per row of Q")
    if path == "spgemm" or not one_hot:
        return g.multiply(_as64(Q), square)
    p = g.rows(np.asarray(Q.indices, dtype=np.int64))
    if square:
        p = LocalCSR(p.indptr, p.indices, p.data * p.data, p.shape, check=None)
    return p


def row_normalize(p: LocalCSR) -> LocalCSR:
    """Divide each row by its sum; rows summing to 0 stay 0 (no NaN, report §9.5). Local.

    The sums run sequentially in storage order (``np.bincount``), so equal
    rows give bit-identical results in every mode.
    """
    k = p.shape[0]
    row = np.repeat(np.arange(k, dtype=np.int64), np.diff(p.indptr))
    sums = np.bincount(row, weights=p.data, minlength=k)
    safe = np.where(sums > 0, sums, 1.0)
    data = np.where(sums[row] > 0, p.data / safe[row], 0.0)
    return LocalCSR(p.indptr, p.indices, data, p.shape, check=None)


def sample_rows(indptr, indices, data, rows, keys, s, method, weighted, backend=None):
    """The backend's keyed row sampling: ``(out_indptr, positions)``. Local.

    Output row ``r`` holds ``min(s, support)`` distinct positions (into
    ``indices``/``data``) of CSR row ``rows[r]``, increasing; see
    :meth:`spgnn.backends.Backend.sample_rows`.  ``backend`` defaults to the
    default backend.
    """
    return get_backend(backend).sample_rows(indptr, indices, data, rows, keys, s, method,
                                            weighted)


def normalize_batches(batches, n, op="sample"):
    """``(vertices, batch_ptr)`` from a 2-D array or a sequence of 1-D arrays. Local.

    Raises DTypeError for non-integer ids and InvalidSparseStructure for ids
    outside ``[0, n)``.
    """
    if isinstance(batches, tuple) and len(batches) == 2 and np.ndim(batches[1]) == 1 \
            and np.ndim(batches[0]) == 1 and not np.isscalar(batches[0]):
        flat, ptr = (np.asarray(b) for b in batches)
        ptr = ptr.astype(np.int64)
    else:
        arr = batches if isinstance(batches, np.ndarray) else None
        if arr is not None and arr.ndim == 2:
            flat = arr.reshape(-1)
            ptr = np.arange(arr.shape[0] + 1, dtype=np.int64) * arr.shape[1]
        else:
            parts = [np.asarray(b).reshape(-1) for b in batches]
            flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            ptr = np.zeros(len(parts) + 1, dtype=np.int64)
            np.cumsum([p.size for p in parts], out=ptr[1:])
    if flat.size and flat.dtype.kind not in "iu":
        raise DTypeError(f"{op}: batch vertex ids must be integers, but got dtype {flat.dtype}")
    flat = flat.astype(np.int64)
    if ptr[0] != 0 or ptr[-1] != flat.size or np.any(np.diff(ptr) < 0):
        raise InvalidSparseStructure(f"{op}: batch offsets must rise from 0 to {flat.size}, "
                                     f"but got {ptr.tolist()[:10]}")
    if flat.size and (flat.min() < 0 or flat.max() >= n):
        bad = int(flat.min()) if flat.min() < 0 else int(flat.max())
        raise InvalidSparseStructure(f"{op}: batch vertex ids must lie in [0, {n}), but got {bad}")
    return flat, ptr


def _mb_of_rows(ptr):
    return np.repeat(np.arange(ptr.size - 1, dtype=np.int64), np.diff(ptr))


# --------------------------------------------------------------------------- #
# Samplers
# --------------------------------------------------------------------------- #

def _check_sizes(sizes, what):
    try:
        out = tuple(int(s) for s in sizes)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a sequence of ints, but got {sizes!r}") from None
    if any(s < 0 for s in out) or any(int(s) != s for s in sizes):
        raise ValueError(f"{what} must be non-negative integers, but got {sizes!r}")
    return out


class _Sampler:
    kind = ""

    @property
    def hops(self) -> int:
        """Sampled hops, one per graph layer of the model trained on them."""
        return len(self.sizes)

    def sample(self, A, batches, minibatch_ids=None, *, epoch=0, backend=None) -> BulkSample:
        """Sample a bulk of minibatches on this process. Local: no communication.

        Parameters
        ----------
        A : scipy sparse (n x n), LocalCSR or LocalGraph
            Row ``v`` lists what ``v`` aggregates from (report §9.11).
            Build a :class:`LocalGraph` once to skip re-canonicalising.
        batches : 2-D int array (k, b), sequence of 1-D int arrays, or
            ``(vertices, batch_ptr)``
        minibatch_ids : int array (k,), optional
            GLOBAL ids keying the RNG; default ``arange(k)``.  Sampling
            minibatch ``i`` alone with id ``minibatch_ids[i]`` gives the same
            blocks bit for bit.
        epoch : int, also keys the RNG
        backend : str, the backend for SpGEMM / row extraction

        Returns
        -------
        BulkSample
        """
        g = A if isinstance(A, LocalGraph) else LocalGraph(A, backend)
        flat, ptr = normalize_batches(batches, g.n, f"{type(self).__name__}.sample")
        ids = self._ids(minibatch_ids, ptr.size - 1)
        return self._run(g, flat, ptr, ids, epoch)

    def _hops(self, kind, sizes, g, dst, row_ptr, ids, epoch) -> BulkSample:
        """One ``_hop`` per entry of ``sizes``; hop ``t + 1``'s rows are hop ``t``'s columns."""
        out = BulkSample(kind, ids)
        for hop, s in enumerate(sizes):
            blk = self._hop(g, dst, row_ptr, ids, hop, s, epoch)
            out.blocks.append(blk)
            dst, row_ptr = blk.src_ids, blk.col_ptr
        return out

    @staticmethod
    def _ids(minibatch_ids, k):
        if minibatch_ids is None:
            return np.arange(k, dtype=np.int64)
        ids = np.asarray(minibatch_ids)
        if ids.dtype.kind not in "iu":
            raise DTypeError(f"sample: minibatch_ids must be integers, but got {ids.dtype}")
        ids = ids.astype(np.int64).reshape(-1)
        if ids.size != k:
            raise DimensionMismatch(f"sample: need one minibatch id per minibatch ({k}), but got "
                                    f"{ids.size}")
        if ids.size and ids.min() < 0:
            raise ValueError(f"sample: minibatch ids must be non-negative, but got "
                             f"{int(ids.min())}")
        return ids


class GraphSAGESampler(_Sampler):
    """Node-wise sampling: ``fanouts[t]`` distinct neighbours per row at hop ``t`` (report §2.4).

    Parameters
    ----------
    fanouts : sequence of int
        ``fanouts[0]`` applies to the hop from the batch (e.g. ``(15, 10, 5)``).
    frontier : ``"tree"`` or ``"unique"``
        ``"tree"`` (the paper's shapes): every sampled nonzero becomes its own
        column and the next hop's row, repeated vertices are not merged; the
        RNG row key is the row's position in its minibatch's tree.
        ``"unique"`` (PyG/DGL blocks): per minibatch, hop ``t``'s columns are
        its rows (targets first) followed by the newly sampled vertices in
        first-appearance order, each vertex once; the next hop's rows are
        those columns; the RNG row key is the vertex id.  Duplicates in a
        batch are merged (first appearance) in this mode.
    include_dst : bool
        Tree mode only: put each minibatch's rows in front of its sampled
        columns (CAGNET's self columns for SAGEConv's root term, report
        §9.7), so the frontier grows by ``1 + s`` per hop.  Always on in
        unique mode.
    method : ``"auto"`` (= ``"floyd"``), ``"floyd"``, ``"es"`` or ``"its"``
        All give an exactly uniform ``min(s, deg)``-subset per row; they
        consume different random numbers.
    seed : int
    """

    kind = "sage"

    def __init__(self, fanouts, *, frontier="tree", include_dst=False, method="auto", seed=0):
        self.fanouts = self.sizes = _check_sizes(fanouts, "GraphSAGESampler: fanouts")
        if frontier not in FRONTIERS:
            raise ValueError(f"GraphSAGESampler: frontier must be one of {FRONTIERS}, but got "
                             f"{frontier!r}")
        if method not in SAMPLE_METHODS:
            raise ValueError(f"GraphSAGESampler: method must be one of {SAMPLE_METHODS}, but got "
                             f"{method!r}")
        self.frontier = frontier
        self.include_dst = bool(include_dst) or frontier == "unique"
        self.method = "floyd" if method == "auto" else method
        self.seed = int(seed)

    def __repr__(self):
        return (f"GraphSAGESampler(fanouts={self.fanouts}, frontier={self.frontier!r}, "
                f"include_dst={self.include_dst}, method={self.method!r}, seed={self.seed})")

    def _run(self, g, flat, ptr, ids, epoch):
        n, k = g.n, ptr.size - 1
        dst, row_ptr = flat, ptr
        if self.frontier == "unique":
            _, _, dst, row_ptr = g.first_appearance(
                flat, ptr, np.zeros(0, dtype=np.int64), np.zeros(k + 1, dtype=np.int64), n)
        return self._hops("sage", self.fanouts, g, dst, row_ptr, ids, epoch)

    def _hop(self, g, dst, row_ptr, ids, hop, s, epoch):
        n = g.n
        R = dst.size
        row_mb = _mb_of_rows(row_ptr)
        if self.frontier == "tree":
            keys = row_keys(self.seed, "sage-tree", ids[row_mb], hop,
                            np.arange(R, dtype=np.int64) - row_ptr[row_mb], epoch)
        else:
            keys = row_keys(self.seed, "sage-unique", ids[row_mb], hop, dst, epoch)
        # P = Q A by row gather, fused into the sampling kernel (report §2.4:
        # GraphSAGE's Q has one nonzero per row); P's values are ignored, so
        # sampling is uniform even for weighted A (report §9.15).
        indptr, indices, data, rows = g.gather(dst)
        s_ptr, pos = g.sample_rows(indptr, indices, data, rows, keys, s, self.method, False)
        cols, vals = indices[pos], data[pos]
        nnz = cols.size
        if self.frontier == "tree" and not self.include_dst:
            # EXTRACT is free: A^hop is S with one column per sampled nonzero.
            col_ptr = s_ptr[row_ptr]
            adj = LocalCSR(s_ptr, np.arange(nnz, dtype=np.int64), vals, (R, nnz), check=None)
            return SampledBlock(hop, adj, dst, cols, row_ptr, col_ptr)
        if self.frontier == "tree":
            edge_mb = np.repeat(row_mb, np.diff(s_ptr))
            nd = np.diff(row_ptr)
            col_ptr = row_ptr + s_ptr[row_ptr]
            src = np.empty(R + nnz, dtype=np.int64)
            rpos = col_ptr[row_mb] + (np.arange(R, dtype=np.int64) - row_ptr[row_mb])
            epos = (col_ptr[edge_mb] + nd[edge_mb]
                    + (np.arange(nnz, dtype=np.int64) - s_ptr[row_ptr][edge_mb]))
            src[rpos] = dst
            src[epos] = cols
            adj = LocalCSR(s_ptr, epos, vals, (R, R + nnz), check=None)
            return SampledBlock(hop, adj, dst, src, row_ptr, col_ptr)
        # unique: columns = this hop's rows, then new vertices (first appearance),
        # de-duplicated per minibatch by the backend (the numba kernel: np.unique
        # + argsort over minibatch*n + vertex keys dominated the time; same bits)
        _, ecol, src, col_ptr = g.first_appearance(dst, row_ptr, cols, s_ptr[row_ptr], n)
        vals = np.ascontiguousarray(vals, dtype=np.float64)
        g.sort_rows_by_column(s_ptr, ecol, vals)
        adj = LocalCSR(s_ptr, ecol, vals, (R, src.size), check=None)
        return SampledBlock(hop, adj, dst, src, row_ptr, col_ptr)


def _sorted_csr(indptr, cols, vals, shape) -> LocalCSR:
    """CSR with each row's entries sorted by column (rows given by ``indptr``)."""
    row = np.repeat(np.arange(shape[0], dtype=np.int64), np.diff(indptr))
    # columns are distinct within a row, so one unstable sort of row*C + col suffices
    order = np.argsort(row * np.int64(max(shape[1], 1)) + cols)
    return LocalCSR(indptr, cols[order], vals[order], shape, check=None)


def _ladies_formula(prob):
    name = _LADIES_ALIASES.get(prob, prob)
    if name not in LADIES_PROBS:
        raise ValueError(f"LADIES: ladies_prob must be one of {LADIES_PROBS} (aliases "
                         f"{sorted(_LADIES_ALIASES)}), but got {prob!r}")
    return name


def _ladies_prob(g, dst, row_ptr, formula) -> LocalCSR:
    """Normalised ``P`` (k x n) for the stacked sets ``dst`` (report §2.5)."""
    q = set_selection_matrix(dst, row_ptr, g.n)
    p = g.multiply(q, square=(formula == "sum_of_squares"))        # SpGEMM
    if formula == "square_of_sum":
        p = LocalCSR(p.indptr, p.indices, p.data * p.data, p.shape, check=None)
    return row_normalize(p)


def ladies_probabilities(A, batches, ladies_prob="sum_of_squares", backend=None):
    """Row-normalised LADIES probabilities, one row per minibatch (scipy csr). Local.

    The paper's Figure 1 example (report §8.2-10) gives ``[1/7, 0, 1/7, 1/7,
    4/7, 0]`` with ``"square_of_sum"`` and ``[1/5, 0, 1/5, 1/5, 2/5, 0]`` with
    ``"sum_of_squares"``.
    """
    g = A if isinstance(A, LocalGraph) else LocalGraph(A, backend)
    flat, ptr = normalize_batches(batches, g.n, "ladies_probabilities")
    return _ladies_prob(g, flat, ptr, _ladies_formula(ladies_prob)).to_scipy()


class LADIESSampler(_Sampler):
    """Layer-wise sampling: ``layer_sizes[t]`` vertices per minibatch at hop ``t`` (report §2.5).

    Per hop and minibatch ``i`` with row set ``B_i``: ``P_i = Q_i A`` (SpGEMM),
    normalised; ``min(s, |support P_i|)`` distinct vertices drawn with
    probabilities ``P_i`` (successive sampling without replacement, report
    §9.3); the block is ``A[B_i, C_i]`` exactly (every edge between the
    rows and the columns, with ``A``'s values).

    Parameters
    ----------
    layer_sizes : sequence of int
        Vertices sampled per minibatch at each hop (``layer_sizes[0]`` from the batch).
    ladies_prob : ``"sum_of_squares"`` (alias ``"zou"``, default) or
        ``"square_of_sum"`` (alias ``"paper"``): see :data:`LADIES_PROBS`.
    include_batch : bool
        Columns ``C_i`` are ``B_i`` (deduplicated, first appearance) followed
        by the sampled vertices not in ``B_i`` (ascending id) -- CAGNET and
        original LADIES keep the batch vertices among the sources (report
        §9.2; here without empty duplicate columns).  ``False``: ``C_i`` is
        the sampled set only (the paper's ``b x s``).  The next hop's rows
        are ``C_i``.
    method : ``"auto"`` (= ``"es"``), ``"es"`` or ``"its"``
    keep_prob : bool, keep each hop's normalised ``P`` in ``SampledBlock.prob``
    seed : int
    """

    kind = "ladies"

    def __init__(self, layer_sizes, *, ladies_prob="sum_of_squares", include_batch=True,
                 method="auto", keep_prob=False, seed=0):
        self.layer_sizes = self.sizes = _check_sizes(layer_sizes, "LADIESSampler: layer_sizes")
        self.ladies_prob = _ladies_formula(ladies_prob)
        if method not in SAMPLE_METHODS or method == "floyd":
            raise ValueError(f"LADIESSampler: method must be 'auto', 'es' or 'its' (weighted), "
                             f"but got {method!r}")
        self.method = "es" if method == "auto" else method
        self.include_batch = bool(include_batch)
        self.keep_prob = bool(keep_prob)
        self.seed = int(seed)

    def __repr__(self):
        return (f"LADIESSampler(layer_sizes={self.layer_sizes}, ladies_prob={self.ladies_prob!r}, "
                f"include_batch={self.include_batch}, method={self.method!r}, seed={self.seed})")

    def _run(self, g, flat, ptr, ids, epoch):
        return self._hops("ladies", self.layer_sizes, g, flat, ptr, ids, epoch)

    def _hop(self, g, dst, row_ptr, ids, hop, s, epoch):
        n, k = g.n, row_ptr.size - 1
        p = _ladies_prob(g, dst, row_ptr, self.ladies_prob)
        keys = row_keys(self.seed, "ladies", ids, hop, np.zeros(k, dtype=np.int64), epoch)
        s_ptr, pos = g.sample_rows(p.indptr, p.indices, p.data,
                                   np.arange(k, dtype=np.int64), keys, s, self.method, True)
        sampled = p.indices[pos]                      # ascending per minibatch
        if self.include_batch:
            # per minibatch: the batch vertices, then the sampled ones, each once
            _, _, src, col_ptr = g.first_appearance(dst, row_ptr, sampled, s_ptr, n)
        else:
            src, col_ptr = sampled, s_ptr
        # EXTRACT (report §2.5): rows A_R = Q_R A by row gather, then the
        # per-minibatch column selection A_R[:, C_i] by a direct sorted-key
        # select instead of the block-diagonal SpGEMM with a kn-row Q_C
        # (report §7, §9.10: int64 keys i*n + v never overflow).
        a_r = g.rows(dst)
        adj = _select_columns(a_r, _mb_of_rows(row_ptr), src, col_ptr, n)
        return SampledBlock(hop, adj, dst, src, row_ptr, col_ptr,
                            p if self.keep_prob else None)


def _select_columns(a_r: LocalCSR, row_mb, src, col_ptr, n) -> LocalCSR:
    """Entries ``(r, v)`` of ``a_r`` with ``v`` among minibatch ``row_mb[r]``'s columns."""
    R = a_r.shape[0]
    nn = np.int64(max(n, 1))
    src_mb = _mb_of_rows(col_ptr)
    ckeys = src_mb * nn + src
    corder = np.argsort(ckeys, kind="stable")
    sorted_keys = ckeys[corder]
    erow = np.repeat(np.arange(R, dtype=np.int64), np.diff(a_r.indptr))
    ekeys = row_mb[erow] * nn + a_r.indices
    at = np.searchsorted(sorted_keys, ekeys)
    at_c = np.minimum(at, max(sorted_keys.size - 1, 0))
    keep = (at < sorted_keys.size) & (sorted_keys[at_c] == ekeys) if sorted_keys.size else \
        np.zeros(ekeys.size, dtype=bool)
    cols = corder[at_c[keep]].astype(np.int64)
    rows = erow[keep]
    vals = a_r.data[keep]
    indptr = np.zeros(R + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=R), out=indptr[1:])
    return _sorted_csr(indptr, cols, vals, (R, int(src.size)))
