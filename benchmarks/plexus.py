"""Plexus's 3D optimisations measured: nnz balance of the double permutation, memory of blocked aggregation.

``python -m spgnn bench plexus imbalance``: for real graphs and 8-64
ranks, max/mean nnz per rank of the Â shards 3D training multiplies by
(:func:`spgnn.plan.events.nnz_per_rank_3d`, the worst of the layers), with the
input order, with Plexus's single symmetric random permutation, and with
the double permutation.  Nothing is launched: the shards are computed.

``mpiexec -n 2 python -m spgnn bench plexus memory``: the peak of the
numpy allocations (``tracemalloc``) during one 3D aggregation
``spmm(Â, H)`` with its all-reduce, for several ``row_blocks``, with the
ledger bytes and messages and the maximum absolute difference from the
unblocked result.  The kernel-output allocator's huge-page buffers
(:mod:`spgnn.local.alloc`, an mmap that tracemalloc does not see) are
switched off in this process, so every output is a numpy allocation and
counts; MPI's own buffers (C) do not.  A resident-set high-water mark was
tried first and rejected: glibc keeps freed blocks resident and reuses
them, so its growth depended on the previous measurement.  Never used by
unit tests.
"""

import argparse
import json
import sys

import numpy as np

__all__ = ["imbalance_rows", "memory_rows", "main"]

IMBALANCE_GRAPHS = ("ego-facebook", "ca-astroph", "email-enron", "musae-facebook",
                    "luxembourg-osm", "soc-slashdot0902")
IMBALANCE_RANKS = (8, 16, 32, 64)


def _ahat(spec):
    from spgnn.io import load_adjacency
    from spgnn.io.preprocess import normalized_adjacency

    adj, name = load_adjacency(spec)
    return normalized_adjacency(adj, np.float32), name


def imbalance_rows(graphs=IMBALANCE_GRAPHS, ranks=IMBALANCE_RANKS, layers=3, seed=0):
    """``[{graph, n, nnz, ranks, grid, original, single, double}, ...]`` (max/mean nnz). Local."""
    from spgnn.grid import default_grid_3d
    from spgnn.partition import double_permutation
    from spgnn.plan.events import nnz_imbalance_3d

    out = []
    for spec in graphs:
        a, name = _ahat(spec)
        n = a.shape[0]
        dp = double_permutation(a, seed)
        single = a[dp.row_perm][:, dp.row_perm]          # P Â Pᵀ: one symmetric order
        for p in ranks:
            grid = default_grid_3d(p)
            out.append({"graph": name, "n": n, "nnz": int(a.nnz), "ranks": p,
                        "grid": "x".join(map(str, grid)),
                        "original": nnz_imbalance_3d(a, grid, layers),
                        "single": nnz_imbalance_3d(single, grid, layers),
                        "double": nnz_imbalance_3d(a, grid, layers, permutation=dp)})
    return out


def memory_rows(comm, graph="ca-astroph", width=128, blocks=(1, 2, 4, 8, 16), grid=None):
    """Peak traced bytes of one 3D aggregation per ``row_blocks``. Collective over ``comm``."""
    import gc
    import tracemalloc

    from spgnn.local import alloc
    from spgnn.local.alloc import release_cached
    from spgnn.core.dist_dense import DistDenseMatrix
    from spgnn.core.dist_sparse import DistSparseMatrix
    from spgnn.core.spmm import spmm
    from spgnn.grid import make_grid
    from spgnn.layout import Layout

    alloc._MADV_HUGEPAGE = None     # kernel outputs as numpy arrays: tracemalloc sees them
    grid = make_grid(grid or (comm.size, 1, 1), ("x", "y", "z"), comm)
    a = name = x = None
    if comm.rank == 0:
        a, name = _ahat(graph)
        x = np.random.default_rng(0).standard_normal((a.shape[0], width)).astype(np.float32)
    A = DistSparseMatrix.from_global(a, grid, Layout("z", "x"), root=0)
    X = DistDenseMatrix.from_global(x, grid, Layout("x", "y"), root=0)
    name = comm.bcast_obj(name, root=0)
    spmm(A, X, algorithm="3d")                      # warm-up: kernels compiled, plans built
    ref = None
    rows = []
    for k in blocks:
        spmm(A, X, algorithm="3d", row_blocks=k)    # chunks cached outside the measurement
        release_cached()
        gc.collect()
        comm.barrier()
        tracemalloc.start()
        with comm.ledger.scope(f"bench-k{k}") as st:
            H = spmm(A, X, algorithm="3d", row_blocks=k)
        numpy_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        if ref is None:
            ref = H.local.copy()
        got = comm.allgather_obj((numpy_peak, int(st.total("bytes_sent")),
                                  int(st.total("messages"))), label="bench:memory")
        rows.append({"graph": name, "ranks": comm.size, "grid": "x".join(map(str, grid.shape)),
                     "width": width, "row_blocks": k, "output_bytes": int(H.local.nbytes),
                     "peak_bytes_max_rank": max(g[0] for g in got),
                     "bytes_sent_per_rank": [g[1] for g in got],
                     "messages_per_rank": [g[2] for g in got],
                     "max_abs_diff": float(np.abs(H.local - ref).max(initial=0.0))})
        del H
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("imbalance", "memory"))
    parser.add_argument("--graph", action="append", default=None)
    parser.add_argument("--ranks", default=",".join(map(str, IMBALANCE_RANKS)))
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--blocks", default="1,2,4,8,16")
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    if args.mode == "imbalance":
        rows = imbalance_rows(tuple(args.graph or IMBALANCE_GRAPHS),
                              tuple(int(v) for v in args.ranks.split(",")))
        print(f"{'graph':<18} {'n':>8} {'nnz':>9} {'P':>3} {'grid':>7} {'original':>9} "
              f"{'single':>7} {'double':>7}")
        for r in rows:
            print(f"{r['graph']:<18} {r['n']:>8} {r['nnz']:>9} {r['ranks']:>3} {r['grid']:>7} "
                  f"{r['original']:>9.3f} {r['single']:>7.3f} {r['double']:>7.3f}")
    else:
        from spgnn.comm import Communicator

        comm = Communicator.world()
        rows = memory_rows(comm, (args.graph or ["ca-astroph"])[0], args.width,
                           tuple(int(v) for v in args.blocks.split(",")))
        if comm.rank != 0:
            return 0
        for r in rows:
            print(f"{r['graph']} P={r['ranks']} grid {r['grid']} f={r['width']} "
                  f"K={r['row_blocks']:>3}: numpy peak (tracemalloc) "
                  f"{r['peak_bytes_max_rank'] / 2**20:7.2f} MiB (output "
                  f"{r['output_bytes'] / 2**20:.2f} MiB); bytes sent per rank "
                  f"{r['bytes_sent_per_rank']}, messages {r['messages_per_rank']}, "
                  f"max |diff| {r['max_abs_diff']}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
