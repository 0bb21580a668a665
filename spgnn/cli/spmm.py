"""``mpiexec -n P python -m spgnn spmm``: one distributed SpMM on a real or generated graph.

Rank 0 loads the graph (any format :func:`spgnn.io.load_graph` reads, or a
generator spec such as ``rmat:16:16``), symmetrises it, drops self-loops,
partitions and permutes it, and scatters A and a random X in the layouts the
algorithm needs.  One untimed multiply builds any exchange plan; then
``--repeat`` timed multiplies (slowest rank, median).  The bytes are those of
one multiply once plans exist (the ``setup_*`` fields count the plan).
With ``--check``, rank 0 compares the result with scipy.
"""


import numpy as np

from spgnn.core.spmm import DISTRIBUTED_ALGORITHMS
from spgnn.grid import parse_grid
from spgnn.partition import (PARTITIONERS, order_from_parts, partition_graph, permute,
                           read_partition_file)
from . import print_result
from ._backend_options import add_backend_options, resolve_backend
from ._graph_options import add_graph_options, graph_options


def replication_arg(text):
    """``--replication``: a positive int or ``auto`` (argparse type; shared with ``train``)."""
    if str(text) == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        import argparse

        raise argparse.ArgumentTypeError(f"must be an int or 'auto', not {text!r}") from None


def add_parser(sub):
    p = sub.add_parser("spmm", help="run one distributed SpMM and report time and bytes")
    p.add_argument("--graph", required=True, help="dataset name (cora), graph file or generator "
                                                  "spec (rmat:16:16)")
    add_graph_options(p)
    p.add_argument("--feat", type=int, default=64, help="columns of X (default 64)")
    p.add_argument("--algo", default="1d-aware", choices=("auto",) + DISTRIBUTED_ALGORITHMS,
                   help="auto: the configuration the performance model predicts fastest for "
                        "one multiply (rank 0 ranks, every rank runs its choice; the top 3 are "
                        "printed and recorded under 'auto')")
    p.add_argument("--partition", default="none", choices=tuple(PARTITIONERS),
                   help="row order and blocks (spgnn.partition.PARTITIONERS; default none: "
                        "the graph's order, even blocks)")
    p.add_argument("--partition-file", help="part id per vertex (from plan --save-partition)")
    p.add_argument("--replication", type=replication_arg, default=2,
                   help="c for 15d algorithms (default 2), or auto: the c the performance model "
                        "ranks first")
    p.add_argument("--grid", help="XxYxZ for 3d (default: the grid Plexus's model prefers for "
                                  "a 2-layer GCN of width --feat)")
    add_backend_options(p)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="store_true", help="compare with scipy on rank 0")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(command="spmm")
    return p


def _prepare_root(args, blocks):
    """Rank 0: graph, partition order, X and the reference product."""
    import scipy.sparse as sp

    from spgnn.io import load_adjacency

    adj, name = load_adjacency(args.graph, **graph_options(args))
    n = adj.shape[0]
    if args.partition_file:
        perm, offsets = order_from_parts(read_partition_file(args.partition_file, n), blocks)
    else:
        perm, offsets, _ = partition_graph(adj, args.partition, blocks, seed=args.seed)
    a = permute(adj, perm)
    x = np.random.default_rng(args.seed).standard_normal((n, args.feat)).astype(np.float32)
    reference = (sp.csr_array(a, dtype=np.float64) @ x.astype(np.float64)) if args.check else None
    return a, x, reference, {"n": n, "nnz": int(a.nnz), "name": name, "offsets": offsets.tolist()}


def _choose(comm, args):
    """Replace ``--algo auto`` / ``--replication auto`` by the model's choice. Collective.

    Rank 0 loads the graph and ranks the configurations
    (:func:`spgnn.plan.choose.choose_spmm`; ``--replication auto`` with a 1.5D
    ``--algo``: that algorithm's c only; ``--grid`` with auto: 3d on it);
    every rank takes its choice.  Prints the top 3 on rank 0 (stderr).
    """
    import sys

    from spgnn.io import load_adjacency

    from ..plan.choose import choose_spmm, describe

    adj, err = None, None
    if comm.rank == 0:
        try:
            adj, _ = load_adjacency(args.graph, **graph_options(args))
        except (OSError, ValueError, ImportError) as exc:
            err = exc
    comm.agree(err)
    algorithms = () if args.algo == "auto" else (args.algo,)
    algo, c, grid, top = choose_spmm(comm, adj, args.feat, partition=args.partition,
                                     seed=args.seed, grid=args.grid, algorithms=algorithms)
    args.algo = algo
    args.replication = c if algo.startswith("15d") else (
        2 if args.replication == "auto" else args.replication)
    if grid is not None:
        args.grid = "x".join(map(str, grid))
    if comm.rank == 0:
        print(f"--algo auto chose {algo}{' --grid ' + args.grid if grid else ''}"
              f"{' --replication %d' % c if algo.startswith('15d') else ''}:\n"
              f"{describe(top, 'multiply')}", file=sys.stderr, flush=True)
    return top


def _distribute(comm, args, a, x, meta, grid3d):
    """A and X in the layouts of ``args.algo``, scattered from rank 0. Collective."""
    from spgnn import DistDenseMatrix, DistSparseMatrix, Layout, ProcessGrid
    from spgnn.core.spmm_15d import layouts_15d
    from spgnn.core.spmm_3d import layouts_3d

    p, n, f = comm.size, meta["n"], args.feat
    offsets = meta["offsets"]
    if args.algo in ("15d", "15d-aware"):
        c = args.replication
        grid = ProcessGrid(comm, (p // c, c), ("row", "layer"))
        la, lx = layouts_15d(grid, n, row_splits=offsets)
    elif args.algo == "3d":
        grid = ProcessGrid(comm, grid3d, ("x", "y", "z"))
        lay = layouts_3d(grid, ("x", "y", "z"), n, f, shard_input=True)
        la, lx = lay["A"], lay["X"]
    else:
        grid = ProcessGrid(comm, (p,), ("row",))
        la = lx = Layout("row", row_splits=offsets)
    A = DistSparseMatrix.from_global(a, grid, la, backend=args.backend, root=0)
    X = DistDenseMatrix.from_global(x, grid, lx, backend=args.backend, root=0)
    return A, X


def _sum_max(comm, value):
    both = comm.allgather_obj(int(value), label="spmm:report")
    return int(sum(both)), int(max(both))


def measure(comm, args):
    """Run ``args.algo`` as the command does and return its result dict (on every rank).

    Collective over ``comm``.  ``check_passed`` is agreed by every rank.
    """
    from spgnn import spmm
    from spgnn.bench import time_collective

    p = comm.size
    # Checks every rank makes alike, agreed so that the command prints one line (exit 2)
    err = None
    if (args.algo in ("15d", "15d-aware") and args.replication != "auto"
            and (args.replication < 1 or p % args.replication)):
        err = ValueError(f"spmm: --replication must divide the {p} ranks, but got "
                         f"{args.replication}")
    elif args.feat < 0 or args.repeat < 1:
        err = ValueError(f"spmm: --feat must be >= 0 and --repeat >= 1, but got {args.feat} and "
                         f"{args.repeat}")
    comm.agree(err)
    # unknown, or no usable device on some rank (cupy): the same error on every rank
    be = resolve_backend(comm, args)
    auto, err = None, None
    if args.algo == "auto" or args.replication == "auto":
        auto = _choose(comm, args)
    blocks = p // args.replication if args.algo in ("15d", "15d-aware") else p
    a = x = reference = meta = None
    if comm.rank == 0:
        try:
            a, x, reference, meta = _prepare_root(args, blocks)
        except (OSError, ValueError, ImportError) as exc:
            err = exc
    comm.agree(err)   # a bad file or partitioner raises on every rank, not only rank 0
    meta = comm.bcast_obj(meta, root=0, label="spmm:meta")
    grid3d = None
    if args.algo == "3d":
        from spgnn.plan.events import best_grid_3d

        grid3d = (parse_grid(args.grid, p, what="spmm: --grid") if args.grid else
                  best_grid_3d(meta["n"], p, [args.feat] * 3))
    A, X = _distribute(comm, args, a, x, meta, grid3d)
    with comm.track("setup") as setup:
        y = spmm(A, X, algorithm=args.algo)
    def once_synced():                 # device kernels are asynchronous: time them finished
        spmm(A, X, algorithm=args.algo)
        be.synchronize()

    seconds, fastest, slowest = time_collective(comm, once_synced, repeat=args.repeat, warmup=0,
                                                with_max=True)
    with comm.track("spmm") as once:
        spmm(A, X, algorithm=args.algo)
    sent_total, sent_max = _sum_max(comm, once.total("bytes_sent"))
    msgs_total, msgs_max = _sum_max(comm, once.total("messages"))
    setup_total, _ = _sum_max(comm, setup.total("bytes_sent") - once.total("bytes_sent"))
    result = {"algorithm": args.algo, "ranks": p, "graph": meta["name"], "n": meta["n"],
              "nnz": meta["nnz"], "feat": args.feat, "partition": args.partition_file or args.partition,
              "backend": A.backend.name, "bytes_total": sent_total, "bytes_max_rank": sent_max,
              "messages_total": msgs_total, "messages_max_rank": msgs_max,
              "setup_bytes_total": setup_total, "seconds": seconds, "seconds_min": fastest,
              "seconds_max": slowest}
    if be.name == "cupy":              # how device buffers moved, and the host copies it cost
        result["gpu_comm"] = comm.gpu_comm
        result["staged_bytes_total"] = _sum_max(comm, once.staged_bytes())[0]
    if args.algo in ("15d", "15d-aware"):
        result["replication"] = args.replication
    if auto is not None:
        result["auto"] = auto
    if grid3d:
        result["grid"] = "x".join(map(str, grid3d))
    if args.check:
        full = y.to_global(root=0)
        err_abs = 0.0
        if comm.rank == 0:
            err_abs = float(np.abs(full - reference).max(initial=0.0))
            tol = 1e-4 * max(1.0, float(np.abs(reference).max(initial=0.0)))
            ok = err_abs <= tol
        else:
            ok = True
        ok = bool(comm.allreduce(np.array([ok], dtype=np.int64), op="min", label="spmm:report")[0])
        result.update(max_abs_err=comm.bcast_obj(err_abs, root=0, label="spmm:report"),
                      check_passed=ok)
    return result


def check_args(args):
    """Raise ValueError for options every rank can judge alone. Local."""
    if args.grid is not None and args.algo not in ("3d", "auto"):
        raise ValueError("spmm: --grid applies to --algo 3d (or auto) only")
    if args.replication == "auto" and args.algo not in ("15d", "15d-aware", "auto"):
        raise ValueError(f"spmm: --replication auto applies to --algo 15d, 15d-aware or auto, "
                         f"not {args.algo}")
    if args.partition_file and (args.algo == "auto" or args.replication == "auto"):
        raise ValueError("spmm: --partition-file fixes the blocks; it cannot be combined with "
                         "--algo auto or --replication auto")
    replication = 1 if args.replication == "auto" else args.replication
    if args.feat < 1 or args.repeat < 1 or replication < 1:
        raise ValueError(f"spmm: --feat, --repeat and --replication must be >= 1, but got "
                         f"{args.feat}, {args.repeat} and {args.replication}")


def run(args):
    from spgnn import Communicator

    check_args(args)                   # every rank, before MPI starts
    comm = Communicator.world()
    result = measure(comm, args)
    print_result(comm, result, args.json)
    return 0 if result.get("check_passed", True) else 1
