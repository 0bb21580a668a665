"""``mpiexec -n P python -m spgnn spmm``: one distributed SpMM on a real or generated graph.

Rank 0 loads the graph (any format :func:`spgnn.io.load_graph` reads, or a
generator spec such as ``rmat:16:16``), symmetrises it, drops self-loops,
partitions and permutes it, and scatters A and a random X in the layouts the
algorithm needs.  One untimed multiply builds any exchange plan; then
``--repeat`` timed multiplies (slowest rank, median).  The bytes are those of
one multiply once plans exist (the ``setup_*`` fields count the plan).
With ``--check``, rank 0 compares the result with scipy.

``--graph DIR`` (a shard directory written by ``spgnn partition``): no rank
loads the graph; each reads only the rows its blocks hold (A' as the shards
store it, in their order: ``--partition`` does not apply) and draws its rows
of X.  X is drawn in row chunks keyed by ``(seed, chunk)``
(:func:`operand_rows`), so it is the same matrix whoever draws it, and a run
from shards equals the run on the graph file with the shards' partition.
With ``--check`` each rank computes its rows of the reference and rank 0
gathers them (``Y`` is gathered too: a debugging aid for graphs that fit).
"""


import numpy as np

from spgnn.core.spmm import DISTRIBUTED_ALGORITHMS
from spgnn.bench import peak_rss_bytes
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
    p.add_argument("--memory-limit", default=None, metavar="BYTES",
                   help="bytes per rank (e.g. 2G): --algo auto skips configurations whose "
                        "predicted peak (spgnn.plan.memory_spmm) exceeds it (default: this "
                        "host's memory over the ranks on it; none: no check); an explicit "
                        "--algo is refused when its peak exceeds an explicit limit")
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


#: Rows of X per independently seeded chunk (:func:`operand_rows`).
X_CHUNK_ROWS = 1 << 14


def operand_rows(seed, lo, hi, f):
    """Rows ``lo:hi`` of the ``n x f`` random operand X (float32 standard normal). Local, pure.

    Drawn in chunks of :data:`X_CHUNK_ROWS` rows, chunk ``c`` from
    ``numpy.random.default_rng([seed, c])``: any rank draws any rows without
    the others, and the matrix does not depend on who draws it.
    """
    out = np.empty((max(hi - lo, 0), f), dtype=np.float32)
    for c in range(lo // X_CHUNK_ROWS, -(-hi // X_CHUNK_ROWS)):
        c0, c1 = c * X_CHUNK_ROWS, (c + 1) * X_CHUNK_ROWS
        a, b = max(lo, c0), min(hi, c1)
        if a >= b:
            continue
        rows = np.random.default_rng([seed, c]).standard_normal((b - c0, f)).astype(np.float32)
        out[a - lo:b - lo] = rows[a - c0:]
    return out


def _prepare_root(args, blocks):
    """Rank 0: graph, partition order, X and the reference product."""
    import scipy.sparse as sp

    from spgnn.io import load_adjacency

    from spgnn.io._files import check_alloc

    adj, name = load_adjacency(args.graph, **graph_options(args))
    n = adj.shape[0]
    # X (float32) and, with --check, its float64 copy and the float64 reference, whole on
    # rank 0: estimated before any is drawn (issue 38: a MemoryError traceback)
    check_alloc(n * args.feat * (4 + (16 if args.check else 0)), "spmm",
                f"--feat {args.feat} ({n:,} x {args.feat:,} operand on rank 0"
                f"{' with its float64 check' if args.check else ''})")
    if args.partition_file:
        perm, offsets = order_from_parts(read_partition_file(args.partition_file, n), blocks)
    else:
        perm, offsets, _ = partition_graph(adj, args.partition, blocks, seed=args.seed)
    a = permute(adj, perm)
    del adj
    limit = _explicit_limit(args)
    if limit is not None:       # an explicit --algo under an explicit --memory-limit: priced
        err = _over_limit(args, a, offsets, blocks, limit)   # before X is drawn or A scattered
        if err is not None:
            raise err
    x = operand_rows(args.seed, 0, n, args.feat)
    reference = (sp.csr_array(a, dtype=np.float64) @ x.astype(np.float64)) if args.check else None
    return a, x, reference, {"n": n, "nnz": int(a.nnz), "name": name, "offsets": offsets.tolist()}


def _explicit_limit(args):
    """The bytes of an explicit ``--memory-limit`` that an explicit ``--algo`` (and
    ``--replication``) is priced against, as ``train`` prices one; None: no check (``--algo
    auto`` prices its candidates itself; no ``--memory-limit`` or ``none``). Local."""
    text = getattr(args, "memory_limit", None)
    if (args.algo == "auto" or args.replication == "auto" or text is None
            or str(text).strip().lower() == "none"):
        return None
    from ..plan.host import memory_limit_bytes

    return memory_limit_bytes(None, text)


def _explicit_grid(args, n, p):
    """``--grid`` of an explicit ``--algo 3d``, or the grid the run takes without it."""
    from spgnn.plan.events import best_grid_3d

    if args.grid:
        return parse_grid(args.grid, p, what="spmm: --grid")
    return best_grid_3d(n, p, [args.feat] * 3)


def _does_not_fit(args, peak, limit):
    return ValueError(f"--algo {args.algo}: does not fit in --memory-limit {int(limit):,d} bytes "
                      f"per rank (the predicted peak is {int(peak):,d} bytes; --memory-limit "
                      f"none turns the check off)")


def _over_limit(args, a, offsets, blocks, limit):
    """Rank 0, in memory: the ValueError of ``args.algo`` (its replication or grid) on the
    permuted matrix ``a`` and its row blocks ``offsets`` when the predicted peak of this
    command (:func:`spgnn.plan.memory_spmm.spmm_peak_bytes`, ``source="memory"``) exceeds
    ``limit``; else None. Local."""
    from ..plan.memory_spmm import spmm_peak_bytes
    from ..plan.model import DEFAULT_CALIBRATION, rank_spmm_configs

    p, n = blocks * (args.replication if args.algo.startswith("15d") else 1), a.shape[0]
    if args.algo == "3d":
        cf = ("3d", 1, tuple(_explicit_grid(args, n, p)))
    else:
        cf = (args.algo, args.replication if args.algo.startswith("15d") else 1, None)
    off = None if cf[0] == "3d" else np.asarray(offsets, dtype=np.int64)
    pred = rank_spmm_configs(a, p, args.feat, DEFAULT_CALIBRATION, configs=[cf],
                             offsets_for=lambda _: (a, off))[0]
    peak = spmm_peak_bytes(a, pred, args.feat, source="memory", offsets=off)
    return _does_not_fit(args, peak, limit) if peak > limit else None


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
    from ..plan.host import memory_limit_bytes, note_default

    limit = memory_limit_bytes(comm, args.memory_limit)
    try:
        algo, c, grid, top = choose_spmm(comm, adj, args.feat, partition=args.partition,
                                         seed=args.seed, grid=args.grid, algorithms=algorithms,
                                         memory_limit=limit)
    except ValueError as exc:       # every rank alike
        raise note_default(exc, args.memory_limit) from None
    _take_choice(args, algo, c, grid)
    if comm.rank == 0:
        print(f"--algo auto chose {algo}{' --grid ' + args.grid if grid else ''}"
              f"{' --replication %d' % c if algo.startswith('15d') else ''}:\n"
              f"{describe(top, 'multiply')}", file=sys.stderr, flush=True)
    return top


def _choose_from_shards(comm, args, explicit=False):
    """``(top 3, [this rank's rows])``: ``--algo auto`` / ``--replication auto`` on a shard
    directory, no rank holding the graph. Collective.

    Each rank reads 1D's row blocks (the parts, coarsened or cut when ``K`` and
    ``P`` differ, else even blocks), the counts the ranking needs are
    gathered from them (:func:`spgnn.plan.from_rows.choose_spmm_from_rows`,
    label ``auto:counts``) and rank 0 ranks, skipping the configurations whose
    predicted per-rank peak of one SpMM exceeds ``--memory-limit`` (default:
    this host's memory over the ranks on it; one agreed ValueError when none
    fits); every rank takes its choice.  The rows are returned to be placed
    without reading them again.

    ``explicit``: price the explicit ``--algo`` (its ``--replication``, its
    ``--grid`` or the grid the run takes) against an explicit
    ``--memory-limit`` alone, from the same gathered counts: one agreed
    ValueError when it does not fit; nothing printed, ``args`` unchanged.
    """
    import sys

    from spgnn.gnn.data import part_blocks
    from spgnn.layout import block_offsets

    from ..plan.choose import describe
    from ..plan.from_rows import choose_spmm_from_rows
    from . import _shards

    p, r = comm.size, comm.rank
    man = _shards.read_manifest(comm, args.graph)
    n = int(man["n"])

    def row_blocks(blocks):
        return part_blocks(man["offsets"], blocks)

    off = row_blocks(p) or block_offsets(n, p)
    block = _shards.read_rows(comm, args.graph, man, off[r], off[r + 1])
    algorithms = () if args.algo == "auto" else (args.algo,)
    from ..plan.host import memory_limit_bytes, note_default

    limit = memory_limit_bytes(comm, args.memory_limit)
    grid, c = args.grid, None
    if explicit:
        c = args.replication if args.algo.startswith("15d") else None
        if args.algo == "3d":
            grid = "x".join(map(str, _explicit_grid(args, n, p)))
    try:
        algo, c, grid, top = choose_spmm_from_rows(comm, block.adj, off[r], n, args.feat,
                                                   grid=grid, algorithms=algorithms,
                                                   row_blocks=row_blocks, memory_limit=limit,
                                                   replication=c)
    except ValueError as exc:       # every rank alike
        if not explicit or "no configuration fits" not in str(exc):
            raise note_default(exc, args.memory_limit) from None
        from ..comm.communicator import agreed_like

        text = str(exc)
        where = text[:text.index("--algo auto: ")]        # "rank 0: " on the other ranks
        raise agreed_like(ValueError(where + f"--algo {args.algo}: " + text[len(where):].replace(
            "--algo auto: ", "").replace("no configuration fits", "does not fit").replace(
            "the smallest predicted", "the predicted")), exc) from None
    if explicit:
        return None, [block]
    _take_choice(args, algo, c, grid)
    if comm.rank == 0:
        print(f"--algo auto chose {algo}{' --grid ' + args.grid if grid else ''}"
              f"{' --replication %d' % c if algo.startswith('15d') else ''} (from the shards' "
              f"rows):\n{describe(top, 'multiply')}", file=sys.stderr, flush=True)
    return top, [block]


def _take_choice(args, algo, c, grid):
    """Write the model's choice into ``args`` (``--algo``, ``--replication``, ``--grid``)."""
    args.algo = algo
    args.replication = c if algo.startswith("15d") else (
        2 if args.replication == "auto" else args.replication)
    if grid is not None:
        args.grid = "x".join(map(str, grid))


def _layouts(comm, args, meta, grid3d):
    """``(grid, layout of A, layout of X)`` of ``args.algo``. Collective (makes the grid)."""
    from spgnn import Layout, ProcessGrid
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
    return grid, la, lx


def _distribute(comm, args, a, x, meta, grid3d):
    """A and X in the layouts of ``args.algo``, scattered from rank 0. Collective."""
    from spgnn import DistDenseMatrix, DistSparseMatrix

    grid, la, lx = _layouts(comm, args, meta, grid3d)
    A = DistSparseMatrix.from_global(a, grid, la, backend=args.backend, root=0)
    X = DistDenseMatrix.from_global(x, grid, lx, backend=args.backend, root=0)
    return A, X


def _from_shards(comm, args, blocks, held=None):
    """``(meta, A, X, reference rows or None)`` from a shard directory, each rank reading only
    its rows and drawing its rows of X. Collective.

    ``held``: a one-item list holding the rows ``--algo auto`` read and ranked (1D's row
    blocks; emptied), used as they are or moved between the ranks to the rows of the chosen
    layout (:func:`spgnn.gnn.data.held_rows`) instead of reading them again."""
    import scipy.sparse as sp

    from spgnn import DistDenseMatrix, DistSparseMatrix
    from spgnn.gnn.data import _take, held_rows, part_blocks
    from spgnn.layout import block_offsets

    from . import _shards

    man = _shards.read_manifest(comm, args.graph)
    n, f = int(man["n"]), args.feat
    if args.algo == "3d":                       # even blocks of the shards' order, any K
        offsets = part_blocks(man["offsets"], blocks) or block_offsets(n, blocks)
    else:
        offsets = _shards.block_offsets_of(man, blocks, "spmm")
    meta = {"n": n, "nnz": int(man["nnz"]), "name": man["name"], "offsets": list(offsets),
            "partition": f"shards ({man['partition']['method']}, K={man['parts']})"}
    grid3d = None
    if args.algo == "3d":
        from spgnn.plan.events import best_grid_3d

        grid3d = (parse_grid(args.grid, comm.size, what="spmm: --grid") if args.grid else
                  best_grid_3d(n, comm.size, [f] * 3))
    grid, la, lx = _layouts(comm, args, meta, grid3d)
    (ar, ac), (xr, xc) = la.bounds(grid, (n, n)), lx.bounds(grid, (n, f))
    block = _take(held)
    if block is not None:                      # every rank holds rows, or none does
        block = held_rows(comm, block, *ar, adj_only=True)
    if block is None:
        block = _shards.read_rows(comm, args.graph, man, *ar)
    rows = _float32_rows(block.adj, n)
    del block
    local = sp.csr_array(rows[:, ac[0]:ac[1]]) if tuple(ac) != (0, n) else rows
    local.sort_indices()
    A = DistSparseMatrix.from_local(local, (n, n), grid, la, backend=args.backend)
    x = np.ascontiguousarray(operand_rows(args.seed, *xr, f)[:, xc[0]:xc[1]])
    X = DistDenseMatrix.from_local(A.backend.from_host(x), (n, f), grid, lx, backend=A.backend)
    reference = None
    if args.check:             # this rank's rows of A' @ X, for the rows it read
        cols = np.unique(rows.indices)
        sub = sp.csr_array((rows.data.astype(np.float64), np.searchsorted(cols, rows.indices),
                            rows.indptr), shape=(rows.shape[0], cols.size))
        reference = (tuple(ar), sub @ _gather_rows(args.seed, cols, f).astype(np.float64))
    return meta, grid3d, A, X, reference


def _float32_rows(adj, n):
    """The shards' rows ``adj`` (scipy CSR, ``n`` columns) as float32 CSR, with int32 indices
    and indptr where ``n`` and the stored entries fit, as ``DistSparseMatrix.from_global``
    scatters blocks (the rows are read with int64 ids): the cast copies are the only copies,
    and the block holds 4 bytes less per entry. Local."""
    import scipy.sparse as sp

    if max(n, adj.shape[0], adj.nnz) >= np.iinfo(np.int32).max:
        return sp.csr_array(adj, dtype=np.float32)
    out = sp.csr_array((adj.data.astype(np.float32), adj.indices.astype(np.int32),
                        adj.indptr.astype(np.int32)), shape=adj.shape, copy=False)
    out.has_sorted_indices = adj.has_sorted_indices
    return out


def _gather_rows(seed, ids, f):
    """Rows ``ids`` (sorted) of X, drawing only the chunks that hold them."""
    out = np.empty((ids.size, f), dtype=np.float32)
    chunk = ids // X_CHUNK_ROWS
    for c in np.unique(chunk):
        sel = np.flatnonzero(chunk == c)
        c0 = int(c) * X_CHUNK_ROWS
        rows = operand_rows(seed, c0, int(ids[sel[-1]]) + 1, f)
        out[sel] = rows[ids[sel] - c0]
    return out


def _bytes_by_label(comm, stats):
    """Label -> bytes all ranks sent, of the events in ``stats`` (sorted). Collective."""
    out = {}
    mine = {k: int(v["bytes_sent"]) for k, v in stats.by_label().items()}
    for part in comm.allgather_obj(mine, label="spmm:report"):
        for k, v in part.items():
            out[k] = out.get(k, 0) + v
    return dict(sorted(out.items()))


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
    auto, err, held = None, None, None
    from . import _shards
    sharded = _shards.is_shard_dir(args.graph)
    if sharded and _explicit_limit(args) is not None:    # priced, and the rows it read kept
        _, held = _choose_from_shards(comm, args, explicit=True)
    elif args.algo == "auto" or args.replication == "auto":
        with comm.track("auto") as ranking:
            auto, held = _choose_from_shards(comm, args) if sharded else (_choose(comm, args),
                                                                          None)
        auto_bytes = _bytes_by_label(comm, ranking)
    blocks = p // args.replication if args.algo in ("15d", "15d-aware") else p
    a = x = reference = meta = None
    if sharded:
        meta, grid3d, A, X, reference = _from_shards(comm, args, blocks, held)
        del held
        result = _run(comm, args, be, auto, meta, grid3d, A, X, reference, sharded=True)
        if auto is not None:
            result["auto_bytes_by_label"] = auto_bytes
        return result
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
    result = _run(comm, args, be, auto, meta, grid3d, A, X, reference, sharded=False)
    if auto is not None:
        result["auto_bytes_by_label"] = auto_bytes
    return result


def _run(comm, args, be, auto, meta, grid3d, A, X, reference, *, sharded):
    """The timed multiplies and the result dict (every rank). Collective."""
    from spgnn import spmm
    from spgnn.bench import time_collective

    p = comm.size
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
              "nnz": meta["nnz"], "feat": args.feat,
              "partition": meta.get("partition") or args.partition_file or args.partition,
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
    if args.check and sharded:          # each rank's rows of the reference, gathered on rank 0
        (r0, r1), ref = reference
        pieces = comm.allgather_obj((r0, ref), label="spmm:report")
        if comm.rank == 0:
            full_ref = np.zeros((meta["n"], args.feat))
            for lo, rows in pieces:
                full_ref[lo:lo + rows.shape[0]] = rows
            reference = full_ref
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
    if args.memory_limit is not None:   # bad text: the same error on every rank, before MPI
        from ..plan.host import memory_limit_bytes

        memory_limit_bytes(None, args.memory_limit)
    from . import _shards
    if _shards.is_shard_dir(args.graph):
        fixed = [o for o, bad in ((f"--partition {args.partition}", args.partition != "none"),
                                  ("--partition-file", bool(args.partition_file)),
                                  ("--num-nodes", args.num_nodes is not None),
                                  ("--relabel", args.relabel)) if bad]
        if fixed:
            raise ValueError(f"spmm: --graph {args.graph} is a shard directory (partitioned "
                             f"once by 'spgnn partition'); {', '.join(fixed)} do(es) not apply "
                             f"to it: leave them out, or pass the graph file")
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
    result["peak_rss_bytes"] = peak_rss_bytes(comm)
    print_result(comm, result, args.json)
    return 0 if result.get("check_passed", True) else 1
