"""Local CPU kernels side by side in one process: SpMM, SDDMM, SpGEMM.

spgnn's numba backend against scipy (single-threaded sparsetools),
python-graphblas (SuiteSparse:GraphBLAS) and torch CSR (``torch==2.13.0``),
on the same inputs (CSR with int32 indices, float32 values) and the same
thread count, timed interleaved (A B C A B C ...) with the median over
repetitions.  Compile time is excluded from every timing (one warm-up call
first) and reported separately, together with the machine's streaming
bandwidth (a triad measured in the same run) and each SpMM as a fraction of
the bandwidth bound under the gather traffic model (see ``traffic model``
in the output).  Dense operands start on a cache line, as a GNN layer's
operands do in torch and spgnn (:func:`dense_operand`).

Run (the numbers in ``docs/performance.md``, section "Local kernels")::

    python -m spgnn bench kernels --threads 2 --json > kernels.json
    python -m spgnn bench kernels --quick --plot kernels.png   # < 1 min subset
    python -m spgnn bench kernels --graph cora --graph ego-facebook --json

Independent runs saved with ``--out`` are combined by ``--markdown r1.json
r2.json r3.json``: each case the median over the runs, and the targets table
also says how many runs met each target (:func:`combine_reports`).

Needs ``pip install python-graphblas suitesparse-graphblas torch==2.13.0``
(the ``bench`` extra); a missing one is reported and skipped.  Real graphs
are dataset names (the dataset cache; ``python -m spgnn bench`` points
``SPGNN_DATA`` at the shared data folder).
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

# Thread settings: numba reads NUMBA_NUM_THREADS when it is imported (in
# main, after they are set); ``python -m spgnn bench`` sets them all before
# the process starts (spgnn.cli.bench), so BLAS sees them too.
_pre = argparse.ArgumentParser(add_help=False)
_pre.add_argument("--threads", type=int, default=2)
_pre.add_argument("--omp-wait-policy", default="passive")

import numpy as np
import scipy.sparse as sp

from spgnn.io import load_graph

from ._common import Case, save_bar_figure, thread_env  # noqa: F401

GATHER_MODEL = ("bytes = nnz*(4*f + 8) + m*f*4: per stored nonzero one int32 column index, "
                "one float32 value and one f-float row of X gathered; Y written once. "
                "Right when X does not stay in cache (random neighbours); rows of X "
                "that hit in cache make the 'fraction of bound' exceed what DRAM alone "
                "could give, so values near or above 1 mean cache reuse.")
TRIAD_MODEL = "a = b + s*c over float32 arrays, 12 bytes per element (write-allocate not counted)"
#: The real graphs of the default run (dataset names: the shared data folder or the cache).
REAL_GRAPHS = ("ego-twitter", "soc-slashdot0902", "luxembourg-osm")


# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #

def log(msg, args):
    if not args.json:
        print(msg, flush=True)
    else:
        print(msg, file=sys.stderr, flush=True)


#: A timed call shorter than this (judged by its warm-up call) is preceded
#: by untimed calls of the same function; see :func:`interleave`.
PRECALL_BELOW_S = 1.0
#: ... for at least this long (seconds), one call at the least.
SETTLE_S = 0.1
#: Calls shorter than this (judged by the warm-up) get at least
#: SHORT_CALL_REPEAT timed repetitions: sub-millisecond calls on this VM
#: have outliers of 2-3x, and a median of 3 is not robust to two of them.
SHORT_CALL_S = 0.01
SHORT_CALL_REPEAT = 9


def interleave(fns, repeat, warmup=1):
    """``{name: (median_s, min_s, max_s)}``; each repetition runs every function once, in turn.

    Interleaving spreads slow drifts of a shared machine over all libraries.
    Each timed call of a function whose warm-up took under
    :data:`PRECALL_BELOW_S` directly follows untimed calls of the *same*
    function, for :data:`SETTLE_S` or one call, whichever is longer, so
    every library is timed in its own steady state.  Why: one library's
    call slows the next calls of another for milliseconds, well beyond the
    first call (cache refill, and on this VM effects that decay over
    several calls).  Measured on ego-Twitter Q·A, spgnn's kernel alone
    0.42 ms; in the 6 calls right after a GraphBLAS call 1.7 ... 1.1 ms in
    one trial, 0.93 ... 0.43 ms (steady after ~3 ms) in another.  Without
    settling, spgnn, first in each round, paid for GraphBLAS's call just
    before it while scipy, next, found the operands warm.  Calls of a second
    or more stream far more than the caches hold, so they are not preceded.
    When every function's warm-up took under :data:`SHORT_CALL_S`, at least
    :data:`SHORT_CALL_REPEAT` repetitions are timed.
    """
    warm_s = {}
    for k, f in fns.items():
        for _ in range(max(1, warmup)):
            t0 = time.perf_counter()
            f()
            warm_s[k] = time.perf_counter() - t0
    times = {k: [] for k in fns}
    if max(warm_s.values()) < SHORT_CALL_S:
        repeat = max(repeat, SHORT_CALL_REPEAT)
    for _ in range(max(1, repeat)):
        for k, f in fns.items():
            if warm_s[k] < PRECALL_BELOW_S:
                settled = time.perf_counter() + SETTLE_S
                f()
                while time.perf_counter() < settled:
                    f()
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: (statistics.median(v), min(v), max(v)) for k, v in times.items()}


#: Where a dense operand starts.  A GNN layer's X is the product H W that the
#: framework just allocated: torch's CPU allocator and spgnn's
#: (``Backend.matmul``) both start it on a 64-byte cache line, while a plain
#: ``np.empty`` starts 16 bytes past one, so every 64-byte row of an f = 16
#: X straddles two lines.  Every library gets the same (aligned) array.
DENSE_ALIGN = 64


def dense_operand(rng, shape):
    """Uniform float32 values in an array starting on a :data:`DENSE_ALIGN` boundary.

    Regular pages, as torch's allocator gives (spgnn's own large outputs
    also ask for huge pages; the benchmark does not, to favour no library).
    """
    from spgnn.local.alloc import _ALIGN, _aligned_numpy  # a plain numpy buffer
    assert _ALIGN == DENSE_ALIGN
    out = _aligned_numpy(int(np.prod(shape)), np.dtype(np.float32)).reshape(shape)
    out[...] = rng.random(shape, dtype=np.float32)
    return out


def as_int32_csr(A):
    A = sp.csr_array(A, dtype=np.float32)
    A.sum_duplicates()
    A.sort_indices()
    if A.nnz >= 2**31 or max(A.shape) >= 2**31:
        raise ValueError("benchmark graphs must fit int32 indices")
    return sp.csr_array((A.data, A.indices.astype(np.int32), A.indptr.astype(np.int32)),
                        shape=A.shape)


def load(spec):
    """The int32 CSR of a graph spec (dataset name, file or generator), or None when a dataset
    cannot be had here (offline, not cached)."""
    from spgnn.errors import DownloadError
    try:
        return as_int32_csr(load_graph(spec).adj)
    except DownloadError:
        return None


def machine(threads):
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = {"cpu": cpu, "cores": os.cpu_count(), "threads": threads,
            "python": platform.python_version(), "platform": platform.platform(),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "loadavg_start": list(os.getloadavg())}
    try:
        import numba
        info["numba"] = numba.__version__
        info["numba_threading_layer"] = os.environ.get("NUMBA_THREADING_LAYER", "default")
    except ImportError:
        pass
    info["numpy"] = np.__version__
    import scipy
    info["scipy"] = scipy.__version__
    return info


# --------------------------------------------------------------------------- #
# optional competitors
# --------------------------------------------------------------------------- #

def import_torch(threads):
    try:
        import warnings
        import torch
        warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
        torch.set_num_threads(threads)
        return torch
    except ImportError:
        return None


def import_graphblas(threads):
    try:
        import graphblas as gb
        gb.ss.config["nthreads"] = threads
        return gb
    except Exception:  # ImportError, or a broken SuiteSparse binary
        return None


def gb_matrix(gb, A):
    return gb.Matrix.ss.import_csr(nrows=A.shape[0], ncols=A.shape[1],
                                   indptr=A.indptr.astype(np.int64),
                                   col_indices=A.indices.astype(np.int64),
                                   values=A.data, take_ownership=False)


def torch_csr(torch, A):
    return torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                   torch.from_numpy(A.indices.astype(np.int64)),
                                   torch.from_numpy(A.data), size=A.shape)


# --------------------------------------------------------------------------- #
# measurements
# --------------------------------------------------------------------------- #

class Triad:
    """A parallel numba triad ``a = b + s*c`` over ``n`` float32 (12 bytes per element).

    Built once (its compile time is kept in ``compile_s``); :meth:`measure`
    times it with :func:`interleave`.  The benchmark measures it at the start
    and the end of the run and right after every SpMM case: on this VM the
    streaming bandwidth moved between 34 and 54 GB/s within one run, so a
    case's fraction of the bound uses the triad measured next to it.
    """

    def __init__(self, n):
        import numba

        @numba.njit(parallel=True, nogil=True)
        def triad(a, b, c, s):
            for i in numba.prange(a.shape[0]):
                a[i] = b[i] + s * c[i]

        self.n = n
        self.a = np.empty(n, np.float32)
        self.b = np.ones(n, np.float32)
        self.c = np.ones(n, np.float32)
        t0 = time.perf_counter()
        triad(self.a[:16], self.b[:16], self.c[:16], np.float32(0.5))
        self.compile_s = time.perf_counter() - t0
        self._triad = triad

    def __call__(self):
        self._triad(self.a, self.b, self.c, np.float32(0.5))

    def measure(self, repeat):
        """``(median_gbs, best_gbs)`` over ``repeat`` interleave rounds."""
        med, best, _ = interleave({"triad": self}, repeat)["triad"]
        return 12 * self.n / med / 1e9, 12 * self.n / best / 1e9


def triad_bandwidth(triad, repeat):
    """Streaming bandwidth (GB/s) of ``triad`` (a :class:`Triad`), and its compile time."""
    med, best = triad.measure(repeat)
    return {"elements": triad.n, "model": TRIAD_MODEL, "median_gbs": med, "best_gbs": best,
            "compile_s": triad.compile_s}


def first_calls(be):
    """First call of each spgnn kernel in this process (cache load or compile) vs a warm call."""
    from spgnn.local.csr import LocalCSR
    A = as_int32_csr(sp.random(64, 64, density=0.1, random_state=0, format="csr"))
    La = LocalCSR(A.indptr, A.indices, A.data, A.shape, check=None)
    Q = selection(64, 16)
    Lq = LocalCSR(Q.indptr, Q.indices, Q.data, Q.shape, check=None)
    X = np.ones((64, 8), np.float32)
    out = {}
    # the selection product Q·A has its own kernel: compiled (and reported)
    # here rather than inside the first graph's timed Q·A case
    for name, fn in (("spmm", lambda: be.spmm(La, X, "plus_times")),
                     ("sddmm", lambda: be.sddmm(La, X, X, "plus_times")),
                     ("spgemm", lambda: be.spgemm(La, La, "plus_times")),
                     ("spgemm_selection", lambda: be.spgemm(Lq, La, "plus_times"))):
        t0 = time.perf_counter()
        fn()
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        fn()
        out[name] = {"first_call_s": first, "warm_call_s": time.perf_counter() - t0}
    return out


_COLD = r"""
import time, numpy as np, scipy.sparse as sp
t0 = time.perf_counter()
import spgnn
t_import = time.perf_counter() - t0
from spgnn.backends import get_backend
from spgnn.local.csr import LocalCSR
A = sp.random(64, 64, density=0.1, random_state=0, format="csr", dtype=np.float32)
La = LocalCSR(A.indptr.astype(np.int32), A.indices.astype(np.int32), A.data, A.shape, check=None)
be = get_backend("numba")
t0 = time.perf_counter(); be.spmm(La, np.ones((64, 8), np.float32), "plus_times")
t_spmm = time.perf_counter() - t0
t0 = time.perf_counter(); be.spgemm(La, La, "plus_times")
t_spgemm = time.perf_counter() - t0
print(t_import, t_spmm, t_spgemm)
"""


def cold_start(threads):
    """``import spgnn`` and first-call costs in fresh processes: empty numba cache, then warm cache."""
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads))
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        env["NUMBA_CACHE_DIR"] = cache
        for label in ("empty_cache", "warm_cache"):
            proc = subprocess.run([sys.executable, "-c", _COLD], env=env, capture_output=True,
                                  text=True, timeout=600)
            if proc.returncode != 0:
                out[label] = {"error": proc.stderr.strip().splitlines()[-1:]}
                continue
            t_import, t_spmm, t_spgemm = map(float, proc.stdout.split())
            out[label] = {"import_spgnn_s": t_import, "first_spmm_s": t_spmm,
                          "first_spgemm_s": t_spgemm}
    return out


def bench_spmm(name, A, feats, libs, be, triad, repeat, seed=0):
    from spgnn.backends import empty_output
    from spgnn.local.csr import LocalCSR
    torch, gb = libs.get("torch"), libs.get("graphblas")
    m, n = A.shape
    La = LocalCSR(A.indptr, A.indices, A.data, A.shape, check=None)
    At = torch_csr(torch, A) if torch is not None else None
    Ga = gb_matrix(gb, A) if gb is not None else None
    rows = []
    for f in feats:
        X = dense_operand(np.random.default_rng(seed), (n, f))
        # a preallocated output, as a training loop keeps one per layer, from
        # spgnn's allocator: 64-byte aligned, so large ones are streamed
        Y = empty_output((m, f), np.float32)
        fns = {"spgnn": lambda: be.spmm(La, X, "plus_times", out=Y),
               "scipy": lambda: A @ X}
        if At is not None:
            Xt = torch.from_numpy(X)
            fns["torch_csr"] = lambda: torch.sparse.mm(At, Xt)
        if Ga is not None:
            Gx = gb.Matrix.ss.import_fullr(X, take_ownership=False)
            fns["graphblas"] = lambda: Ga.mxm(Gx, gb.semiring.plus_times).new()
        res = interleave(fns, repeat)
        ref = A @ X
        ok = bool(np.allclose(Y, ref, rtol=1e-4, atol=1e-4))
        model_bytes = A.nnz * (4 * f + 8) + m * f * 4
        rec = {"graph": name, "m": m, "nnz": int(A.nnz), "f": f, "correct": ok,
               "model_bytes": model_bytes, "times_s": {k: v[0] for k, v in res.items()},
               "best_s": {k: v[1] for k, v in res.items()},
               "worst_s": {k: v[2] for k, v in res.items()}}
        t = rec["times_s"]
        rec["spgnn_model_gbs"] = model_bytes / t["spgnn"] / 1e9
        # the bound: the best triad repetition measured right after this case
        rec["triad_gbs"] = triad.measure(repeat)[1]
        rec["fraction_of_bound"] = rec["spgnn_model_gbs"] / rec["triad_gbs"]
        rec["speedup_vs"] = {k: t[k] / t["spgnn"] for k in t if k != "spgnn"}
        rows.append(rec)
    return rows


#: Semirings of the custom-semiring SpMM table (GNN max/sum aggregation,
#: tropical min-plus).
OTHER_SEMIRINGS = ("max_second", "plus_second", "min_plus")


def bench_semiring_spmm(name, A, f, libs, be, repeat, seed=0):
    """SpMM over semirings other than plus_times: spgnn (register kernels) vs its
    generic scalar kernel (the code path before them) vs GraphBLAS, same X."""
    import numba
    from spgnn._kernels.numba import _ops, spmm as kernels
    from spgnn.local.csr import LocalCSR
    from spgnn.local.semiring import get_semiring
    gb = libs.get("graphblas")
    m, n = A.shape
    La = LocalCSR(A.indptr, A.indices, A.data, A.shape, check=None)
    X = dense_operand(np.random.default_rng(seed), (n, f))
    Ga = gb_matrix(gb, A) if gb is not None else None
    Gx = gb.Matrix.ss.import_fullr(X, take_ownership=False) if gb is not None else None
    rows = []
    for name_s in OTHER_SEMIRINGS:
        s = get_semiring(name_s)
        Y, Y0 = np.empty((m, f), np.float32), np.empty((m, f), np.float32)
        add, mul = _ops.ADD_CODES[s.add.name], _ops.MUL_CODES[s.multiply]
        ident = np.float32(s.add.identity)
        fns = {"spgnn": lambda s=s: be.spmm(La, X, s, out=Y),
               "scalar_kernel": lambda add=add, mul=mul, ident=ident: kernels.csr_spmm_rowwise(
                   A.indptr, A.indices, A.data, X, add, mul, ident,
                   4 * numba.get_num_threads(), Y0)}
        if gb is not None:
            gs = getattr(gb.semiring, name_s)
            fns["graphblas"] = lambda gs=gs: Ga.mxm(Gx, gs).new()
        res = interleave(fns, repeat)
        # bit-identical to the scalar kernel (itself property-tested against
        # the numpy reference, which needs nnz * f temporaries: 16 GB here)
        ok = bool(np.array_equal(Y.view(np.uint32), Y0.view(np.uint32)))
        t = {k: v[0] for k, v in res.items()}
        rows.append({"graph": name, "f": f, "semiring": name_s, "correct": ok, "times_s": t,
                     "speedup_vs": {k: t[k] / t["spgnn"] for k in t if k != "spgnn"}})
    return rows


def bench_sddmm(name, A, f, libs, be, repeat, seed=0):
    from spgnn.local.csr import LocalCSR
    torch = libs.get("torch")
    m, n = A.shape
    La = LocalCSR(A.indptr, A.indices, A.data, A.shape, check=None)
    rng = np.random.default_rng(seed)
    X = dense_operand(rng, (m, f))
    Yd = dense_operand(rng, (n, f))
    rows_idx = np.repeat(np.arange(m, dtype=np.int64), np.diff(A.indptr))
    step = max(1, (1 << 24) // max(1, f))  # gather at most 64 MiB of rows at a time

    def numpy_gather():
        out = np.empty(A.nnz, np.float32)
        for s in range(0, A.nnz, step):
            e = min(A.nnz, s + step)
            out[s:e] = A.data[s:e] * np.einsum("ij,ij->i", X[rows_idx[s:e]], Yd[A.indices[s:e]])
        return out

    fns = {"spgnn": lambda: be.sddmm(La, X, Yd, "plus_times"), "numpy_gather": numpy_gather}
    if torch is not None:
        At = torch_csr(torch, A)
        Xt, Yt = torch.from_numpy(X), torch.from_numpy(np.ascontiguousarray(Yd.T))
        try:
            torch.sparse.sampled_addmm(At, Xt, Yt, beta=0.0)
            fns["torch_sampled_addmm"] = lambda: torch.sparse.sampled_addmm(At, Xt, Yt, beta=0.0)
        except Exception:  # not supported on this build
            pass
    res = interleave(fns, repeat)
    got = be.sddmm(La, X, Yd, "plus_times").data
    ok = bool(np.allclose(got, numpy_gather(), rtol=1e-4, atol=1e-4))
    t = {k: v[0] for k, v in res.items()}
    best_alt = min((k for k in t if k != "spgnn"), key=t.get)
    return {"graph": name, "m": m, "nnz": int(A.nnz), "f": f, "correct": ok, "times_s": t,
            "range_s": {k: [v[1], v[2]] for k, v in res.items()},
            "best_alternative": best_alt, "speedup_vs_best": t[best_alt] / t["spgnn"]}


def bench_spgemm(name, kind, A, B, libs, be, repeat):
    from spgnn.local.csr import LocalCSR
    gb = libs.get("graphblas")
    La = LocalCSR(A.indptr, A.indices, A.data, A.shape, check=None)
    Lb = LocalCSR(B.indptr, B.indices, B.data, B.shape, check=None)
    fns = {"spgnn": lambda: be.spgemm(La, Lb, "plus_times"), "scipy": lambda: A @ B}
    if gb is not None:
        Ga, Gb = gb_matrix(gb, A), gb_matrix(gb, B)
        fns["graphblas"] = lambda: Ga.mxm(Gb, gb.semiring.plus_times).new()
    res = interleave(fns, repeat)
    C = be.spgemm(La, Lb, "plus_times")
    S = sp.csr_array(A @ B)
    S.sort_indices()
    ok = bool(np.array_equal(C.indptr, S.indptr) and np.array_equal(C.indices, S.indices)
              and np.allclose(C.data, S.data, rtol=1e-4, atol=1e-5))
    flops = int(np.diff(B.indptr)[A.indices].sum())
    t = {k: v[0] for k, v in res.items()}
    return {"graph": name, "kind": kind, "shape": [A.shape[0], B.shape[1]], "nnz_a": int(A.nnz),
            "flops": flops, "nnz_c": int(C.nnz), "correct": ok, "times_s": t,
            "range_s": {k: [v[1], v[2]] for k, v in res.items()},
            "speedup_vs": {k: t[k] / t["spgnn"] for k in t if k != "spgnn"}}


def selection(n, b, seed=0):
    rows = np.sort(np.random.default_rng(seed).choice(n, size=min(b, n), replace=False))
    k = rows.shape[0]
    return sp.csr_array((np.ones(k, np.float32), rows.astype(np.int32),
                         np.arange(k + 1, dtype=np.int32)), shape=(k, n))


def bench_locality(name, A, f, be, triad, repeat, seed=0):
    from spgnn.backends import empty_output
    from spgnn.local.csr import LocalCSR
    from spgnn.partition import reorder
    m = A.shape[0]
    X = dense_operand(np.random.default_rng(seed), (m, f))
    mats, order_s = {"original": A}, {}
    for method in ("rcm", "degree", "metis"):
        t0 = time.perf_counter()
        try:
            perm = reorder(A, method)
        except Exception as exc:  # pymetis missing
            order_s[method] = f"skipped: {exc}"
            continue
        order_s[method] = time.perf_counter() - t0
        mats[method] = as_int32_csr(A[perm][:, perm])
    locs = {k: LocalCSR(M.indptr, M.indices, M.data, M.shape, check=None) for k, M in mats.items()}
    Y = empty_output((m, f), np.float32)
    fns = {k: (lambda L=L: be.spmm(L, X, "plus_times", out=Y)) for k, L in locs.items()}
    res = interleave(fns, repeat)
    triad_gbs = triad.measure(repeat)[1]
    model_bytes = A.nnz * (4 * f + 8) + m * f * 4
    out = {"graph": name, "f": f, "reorder_time_s": order_s, "triad_gbs": triad_gbs,
           "orders": {}}
    for k, (med, *_) in res.items():
        out["orders"][k] = {"time_s": med, "model_gbs": model_bytes / med / 1e9,
                            "fraction_of_bound": model_bytes / med / 1e9 / triad_gbs,
                            "speedup_vs_original": res["original"][0] / med}
    return out


# --------------------------------------------------------------------------- #
# main
# --------------------------------------------------------------------------- #

#: The issue's targets at 2 threads (docs/performance.md, "Targets"): (what,
#: table, measure, threshold).  A measure is ``speedup_vs[<library>]`` or the
#: fraction of the bandwidth bound.
TARGETS = (
    ("SpMM vs torch CSR", "spmm", "torch_csr", 1.2),
    ("SpMM vs scipy", "spmm", "scipy", 3.0),
    ("SpMM fraction of the bandwidth bound, locality-ordered graphs", "spmm",
     "fraction_of_bound", 0.5),
    ("SpGEMM vs GraphBLAS", "spgemm", "graphblas", 1.0),
)


def _locality_ordered(graph):
    """The real graphs come numbered with locality (crawl order, a road
    network's own order); R-MAT numbers hubs first and their neighbours at
    random, so its SpMM is bound by gather latency, not bandwidth."""
    return not graph.startswith("rmat:")


def check_targets(report):
    """Each target of :data:`TARGETS` against a report: its worst case, and whether every
    case met it.  A target with no case (a library missing) is ``met: None``.  Pure."""
    out = []
    for what, table, measure, threshold in TARGETS:
        cases = []
        for r in report.get(table, []):
            if measure == "fraction_of_bound":
                if not _locality_ordered(r["graph"]):
                    continue
                value = r["fraction_of_bound"]
            elif measure in r["speedup_vs"]:
                value = r["speedup_vs"][measure]
            else:
                continue
            case = f"{r['graph']} " + (f"f = {r['f']}" if table == "spmm" else r["kind"])
            cases.append((value, case))
        worst = min(cases) if cases else (None, None)
        out.append({"target": what, "threshold": threshold, "cases": len(cases),
                    "missed": sorted(c for v, c in cases if v < threshold),
                    "worst": worst[0], "worst_case": worst[1],
                    "met": (worst[0] >= threshold) if cases else None})
    return out


#: How the cases of each table are matched across runs (:func:`combine_reports`).
CASE_KEYS = {"spmm": ("graph", "f"), "semiring_spmm": ("graph", "f", "semiring"),
             "sddmm": ("graph", "f"), "spgemm": ("graph", "kind"), "locality": ("graph", "f")}


def _median_tree(values):
    """One value for the same field of several runs' records.

    Dicts merge key by key (a key missing in some runs takes the median of
    the others); numbers that differ take their median; booleans (the
    ``correct`` flags) must hold in every run; anything else (strings,
    equal numbers) keeps the most common value.  Pure.
    """
    if all(isinstance(v, dict) for v in values):
        keys = list(dict.fromkeys(k for v in values for k in v))
        return {k: _median_tree([v[k] for v in values if k in v]) for k in keys}
    if all(isinstance(v, bool) for v in values):
        return all(values)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if numbers and len(set(values)) > 1:
        return statistics.median(values)
    return max(values, key=values.count)


def combine_reports(reports, names=None):
    """One report whose every case is the median over several runs' reports of that case.

    Times, ratios (``speedup_vs``, each run's own paired ratio, so a case's
    ratio is the median of the runs' ratios, not the ratio of the median
    times) and fractions of the bound are medians over the runs that have
    the case; ``runs`` counts them.  ``combined_from`` keeps, per run, its
    name, command, start load and its own :func:`check_targets`, which the
    targets table reports beside the combined verdict.  Why: on a shared VM
    the memory bandwidth has phases lasting minutes, so one run judges each
    case in one phase; independent runs, each comparing the libraries in
    the same phase, and their median per case, do not hang a verdict on
    one phase.  Pure.
    """
    names = list(names) if names is not None else [f"run {i + 1}" for i in range(len(reports))]
    out = {k: v for k, v in reports[0].items() if k not in CASE_KEYS}
    for table, key in CASE_KEYS.items():
        groups = {}
        for rep in reports:
            for rec in rep.get(table, []):
                groups.setdefault(tuple(rec[k] for k in key), []).append(rec)
        if table in reports[0] or groups:
            out[table] = [dict(_median_tree(recs), runs=len(recs)) for recs in groups.values()]
    out["combined_from"] = [
        {"name": name, "command": rep.get("command"),
         "loadavg_start": rep.get("machine", {}).get("loadavg_start"),
         "targets": check_targets(rep)} for name, rep in zip(names, reports)]
    out["targets"] = check_targets(out)
    return out


def _runs_met(target, runs):
    """The targets table's cell for one target over the combined runs: how many met it,
    and the cases each other run missed."""
    judged = [(run["name"], t) for run in runs for t in run["targets"]
              if t["target"] == target and t["met"] is not None]
    met = sum(1 for _, t in judged if t["met"])
    misses = [f"{name}: " + ", ".join(t["missed"]) for name, t in judged if not t["met"]]
    return f"{met} of {len(judged)}" + (f" ({'; '.join(misses)})" if misses else "")


def _table_head(title, columns):
    """A ``###`` heading and a markdown table header for ``columns``."""
    return [f"### {title}", "", "| " + " | ".join(columns) + " |",
            "|" + "---|" * len(columns)]


def markdown_tables(report) -> str:
    """The SpMM, semiring SpMM, SDDMM, SpGEMM, locality and targets tables of
    docs/performance.md, from a report (reports without ``semiring_spmm`` predate that table). Pure."""
    nan = float("nan")
    ms = lambda t: f"{t * 1e3:.3g}"                                     # noqa: E731
    out = _table_head("SpMM Y = A·X (plus_times, float32)",
                      ["graph", "f", "spgnn ms", "scipy ms", "torch CSR ms", "GraphBLAS ms",
                       "vs torch", "vs scipy", "model GB/s", "triad GB/s", "frac. of bound"])
    for r in report["spmm"]:
        t, v = r["times_s"], r["speedup_vs"]
        out.append(f"| {r['graph']} | {r['f']} | {ms(t['spgnn'])} | {ms(t['scipy'])} | "
                   f"{ms(t.get('torch_csr', nan))} | {ms(t.get('graphblas', nan))} | "
                   f"{v.get('torch_csr', nan):.2f}x | {v['scipy']:.2f}x | "
                   f"{r['spgnn_model_gbs']:.1f} | {r.get('triad_gbs', nan):.1f} | "
                   f"{r['fraction_of_bound']:.2f} |")
    if "semiring_spmm" in report:
        out += [""] + _table_head("SpMM over other semirings (float32)",
                                  ["graph", "f", "semiring", "spgnn ms", "scalar kernel ms",
                                   "GraphBLAS ms", "vs scalar kernel", "vs GraphBLAS"])
    for r in report.get("semiring_spmm", []):
        t, v = r["times_s"], r["speedup_vs"]
        out.append(f"| {r['graph']} | {r['f']} | {r['semiring']} | {ms(t['spgnn'])} | "
                   f"{ms(t['scalar_kernel'])} | {ms(t.get('graphblas', nan))} | "
                   f"{v['scalar_kernel']:.2f}x | {v.get('graphblas', nan):.2f}x |")
    out += [""] + _table_head("SDDMM (attention scores: `C[e] = A[e] * <X[i], Y[j]>`)",
                              ["graph", "d", "spgnn ms", "torch sampled_addmm ms",
                               "numpy gather ms", "vs best"])
    for r in report["sddmm"]:
        t = r["times_s"]
        out.append(f"| {r['graph']} | {r['f']} | {ms(t['spgnn'])} | "
                   f"{ms(t.get('torch_sampled_addmm', nan))} | {ms(t['numpy_gather'])} | "
                   f"{r['speedup_vs_best']:.2f}x ({r['best_alternative']}) |")
    out += [""] + _table_head("SpGEMM (plus_times; sorted, duplicate-free output)",
                              ["graph", "product", "flops", "nnz(C)", "spgnn ms", "scipy ms",
                               "GraphBLAS ms", "vs GraphBLAS", "vs scipy"])
    for r in report["spgemm"]:
        t, v = r["times_s"], r["speedup_vs"]
        out.append(f"| {r['graph']} | {r['kind']} | {r['flops']:.2e} | {r['nnz_c']:.2e} | "
                   f"{ms(t['spgnn'])} | {ms(t['scipy'])} | {ms(t.get('graphblas', nan))} | "
                   f"{v.get('graphblas', nan):.2f}x | {v['scipy']:.2f}x |")
    out += [""] + _table_head("Locality (SpMM, `spgnn.partition.reorder`)",
                              ["graph", "f", "original ms", "rcm", "degree", "metis",
                               "best speedup", "reorder time rcm / degree / metis s"])
    for r in report["locality"]:
        o = r["orders"]
        cell = lambda k: f"{ms(o[k]['time_s'])} ({o[k]['fraction_of_bound']:.2f})"  # noqa: E731
        best = max(o[k]["speedup_vs_original"] for k in o)
        rt = r["reorder_time_s"]
        out.append(f"| {r['graph']} | {r['f']} | {cell('original')} | {cell('rcm')} | "
                   f"{cell('degree')} | {cell('metis')} | {best:.2f}x | "
                   f"{rt['rcm']:.2f} / {rt['degree']:.2f} / {rt['metis']:.2f} |")
    runs = report.get("combined_from")
    columns = ["target", "threshold", "cases", "worst", "worst case", "met"]
    if runs:
        out += ["", f"### Runs combined ({len(runs)})", "",
                "Every time, ratio and fraction above is the median over the runs that have "
                "the case (a ratio: the median of the runs' own ratios).", ""]
        out += [f"* {run['name']}: `{run['command']}`" for run in runs]
        columns = columns[:-1] + ["met by the medians", "runs that met it"]
    out += [""] + _table_head("Targets (2 threads)", columns)
    for t in check_targets(report):
        worst = "-" if t["worst"] is None else f"{t['worst']:.2f}"
        met = {True: "yes", False: "**no**: " + ", ".join(t["missed"]), None: "no cases"}
        row = (f"| {t['target']} | {t['threshold']:g} | {t['cases']} | {worst} | "
               f"{t['worst_case'] or '-'} | {met[t['met']]} |")
        out.append(row + (f" {_runs_met(t['target'], runs)} |" if runs else ""))
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                parents=[_pre])
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--markdown", default=None, nargs="+", metavar="REPORT.json",
                   help="print the markdown tables of a saved --out report and exit (no "
                        "timing); several reports (independent runs) are combined first, "
                        "each case the median over the runs, and --out saves the combination")
    p.add_argument("--quick", action="store_true",
                   help="small subset (R-MAT scale 12, f in {16, 64}, 2 repetitions): < 1 min")
    p.add_argument("--backend", default="numba", choices=["numba", "cupy"],
                   help="spgnn backend under test (cupy reserved for the GPU version)")
    p.add_argument("--graphs", default=None,
                   help="comma list of graph specs (dataset name, file, rmat:S[:EF]); "
                        "default rmat:16,rmat:18,rmat:20 and " + ",".join(REAL_GRAPHS))
    p.add_argument("--graph", action="append", default=None, metavar="SPEC",
                   help="a graph to run (repeatable; adds to --graphs)")
    p.add_argument("--plot", default=None, metavar="FILE",
                   help="write a bar chart of the SpMM and SpGEMM cases (png, svg, pdf)")
    p.add_argument("--feats", default="16,64,256")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--aa-max-flops", type=float, default=5e8,
                   help="run A·A only where its flop count is below this (A·A of power-law "
                        "R-MAT graphs of scale >= 16 has 10^9+ flops and 10^8+ output "
                        "entries; ego-Twitter's 4.6e8 flops peak at ~14 GB resident)")
    p.add_argument("--aa-graphs", default=None,
                   help="extra graphs for A·A only (default rmat:14 when not --quick)")
    p.add_argument("--sample-rows", type=int, default=8192, help="rows b of the selection Q in Q·A")
    p.add_argument("--skip-cold", action="store_true", help="skip the fresh-process compile test")
    p.add_argument("--no-output-cache", action="store_true",
                   help="do not reuse spgnn's freed output buffers (spgnn.local.alloc; "
                        "SpGEMM and SDDMM outputs, SpMM writes into out=): every call's output "
                        "is then a new mapping, first-touched like the other libraries' "
                        "outputs (still on huge pages)")
    p.add_argument("--out", default=None,
                   help="also write the JSON report to this file, rewritten after every graph "
                        "(a checkpoint if a long run is interrupted)")
    args = p.parse_args(argv)
    if args.markdown:
        reports = []
        for path in args.markdown:
            with open(path) as fh:
                reports.append(json.load(fh))
        report = (reports[0] if len(reports) == 1
                  else combine_reports(reports, [os.path.basename(p) for p in args.markdown]))
        if args.out and len(reports) > 1:
            with open(args.out, "w") as fh:
                json.dump(report, fh, indent=1)
        print(markdown_tables(report), end="")
        return None
    if args.backend != "numba":
        p.error("only --backend numba is implemented (cupy is reserved for the GPU kernels)")
    # before numba is imported (no-ops when spgnn.cli.bench set them already)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    if args.omp_wait_policy:
        os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy

    from spgnn.backends import get_backend

    quick = args.quick
    repeat = 2 if quick else args.repeat
    feats = [16, 64] if quick else [int(s) for s in args.feats.split(",")]
    if args.graphs or args.graph:
        graphs = (args.graphs.split(",") if args.graphs else []) + (args.graph or [])
    elif quick:
        graphs = ["rmat:12"]
    else:
        graphs = ["rmat:16", "rmat:18", "rmat:20"] + list(REAL_GRAPHS)
    aa_graphs = (args.aa_graphs.split(",") if args.aa_graphs
                 else ([] if quick or args.graphs or args.graph else ["rmat:14"]))

    import numba
    numba.set_num_threads(args.threads)
    libs = {"torch": import_torch(args.threads), "graphblas": import_graphblas(args.threads)}
    report = {"command": " ".join(["python -m spgnn bench kernels"]
                                  + (argv if argv is not None else sys.argv[1:])),
              "machine": machine(args.threads),
              "versions": {"torch": getattr(libs["torch"], "__version__", None),
                           "graphblas": getattr(libs["graphblas"], "__version__", None)},
              "missing": [k for k, v in libs.items() if v is None],
              "repeat": repeat, "traffic_model": GATHER_MODEL,
              "dense_operands": f"float32, start on a {DENSE_ALIGN}-byte boundary, regular pages"}
    if libs["graphblas"] is not None:
        try:
            import suitesparse_graphblas as ssgb
            report["versions"]["suitesparse_graphblas"] = ssgb.__version__
        except Exception:
            pass
    from spgnn.local import alloc as _alloc
    if args.no_output_cache:
        _alloc.CACHE_MAX_BYTES = 0
    report["machine"]["spgnn_output_cache_bytes"] = _alloc.CACHE_MAX_BYTES
    be = get_backend(args.backend)
    t_all = time.perf_counter()

    log("triad ...", args)
    triad = Triad(4_000_000 if quick else 50_000_000)
    report["bandwidth"] = triad_bandwidth(triad, repeat)
    # Each SpMM case's bound is the best triad repetition measured right after
    # it (the bandwidth drifts within a run); the best, not the median: on a
    # shared machine the median is lowered by other jobs, and a low bound
    # would flatter the fractions.
    bw = report["bandwidth"]["best_gbs"]
    log(f"  triad {report['bandwidth']['median_gbs']:.1f} GB/s median, {bw:.1f} best", args)
    report["first_calls"] = first_calls(be)
    report["cold_start"] = {} if (quick or args.skip_cold) else cold_start(args.threads)
    for k, v in report["first_calls"].items():
        log(f"  first call {k}: {v['first_call_s']:.2f} s (warm {v['warm_call_s'] * 1e3:.2f} ms)",
            args)
    for k, v in report["cold_start"].items():
        log(f"  fresh process, {k}: {v}", args)

    report["spmm"], report["sddmm"], report["spgemm"], report["locality"] = [], [], [], []
    report["semiring_spmm"] = []
    report["skipped"] = []
    for spec in graphs:
        t0 = time.perf_counter()
        A = load(spec)
        if A is None:
            report["skipped"].append(f"{spec}: dataset not in the cache and not downloadable here")
            continue
        log(f"{spec}: n={A.shape[0]} nnz={A.nnz} (loaded in {time.perf_counter() - t0:.1f} s)",
            args)
        for rec in bench_spmm(spec, A, feats, libs, be, triad, repeat):
            report["spmm"].append(rec)
            log("  spmm f={f}: ".format(**rec)
                + " ".join(f"{k}={v * 1e3:.2f}ms" for k, v in rec["times_s"].items())
                + f"  bound={rec['fraction_of_bound']:.2f}", args)
        for rec in bench_semiring_spmm(spec, A, 64 if not quick else 16, libs, be, repeat):
            report["semiring_spmm"].append(rec)
            log(f"  spmm {rec['semiring']} f={rec['f']}: "
                + " ".join(f"{k}={v * 1e3:.2f}ms" for k, v in rec["times_s"].items()), args)
        rec = bench_sddmm(spec, A, 64 if not quick else 16, libs, be, repeat)
        report["sddmm"].append(rec)
        log("  sddmm: " + " ".join(f"{k}={v * 1e3:.2f}ms" for k, v in rec["times_s"].items()),
            args)
        Q = selection(A.shape[0], args.sample_rows)
        rec = bench_spgemm(spec, "Q·A", Q, A, libs, be, repeat)
        report["spgemm"].append(rec)
        log("  Q·A: " + " ".join(f"{k}={v * 1e3:.2f}ms" for k, v in rec["times_s"].items()),
            args)
        flops = int(np.diff(A.indptr)[A.indices].sum())
        if flops <= args.aa_max_flops:
            rec = bench_spgemm(spec, "A·A", A, A, libs, be, repeat)
            report["spgemm"].append(rec)
            log("  A·A: " + " ".join(f"{k}={v * 1e3:.2f}ms" for k, v in rec["times_s"].items()),
                args)
        else:
            report["skipped"].append(f"{spec}: A·A has {flops:.3g} flops > --aa-max-flops")
        if not spec.startswith("rmat:") or spec == graphs[0]:
            rec = bench_locality(spec, A, 64 if not quick else 16, be, triad, repeat)
            report["locality"].append(rec)
            log("  locality: " + " ".join(f"{k}={v['time_s'] * 1e3:.2f}ms"
                                          for k, v in rec["orders"].items()), args)
        del A
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(report, fh, indent=1)
    for spec in aa_graphs:
        A = load(spec)
        if A is None:
            continue
        rec = bench_spgemm(spec, "A·A", A, A, libs, be, repeat)
        report["spgemm"].append(rec)
        log(f"{spec} A·A: " + " ".join(f"{k}={v * 1e3:.2f}ms" for k, v in rec["times_s"].items()),
            args)
    end = triad_bandwidth(triad, repeat)
    report["bandwidth"]["end_median_gbs"] = end["median_gbs"]
    report["bandwidth"]["end_best_gbs"] = end["best_gbs"]
    report["bandwidth"]["bound_gbs"] = bw
    report["bandwidth"]["bound_rule"] = (
        "each SpMM case (and locality row) is divided by the best triad repetition "
        "measured right after it (its record's triad_gbs); bound_gbs is the start's")
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    report["wall_s"] = time.perf_counter() - t_all
    report["targets"] = check_targets(report)
    for t in report["targets"]:
        log(f"target {t['target']} >= {t['threshold']:g}: "
            + ("no cases" if t["met"] is None else
               f"worst {t['worst']:.2f} ({t['worst_case']}), "
               + ("met" if t["met"] else "MISSED: " + ", ".join(t["missed"]))), args)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(report, fh, indent=1)
    if args.json:
        print(json.dumps(report, indent=1))
    if args.plot:
        save_bar_figure(plot_cases(report), args.plot,
                        title=f"local kernels, {args.threads} thread(s): SpMM (f) and SpGEMM")
        log(f"figure written to {args.plot}", args)
    return report


def plot_cases(report):
    """The figure's cases: every SpMM (graph, f) and SpGEMM (graph, product) of a report."""
    cases = []
    for r in report["spmm"]:
        lo, hi = r.get("best_s", r["times_s"]), r.get("worst_s", r["times_s"])
        cases.append(Case(f"{r['graph']} f={r['f']}",
                          {k: (v, lo.get(k, v), hi.get(k, v)) for k, v in r["times_s"].items()}))
    for r in report["spgemm"]:
        rng = r.get("range_s", {})
        cases.append(Case(f"{r['graph']} {r['kind']}",
                          {k: (v, *rng.get(k, (v, v))) for k, v in r["times_s"].items()}))
    return cases


if __name__ == "__main__":
    main()
