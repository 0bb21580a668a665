"""GPU kernels vs cuSPARSE and torch CUDA: SpMM and SDDMM on random power-law-free graphs.

Run on an H100 on 2026-11-26 (docs/gpu.md has the numbers).  Needs CuPy and a device;
torch with CUDA is optional.  Prints ratios vs cuSPARSE and writes JSON::

    python benchmarks/bench_gpu.py [--n 200000] [--deg 16] [--f 16 64 256] [--out FILE]

Timing: CUDA events around ``--reps`` calls after ``--warmup`` calls, median.
SpGEMM (``A @ A`` on a ``--spgemm-n`` graph, hash-per-row kernel vs cuSPARSE
through cupyx) and transposition are timed once per run (not yet run on a
device).  A GCN epoch vs PyG is not benchmarked: a GPU GCN epoch needs the GPU
communicator path.
"""

import argparse
import json
import sys


def _time(fn, reps, warmup):
    import cupy

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    times.sort()
    return times[len(times) // 2]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--deg", type=int, default=16)
    ap.add_argument("--f", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--spgemm-n", type=int, default=50_000)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    from spgnn.backends.cupy_backend import CupyBackend

    why = CupyBackend.unavailable_reason()
    if why:
        print(f"bench_gpu: no usable GPU: {why}", file=sys.stderr)
        return 2
    import cupy
    import cupyx.scipy.sparse as csp

    from spgnn.local.csr import LocalCSR

    ours, alt = CupyBackend(), CupyBackend(spmm_impl="cusparse")
    a_sp = csp.random(args.n, args.n, density=args.deg / args.n, format="csr", dtype=cupy.float32,
                      random_state=0)
    a = LocalCSR(a_sp.indptr, a_sp.indices, a_sp.data, a_sp.shape, check=None)
    try:
        import torch

        t_a = torch.sparse_csr_tensor(torch.as_tensor(a_sp.indptr, device="cuda"),
                                      torch.as_tensor(a_sp.indices, device="cuda"),
                                      torch.as_tensor(a_sp.data, device="cuda"), a_sp.shape)
    except Exception:            # torch without CUDA: no torch column
        torch = t_a = None
    rows = []
    for f in args.f:
        x = cupy.random.default_rng(1).standard_normal((args.n, f), dtype=cupy.float32)
        r = {"n": args.n, "nnz": int(a_sp.nnz), "f": f,
             "spmm_kernel_s": _time(lambda: ours.spmm(a, x, "plus_times"), args.reps, args.warmup),
             "spmm_cusparse_s": _time(lambda: alt.spmm(a, x, "plus_times"), args.reps, args.warmup),
             "sddmm_kernel_s": _time(lambda: ours.sddmm(a, x, x, "plus_times"), args.reps,
                                     args.warmup)}
        if torch is not None:
            tx = torch.as_tensor(x, device="cuda")
            r["spmm_torch_s"] = _time(lambda: t_a @ tx, args.reps, args.warmup)
        r["spmm_kernel_vs_cusparse"] = r["spmm_cusparse_s"] / r["spmm_kernel_s"]
        rows.append(r)
        print(json.dumps(r))
    b_sp = csp.random(args.spgemm_n, args.spgemm_n, density=args.deg / args.spgemm_n,
                      format="csr", dtype=cupy.float32, random_state=2)
    b = LocalCSR(b_sp.indptr, b_sp.indices, b_sp.data, b_sp.shape, check=None)
    r = {"n": args.spgemm_n, "nnz": int(b_sp.nnz), "op": "spgemm A@A, transpose",
         "spgemm_kernel_s": _time(lambda: ours.spgemm(b, b, "plus_times"), args.reps, args.warmup),
         "spgemm_cusparse_s": _time(lambda: b_sp @ b_sp, args.reps, args.warmup),
         "transpose_s": _time(lambda: ours.transpose(b), args.reps, args.warmup),
         "transpose_cusparse_s": _time(lambda: b_sp.T.tocsr(), args.reps, args.warmup)}
    r["spgemm_kernel_vs_cusparse"] = r["spgemm_cusparse_s"] / r["spgemm_kernel_s"]
    rows.append(r)
    print(json.dumps(r))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"command": " ".join(sys.argv), "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
