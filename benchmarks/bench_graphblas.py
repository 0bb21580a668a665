"""Single-rank triangle counting and masked SpGEMM: spgnn vs python-graphblas (SuiteSparse).

Side by side in one process, both at the same thread count (default 2), each
timing the median of ``--reps`` runs after one warm-up (which also compiles
the numba kernels).  Printed as ratios ``python-graphblas time / spgnn time``
(> 1: spgnn faster).  Two spgnn levels are timed:

* ``kernel`` -- the backend's mask-driven masked SpGEMM
  (``Backend.spgemm_masked``) plus the sum, on ``L = tril(A, -1)``;
* ``api``    -- the public distributed operations on one rank
  (``spgnn.core.graph_algorithms.triangle_count``: select, mxm, reduce).

Masked SpGEMM is ``C<A.S> = A (+.x) A``.  Usage::

    python benchmarks/bench_graphblas.py [--graphs slashdot,twitter,luxembourg] [--threads 2]
"""

import argparse
import json
import os

import numpy as np
import scipy.sparse as sp

from spgnn.benchmarks.common import median_seconds

GRAPHS = {
    "slashdot": ("snap_soc_slashdot0902", "soc-Slashdot0902.txt.gz"),
    "twitter": ("snap_ego_twitter", "ego-twitter-undirected.jlg"),
    "luxembourg": ("luxembourg_osm", "luxembourg_osm.mtx"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", default="slashdot,twitter,luxembourg")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()

    import graphblas as gb
    import numba

    from spgnn import DistSparseMatrix, Layout, grid_1d
    from spgnn.backends import get_backend
    from spgnn.comm import Communicator
    from spgnn.core.graph_algorithms import triangle_count
    from spgnn.io import load_adjacency
    from spgnn.local.csr import LocalCSR
    from spgnn.testing.data import SHARED_DATA

    numba.set_num_threads(args.threads)
    gb.ss.config["nthreads"] = args.threads
    be = get_backend("numba")
    grid = grid_1d(Communicator.world())
    out = []
    for name in args.graphs.split(","):
        path = os.path.join(SHARED_DATA, *GRAPHS[name])
        adj = sp.csr_array(load_adjacency(path)[0], dtype=np.float64)
        adj.sort_indices()
        L = sp.csr_array(sp.tril(adj, -1))
        L.sort_indices()
        Ll, Al = LocalCSR.from_scipy(L), LocalCSR.from_scipy(adj)

        def ours_tri():
            c = be.spgemm_masked(Ll, Ll, "plus_pair", Ll, structure=True)
            return float(c.data.sum())

        A_dist = DistSparseMatrix.from_global(adj, grid, Layout("row"), backend="numba")

        def ours_api():
            return triangle_count(A_dist)

        gA = gb.io.from_scipy_sparse(adj)
        gL = gb.io.from_scipy_sparse(L)

        def theirs_tri():
            C = gb.Matrix(gb.dtypes.FP64, *adj.shape)
            C(gL.S) << gL.mxm(gL, gb.semiring.plus_pair)
            return C.reduce_scalar().value

        def ours_masked():
            return be.spgemm_masked(Al, Al, "plus_times", Al, structure=True)

        def theirs_masked():
            C = gb.Matrix(gb.dtypes.FP64, *adj.shape)
            C(gA.S) << gA.mxm(gA, gb.semiring.plus_times)
            return C

        t_ours, t_api, t_theirs = ours_tri(), ours_api(), theirs_tri()
        assert int(t_ours) == int(t_api) == int(t_theirs), (t_ours, t_api, t_theirs)
        mo, mt = ours_masked(), theirs_masked()
        assert mo.nnz == mt.nvals
        tri_ours, tri_api, tri_gb = (median_seconds(f, args.reps) for f in (ours_tri, ours_api, theirs_tri))
        m_ours, m_gb = (median_seconds(f, args.reps) for f in (ours_masked, theirs_masked))
        row = {"graph": name, "n": adj.shape[0], "nnz": int(adj.nnz), "triangles": int(t_ours),
               "tri_spgnn_kernel_s": tri_ours, "tri_spgnn_api_s": tri_api, "tri_graphblas_s": tri_gb,
               "tri_speedup_kernel": tri_gb / tri_ours, "tri_speedup_api": tri_gb / tri_api,
               "masked_spgnn_s": m_ours, "masked_graphblas_s": m_gb,
               "masked_speedup": m_gb / m_ours, "threads": args.threads}
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


if __name__ == "__main__":
    main()
