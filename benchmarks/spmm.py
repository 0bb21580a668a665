"""All distributed SpMM algorithms side by side in one mpirun: time and bytes.

    mpiexec -n 2 python -m spgnn bench spmm --graph rmat:14 --feat 64 --plot spmm.png
    mpiexec -n 8 python -m spgnn bench spmm --graph ego-twitter --partition metis --json

Each algorithm runs as ``python -m spgnn spmm`` would (same preparation,
same timing rule: slowest rank, median of ``--repeat``), checked against
scipy.  Bytes are exact at any rank count; times mean something only with no
more ranks than cores.
"""

import argparse
import json

from spgnn import Communicator
from spgnn.bench import machine
from spgnn.cli.spmm import measure
from spgnn.core.spmm import DISTRIBUTED_ALGORITHMS
from spgnn.partition import PARTITIONERS

from ._common import Case, save_bar_figure


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", action="append", default=None, metavar="SPEC",
                    help="dataset name, file or generator spec (repeatable; default rmat:14)")
    ap.add_argument("--plot", default=None, metavar="FILE", help="write a bar chart (rank 0)")
    ap.add_argument("--feat", type=int, default=64)
    ap.add_argument("--algos", default=",".join(DISTRIBUTED_ALGORITHMS))
    ap.add_argument("--partition", default="none", choices=tuple(PARTITIONERS))
    ap.add_argument("--replication", type=int, default=2)
    ap.add_argument("--backend", default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    comm = Communicator.world()
    rows = []
    for graph, algo in ((g, a) for g in (args.graph or ["rmat:14"])
                        for a in args.algos.split(",")):
        if algo.startswith("15d") and comm.size % args.replication:
            continue
        run_args = argparse.Namespace(graph=graph, feat=args.feat, algo=algo,
                                      partition=args.partition, partition_file=None,
                                      replication=args.replication, grid=None,
                                      backend=args.backend, repeat=args.repeat, seed=args.seed,
                                      check=True)
        rows.append(measure(comm, run_args))
    if comm.rank != 0:
        return
    if args.plot:
        save_bar_figure(plot_cases(rows), args.plot, reference="1d",
                        title=f"distributed SpMM, P={comm.size}, f={args.feat}, "
                              f"partition {args.partition}")
    if args.json:
        print(json.dumps({"machine": machine(), "ranks": comm.size, "results": rows}))
        return
    for graph in dict.fromkeys(r["graph"] for r in rows):
        print_table([r for r in rows if r["graph"] == graph], comm.size, args)


def print_table(rows, ranks, args):
    """One graph's algorithms side by side (rank 0)."""
    base = next((r["seconds"] for r in rows if r["algorithm"] == "1d"), None)
    print(f"graph {rows[0]['graph']}: n={rows[0]['n']} nnz={rows[0]['nnz']} f={args.feat} "
          f"P={ranks} partition={args.partition} backend={rows[0]['backend']}")
    print(f"{'algorithm':<10} {'shape':>7} {'seconds':>10} {'vs 1d':>7} {'bytes total':>14} "
          f"{'max/rank':>12} {'check':>6}")
    for r in rows:
        shape = r.get("grid") or (f"c={r['replication']}" if "replication" in r else "")
        speed = f"{base / r['seconds']:.2f}x" if base else ""
        print(f"{r['algorithm']:<10} {shape:>7} {r['seconds']:>10.4f} {speed:>7} "
              f"{r['bytes_total']:>14,d} {r['bytes_max_rank']:>12,d} "
              f"{'ok' if r['check_passed'] else 'FAIL':>6}")


def plot_cases(rows):
    """The figure's cases: one per graph, one bar per algorithm (seconds per SpMM)."""
    by_graph = {}
    for r in rows:
        by_graph.setdefault(r["graph"], {})[r["algorithm"]] = (
            r["seconds"], r["seconds_min"], r.get("seconds_max", r["seconds"]))
    return [Case(g, t) for g, t in by_graph.items()]


if __name__ == "__main__":
    main()
