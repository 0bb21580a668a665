"""Message-codec throughput against the STREAM triad, one thread, in one process.

    python -m spgnn bench codec                      # 100,000 x 128 float32 rows
    python -m spgnn bench codec --rows 20000 --width 512 --reps 9

The codec's encode and decode (``kernels/numba/quant.py``) are streaming
kernels, so their yardstick is the memory bandwidth: a Numba STREAM triad
``a = b + s·c`` over arrays of the same size as the rows, timed right before
every codec configuration (the machine's load drifts; the ratio of two
neighbouring measurements is what carries over).  For int8/int4/int2 ×
stochastic/nearest it reports bytes touched per second:

* ``kernel``: the Numba kernels alone with preallocated outputs (like the
  triad): encode reads ``x`` and writes codes and the float32 ``(Z, S)``;
  decode reads those and writes the rows;
* ``api``: ``Backend.quantize_rows`` / ``dequantize_rows`` as the codec calls
  them (group bookkeeping, the parameter packing and, for decode, a fresh
  output array whose first touch costs page faults).

Each figure is the median of ``--reps`` runs (spread: min and max) of the
calling thread's CPU time (``time.thread_time``: on a shared machine it
leaves out the time the process waits for a core, not the memory traffic of
the others), and the wall time beside it.  The load average is recorded.
Results go to ``benchmarks/results/codec.jsonl``, one JSON object per line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from spgnn.backends._quant import PACK_AXES

from ._common import ROOT

OUT = ROOT / "benchmarks" / "results" / "codec.jsonl"


def timed(fn, reps):
    """``(cpu, wall)``: lists of per-run seconds after one warm-up run."""
    fn()
    cpu, wall = [], []
    for _ in range(reps):
        c0, w0 = time.thread_time(), time.perf_counter()
        fn()
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - w0)
    return cpu, wall


def rate(nbytes, secs):
    """GB/s as ``(median, slowest, fastest)`` from per-run seconds."""
    s = np.asarray(secs)
    return (nbytes / np.median(s) / 1e9, nbytes / s.max() / 1e9, nbytes / s.min() / 1e9)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--pack-axis", default="feature", choices=PACK_AXES)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)

    import numba

    from spgnn._kernels.numba import quant as Q
    from spgnn.backends import _quant, get_backend

    numba.set_num_threads(1)

    @numba.njit(cache=True, nogil=True)
    def triad(a, b, c, s):
        for i in range(a.size):
            a[i] = b[i] + s * c[i]

    be = get_backend("numba")
    n, F, reps = args.rows, args.width, args.reps
    x = np.random.default_rng(0).standard_normal((n, F), dtype=np.float32)
    keys = np.arange(n, dtype=np.int64)
    ta, tb, tc = (np.random.default_rng(1).random(n * F, dtype=np.float32) for _ in range(3))
    ks, km, ke = Q.draw_key(x.dtype)
    xb = x.view(np.int32)
    load = os.getloadavg()
    rows = []
    for bits in (8, 4, 2):
        axis = args.pack_axis
        gr, gl, go = _quant.segment_groups([n], bits, F, axis)
        lo, sc = np.empty(n, np.float32), np.empty(n, np.float32)
        codes = np.empty(int(_quant.code_bytes([n], bits, F, axis).sum()), np.uint8)
        bad = np.empty(gr.size, np.int64)
        out = np.empty((n, F), np.float32)
        for rounding in ("nearest", "stochastic"):
            st = rounding == "stochastic"
            t_cpu, t_wall = timed(lambda: triad(ta, tb, tc, np.float32(3.0)), reps)
            triad_bytes = 3 * ta.nbytes
            moved = x.nbytes + codes.nbytes + lo.nbytes + sc.nbytes
            res = {}
            res["kernel_encode"] = timed(lambda: Q.encode_rows(
                x, xb, ks, km, ke, gr, gl, go, bits, axis == "feature", st, np.uint64(7), keys,
                True, lo, sc, codes, bad), reps)
            res["kernel_decode"] = timed(lambda: Q.decode_rows(
                codes, lo, sc, gr, gl, go, bits, axis == "feature", out), reps)
            c_api, p_api = be.quantize_rows(x, [n], bits, rounding, "bf16", 7, keys, axis)
            res["api_encode"] = timed(lambda: be.quantize_rows(x, [n], bits, rounding, "bf16", 7,
                                                               keys, axis), reps)
            res["api_decode"] = timed(lambda: be.dequantize_rows(c_api, p_api, [n], bits, F,
                                                                 np.float32, axis), reps)
            tri = rate(triad_bytes, t_cpu)
            row = dict(kind="codec", bits=bits, rounding=rounding, pack_axis=axis, rows=n,
                       width=F, threads=1,
                       reps=reps, timer="thread_time", loadavg=load,
                       triad_gbs=tri, triad_wall_gbs=rate(triad_bytes, t_wall),
                       command="python -m spgnn bench codec " + " ".join(argv if argv is not None else sys.argv[1:]))
            for k, (cpu, wall) in res.items():
                row[f"{k}_gbs"] = rate(moved, cpu)
                row[f"{k}_wall_gbs"] = rate(moved, wall)
                row[f"{k}_frac"] = row[f"{k}_gbs"][0] / tri[0]
            rows.append(row)
            print(json.dumps(row), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    print(f"\nload average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores; "
          f"{n} x {F} float32, one thread, median of {reps} (thread CPU time)\n")
    print("| codec | triad GB/s | kernel encode GB/s (% triad) | kernel decode GB/s (% triad) "
          "| api encode % | api decode % |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        def cell(k):
            m, lo_, hi_ = r[f"{k}_gbs"]
            return f"{m:.1f} [{lo_:.1f}–{hi_:.1f}] ({100 * r[f'{k}_frac']:.0f} %)"
        print(f"| int{r['bits']} {r['rounding']} | {r['triad_gbs'][0]:.1f} | "
              f"{cell('kernel_encode')} | {cell('kernel_decode')} | "
              f"{100 * r['api_encode_frac']:.0f} % | {100 * r['api_decode_frac']:.0f} % |")


if __name__ == "__main__":
    main()
