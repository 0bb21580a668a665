"""``DistGraph``: a graph prepared for GNN training and placed on the ranks.

:meth:`DistGraph.from_graph` is collective and runs four named steps:

1. **prepare** (:func:`prepare`, on the ranks holding the graph): the
   adjacency matrix (:mod:`spgnn.io.preprocess`) from the global degrees,
   before any split -- ``adjacency="gcn"`` normalises as Kipf & Welling do
   (symmetrise, drop stored self-loops, add ``I``,
   ``Â = D^-1/2 (A + I) D^-1/2``), ``adjacency="mean"`` is GraphSAGE's mean
   aggregator ``D⁻¹A`` of the symmetrised pattern without self-loops (its
   transpose is built on first use by the backward pass); row-normalised
   features (``normalize_features=True``; zero rows stay zero); the node
   data (:class:`NodeData`: labels, masks, original ids);
2. **order** (:func:`order`): optionally renumbers the vertices by a
   partition (``"random"``, ``"metis"``, ``"balanced"`` through
   :func:`spgnn.partition.partition_graph`; ``"none"`` computes nothing) and
   applies the permutation to Â's rows and columns, the features and the
   node data, remembering the original ids (dropout masks and
   :meth:`DistGraph.to_original` use them); then, for
   ``Plexus3D(permute="double")``, Plexus's double permutation;
3. **place** (the placement's ``layouts``, :mod:`spgnn.gnn.placement`):
   the layouts of Â (Â is its own transpose after step 1), the features and
   the node data:

   ========== =============== ============================== =================================
   placement  grid            Â                              features / node data
   ========== =============== ============================== =================================
   Row1D      ``("row",)``    ``Layout("row", splits)``      ``Layout("row", splits)``
   Rep15D     ``(k, c)``      ``Layout("row", "layer")``     ``Layout("row")``, replicated c×
   Plexus3D   ``(x, y, z)``   ``Layout(d, o)`` per layer,    ``Layout(x, y)`` (layer-0 roles),
                              made on first use from a        or ``Layout((x, z), y)`` sharded
                              row-split base copy             over depth (``shard_input``)
   ========== =============== ============================== =================================

   ``splits`` are the partition's block offsets (P parts for 1d, ``k = P/c``
   for 1.5D).  In 3D the permutation is applied but blocks are even (the
   rows of a 3D layer are split over a different axis in each layer);
4. **scatter** (:func:`scatter`): every matrix from rank 0, or sliced by
   every rank when all hold the graph.  The result (:class:`Shards`) and the
   global sizes (``meta``) are all the :class:`DistGraph` constructor takes:
   a reader of pre-partitioned shards (issue 37) replaces steps 1, 2 and 4
   by producing the same two.
"""

import contextlib
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..backends import get_backend
from ..core.dist_dense import DistDenseMatrix
from ..core.dist_sparse import DistSparseMatrix
from ..core.spmm import DISTRIBUTED_ALGORITHMS
from ..errors import GridError, NonFiniteError, ShardError
from ..grid import default_grid_3d
from ..layout import Layout, block_offsets
from ..io.preprocess import (mean_adjacency, neighbour_pattern, normalized_adjacency,
                             normalized_adjacency_rows, offdiagonal_pattern,
                             row_normalize_features)
from ..io import shards as shard_io
from ..io.synthetic import SYNTHETIC_HINT
from ..local.csr import LocalCSR
from ..partition import PARTITIONERS, double_permutation, partition_graph
from .context import GraphContext
from .placement import Plexus3D, Row1D, as_placement, check_choice
from .sparse import SPARSE_DENSITY, SparseBackedMatrix

__all__ = ["DistGraph", "NodeData", "Shards", "ALGORITHMS", "PARTITIONS", "ADJACENCIES",
           "default_grid_3d"]

#: Algorithms a GCN trains on.
ALGORITHMS = DISTRIBUTED_ALGORITHMS
PARTITIONS = tuple(PARTITIONERS)
#: The graph's adjacency matrix (what :meth:`GraphContext.propagate` multiplies by):
#: GCN's symmetric ``Â`` or the mean aggregator ``D⁻¹A``.
ADJACENCIES = ("gcn", "mean")


def require_finite(graph):
    """Raise :class:`~spgnn.errors.NonFiniteError` naming the first NaN/infinite feature or edge weight.

    Local.  Training on such a graph would not fail: ReLU maps NaN to 0, and
    the run would end with a finite-looking loss at chance accuracy.
    """
    x = graph.features
    data = x.data if sp.issparse(x) else np.asarray(x)
    if data.size and not np.isfinite(data).all():
        if sp.issparse(x):
            coo = sp.coo_array(x)
            k = int(np.flatnonzero(~np.isfinite(coo.data))[0])
            r, c, v = int(coo.row[k]), int(coo.col[k]), coo.data[k]
        else:
            r, c = (int(i) for i in np.argwhere(~np.isfinite(data))[0])
            v = data[r, c]
        raise NonFiniteError(f"{graph.name}: feature row {r}, column {c} is {v}; features must "
                             f"be finite")
    adj = graph.adj
    if adj.nnz and not np.isfinite(adj.data).all():
        coo = sp.coo_array(adj)
        k = int(np.flatnonzero(~np.isfinite(coo.data))[0])
        raise NonFiniteError(f"{graph.name}: the edge ({int(coo.row[k])}, {int(coo.col[k])}) has "
                             f"weight {coo.data[k]}; edge weights must be finite")


def _adjacency_matrix(adj, adjacency, dtype):
    if adjacency == "gcn":
        return normalized_adjacency(adj, dtype)
    return mean_adjacency(neighbour_pattern(adj), dtype)


def _dense_features(x, dtype):
    """The features as a dense ``dtype`` array, not normalised."""
    if sp.issparse(x):
        x = sp.csr_array(x, dtype=np.float64)
        x.sum_duplicates()
        return x.astype(dtype).toarray()
    return np.asarray(x).astype(np.float64).astype(dtype, copy=False)


def require_nonnegative_weights(graph):
    """Raise ValueError naming the first negative edge weight. Local.

    GCN's ``D^-1/2 (A + I) D^-1/2`` needs positive degrees: with negative
    weights a degree can reach 0 or below, and a graph whose weights are all
    -1 trained at a constant loss without a word.  The mean aggregator
    (``adjacency="mean"``) reads the pattern only, so it takes any weights.
    """
    adj = graph.adj
    if adj.nnz and adj.data.min() < 0:
        coo = sp.coo_array(adj)
        k = int(np.flatnonzero(coo.data < 0)[0])
        raise ValueError(f"{graph.name}: the edge ({int(coo.row[k])}, {int(coo.col[k])}) has "
                         f"weight {coo.data[k]}; GCN's normalisation D^-1/2 (A + I) D^-1/2 "
                         f"needs non-negative edge weights (the mean aggregator reads the "
                         f"pattern only)")


def require_features_and_labels(graph):
    """Raise ValueError (with the hint for synthetic ones) unless ``graph`` has both. Local."""
    if graph.features is None or graph.labels is None:
        raise ValueError(f"DistGraph.from_graph: graph {graph.name!r} needs features and labels "
                         f"(features={'set' if graph.features is not None else None}, "
                         f"labels={'set' if graph.labels is not None else None}); "
                         f"{SYNTHETIC_HINT}")


@dataclass
class NodeData:
    """Per-node data of some rows: ``label`` (int64), the masks (bool), ``orig`` (input ids).

    ``nodes[name]`` reads a field by name (a mask chosen by name:
    ``nodes[which]``).
    """

    label: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    orig: np.ndarray

    FIELDS = ("label", "train", "val", "test", "orig")
    MASKS = ("train", "val", "test")

    @classmethod
    def of_graph(cls, graph):
        """The input graph's labels and masks (a missing mask: no node), ids ``0..n-1``. Local."""
        n = graph.num_nodes
        masks = [np.zeros(n, dtype=bool) if m is None else np.asarray(m).astype(bool)
                 for m in (graph.train_mask, graph.val_mask, graph.test_mask)]
        return cls(np.asarray(graph.labels).astype(np.int64), *masks, np.arange(n, dtype=np.int64))

    def __getitem__(self, name):
        if name not in self.FIELDS:
            raise KeyError(f"NodeData: no field {name!r}; fields are {self.FIELDS}")
        return getattr(self, name)

    def take(self, rows):
        """The rows ``rows`` (a permutation or a selection), a new NodeData. Local."""
        return NodeData(*(getattr(self, f)[rows] for f in self.FIELDS))

    def counts(self):
        """``{"train", "val", "test"}`` node counts. Local."""
        return {k: int(getattr(self, k).sum()) for k in self.MASKS}

    def packed(self):
        """One ``(n, 5)`` int64 matrix, columns :attr:`FIELDS` (what is distributed). Local.

        Distributing one matrix moves the node data in one scatter or
        redistribution per placement (the setup bytes of the ledger's
        ``gnn-setup:*`` labels), not five.
        """
        return np.column_stack([getattr(self, f).astype(np.int64) for f in self.FIELDS])

    @classmethod
    def unpacked(cls, table):
        """The inverse of :meth:`packed` (masks back to bool, contiguous columns). Local."""
        return cls(*(table[:, k].astype(bool) if name in cls.MASKS
                     else np.ascontiguousarray(table[:, k])
                     for k, name in enumerate(cls.FIELDS)))


@dataclass
class Prepared:
    """What :func:`prepare` makes on a rank holding the graph (global, unordered)."""

    adj: sp.csr_array
    x: np.ndarray
    nodes: NodeData


def prepare(graph, adjacency, normalize_features, dtype):
    """Step 1: adjacency matrix, dense features and node data of ``graph``. Local.

    Raises ValueError / TypeError / NonFiniteError for a graph without
    features or labels, with non-finite values, or (``adjacency="gcn"``)
    with a negative edge weight.
    """
    require_features_and_labels(graph)
    require_finite(graph)
    if adjacency == "gcn":
        require_nonnegative_weights(graph)
    adj = _adjacency_matrix(graph.adj, adjacency, dtype)
    if normalize_features:
        x = row_normalize_features(graph.features, dtype)
    else:
        x = _dense_features(graph.features, dtype)
    return Prepared(adj, x, NodeData.of_graph(graph))


@dataclass
class Ordered:
    """What :func:`order` leaves: ``meta`` on every rank, the matrices on the holders.

    ``meta``: ``n``, ``f`` (features), ``c`` (classes), ``offsets`` (the
    partition's block boundaries), ``nnz_x``, ``counts`` -- a plain dict, the
    pickle broadcast as ``gnn-setup:meta``.  ``adj``, ``x``, ``nodes`` in the
    new order (columns ``P_c`` with a double permutation), ``adj2`` and
    ``nodes_r`` (double permutation only: ``P_c Â P_rᵀ`` and the node data in
    ``P_r`` order); ``stats`` the partitioner's (rank 0, else ``None``).
    """

    meta: dict
    stats: dict | None = None
    adj: sp.csr_array | None = None
    x: np.ndarray | None = None
    nodes: NodeData | None = None
    adj2: sp.csr_array | None = None
    nodes_r: NodeData | None = None


def order(comm, prepared, nparts, partition, seed, *, everyone, double):
    """Step 2: rank 0 decides the vertex order; every holder applies it. Collective.

    ``prepared`` is :func:`prepare`'s result on the holders (rank 0 always),
    ``None`` elsewhere; ``everyone``: every rank holds it; ``double``: then
    Plexus's double permutation (``Plexus3D(permute="double")``).
    """
    perm, meta, stats = None, None, None
    if comm.rank == 0:
        adj, x, nodes = prepared.adj, prepared.x, prepared.nodes
        n = adj.shape[0]
        if partition != "none":
            # fresh arrays: Â itself is not touched
            perm, offsets, stats = partition_graph(offdiagonal_pattern(adj), partition, nparts,
                                                   seed)
        else:
            offsets = np.asarray(block_offsets(n, nparts), dtype=np.int64)
        meta = dict(n=n, f=x.shape[1], c=int(max(nodes.label.max(initial=-1), -1)) + 1,
                    offsets=tuple(int(v) for v in offsets), nnz_x=int(np.count_nonzero(x)),
                    counts=nodes.counts())
    meta = comm.bcast_obj(meta, root=0, label="gnn-setup:meta")
    if everyone and partition != "none":
        perm = comm.bcast_obj(perm, root=0, label="gnn-setup:perm")
    out = Ordered(meta, stats)
    if prepared is None:
        return out
    adj, x, nodes = prepared.adj, prepared.x, prepared.nodes
    if perm is not None:
        perm = np.asarray(perm, dtype=np.int64)
        adj = sp.csr_array(adj[perm][:, perm])
        adj.sort_indices()
        x, nodes = x[perm], nodes.take(perm)
    if double:
        # rank 0 and every holder draw the same P_r, P_c from the seed
        dp = double_permutation(adj, seed)
        adj, out.adj2 = dp.matrices(adj)
        adj.sort_indices()
        out.adj2.sort_indices()
        x, nodes, out.nodes_r = x[dp.col_perm], nodes.take(dp.col_perm), nodes.take(dp.row_perm)
    out.adj, out.x, out.nodes = adj, x, nodes
    return out


@dataclass
class Shards:
    """A rank's share of a placed graph: what the :class:`DistGraph` constructor takes.

    ``A`` (Â in the placement's adjacency layout), ``features``,
    ``nodes`` (the packed node data, :meth:`NodeData.packed`), and with a
    double permutation ``A2`` and ``nodes_r``.
    """

    A: DistSparseMatrix
    features: DistDenseMatrix
    nodes: DistDenseMatrix
    A2: DistSparseMatrix | None = None
    nodes_r: DistDenseMatrix | None = None


def scatter(ordered, grid, layouts, *, everyone, double, backend):
    """Step 4: place :func:`order`'s matrices in ``layouts``; the rank's :class:`Shards`. Collective.

    From rank 0 (one alltoallv per matrix), or, when ``everyone`` holds
    the graph, each rank slices its blocks.  ``double``: the placement has
    a double permutation (two variants of Â and of the node data).
    """
    root = None if everyone else 0
    mine = everyone or grid.world.rank == 0

    def sparse(m):
        return DistSparseMatrix.from_global(m if mine else None, grid, layouts.adjacency,
                                            backend=backend, root=root)

    def nodes(data):
        return DistDenseMatrix.from_global(data.packed() if mine else None, grid, layouts.nodes,
                                           root=root)

    # the order of these calls is the order of the setup's ledger entries
    A = sparse(ordered.adj)
    x = DistDenseMatrix.from_global(ordered.x if mine else None, grid, layouts.features,
                                    backend=backend, root=root)
    shards = Shards(A, x, nodes(ordered.nodes))
    if double:
        shards.nodes_r = nodes(ordered.nodes_r)
        shards.A2 = sparse(ordered.adj2)
    return shards


def part_blocks(off, blocks):
    """``blocks + 1`` row boundaries from ``K`` parts' boundaries ``off``, or ``None``. Pure.

    ``K = blocks``: the parts; ``K = m·blocks``: every ``m`` consecutive parts
    make one block; ``blocks = m·K``: every part is cut into ``m`` even
    blocks; otherwise ``None`` (the callers name the fix).
    """
    off = [int(v) for v in off]
    k = len(off) - 1
    if k == blocks:
        return tuple(off)
    if k % blocks == 0:
        return tuple(off[::k // blocks])
    if blocks % k == 0:
        m = blocks // k
        out = [0]
        for i in range(k):
            out += [off[i] + b for b in block_offsets(off[i + 1] - off[i], m)[1:]]
        return tuple(out)
    return None


def shard_offsets(man, placement, grid):
    """The row blocks of ``placement`` on ``grid`` from a shard manifest's ``K`` parts. Pure.

    ``K`` equal to the placement's block count (``P`` for 1d, ``P/c`` for
    1.5D): the parts; ``K = m·P``: every ``m`` consecutive parts make one
    block (coarsened offsets); ``P = m·K``: every part is cut into ``m`` even
    blocks.  3d cuts even blocks of the shards' order whatever ``K``.
    Raises GridError naming the fix (``--parts``) when neither divides the other.
    """
    off = [int(v) for v in man["offsets"]]
    k = len(off) - 1
    if isinstance(placement, Plexus3D):
        return tuple(off)
    p = placement.nparts(grid)
    blocks = part_blocks(off, p)
    if blocks is not None:
        return blocks
    what = "P" if isinstance(placement, Row1D) else "P/c"
    raise GridError(f"DistGraph.from_shards: the shards have K={k} parts, but "
                    f"{placement.algorithm} on {grid.size} ranks cuts the graph into "
                    f"{what}={p} row blocks, and neither divides the other; re-partition with "
                    f"--parts {p} (or run on a rank count that divides or is a multiple of {k})")


def read_shards(comm, grid, placement, directory, man, offsets, adjacency, normalize_features,
                dtype, backend, block=None, stage=None):
    """The shard reader's steps 1, 2 and 4: ``(meta, Shards, files read)``. Collective.

    Each rank reads only the rows of its blocks (their part files), builds
    its block of Â from them and the stored degrees (bit for bit the rows of
    :func:`prepare`'s Â), normalises its feature rows in the form the whole
    matrix takes, and wraps the blocks (``from_local``): no graph data moves
    between ranks.  A missing or damaged file raises
    :class:`~spgnn.errors.ShardError` on every rank.  ``block``: rows
    already read (``--algo auto``; or a one-item list holding them, emptied), used when
    they are exactly this rank's.  ``stage``: a stage clock's ``stage`` (the reading is
    timed as ``read-rows``, the rest as ``place``).
    """
    stage = _no_stage if stage is None else stage
    n, f = man["n"], man["num_features"]
    layouts = placement.layouts(grid, n, offsets)
    lo, hi = row_span(grid, layouts, n, f)
    block = _take(block)
    if block is not None:                    # every rank passes one, or none does
        block = held_rows(comm, block, lo, hi, stage)
    if block is None:
        block = read_own_rows(comm, directory, man, lo, hi, stage)
    info = dict(n=n, f=f, c=man["num_classes"], offsets=tuple(offsets),
                feature_form=man["feature_form"], counts=dict(man["counts"]))
    with stage("place"):
        meta, shards = place_rows(comm, grid, layouts, block, lo, info, adjacency,
                                  normalize_features, dtype, backend)
    return meta, shards, block.files


def row_span(grid, layouts, n, f):
    """``(lo, hi)``: the rows this rank's blocks of Â, features and node data need. Local."""
    (ar, _) = layouts.adjacency.bounds(grid, (n, n))
    (xr, _) = layouts.features.bounds(grid, (n, f))
    (nr, _) = layouts.nodes.bounds(grid, (n, len(NodeData.FIELDS)))
    return min(ar[0], xr[0], nr[0]), max(ar[1], xr[1], nr[1])


def place_rows(comm, grid, layouts, block, lo, info, adjacency, normalize_features, dtype,
               backend):
    """Rows -> placed matrices: ``(meta, Shards)`` from this rank's :class:`RowBlock`. Collective.

    The step shared by shard reading and generation: the rank's block of Â
    from its rows of ``A'`` and the degrees (bit for bit the rows of
    :func:`prepare`'s Â), its feature rows normalised in the form the whole
    matrix takes (``info["feature_form"]``), its node data, each wrapped
    where it lies (``from_local``): no graph data moves between ranks.
    ``block`` holds rows ``lo:`` (at least the rows of ``row_span``);
    ``info``: ``n``, ``f``, ``c``, ``offsets``, ``feature_form``, ``counts``.
    """
    n, f = info["n"], info["f"]
    (ar, ac) = layouts.adjacency.bounds(grid, (n, n))
    (xr, xc) = layouts.features.bounds(grid, (n, f))
    (nr, _) = layouts.nodes.bounds(grid, (n, len(NodeData.FIELDS)))
    be = get_backend(backend)

    def rows(a, r):
        return a[r[0] - lo:r[1] - lo]

    # Â's block
    a_rows = rows(block.adj, ar)
    if adjacency == "gcn":
        a_hat = normalized_adjacency_rows(a_rows, np.arange(*ar), rows(block.deg, ar),
                                          block.degree_of, dtype)
    else:
        pattern = sp.csr_array(a_rows, copy=True)
        pattern.eliminate_zeros()
        pattern.data[:] = 1.0
        a_hat = mean_adjacency(pattern, dtype)
    del a_rows
    a_hat = sp.csr_array(a_hat[:, ac[0]:ac[1]]) if ac != (0, n) else a_hat
    a_hat.sort_indices()
    shape = a_hat.shape
    idt = np.int32 if max(shape[0], shape[1], a_hat.nnz) < np.iinfo(np.int32).max else np.int64
    local = LocalCSR(be.from_host(a_hat.indptr.astype(idt)), be.from_host(a_hat.indices.astype(idt)),
                     be.from_host(a_hat.data), shape)
    del a_hat
    A = DistSparseMatrix.from_local(local, (n, n), grid, layouts.adjacency, backend=be)
    # features
    x_rows = rows(block.x, xr)
    if normalize_features:
        x = row_normalize_features(x_rows, dtype, form=info["feature_form"])
    else:
        x = _dense_features(x_rows, dtype)
    x = np.ascontiguousarray(x[:, xc[0]:xc[1]])
    nnz_x = comm.allgather_obj((xr, xc, int(np.count_nonzero(x))), label="gnn-setup:meta")
    features = DistDenseMatrix.from_local(be.from_host(x), (n, f), grid, layouts.features,
                                          backend=be)
    # node data
    nodes = NodeData(*(rows(getattr(block, name), nr) for name in NodeData.FIELDS))
    packed = DistDenseMatrix.from_local(nodes.packed(), (n, len(NodeData.FIELDS)), grid,
                                        layouts.nodes)
    meta = dict(n=n, f=f, c=info["c"], offsets=tuple(info["offsets"]),
                nnz_x=sum(c for _, _, c in {(r, cc): (r, cc, c) for r, cc, c in nnz_x}.values()),
                counts=dict(info["counts"]))
    return meta, Shards(A, features, packed)


def held_rows(comm, block, lo, hi, stage=None, *, adj_only=False):
    """Rows ``lo:hi`` from the rows ``block`` this rank already holds, or None. Collective.

    ``block`` itself when every rank holds exactly the rows it needs (1D);
    else the ranks move the rows they hold to the ranks that need them
    (:func:`spgnn.core.row_moves.move_rows`, timed as the stage
    ``move-rows``) instead of drawing or reading them again; None (on every
    rank) when the held rows cannot be moved there, and the caller draws or
    reads them.  Every rank passes a block.  ``adj_only``: only ``A'``'s rows are
    needed (``spmm``; :func:`~spgnn.core.row_moves.move_rows`).
    """
    if all(comm.allgather_obj((block.lo, block.hi) == (lo, hi), label="gnn-setup:meta")):
        return block
    from ..core.row_moves import move_rows

    with (_no_stage if stage is None else stage)("move-rows"):
        return move_rows(comm, block, lo, hi, adj_only=adj_only)


def read_own_rows(comm, directory, man, lo, hi, stage=None):
    """Rows ``lo:hi`` of the shard directory, read by this rank (timed as ``read-rows``).
    Collective: a missing or damaged file is one ShardError on every rank."""
    stage = _no_stage if stage is None else stage
    block, err = None, None
    with stage("read-rows"):
        try:
            block = shard_io.read_rows(directory, man, lo, hi)
        except ShardError as exc:
            err = exc
        comm.agree(err)
    return block


def read_manifest_on_root(directory, comm, label):
    """A shard directory's manifest: rank 0 reads it, every rank gets it. Collective.

    A missing or unreadable manifest is one ShardError on every rank.
    """
    man, err = None, None
    if comm.rank == 0:
        try:
            man = shard_io.read_manifest(directory)
        except ShardError as exc:
            err = exc
    comm.agree(err)
    return comm.bcast_obj(man, root=0, label=label)


def _take(block):
    """``block``, or the one item of a list holding it (emptied: the caller's rows are freed
    as soon as the callee drops them)."""
    if isinstance(block, list):
        return block.pop() if block else None
    return block


@contextlib.contextmanager
def _no_stage(name):
    yield


def _sparse_backed(features):
    """The features with a CSR copy of the local block (:class:`SparseBackedMatrix`). Local."""
    dense = features.local
    csr = sp.csr_array(dense)
    csr.sort_indices()
    return SparseBackedMatrix(csr, features.shape, features.grid, features.layout,
                              backend=features.backend, dense=dense)


def _check_options(placement, partition, adjacency, sparse_features, on_device, dtype):
    """The ValueErrors of :meth:`DistGraph.from_graph` before anything moves. Pure."""
    check_choice("DistGraph.from_graph", "partition", partition, PARTITIONS)
    check_choice("DistGraph.from_graph", "adjacency", adjacency, ADJACENCIES)
    three = isinstance(placement, Plexus3D)
    if adjacency == "mean" and three:
        raise ValueError("DistGraph.from_graph: adjacency='mean' is not supported on '3d' "
                         "(its root term needs the input and the aggregation in one layout)")
    if sparse_features and three:
        raise ValueError("DistGraph.from_graph: sparse_features=True is not supported on "
                         "'3d' (its first-layer products split the feature columns)")
    if sparse_features and on_device:
        raise ValueError("DistGraph.from_graph: sparse_features=True needs a host backend: "
                         "the CSR copy of the features is a scipy matrix (the cupy backend "
                         "keeps the features dense on the device)")
    if np.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"DistGraph.from_graph: dtype must be float32 or float64, but got "
                         f"{np.dtype(dtype)}")


class DistGraph:
    """Â, features and node data of one graph, placed on one grid.

    Build with :meth:`from_graph`.  Attributes (local): ``comm``, ``grid``,
    ``placement`` (a :mod:`~spgnn.gnn.placement` value) and what it implies
    (``algorithm``, ``permute``, ``agg_blocks``, ``shard_input``,
    ``shard_weights``, ``exchange`` -- the ``1d`` exchange options or
    ``None`` -- and ``codec``, the exchange's codec made once here),
    ``dtype``, ``backend``, ``partition``, ``adjacency_kind`` (``"gcn"`` or
    ``"mean"``), ``num_nodes``, ``num_features``, ``num_classes``,
    ``counts`` (global ``{"train", "val", "test"}`` node counts),
    ``features`` (:class:`DistDenseMatrix` in the first layer's input
    layout), ``A`` / ``AT`` (1d/15d: Â and Âᵀ; 3d: ``None``, use
    :meth:`adjacency`), ``offsets`` (row block boundaries), ``stats`` (the
    partitioner's statistics on rank 0, else ``None``).
    """

    def __init__(self, comm, grid, placement, meta, shards, *, partition="none", stats=None,
                 adjacency="gcn", sparse_features=False, dtype=np.float32, backend=None):
        """Assemble placed pieces (local); :meth:`from_graph` makes them.

        ``meta``: the global sizes (:class:`Ordered`), ``shards``: this
        rank's :class:`Shards` in ``placement``'s layouts on ``grid``.
        ``sparse_features``: keep a CSR copy of the feature block (a bool).
        """
        self.comm, self.grid, self.placement = comm, grid, placement
        self.dtype, self.backend = np.dtype(dtype), backend
        self.partition, self.stats, self.adjacency_kind = partition, stats, adjacency
        three = placement if isinstance(placement, Plexus3D) else Plexus3D()
        self.permute, self.agg_blocks = three.permute, three.agg_blocks
        self.shard_input, self.shard_weights = three.shard_input, three.shard_weights
        self.exchange = placement.exchange if isinstance(placement, Row1D) else None
        self.codec = None if self.exchange is None else self.exchange.make_codec()
        n = meta["n"]
        self.num_nodes, self.num_features, self.num_classes = n, meta["f"], meta["c"]
        self.counts = meta["counts"]
        self.offsets = placement.layouts(grid, n, meta["offsets"]).offsets
        self.features = _sparse_backed(shards.features) if sparse_features else shards.features
        self._nodes_by_order = {"c": shards.nodes}
        self._A_by_variant = {0: shards.A}
        if shards.A2 is not None:
            self._nodes_by_order["r"] = shards.nodes_r
            self._A_by_variant[1] = shards.A2
        self._A_base = shards.A
        self.A = None if isinstance(placement, Plexus3D) else shards.A
        self._node_cache, self._adj_cache, self._perm = {}, {}, {}

    @property
    def algorithm(self) -> str:
        """The placement's algorithm (``"1d"``, ``"1d-aware"``, ``"15d"``, ``"15d-aware"``, ``"3d"``)."""
        return self.placement.algorithm

    # ---------------------------------------------------------------- building
    @classmethod
    def from_graph(cls, graph, comm, placement="1d-aware", *, partition="none", adjacency="gcn",
                   normalize_features=True, sparse_features=None, dtype=np.float32,
                   backend=None, seed=0):
        """Prepare, order, place and scatter ``graph`` (module docstring). Collective over ``comm``.

        Parameters
        ----------
        graph : spgnn.io.Graph or None
            With features, labels and (optionally) masks.  Either rank 0 alone
            holds it (others pass ``None``; data are scattered from rank 0) or
            every rank passes the same graph (each slices its blocks).
        comm : Communicator
        placement : Row1D, Rep15D, Plexus3D or str
            How the graph lies on the ranks (:mod:`spgnn.gnn.placement`);
            an algorithm name (``"1d"``, ``"1d-aware"``, ``"15d"``,
            ``"15d-aware"``, ``"3d"``) means its placement with defaults.
        partition : {"none", "random", "metis", "balanced"}
            Vertex renumbering computed on rank 0 (``seed``); ``"none"`` keeps
            the input order with even blocks.
        adjacency : {"gcn", "mean"}
            The adjacency matrix: GCN's ``Â`` (symmetric) or the mean
            aggregator ``D⁻¹A`` (GraphSAGE; not on ``3d``).
        normalize_features : bool
            Row-normalise the features (Kipf & Welling's preprocessing).
        sparse_features : bool or None
            Keep a CSR copy of each rank's feature block, so that input
            dropout and the first layer's ``X·W`` and ``Xᵀ·G`` cost O(nnz)
            (``features`` is then a
            :class:`~spgnn.gnn.sparse.SparseBackedMatrix`; its ``local`` is
            still the dense block).  ``None`` (default): when at most
            ``SPARSE_DENSITY`` (10 %) of the features are non-zero, except on
            ``3d``, whose products split the feature columns, and on a device
            backend (``cupy``), whose features stay dense on the device (both
            refuse ``True``).
        dtype : numpy dtype
            float32 (default) or float64 for Â, features and parameters.
        backend : str, optional
            Local kernel backend of the sparse matrices.
        seed : int
            Of the partitioner and of the double permutation.

        Raises
        ------
        ValueError, GridError
            On every rank, before distributing anything.
        """
        placement = as_placement(placement)
        on_device = get_backend(backend).xp is not np
        _check_options(placement, partition, adjacency, sparse_features, on_device, dtype)
        dtype = np.dtype(dtype)
        have = comm.allgather_obj(graph is not None, label="gnn-setup:meta")
        if not have[0]:
            raise ValueError("DistGraph.from_graph: rank 0 must hold the graph (others may "
                             "pass None)")
        everyone = all(have)
        grid = placement.make_grid(comm)
        # 1. prepare, on the holders
        prepared, err = None, None
        if graph is not None and (everyone or comm.rank == 0):
            try:
                prepared = prepare(graph, adjacency, normalize_features, dtype)
            except (ValueError, TypeError, NonFiniteError) as exc:
                err = exc
        comm.agree(err)
        # 2. order; 3. place; 4. scatter (issue 37: a shard reader makes `meta` and
        # `shards` from files instead of steps 1, 2 and 4, and calls the constructor)
        double = isinstance(placement, Plexus3D) and placement.permute == "double"
        ordered = order(comm, prepared, placement.nparts(grid), partition, seed,
                        everyone=everyone, double=double)
        meta = ordered.meta
        layouts = placement.layouts(grid, meta["n"], meta["offsets"])
        shards = scatter(ordered, grid, layouts, everyone=everyone, double=double,
                         backend=backend)
        if sparse_features is None:
            sparse_features = (not isinstance(placement, Plexus3D) and not on_device
                               and meta["nnz_x"] <= SPARSE_DENSITY * max(1, meta["n"] * meta["f"]))
        return cls(comm, grid, placement, meta, shards, partition=partition, stats=ordered.stats,
                   adjacency=adjacency, sparse_features=bool(sparse_features), dtype=dtype,
                   backend=backend)

    @classmethod
    def from_shards(cls, directory, comm, placement="1d-aware", *, adjacency="gcn",
                    normalize_features=True, sparse_features=None, dtype=np.float32,
                    backend=None, block=None, clock=None):
        """Read a shard directory (``spgnn partition``, :mod:`spgnn.io.shards`) in parallel. Collective.

        Each rank reads only the part files holding its rows: no rank holds
        the whole graph, and features and labels never pass through rank 0
        (rank 0 reads the small manifest and broadcasts it).  The result is
        exactly what :meth:`from_graph` makes from the graph the shards were
        written from with the same partition method and seed when the shards
        have as many parts as the placement has row blocks (``P`` for 1d,
        ``P/c`` for 1.5D): the same Â, features and node data, bit for bit,
        so training is too.  ``K = m·P`` parts are coarsened (rank ``r``
        reads parts ``m·r .. m·r+m-1``), ``P = m·K`` ranks cut each part into
        ``m`` even blocks (each of the ``m`` ranks reads the whole part file
        and keeps its rows); any other ``K`` raises GridError on every rank
        naming the fix (``--parts``).  3d (``permute="none"``) reads even
        blocks of the shards' order, any ``K``; ``permute="double"`` is
        refused (its permutations need the whole Â).  Other parameters as in
        :meth:`from_graph` (the partition is the shards': ``partition`` is
        the manifest's method).  ``block``: this rank's rows already read
        (:func:`spgnn.io.shards.read_rows`, ``--algo auto``; or a one-item
        list holding them, which is emptied so that they are freed once
        placed; every rank passes rows, or none), used instead of reading
        them again: as they are when they are exactly the rows it needs,
        else moved between the ranks to the rows the placement needs (1.5D,
        3D; :func:`held_rows`).  ``clock``: a stage clock
        (``clock.stage(name)`` context manager, :class:`spgnn.bench.StageClock`)
        timing the stages ``read-rows``, ``move-rows`` and ``place``.

        ``shard_files`` (attribute, local): the part files this rank read.

        Raises
        ------
        ShardError
            On every rank: a missing, truncated or damaged part file, a
            missing manifest or one of another format version.
        GridError, ValueError
            On every rank, before reading any part.
        """
        placement = as_placement(placement)
        on_device = get_backend(backend).xp is not np
        _check_options(placement, "none", adjacency, sparse_features, on_device, dtype)
        if isinstance(placement, Plexus3D) and placement.permute == "double":
            raise ValueError("DistGraph.from_shards: Plexus3D(permute='double') is not supported "
                             "from shards (its double permutation is drawn from the whole Â); "
                             "use permute='none', or DistGraph.from_graph")
        dtype = np.dtype(dtype)
        grid = placement.make_grid(comm)
        man = read_manifest_on_root(directory, comm, "gnn-setup:meta")
        if adjacency == "gcn" and man.get("min_edge_weight", 0.0) < 0:
            raise ValueError(f"DistGraph.from_shards: {directory} has an edge of weight "
                             f"{man['min_edge_weight']}; GCN's normalisation D^-1/2 (A + I) "
                             f"D^-1/2 needs non-negative edge weights (the mean aggregator "
                             f"reads the pattern only)")
        offsets = shard_offsets(man, placement, grid)
        meta, shards, files = read_shards(comm, grid, placement, directory, man, offsets,
                                          adjacency, normalize_features, dtype, backend, block,
                                          stage=None if clock is None else clock.stage)
        if sparse_features is None:
            sparse_features = (not isinstance(placement, Plexus3D) and not on_device
                               and meta["nnz_x"] <= SPARSE_DENSITY * max(1, meta["n"] * meta["f"]))
        method = man.get("partition", {}).get("method", "none")
        out = cls(comm, grid, placement, meta, shards, partition=method, stats=None,
                  adjacency=adjacency, sparse_features=bool(sparse_features), dtype=dtype,
                  backend=backend)
        out.shard_files = files
        return out

    @classmethod
    def from_generator(cls, spec, comm, placement="1d-aware", *, features=None, labels=None,
                       split=(0.6, 0.2), split_seed=0, adjacency="gcn", normalize_features=True,
                       sparse_features=None, dtype=np.float32, backend=None, clock=None,
                       progress=None, block=None):
        """Generate ``spec`` (``rmat:``/``sbm:``/``plsbm:``) in parallel and place it. Collective.

        Each rank draws its share of the edges and gets the rows of its
        blocks (:func:`spgnn.gnn.rows.generate_rows`), then the step shared
        with shard reading (:func:`place_rows`): no rank ever holds the whole
        graph.  The vertex order is the generator's (``partition="none"``,
        even blocks).  The result equals, bit for bit, what
        :meth:`from_graph` makes from ``load_graph(spec)`` with the same
        ``features``/``labels`` specs (:func:`spgnn.io.with_synthetic`) and
        the per-vertex split of ``split`` and ``split_seed``
        (``Graph.random_split(..., per_vertex=True)``), so training is too.
        ``Plexus3D(permute="double")`` is refused (its permutations need the
        whole Â).  ``clock``: a stage clock (``clock.stage(name)`` context
        managers: ``generate``, ``move-rows``, ``place``), ``progress``: as
        in ``generate_rows``.  ``block``: this rank's rows already drawn
        with the same specs (``--algo auto`` ranks from them; or a one-item
        list holding them, which is emptied so that they are freed once
        placed; every rank passes rows, or none), used instead of drawing
        again: as they are when every rank's are exactly the rows it needs,
        else moved between the ranks to the rows the placement needs (1.5D,
        3D; :func:`held_rows`).
        Other parameters as in :meth:`from_graph`.

        Raises
        ------
        ValueError, GridError
            On every rank, before drawing anything.
        """
        from .rows import as_generator_spec, block_totals, feature_form_of, generate_rows

        placement = as_placement(placement)
        on_device = get_backend(backend).xp is not np
        _check_options(placement, "none", adjacency, sparse_features, on_device, dtype)
        if isinstance(placement, Plexus3D) and placement.permute == "double":
            raise ValueError("DistGraph.from_generator: Plexus3D(permute='double') is not "
                             "supported (its double permutation is drawn from the whole Â); "
                             "use permute='none', or DistGraph.from_graph")
        gen = as_generator_spec(spec)
        dtype = np.dtype(dtype)
        grid = placement.make_grid(comm)
        n = gen.n
        offsets = tuple(int(v) for v in block_offsets(n, placement.nparts(grid)))
        layouts = placement.layouts(grid, n, offsets)
        lo, hi = row_span(grid, layouts, n, 1)
        stage = clock.stage if clock is not None else _no_stage
        block = _take(block)
        if block is not None:                # every rank passes one, or none does
            block = held_rows(comm, block, lo, hi, stage)
        with stage("generate"):
            if block is None:
                block = generate_rows(comm, gen, rows=(lo, hi), features=features,
                                      labels=labels, split=split, split_seed=split_seed,
                                      progress=progress)
            f = int(block.x.shape[1])
            totals = block_totals(comm, lo, hi, [block.train.sum(), block.val.sum(),
                                                 block.test.sum()])
            top = int(comm.allreduce(np.array([block.label.max(initial=-1)], dtype=np.int64),
                                     op="max", label="gnn-setup:meta")[0])
            info = dict(n=n, f=f, c=max(top, -1) + 1, offsets=offsets,
                        feature_form=feature_form_of(comm, block, n),
                        counts={k: int(v) for k, v in zip(NodeData.MASKS, totals)})
        with stage("place"):
            meta, shards = place_rows(comm, grid, layouts, block, lo, info, adjacency,
                                      normalize_features, dtype, backend)
            del block
        if sparse_features is None:
            sparse_features = (not isinstance(placement, Plexus3D) and not on_device
                               and meta["nnz_x"] <= SPARSE_DENSITY * max(1, meta["n"] * meta["f"]))
        return cls(comm, grid, placement, meta, shards, partition="none", stats=None,
                   adjacency=adjacency, sparse_features=bool(sparse_features), dtype=dtype,
                   backend=backend)

    @property
    def AT(self):
        """The transpose of :attr:`A` in A's layout (``None`` on 3d, use :meth:`adjacency_T`).

        ``Â`` is symmetric: one matrix (and one exchange plan) for both.  The
        mean aggregator is not: its transpose is made on first use.
        Collective the first time.
        """
        if self.A is None or self.adjacency_kind == "gcn":
            return self.A
        return self.A.transposed()


    # ------------------------------------------------------------ matrices by layout
    #: Row orders of node data: ``"c"`` (the features' order; the only one
    #: without a double permutation) and ``"r"`` (``P_r``, double only).
    ORDERS = ("c", "r")

    def variant(self, hop):
        """Which Â variant hop ``hop`` multiplies by: 0 (``A1``) or, double-permuted odd hops, 1. Local."""
        return int(hop) % 2 if self.permute == "double" else 0

    @staticmethod
    def variant_orders(variant):
        """``(input order, output order)`` of variant ``variant``'s product (double permutation)."""
        return ("c", "r") if variant == 0 else ("r", "c")

    def adjacency(self, rows, cols, variant=0):
        """Â (variant ``variant``) placed as ``Layout(rows, cols)`` (3d shards). Collective once.

        Made by redistributing the base copy; every rank must ask for the
        same shards in the same order (they do: the forward pass is SPMD).
        Variant 1 (``P_c Â P_rᵀ``) exists with ``permute="double"`` only.
        """
        key = ("A", rows, cols, variant)
        got = self._adj_cache.get(key)
        if got is None:
            got = self._A_by_variant[variant].redistribute(Layout(rows, cols))
            self._adj_cache[key] = got
        return got

    def adjacency_T(self, rows, cols, variant=0):
        """Âᵀ placed as ``Layout(rows, cols)``: the local transpose of ``adjacency(cols, rows)``."""
        key = ("AT", rows, cols, variant)
        got = self._adj_cache.get(key)
        if got is None:
            got = self.adjacency(cols, rows, variant).transpose()
            self._adj_cache[key] = got
        return got

    def node_block(self, layout, order="c"):
        """Node data for the row block of ``layout``: a :class:`NodeData`.

        Local arrays (masks bool) for my rows under ``layout``'s row axes and
        row splits, in row order ``order`` (:attr:`ORDERS`; ``"r"`` only
        with ``permute="double"``).  Collective the first time per row
        placement and order (cached).
        """
        key = (layout.rows, layout.row_splits, order)
        got = self._node_cache.get(key)
        if got is None:
            lay = Layout(layout.rows, row_splits=layout.row_splits)
            got = NodeData.unpacked(self._nodes_by_order[order].redistribute(lay).local)
            self._node_cache[key] = got
        return got

    def node_ids(self, layout, order="c"):
        """Original (input-graph) ids of my rows under ``layout``. Collective the first time."""
        return self.node_block(layout, order).orig

    def permutation(self, order="c"):
        """``perm`` with new vertex ``i`` = original vertex ``perm[i]``, on every rank.

        ``order`` as in :meth:`node_block`.  Collective the first time (cached).
        """
        if order not in self._perm:
            self._perm[order] = NodeData.unpacked(self._nodes_by_order[order].to_global()).orig
        return self._perm[order]

    def to_original(self, values, order="c"):
        """Rows in the distributed (permuted) order put back in the input order. Collective once."""
        values = np.asarray(values)
        perm = self.permutation(order)
        out = np.empty_like(values)
        out[perm] = values
        return out

    def context(self, *, training=True, epoch=0, seed=0):
        """A :class:`~spgnn.gnn.context.GraphContext` for one pass. Local."""
        return GraphContext(self, training=training, epoch=epoch, seed=seed)

    def __repr__(self):
        return (f"DistGraph(n={self.num_nodes}, features={self.num_features}, "
                f"classes={self.num_classes}, algorithm={self.algorithm!r}, grid={self.grid!r}, "
                f"dtype={self.dtype})")
