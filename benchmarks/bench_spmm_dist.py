"""All distributed SpMM algorithms side by side in one mpirun: time and bytes.

    mpiexec -n 2 python benchmarks/bench_spmm_dist.py --graph rmat:14 --feat 64
    mpiexec -n 8 python benchmarks/bench_spmm_dist.py --graph ../shared/data/snap_ego_twitter/... \\
        --partition metis --json

Each algorithm runs as ``python -m spgnn spmm`` would (same preparation,
same timing rule: slowest rank, median of ``--repeat``), checked against
scipy.  Bytes are exact at any rank count; times mean something only with no
more ranks than cores.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import machine  # noqa: E402

from spgnn import Communicator  # noqa: E402
from spgnn.cli.spmm import measure  # noqa: E402
from spgnn.core.spmm import DISTRIBUTED_ALGORITHMS  # noqa: E402
from spgnn.partition import PARTITIONERS  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", default="rmat:14")
    ap.add_argument("--feat", type=int, default=64)
    ap.add_argument("--algos", default=",".join(DISTRIBUTED_ALGORITHMS))
    ap.add_argument("--partition", default="none", choices=tuple(PARTITIONERS))
    ap.add_argument("--replication", type=int, default=2)
    ap.add_argument("--backend", default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    comm = Communicator.world()
    rows = []
    for algo in args.algos.split(","):
        if algo.startswith("15d") and comm.size % args.replication:
            continue
        run_args = argparse.Namespace(graph=args.graph, feat=args.feat, algo=algo,
                                      partition=args.partition, partition_file=None,
                                      replication=args.replication, grid=None,
                                      backend=args.backend, repeat=args.repeat, seed=args.seed,
                                      check=True)
        rows.append(measure(comm, run_args))
    if comm.rank != 0:
        return
    if args.json:
        print(json.dumps({"machine": machine(), "ranks": comm.size, "results": rows}))
        return
    base = next((r["seconds"] for r in rows if r["algorithm"] == "1d"), None)
    print(f"graph {rows[0]['graph']}: n={rows[0]['n']} nnz={rows[0]['nnz']} f={args.feat} "
          f"P={comm.size} partition={args.partition} backend={rows[0]['backend']}")
    print(f"{'algorithm':<10} {'shape':>7} {'seconds':>10} {'vs 1d':>7} {'bytes total':>14} "
          f"{'max/rank':>12} {'check':>6}")
    for r in rows:
        shape = r.get("grid") or (f"c={r['replication']}" if "replication" in r else "")
        speed = f"{base / r['seconds']:.2f}x" if base else ""
        print(f"{r['algorithm']:<10} {shape:>7} {r['seconds']:>10.4f} {speed:>7} "
              f"{r['bytes_total']:>14,d} {r['bytes_max_rank']:>12,d} "
              f"{'ok' if r['check_passed'] else 'FAIL':>6}")


if __name__ == "__main__":
    main()
