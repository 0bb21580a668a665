"""``mpiexec -n 4 python -m spgnn demo``: the main job on a built-in R-MAT graph.

Distributes an R-MAT graph over a 1-D grid, runs the sparsity-oblivious and
the sparsity-aware distributed SpMM, checks both against scipy on rank 0 and
prints the check and a communication table (bytes and messages per
operation and per rank).  Exits non-zero if a check fails.
"""

import numpy as np


#: Bytes per entry of X (n x f) a rank holds at once: the float64 draw, its float32 copy,
#: the float64 copy and the float64 reference product.
_DEMO_BYTES_PER_ENTRY = 28


def add_parser(sub):
    p = sub.add_parser("demo", help="distributed SpMM on a synthetic R-MAT graph, checked against scipy")
    p.add_argument("--scale", type=int, default=12, help="log2 of the number of vertices (default 12)")
    p.add_argument("--edge-factor", type=int, default=8, help="edges per vertex (default 8)")
    p.add_argument("--feat", type=int, default=32, help="feature width f of X (default 32)")
    p.add_argument("--backend", default=None, help="numpy | numba (default: numba if available)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(command="demo")
    return p


def run(args):
    import scipy.sparse as sp

    from spgnn import DistDenseMatrix, DistSparseMatrix, Layout, grid_1d, rmat, spmm
    from spgnn.errors import InputTooLarge
    from spgnn.io._files import check_alloc

    grid = grid_1d()
    comm = grid.world
    # every rank judges the same arguments: one agreed line (exit 2), no traceback
    for option, value, low in (("--scale", args.scale, 1), ("--edge-factor", args.edge_factor, 1),
                               ("--feat", args.feat, 1), ("--seed", args.seed, 0)):
        if value < low:
            comm.raise_together(ValueError(f"demo: {option} must be >= {low}, but got {value}"))
    # X and the float64 reference are whole on every rank: estimate them before drawing
    # (`--feat 1000000000` was a MemoryError traceback and MPI_Abort on every rank).
    n = 2 ** min(args.scale, 62)
    try:
        check_alloc(_DEMO_BYTES_PER_ENTRY * n * args.feat, "demo",
                    f"--feat {args.feat:,} with --scale {args.scale} (X and its scipy reference, "
                    f"{n:,} x {args.feat:,}, whole on every rank)")
    except InputTooLarge as e:
        comm.raise_together(e)
    # Every rank generates the same graph from the seed: no file, no broadcast.
    a = rmat(args.scale, args.edge_factor, seed=args.seed, scramble=False)
    x = np.random.default_rng(args.seed + 1).standard_normal((a.shape[0], args.feat)).astype(np.float32)
    layout = Layout("row")
    A = DistSparseMatrix.from_global(a, grid, layout, backend=args.backend)
    X = DistDenseMatrix.from_global(x, grid, layout, backend=args.backend)
    reference = (sp.csr_array(a, dtype=np.float64) @ x.astype(np.float64))

    results = {}
    for algo in ("1d", "1d-aware"):
        with comm.track(f"spmm {algo}") as stats:
            y = spmm(A, X, algorithm=algo)
        # A second multiply reuses 1d-aware's cached exchange plan: its
        # bytes are what every later SpMM with this matrix costs.
        with comm.track(f"spmm {algo} again") as again:
            spmm(A, X, algorithm=algo)
        moved = int(comm.allreduce(np.array([again.total("bytes_sent")], dtype=np.int64))[0])
        full = y.to_global(root=0)
        err = float(np.abs(full - reference).max()) if comm.rank == 0 else 0.0
        results[algo] = (err, stats.reduce(comm), moved)

    ok = True
    if comm.rank == 0:
        print(f"spgnn demo: R-MAT scale {args.scale} (n={a.shape[0]}, nnz={a.nnz}), f={args.feat}, "
              f"{comm.size} ranks, backend {A.backend.name}")
        for algo, (err, red, _) in results.items():
            tol = 1e-3 * max(1.0, float(np.abs(reference).max()))
            passed = err <= tol
            ok &= passed
            print(f"\n[{algo}] max |Y - scipy| = {err:.3e} (tolerance {tol:.1e}): "
                  f"{'PASS' if passed else 'FAIL'}")
            print(red.table(per_rank=True))
        base = results["1d"][2]
        print("\nbytes sent per SpMM once plans are built (all ranks):")
        for algo, (_, _, moved) in results.items():
            share = f"{moved / base:6.1%} of 1d" if base else "n/a"
            print(f"  {algo:<9} {moved:>12,d}  {share}")
    ok = bool(comm.allreduce(np.array([ok], dtype=np.int64), op="min")[0])
    return 0 if ok else 1
