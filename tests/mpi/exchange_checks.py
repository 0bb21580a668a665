"""Pre / post / hybrid exchanges and quantized exchanges of the 1D SpMM (paper 004).

``check_exchange(comm, case)`` is collective over ``comm``: it compares
``spmm(A, X, aggregation=..., codec=...)`` (and ``Aᵀ``) with scipy on every
rank, checks the messages each rank receives from each peer against an
independent count on the global matrix (post: distinct sources; pre:
distinct destinations; hybrid: the maximum matching size of the pair's cut
graph, from scipy), and the ledger bytes against the wire formula.

Run under MPI: ``mpiexec -n P python -m mpi4py tests/mpi/exchange_checks.py
[--examples N]``; Hypothesis derandomized so every rank draws the same examples.
"""

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st
from scipy.sparse.csgraph import maximum_bipartite_matching

from spgnn import DistDenseMatrix, DistSparseMatrix, Layout, ProcessGrid, spmm
from spgnn.core.codec import make_codec, wire_bytes
from spgnn.core.hybrid import predict_messages
from spgnn.testing.asserts import assert_dist_allclose, assert_dist_equal
from spgnn.testing.strategies_dist import random_sparse, splits_for

SIZES = (1, 2, 3, 4, 8)


@st.composite
def exchange_case(draw, sizes=SIZES, max_dim=24):
    p = draw(st.sampled_from(sizes))
    n = draw(st.integers(0, max_dim))
    return dict(p=p, n=n, f=draw(st.integers(0, 6)), rows=draw(splits_for(n, p)),
                mode=draw(st.sampled_from(["post", "pre", "hybrid"])),
                quantize=draw(st.sampled_from(["none", "none", "int8", "int2"])),
                integer=draw(st.booleans()), symmetric=draw(st.booleans()),
                dtype=draw(st.sampled_from(["float32", "float64"])),
                density=draw(st.sampled_from([0.0, 0.1, 0.3])),
                seed=draw(st.integers(0, 2**31 - 1)))


def expected_messages(a, offsets, mode, r):
    """Messages rank ``r`` receives from each rank, counted on the global matrix."""
    p = len(offsets) - 1
    out = np.zeros(p, dtype=np.int64)
    rows = sp.csr_array(a[offsets[r]:offsets[r + 1]])
    for s in range(p):
        if s == r:
            continue
        b = sp.csr_array(rows[:, offsets[s]:offsets[s + 1]])
        b.eliminate_zeros()
        if b.nnz == 0:
            continue
        if mode == "post":
            out[s] = np.unique(b.indices).size
        elif mode == "pre":
            out[s] = np.count_nonzero(np.diff(b.indptr))
        else:
            out[s] = int(np.count_nonzero(maximum_bipartite_matching(b, perm_type="column") >= 0))
    return out


def check_exchange(comm, case, backend="numpy"):
    p, n, f, dtype = case["p"], case["n"], case["f"], np.dtype(case["dtype"])
    mode, quantize = case["mode"], case["quantize"]
    a = random_sparse((n, n), case["density"], case["seed"], dtype=dtype)
    rng = np.random.default_rng(case["seed"] + 1)
    if case["integer"]:
        a.data = np.round(a.data * 4).astype(dtype) + np.sign(a.data).astype(dtype)
    if case["symmetric"]:
        a = sp.csr_array(a + a.T)
    a.eliminate_zeros()
    x = (rng.integers(-3, 4, (n, f)) if case["integer"] else rng.standard_normal((n, f)))
    x = x.astype(dtype)
    grid = ProcessGrid(comm, (p,), ("row",))
    lay = Layout("row", row_splits=case["rows"])
    A = DistSparseMatrix.from_global(a, grid, lay, backend=backend)
    X = DistDenseMatrix.from_global(x, grid, lay, backend=backend)
    codec = make_codec(quantize, "nearest", "fp32")
    offsets = np.asarray(lay.offsets(grid, n, 0))
    r = comm.rank
    for transpose, ref in ((False, a), (True, sp.csr_array(a.T))):
        with comm.track("x") as stats:
            Y = spmm(A, X, algorithm="1d-aware", aggregation=mode, codec=codec,
                     transpose_a=transpose)
        expected = ref @ x
        (r0, r1), _ = Y.layout.bounds(grid, Y.shape)
        what = f"{mode} {quantize} transpose={transpose}"
        if codec is None:
            if case["integer"]:   # exact: integer sums in any order
                assert_dist_equal(comm, Y.local, expected[r0:r1], what)
            else:
                assert_dist_allclose(comm, Y.local, expected[r0:r1], what=what)
        else:
            # A message element is off by at most half a step, range/(2(2^b-1)),
            # and its range is at most 2 Σ_u |A[d,u]| max|x_u|: row d of Y is
            # off by at most (|A| @ max|x|)[d] / (2^b - 1) (+ fp32 rounding).
            bound = (abs(ref) @ np.abs(x).max(1, initial=0))[r0:r1]
            err = np.abs(Y.local - expected[r0:r1]).max(1, initial=0)
            ok = np.all(err <= bound * (1 / (2**codec.bits - 1) + 1e-4) + 1e-6)
            assert_dist_equal(comm, np.array(ok), np.array(True), what + " error bound")
        mat = A.transposed() if transpose else A
        # post without a codec is the original 1d-aware exchange plan.
        key = "spmm-1d-aware" if (mode, codec) == ("post", None) else "spmm-1d-exchange"
        plan = [v for k, v in mat.cache.items() if isinstance(k, tuple) and k[0] == key
                and (key == "spmm-1d-aware" or k[1] == mode)][0]
        want = expected_messages(ref, offsets, mode, r)
        # The planner's prediction (no communication) equals the plan.
        assert_dist_equal(comm, predict_messages(ref, offsets, mode)[r], want,
                          what + " predicted messages")
        assert_dist_equal(comm, plan.recv_counts, want, what + " messages received")
        label = ("spmm-1d-aware:exchange" if key == "spmm-1d-aware"
                 else f"spmm-1d-{mode}:exchange")
        others = np.arange(p) != r
        if codec is None:
            got = stats.total("bytes_recv", label=label)
            assert_dist_equal(comm, np.array(got), np.array(want[others].sum() * f * dtype.itemsize),
                              what + " bytes")
        else:
            data, par = wire_bytes(want, f, codec.bits, "fp32")
            assert_dist_equal(comm, np.array(stats.total("bytes_recv", label=label + ":data")),
                              np.array(data[others].sum()), what + " code bytes")
            assert_dist_equal(comm, np.array(stats.total("bytes_recv", label=label + ":params")),
                              np.array(par[others].sum()), what + " param bytes")


def properties(comm, args):
    yield ("exchange", exchange_case(sizes=(comm.size,)),
           lambda case: check_exchange(comm, case, args.backend))


if __name__ == "__main__":
    from spgnn.testing.mpi import run_property_checks

    run_property_checks("exchange_checks", properties, examples=20, backend="numba")
