"""``python -m spgnn graph {triangles,bfs,sssp,pagerank}``: GraphBLAS graph algorithms, distributed.

Every rank loads the graph (symmetrised, without self-loops, float64 values
of 1), places it by whole rows (``Layout("row")``) and runs the algorithm of
:mod:`spgnn.algorithms`; rank 0 prints the result summary and the
ledger's bytes (all ranks, every collective of the algorithm).

PageRank's ``--alpha``, ``--tol`` and ``--max-iter`` are checked on every
rank before the graph is read (``ValueError`` naming the parameter), and its
result carries ``converged`` and the final ``residual``; ``sssp`` refuses
negative weights (:class:`~spgnn.errors.InvalidWeight`).

``--graph DIR`` (a shard directory written by ``spgnn partition``): no rank
loads the graph; rank ``r`` reads only its rows of ``A'`` (the shards' order;
``K != P`` parts when one divides the other, else one GridError naming
``--parts``), with the stored weights, as the whole-graph path.  ``--source`` and the
vertex ids printed (PageRank's top 10) are the ORIGINAL ids: the source is
mapped to the shards' order and the ids back through the stored ``orig``.
The result equals the whole-graph run (PageRank up to rounding: its sums
run in another vertex order).
"""

import numpy as np

from . import print_result

ALGORITHMS = ("triangles", "bfs", "sssp", "pagerank")


def add_parser(sub):
    p = sub.add_parser("graph", help="triangle count, BFS, SSSP or PageRank with the GraphBLAS "
                                     "operations (run under mpiexec for several ranks)")
    p.add_argument("algorithm", choices=ALGORITHMS)
    p.add_argument("--graph", required=True, help="dataset name, graph file or generator spec")
    p.add_argument("--source", type=int, default=0, help="source vertex of bfs/sssp (default 0)")
    p.add_argument("--backend", default=None, help="numpy or numba (default: the default backend)")
    p.add_argument("--alpha", type=float, default=0.85,
                   help="PageRank damping, in (0, 1) (default 0.85)")
    p.add_argument("--tol", type=float, default=1e-9,
                   help="PageRank L1 tolerance, finite and > 0 (default 1e-9)")
    p.add_argument("--max-iter", type=int, default=200,
                   help="PageRank iterations at most (default 200)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _histogram(values):
    vals, counts = np.unique(values, return_counts=True)
    return {str(int(v)) if float(v).is_integer() else repr(float(v)): int(c)
            for v, c in zip(vals, counts)}


def run(args):
    import scipy.sparse as sp

    from spgnn import Communicator, DistSparseMatrix, Layout, grid_1d
    from spgnn import algorithms as G
    from spgnn.io import load_adjacency

    from . import _shards

    if args.algorithm == "pagerank":                # every rank, before anything collective
        G.check_pagerank_options(args.alpha, args.tol, args.max_iter)
    if _shards.is_shard_dir(args.graph):
        return _run_sharded(args)
    adj, name = load_adjacency(args.graph)          # every rank, before MPI starts
    adj = sp.csr_array(adj, dtype=np.float64)
    n = adj.shape[0]
    if args.algorithm in ("bfs", "sssp") and not 0 <= args.source < n:
        raise ValueError(f"graph: --source must be in [0, {n}), but got {args.source}")
    comm = Communicator.world()
    grid = grid_1d(comm)
    A = DistSparseMatrix.from_global(adj, grid, Layout("row"), backend=args.backend,
                                     check_same=False)
    result = {"graph": name, "n": n, "nnz": int(adj.nnz), "ranks": comm.size,
              "algorithm": args.algorithm}
    _algorithm(comm, args, A, result, lambda ids: ids, args.source)
    print_result(comm, result, args.json)
    return 0


def _run_sharded(args, comm=None):
    """``graph ALGORITHM --graph DIR``: each rank reads its rows of the shards. Collective."""
    result = sharded_result(args, comm)
    print_result(result[0], result[1], args.json)
    return 0


def sharded_result(args, comm=None):
    """``(comm, result)`` of ``graph ALGORITHM --graph DIR`` (every rank). Collective."""
    import scipy.sparse as sp

    from spgnn import Communicator, DistSparseMatrix, Layout, grid_1d

    from . import _shards

    comm = Communicator.world() if comm is None else comm
    man = _shards.read_manifest(comm, args.graph)
    n = int(man["n"])
    if args.algorithm in ("bfs", "sssp") and not 0 <= args.source < n:
        raise ValueError(f"graph: --source must be in [0, {n}), but got {args.source}")
    grid = grid_1d(comm)
    offsets = _shards.block_offsets_of(man, comm.size, "graph")
    lo, hi = offsets[comm.rank], offsets[comm.rank + 1]
    block = _shards.read_rows(comm, args.graph, man, lo, hi)
    rows = sp.csr_array(block.adj, dtype=np.float64)     # A' as load_adjacency makes it
    rows.sort_indices()
    A = DistSparseMatrix.from_local(rows, (n, n), grid, Layout("row", row_splits=offsets),
                                    backend=args.backend)
    orig = np.asarray(block.orig, dtype=np.int64)

    def to_orig(ids):
        """Original ids of renumbered ``ids`` (each rank maps the ones it owns). Collective."""
        ids = np.asarray(ids, dtype=np.int64)
        mine = np.full(ids.size, -1, dtype=np.int64)
        own = (ids >= lo) & (ids < hi)
        mine[own] = orig[ids[own] - lo]
        return comm.allreduce(mine, op="max", label="graph:ids")

    if args.algorithm in ("bfs", "sssp"):   # the source, in the shards' order
        where = np.flatnonzero(orig == args.source)
        new = np.array([lo + int(where[0]) if where.size else -1], dtype=np.int64)
        source = int(comm.allreduce(new, op="max", label="graph:ids")[0])
    else:
        source = args.source
    result = {"graph": man["name"], "n": n, "nnz": int(man["nnz"]), "ranks": comm.size,
              "algorithm": args.algorithm, "shards": {"parts": man["parts"],
                                                      "method": man["partition"]["method"]}}
    _algorithm(comm, args, A, result, to_orig, source)
    return comm, result


def _algorithm(comm, args, A, result, to_orig, source):
    """Run ``args.algorithm`` on ``A`` into ``result``; ``to_orig`` maps printed ids, ``source``
    is bfs/sssp's source in ``A``'s order. Collective."""
    from spgnn import algorithms as G

    with comm.track("graph") as seen:
        if args.algorithm == "triangles":
            result["triangles"] = G.triangle_count(A)
        elif args.algorithm in ("bfs", "sssp"):
            v = (G.bfs_levels if args.algorithm == "bfs" else G.sssp)(A, source)
            got = v.to_global()
            key = "levels" if args.algorithm == "bfs" else "distances"
            result["source"] = args.source
            result["reached"] = int(got.nnz)
            result[f"{key}_histogram"] = _histogram(got.data)
        else:
            pr = G.pagerank(A, alpha=args.alpha, tol=args.tol, max_iter=args.max_iter)
            full = pr.rank.to_global()[:, 0]
            top = np.argsort(-full, kind="stable")[:10]
            result["iterations"] = pr.iterations
            result["converged"] = pr.converged
            result["residual"] = pr.residual
            result["top10"] = [[int(o), float(full[i])] for o, i in zip(to_orig(top), top)]
    sent = int(sum(e.bytes_sent for e in seen.events))
    result["ledger_bytes"] = int(comm.allreduce(np.array([sent], dtype=np.int64))[0])
