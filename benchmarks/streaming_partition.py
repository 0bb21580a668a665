"""Edge cut and balance of the streaming partitioner (LDG) against METIS and random.

    python -m spgnn bench streaming_partition [--parts 4 16] [--json]

Each graph of the shared data folder named below (``spgnn.testing.data``:
``SPGNN_DATA_DIR`` or ``<repo>/../shared/data``) is loaded, made ``A'`` (symmetric,
no self-loops: the pattern ``spgnn partition`` partitions) and cut into K
parts by ``random``, ``ldg`` (1 and 3 passes over the stream, in the file's
vertex order) and ``metis`` (pymetis).  Reported per run: the edge cut as a
fraction of the edges, the total communication volume of 1D SpMM
(``Σ λ_u``), the vertex imbalance (max / mean - 1) and seconds.  Local.
"""

import argparse
import json
import time
from spgnn.io import load_graph
from spgnn.io.shards import partition_pattern
from spgnn.partition import ldg_partition, metis_partition, random_partition
from spgnn.testing.data import shared_data_path

GRAPHS = {
    "email-Enron": ("snap_email_enron", "email-Enron.txt.gz"),
    "ca-AstroPh": ("snap_ca_astroph", "astro-ph-cc1.jlg"),
    "luxembourg-osm": ("luxembourg_osm", "luxembourg_osm.mtx"),
    "musae-facebook": ("musae_facebook",),
}


def main(argv=None):
    p = argparse.ArgumentParser(prog="spgnn bench streaming_partition",
                                description=__doc__.splitlines()[0])
    p.add_argument("--parts", type=int, nargs="+", default=[4, 16])
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    methods = {"random": lambda A, k: random_partition(A, k, seed=0),
               "ldg": lambda A, k: ldg_partition(A, k),
               "ldg-3pass": lambda A, k: ldg_partition(A, k, passes=3),
               "metis": lambda A, k: metis_partition(A, k, seed=0)}
    rows = []
    for name, parts in GRAPHS.items():
        g = load_graph(str(shared_data_path(*parts)),
                       name="facebook" if name == "musae-facebook" else None)
        A = partition_pattern(g)
        edges = A.nnz // 2
        for k in a.parts:
            for method, fn in methods.items():
                t = time.perf_counter()
                part = fn(A, k)
                sec = time.perf_counter() - t
                s = part.stats
                rows.append({"graph": name, "n": A.shape[0], "edges": edges, "K": k,
                             "method": method, "cut_fraction": round(s.edge_cut / edges, 4),
                             "volume": int(s.total_volume),
                             "vertex_imbalance": round(float(s.vertex_imbalance), 4),
                             "seconds": round(sec, 3)})
    if a.json:
        print(json.dumps(rows))
        return
    print("| graph | n | edges | K | method | edge cut | volume | vertex imbalance | s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['graph']} | {r['n']:,} | {r['edges']:,} | {r['K']} | {r['method']} | "
              f"{100 * r['cut_fraction']:.1f} % | {r['volume']:,} | "
              f"{100 * r['vertex_imbalance']:.1f} % | {r['seconds']} |")


if __name__ == "__main__":
    main()
