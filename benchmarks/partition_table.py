"""Partition quality table: oblivious vs METIS vs the communication-balancing partitioner.

For ``snap_soc_slashdot0902`` and ``snap_ego_twitter`` (symmetrised, self-loops
dropped) at 16, 64 and 256 parts, prints a markdown table of the 1D SpMM
communication volumes (rows of X; see ``spgnn.partition``):

* oblivious volume ``(k−1)·n``;
* METIS (pymetis, vertex-balanced, edge-cut objective, seed 0): total volume
  and % of oblivious, max send and max/mean;
* ``balanced_partition`` started from that METIS partition: total volume
  (ratio to METIS), max send (reduction vs METIS), nnz imbalance;
* the time of each partitioner (METIS; refinement alone).

Usage::

    python -m spgnn bench partition_table [--json OUT.json] [--parts 16 64 256]
                                         [--graphs slashdot twitter]

The data folder is found by ``spgnn.testing.data`` (``SPGNN_DATA_DIR`` or
``<repo>/../shared/data``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import sys
import time

import numpy as np
import scipy.sparse as sp

from spgnn.partition import balanced_partition, metis_partition
from spgnn.testing.data import shared_data_path

GRAPHS = {
    "slashdot": ("snap_soc_slashdot0902", "soc-Slashdot0902.txt.gz"),
    "twitter": ("snap_ego_twitter", "ego-twitter-undirected.jlg"),
}


def _symmetric_no_loops(src, dst, n) -> sp.csr_array:
    keep = src != dst
    src, dst = src[keep], dst[keep]
    A = sp.coo_array((np.ones(2 * src.size, dtype=np.float32),
                      (np.concatenate([src, dst]), np.concatenate([dst, src]))),
                     shape=(n, n)).tocsr()
    A.sum_duplicates()
    A.data[:] = 1.0
    return A


def _read_snap_txt(path) -> sp.csr_array:
    """SNAP edge list: ``#`` comments, ``from<TAB>to`` per line, 0-based ids."""
    with gzip.open(path, "rb") as f:
        e = np.loadtxt(f, dtype=np.int64, comments="#", ndmin=2)
    n = int(e.max()) + 1
    return _symmetric_no_loops(e[:, 0], e[:, 1], n)


def _read_jlg(path) -> sp.csr_array:
    """LightGraphs ``.jlg`` (gzip): header ``n,m,u|d,graph``, then 1-based ``u,v``."""
    with gzip.open(path, "rt") as f:
        n = int(f.readline().split(",")[0])
        e = np.loadtxt(f, dtype=np.int64, delimiter=",", ndmin=2)
    return _symmetric_no_loops(e[:, 0] - 1, e[:, 1] - 1, n)


def load(name: str) -> tuple:
    """``(A, loader)``: the symmetrised, loop-free pattern of a benchmark graph."""
    folder, fname = GRAPHS[name]
    path = shared_data_path(folder, fname)
    try:
        from spgnn.io import load_graph
    except ImportError:
        load_graph = None
    if load_graph is not None:
        try:
            g = load_graph(path)
            A = sp.csr_array(g.adj)
            A = _symmetric_no_loops(*A.nonzero(), A.shape[0])
            return A, "spgnn.io.load_graph"
        except Exception as exc:        # noqa: BLE001 - the reader below is the fallback
            print(f"# spgnn.io.load_graph failed on {path} ({exc}); using the local reader",
                  file=sys.stderr)
    reader = _read_snap_txt if fname.endswith(".txt.gz") else _read_jlg
    return reader(path), "local reader"


def run(graphs, parts_list, seed=0):
    rows = []
    for name in graphs:
        A, loader = load(name)
        n = A.shape[0]
        for k in parts_list:
            t0 = time.perf_counter()
            m = metis_partition(A, k, seed=seed)
            t_metis = time.perf_counter() - t0
            t0 = time.perf_counter()
            b = balanced_partition(A, k, base=m, seed=seed)
            t_bal = time.perf_counter() - t0
            sm, sb = m.stats, b.stats
            rows.append({
                "graph": name, "n": n, "edges": A.nnz // 2, "loader": loader, "parts": k,
                "oblivious_volume": sm.oblivious_volume,
                "metis_total": sm.total_volume, "metis_pct_oblivious": 100 * sm.volume_ratio,
                "metis_max_send": sm.max_send, "metis_max_over_mean": sm.max_send / sm.mean_send,
                "metis_nnz_imbalance": sm.nnz_imbalance,
                "metis_vertex_imbalance": sm.vertex_imbalance,
                "balanced_total": sb.total_volume,
                "balanced_total_ratio": sb.total_volume / sm.total_volume,
                "balanced_max_send": sb.max_send,
                "balanced_max_reduction_pct": 100 * (1 - sb.max_send / sm.max_send),
                "balanced_max_over_mean": sb.max_send / sb.mean_send,
                "balanced_nnz_imbalance": sb.nnz_imbalance,
                "balanced_vertex_imbalance": sb.vertex_imbalance,
                "balanced_passes": b.info["passes"], "balanced_moves": b.info["moves"],
                "time_metis_s": t_metis, "time_balanced_s": t_bal,
            })
            print(f"# {name} k={k} done", file=sys.stderr, flush=True)
    return rows


def markdown(rows) -> str:
    head = ("| graph | parts | oblivious vol | METIS total (% obl.) | METIS max send (max/mean) "
            "| balanced total (× METIS) | balanced max send (vs METIS) | nnz imb. METIS → bal. "
            "| t METIS | t balance |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    out = [head]
    for r in rows:
        out.append(
            f"| {r['graph']} | {r['parts']} | {r['oblivious_volume']:,} "
            f"| {r['metis_total']:,} ({r['metis_pct_oblivious']:.1f} %) "
            f"| {r['metis_max_send']:,} ({r['metis_max_over_mean']:.2f}×) "
            f"| {r['balanced_total']:,} ({r['balanced_total_ratio']:.3f}) "
            f"| {r['balanced_max_send']:,} (−{r['balanced_max_reduction_pct']:.1f} %) "
            f"| {100 * r['metis_nnz_imbalance']:.0f} % → {100 * r['balanced_nnz_imbalance']:.0f} % "
            f"| {r['time_metis_s']:.2f} s | {r['time_balanced_s']:.2f} s |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", nargs="+", default=list(GRAPHS), choices=list(GRAPHS))
    ap.add_argument("--parts", nargs="+", type=int, default=[16, 64, 256])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON ('-' = stdout)")
    args = ap.parse_args(argv)
    # compile (or load from Numba's cache) the refinement kernel outside the timings:
    # a 4-cycle split 0, 1, 0, 1 sends every row, so the refinement runs
    ring = sp.csr_array(np.roll(np.eye(4), 1, axis=1) + np.roll(np.eye(4), -1, axis=1))
    balanced_partition(ring, 2, base=np.array([0, 1, 0, 1]))
    rows = run(args.graphs, args.parts, args.seed)
    print(markdown(rows))
    print(f"\nmachine: {platform.machine()}, {platform.processor() or 'cpu'}, "
          f"python {platform.python_version()}, numpy {np.__version__}")
    if args.json:
        text = json.dumps(rows, indent=1)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text)


if __name__ == "__main__":
    main()
