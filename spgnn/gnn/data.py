"""``DistGraph``: a graph prepared for GCN training and distributed for one algorithm.

:meth:`DistGraph.from_graph` is collective.  It

1. builds the aggregation matrix (:mod:`spgnn.io.preprocess`) from the
   global degrees, before any split: ``aggregation="gcn"`` normalises as Kipf
   & Welling do (symmetrise, drop stored self-loops, add ``I``,
   ``Â = D^-1/2 (A + I) D^-1/2``); ``aggregation="mean"`` is GraphSAGE's mean
   aggregator ``D⁻¹A`` of the symmetrised pattern without self-loops (its
   transpose is built on first use by the backward pass);
2. row-normalises the features (``normalize_features=True``; zero rows stay
   zero);
3. optionally renumbers the vertices by a partition (``"random"``,
   ``"metis"``, ``"balanced"`` through
   :func:`spgnn.partition.partition_graph`; ``"none"`` computes nothing)
   and applies the permutation to Â's rows and columns, the features, the
   labels and the masks, remembering the original ids (dropout masks and
   :meth:`to_original` use them);
4. places Â, its transpose (Â itself: Â is symmetric after step 1), the
   features and the per-node data (labels, masks, original ids) in the
   layouts of the algorithm:

   ========== =============== ============================== =================================
   algorithm  grid            Â                              features / node data
   ========== =============== ============================== =================================
   1d, 1d-aw  ``("row",)``    ``Layout("row", splits)``      ``Layout("row", splits)``
   15d(-aw)   ``(k, c)``      ``Layout("row", "layer")``     ``Layout("row")``, replicated c×
   3d         ``(x, y, z)``   ``Layout(d, o)`` per layer,    ``Layout(x, y)`` (layer-0 roles),
                              made on first use from a        or ``Layout((x, z), y)`` sharded
                              row-split base copy             over depth (``shard_input``)
   ========== =============== ============================== =================================

   ``splits`` are the partition's block offsets (P parts for 1d, ``k = P/c``
   for 1.5D).  In 3D the permutation is applied but blocks are even (the
   rows of a 3D layer are split over a different axis in each layer).
"""

import numpy as np
import scipy.sparse as sp

from ..backends import get_backend
from ..core.depth import nested_splits
from ..core.dist_dense import DistDenseMatrix
from ..core.dist_sparse import DistSparseMatrix
from ..core.spmm import DISTRIBUTED_ALGORITHMS
from ..core.spmm_15d import layouts_15d
from ..errors import GridError, NonFiniteError
from ..grid import ProcessGrid, default_grid_3d, grid_1d, grid_15d, make_grid, roles_for_layer
from ..layout import Layout, block_offsets
from ..io.preprocess import (mean_adjacency, neighbour_pattern, normalized_adjacency,
                             row_normalize_features)
from ..io.synthetic import SYNTHETIC_HINT
from ..partition import PARTITIONERS, double_permutation, partition_graph
from .context import GraphContext
from .sparse import SPARSE_DENSITY, SparseBackedMatrix

__all__ = ["DistGraph", "ALGORITHMS", "PARTITIONS", "AGGREGATIONS", "default_grid_3d"]

#: Algorithms a GCN trains on.
ALGORITHMS = DISTRIBUTED_ALGORITHMS
PARTITIONS = tuple(PARTITIONERS)
#: The graph's aggregation matrix (what :meth:`GraphContext.propagate` multiplies by).
AGGREGATIONS = ("gcn", "mean")
#: Row/column orders of 3d training (``permute=``): none, or Plexus's double permutation.
PERMUTES = ("none", "double")
_NODE_COLS = ("label", "train", "val", "test", "orig")


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


def _aggregation_matrix(adj, aggregation, dtype):
    if aggregation == "gcn":
        return normalized_adjacency(adj, dtype)
    return mean_adjacency(neighbour_pattern(adj), dtype)


def _dense_features(x, dtype):
    """The features as a dense ``dtype`` array, not normalised."""
    if sp.issparse(x):
        x = sp.csr_array(x, dtype=np.float64)
        x.sum_duplicates()
        return x.astype(dtype).toarray()
    return np.asarray(x).astype(np.float64).astype(dtype, copy=False)


def require_features_and_labels(graph):
    """Raise ValueError (with the hint for synthetic ones) unless ``graph`` has both. Local."""
    if graph.features is None or graph.labels is None:
        raise ValueError(f"DistGraph.from_graph: graph {graph.name!r} needs features and labels "
                         f"(features={'set' if graph.features is not None else None}, "
                         f"labels={'set' if graph.labels is not None else None}); "
                         f"{SYNTHETIC_HINT}")


def _prepare(graph, aggregation, normalize_features, dtype):
    """Aggregation matrix, dense features and node table (n x 5 int64)."""
    require_features_and_labels(graph)
    n = graph.num_nodes
    require_finite(graph)
    adj = _aggregation_matrix(graph.adj, aggregation, dtype)
    if normalize_features:
        x = row_normalize_features(graph.features, dtype)
    else:
        x = _dense_features(graph.features, dtype)
    nodes = np.zeros((n, len(_NODE_COLS)), dtype=np.int64)
    nodes[:, 0] = graph.labels
    for k, m in enumerate((graph.train_mask, graph.val_mask, graph.test_mask)):
        if m is not None:
            nodes[:, 1 + k] = m
    nodes[:, 4] = np.arange(n)
    return adj, x, nodes


class DistGraph:
    """Â, features and node data of one graph, placed for one algorithm on one grid.

    Build with :meth:`from_graph`.  Attributes (local): ``comm``, ``grid``,
    ``algorithm``, ``dtype``, ``num_nodes``, ``num_features``,
    ``num_classes``, ``counts`` (global ``{"train", "val", "test"}`` node
    counts), ``features`` (:class:`DistDenseMatrix` in the first layer's
    input layout), ``A`` / ``AT`` (1d/15d: Â and Âᵀ; 3d: ``None``, use
    :meth:`adjacency`), ``offsets`` (row block boundaries), ``stats`` (the
    partitioner's statistics on rank 0, else ``None``).
    """

    def __init__(self):
        raise TypeError("DistGraph: use DistGraph.from_graph(graph, comm, algorithm=...)")

    # ---------------------------------------------------------------- building
    @classmethod
    def from_graph(cls, graph, comm, *, algorithm="1d-aware", partition="none", replication=2,
                   grid=None, backend=None, seed=0, dtype=np.float32, normalize_features=True,
                   shard_input=False, shard_weights=True, sparse_features=None,
                   aggregation="gcn", permute="none", agg_blocks=1):
        """Normalise, (optionally) partition and distribute ``graph``.

        Collective over ``comm``.

        Parameters
        ----------
        graph : spgnn.io.Graph or None
            With features, labels and (optionally) masks.  Either rank 0 alone
            holds it (others pass ``None``; data are scattered from rank 0) or
            every rank passes the same graph (each slices its blocks).
        comm : Communicator
        algorithm : {"1d", "1d-aware", "15d", "15d-aware", "3d"}
        partition : {"none", "random", "metis", "balanced"}
            Vertex renumbering computed on rank 0 (``seed``); ``"none"`` keeps
            the input order with even blocks.
        replication : int
            ``c`` of the 1.5D grid (must divide ``comm.size``).
        grid : ProcessGrid or tuple of int, optional
            1.5D: a ``("row", "layer")`` grid or ``(k, c)``; 3d: a 3-axis grid
            or ``(x, y, z)`` (default :func:`default_grid_3d`); 1d: a 1-axis grid.
        backend : str, optional
            Local kernel backend of the sparse matrices.
        dtype : numpy dtype
            float32 (default) or float64 for Â, features and parameters.
        normalize_features : bool
            Row-normalise the features (Kipf & Welling's preprocessing).
        shard_input, shard_weights : bool
            3d only: row-shard the first layer's input features over the
            depth axis (all-gathered in forward, Plexus §2.3) and the weights
            over each layer's depth axis (all-gathered in forward and
            backward, gradients reduce-scattered).  A weight block whose rows
            do not divide evenly over depth stays replicated over depth and
            its gradient is all-reduced.
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
        aggregation : {"gcn", "mean"}
            The aggregation matrix: GCN's ``Â`` (symmetric) or the mean
            aggregator ``D⁻¹A`` (GraphSAGE; not on ``3d``).
        permute : {"none", "double"}
            3d only.  ``"double"``: Plexus's double permutation (§4.1,
            :func:`spgnn.partition.double_permutation` with ``seed``),
            applied after ``partition``: independent row and column orders
            ``P_r``, ``P_c``; even hops multiply by ``A1 = P_r Â P_cᵀ``,
            odd hops by ``A2 = P_c Â P_rᵀ``, the features are in ``P_c``
            order and a hop's output in ``P_r`` (even hop) or ``P_c`` (odd
            hop) order.  Evens out the nnz of the 2D blocks (the self-loops
            of a symmetric order stay in the diagonal blocks); the losses
            are those of the unpermuted run.  Stores both variants.
        agg_blocks : int
            3d only: the aggregation's SpMM and its all-reduce run in this
            many row chunks (Plexus's blocked aggregation, §4.2): the same
            bytes, smaller partial-sum buffers.

        Raises
        ------
        ValueError, GridError
            On every rank, before distributing anything.
        """
        if algorithm not in ALGORITHMS:
            raise ValueError(f"DistGraph.from_graph: unknown algorithm {algorithm!r}; expected "
                             f"one of {ALGORITHMS}")
        if partition not in PARTITIONS:
            raise ValueError(f"DistGraph.from_graph: unknown partition {partition!r}; expected "
                             f"one of {PARTITIONS}")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"DistGraph.from_graph: unknown aggregation {aggregation!r}; "
                             f"expected one of {AGGREGATIONS}")
        if aggregation == "mean" and algorithm == "3d":
            raise ValueError("DistGraph.from_graph: aggregation='mean' is not supported on '3d' "
                             "(its root term needs the input and the aggregation in one layout)")
        if permute not in PERMUTES:
            raise ValueError(f"DistGraph.from_graph: unknown permute {permute!r}; expected one "
                             f"of {PERMUTES}")
        if (permute != "none" or int(agg_blocks) != 1) and algorithm != "3d":
            raise ValueError(f"DistGraph.from_graph: permute={permute!r} and "
                             f"agg_blocks={agg_blocks} apply to algorithm '3d' only, not "
                             f"{algorithm!r}")
        if int(agg_blocks) < 1:
            raise ValueError(f"DistGraph.from_graph: agg_blocks must be >= 1, but got "
                             f"{agg_blocks}")
        if sparse_features and algorithm == "3d":
            raise ValueError("DistGraph.from_graph: sparse_features=True is not supported on "
                             "'3d' (its first-layer products split the feature columns)")
        on_device = get_backend(backend).xp is not np
        if sparse_features and on_device:
            raise ValueError("DistGraph.from_graph: sparse_features=True needs a host backend: "
                             "the CSR copy of the features is a scipy matrix (the cupy backend "
                             "keeps the features dense on the device)")
        dtype = np.dtype(dtype)
        if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"DistGraph.from_graph: dtype must be float32 or float64, but got "
                             f"{dtype}")
        have = comm.allgather_obj(graph is not None, label="gnn-setup:meta")
        if not have[0]:
            raise ValueError("DistGraph.from_graph: rank 0 must hold the graph (others may "
                             "pass None)")
        everyone = all(have)
        root = None if everyone else 0
        grid = cls._grid(comm, algorithm, replication, grid)
        if algorithm in ("15d", "15d-aware"):
            nparts = grid.axis_size("row")
        else:
            nparts = grid.size
        self = object.__new__(cls)
        self.comm, self.grid, self.algorithm, self.dtype = comm, grid, algorithm, dtype
        self.backend = backend
        self.shard_input, self.shard_weights = bool(shard_input), bool(shard_weights)
        self.partition, self.stats = partition, None
        self.aggregation = aggregation
        self.permute, self.agg_blocks = permute, int(agg_blocks)
        # --- prepare on the holders; rank 0 decides the permutation
        meta, err = None, None
        adj_hat = x = nodes = None
        if graph is not None and (everyone or comm.rank == 0):
            try:
                adj_hat, x, nodes = _prepare(graph, aggregation, normalize_features, dtype)
            except (ValueError, TypeError, NonFiniteError) as exc:
                err = exc
        comm.agree(err)
        perm = None
        if comm.rank == 0:
            n = adj_hat.shape[0]
            if partition != "none":
                coo = adj_hat.tocoo()
                off = coo.row != coo.col        # fresh arrays: Â itself is not touched
                pattern = sp.csr_array((np.ones(int(off.sum()), dtype=np.float32),
                                        (coo.row[off], coo.col[off])), shape=adj_hat.shape)
                perm, offsets, self.stats = partition_graph(pattern, partition, nparts, seed)
            else:
                offsets = np.asarray(block_offsets(n, nparts), dtype=np.int64)
            labels = nodes[:, 0]
            meta = dict(n=n, f=x.shape[1], c=int(max(labels.max(initial=-1), -1)) + 1,
                        offsets=tuple(int(v) for v in offsets), nnz_x=int(np.count_nonzero(x)),
                        counts={k: int(nodes[:, 1 + j].sum())
                                for j, k in enumerate(("train", "val", "test"))})
        meta = comm.bcast_obj(meta, root=0, label="gnn-setup:meta")
        if everyone and partition != "none":
            perm = comm.bcast_obj(perm, root=0, label="gnn-setup:perm")
        if perm is not None and adj_hat is not None:
            perm = np.asarray(perm, dtype=np.int64)
            adj_hat = sp.csr_array(adj_hat[perm][:, perm])
            adj_hat.sort_indices()
            x, nodes = x[perm], nodes[perm]
        adj2 = nodes_r = None
        if permute == "double" and adj_hat is not None:
            # rank 0 and every holder draw the same P_r, P_c from the seed
            dp = double_permutation(adj_hat, seed)
            adj_hat, adj2 = dp.matrices(adj_hat)
            adj_hat.sort_indices()
            adj2.sort_indices()
            x, nodes, nodes_r = x[dp.col_perm], nodes[dp.col_perm], nodes[dp.row_perm]
        n = meta["n"]
        self.num_nodes, self.num_features, self.num_classes = n, meta["f"], meta["c"]
        self.counts = meta["counts"]
        # --- layouts
        if algorithm == "3d":
            self.offsets = block_offsets(n, nparts)
            base = Layout(tuple(grid.axis_names))
            o, i, d = roles_for_layer(0, grid.axis_names)
            if shard_input:
                xl = Layout((o, d), i, row_splits=nested_splits(block_offsets(n, grid.axis_size(o)),
                                                                grid.axis_size(d)))
            else:
                xl = Layout(o, i)
            node_layout, a_layout = base, base
        else:
            self.offsets = tuple(meta["offsets"])
            if algorithm in ("15d", "15d-aware"):
                a_layout, xl = layouts_15d(grid, n, row_splits=self.offsets)
            else:
                a_layout = xl = Layout("row", row_splits=self.offsets)
            node_layout = xl
        src = (lambda v: v) if everyone else (lambda v: v if comm.rank == 0 else None)
        A = DistSparseMatrix.from_global(src(adj_hat), grid, a_layout, backend=backend, root=root)
        self.features = DistDenseMatrix.from_global(src(x), grid, xl, backend=backend, root=root)
        if sparse_features is None:
            sparse_features = (algorithm != "3d" and not on_device
                               and meta["nnz_x"] <= SPARSE_DENSITY * max(1, n * meta["f"]))
        if sparse_features:
            dense = self.features.local
            csr = sp.csr_array(dense)
            csr.sort_indices()
            self.features = SparseBackedMatrix(csr, self.features.shape, grid, xl,
                                               backend=self.features.backend, dense=dense)
        self._nodes = DistDenseMatrix.from_global(src(nodes), grid, node_layout, root=root)
        self._node_cache, self._adj_cache, self._perm = {}, {}, {}
        self._nodes_by_order = {"c": self._nodes}
        self._A_by_variant = {0: A}
        if permute == "double":
            self._nodes_by_order["r"] = DistDenseMatrix.from_global(src(nodes_r), grid,
                                                                    node_layout, root=root)
            self._A_by_variant[1] = DistSparseMatrix.from_global(src(adj2), grid, a_layout,
                                                                 backend=backend, root=root)
        if algorithm == "3d":
            self.A = None
            self._A_base = A
        else:
            self.A = A
            self._A_base = A
        return self

    @property
    def AT(self):
        """The transpose of :attr:`A` in A's layout (``None`` on 3d, use :meth:`adjacency_T`).

        ``Â`` is symmetric: one matrix (and one exchange plan) for both.  The
        mean aggregator is not: its transpose is made on first use.
        Collective the first time.
        """
        if self.A is None or self.aggregation == "gcn":
            return self.A
        return self.A.transposed()

    @staticmethod
    def _grid(comm, algorithm, replication, grid):
        if isinstance(grid, ProcessGrid):
            want = {"1d": 1, "1d-aware": 1, "15d": 2, "15d-aware": 2, "3d": 3}[algorithm]
            if grid.ndim != want or (want == 2 and grid.axis_names != ("row", "layer")):
                raise GridError(f"DistGraph.from_graph: algorithm {algorithm!r} needs a "
                                f"{want}-axis grid{' with axes (row, layer)' if want == 2 else ''}"
                                f", but got {grid!r}")
            if grid.world is not comm and grid.world.size != comm.size:
                raise GridError(f"DistGraph.from_graph: grid has {grid.size} ranks, comm "
                                f"{comm.size}")
            return grid
        if algorithm == "3d":
            shape = default_grid_3d(comm.size) if grid is None else tuple(int(g) for g in grid)
            if len(shape) != 3:
                raise GridError(f"DistGraph.from_graph: a 3d grid shape needs three ints, but got "
                                f"{grid!r}")
            return make_grid(shape, ("x", "y", "z"), comm)
        if algorithm in ("15d", "15d-aware"):
            c = int(replication) if grid is None else int(tuple(grid)[1])
            if c <= 0 or comm.size % c:
                raise GridError(f"DistGraph.from_graph: replication c={c} must divide "
                                f"comm.size={comm.size}")
            return grid_15d(c, comm)
        if grid is not None and tuple(grid) != (comm.size,):
            raise GridError(f"DistGraph.from_graph: a 1d grid is ({comm.size},), but got {grid!r}")
        return grid_1d(comm)

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
        """Node data for the row block of ``layout``: ``{"label", "train", "val", "test", "orig"}``.

        Local arrays (masks bool) for my rows under ``layout``'s row axes and
        row splits, in row order ``order`` (:attr:`ORDERS`; ``"r"`` only
        with ``permute="double"``).  Collective the first time per row
        placement and order (cached).
        """
        key = (layout.rows, layout.row_splits, order)
        got = self._node_cache.get(key)
        if got is None:
            lay = Layout(layout.rows, row_splits=layout.row_splits)
            loc = self._nodes_by_order[order].redistribute(lay).local
            got = {name: (loc[:, k].astype(bool) if name in ("train", "val", "test")
                          else np.ascontiguousarray(loc[:, k]))
                   for k, name in enumerate(_NODE_COLS)}
            self._node_cache[key] = got
        return got

    def node_ids(self, layout, order="c"):
        """Original (input-graph) ids of my rows under ``layout``. Collective the first time."""
        return self.node_block(layout, order)["orig"]

    def permutation(self, order="c"):
        """``perm`` with new vertex ``i`` = original vertex ``perm[i]``, on every rank.

        ``order`` as in :meth:`node_block`.  Collective the first time (cached).
        """
        if order not in self._perm:
            self._perm[order] = self._nodes_by_order[order].to_global()[:, 4].copy()
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
