"""Hashes of the partitioners' outputs, to show a refactor leaves them bit-identical.

    python tests/regression/partition_hashes.py --record before.json
    python tests/regression/partition_hashes.py --check before.json

Runs :func:`spgnn.partition.random_partition`, :func:`metis_partition` and
:func:`balanced_partition` (both balance criteria) on R-MAT graphs (a few
scales and seeds, symmetric and directed) and on real graphs of the shared
data folder (skipped when absent), for several part counts, and records a
SHA-256 of each result: the part array, the permutation, the offsets, the
exact statistics and the refinement's pass and move counts.  ``--check``
reruns everything and compares.  It takes a few minutes (the balanced
refinement on 64 parts of the larger graphs dominates), hence a script and
not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time

import numpy as np
import scipy.sparse as sp

from spgnn import load_graph, rmat
from spgnn.partition import balanced_partition, metis_partition, random_partition
from spgnn.testing.data import find_shared_data

NPARTS = (2, 3, 4, 8, 16, 64)

#: (label, folder, file or None, load_graph name or None)
REAL = (
    ("cora", "planetoid", None, "cora"),
    ("facebook_combined", "snap_facebook_combined", "facebook_combined.txt.gz", None),
    ("ca_astroph", "snap_ca_astroph", "astro-ph-cc1.jlg", None),
    ("luxembourg_osm", "luxembourg_osm", "luxembourg_osm.mtx", None),
    ("cit_hepth", "snap_cit_hep", "arxiv-cit-hep-th.jlg", None),
)


def _graphs():
    """``(label, adjacency)`` pairs."""
    for scale, seed, symmetric in ((8, 0, True), (10, 1, True), (12, 2, True), (11, 3, False)):
        adj = rmat(scale, 8, seed=seed, symmetric=symmetric, self_loops=not symmetric)
        yield f"rmat{scale}-s{seed}-{'sym' if symmetric else 'dir'}", sp.csr_array(adj)
    data = find_shared_data()
    if data is None:
        print("# no shared data folder: real graphs skipped", file=sys.stderr)
        return
    for label, folder, fname, name in REAL:
        path = data / folder if fname is None else data / folder / fname
        yield label, sp.csr_array(load_graph(str(path), name=name).adj)


def _digest(p) -> str:
    h = hashlib.sha256()
    for arr in (p.parts, p.perm, p.offsets, p.stats.send_volume, p.stats.recv_volume,
                p.stats.nnz_per_part, p.stats.vertices_per_part):
        h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
    scalars = (p.nparts, p.method, p.stats.total_volume, p.stats.max_send, p.stats.edge_cut,
               p.stats.messages, p.info.get("passes"), p.info.get("moves"))
    h.update(repr(scalars).encode())
    return h.hexdigest()


def run() -> dict:
    out = {}
    for label, adj in _graphs():
        t0 = time.perf_counter()
        for k in NPARTS:
            runs = {
                "random": lambda: random_partition(adj, k, seed=3),
                "metis": lambda: metis_partition(adj, k, seed=1),
                "metis-nnz": lambda: metis_partition(adj, k, balance="nnz", seed=0),
                "balanced": lambda: balanced_partition(adj, k, seed=0),
                "balanced-nnz": lambda: balanced_partition(adj, k, balance="nnz", seed=2,
                                                           volume_tol=0.2, candidates=2),
            }
            for what, make in runs.items():
                out[f"{label}/{what}/{k}"] = _digest(make())
        print(f"# {label}: n={adj.shape[0]} nnz={adj.nnz} {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--record", metavar="FILE")
    group.add_argument("--check", metavar="FILE")
    args = ap.parse_args(argv)
    got = run()
    if args.record:
        with open(args.record, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
        print(f"{len(got)} hashes written to {args.record}")
        return 0
    with open(args.check) as f:
        want = json.load(f)
    same = [key for key in want if got.get(key) == want[key]]
    differ = [key for key in want if key in got and got[key] != want[key]]
    missing = [key for key in want if key not in got]
    print(f"{len(same)} of {len(want)} bit-identical")
    for key in differ:
        print(f"DIFFERS: {key}")
    for key in missing:
        print(f"MISSING: {key}")
    return 0 if len(same) == len(want) else 1


if __name__ == "__main__":
    sys.exit(main())
