"""``python -m spgnn calibrate``: measure the machine for the performance model.

Without ``--model``: α (latency) and β (seconds per byte) of a 2-rank
ping-pong (``mpiexec -n 2 python -m spgnn calibrate``).  With ``--model``:
fit :class:`spgnn.plan.model.Calibration` and update ``--output`` (default
``$SPGNN_CALIBRATION`` or ``~/.cache/spgnn/calibration.json``), where
``plan`` and ``train --algo auto`` read it, in two runs::

    python -m spgnn calibrate --model [--validate]     # SpMM and GEMM, one process
    mpiexec -n 2 python -m spgnn calibrate --model     # the collectives

(each keeps what the other measured; measuring kernels beside MPI ranks that
spin in a barrier would time the scheduler).  ``--validate`` compares the
fitted compute model with held-out shapes.
"""

import json
import os
import sys


def add_parser(sub):
    p = sub.add_parser("calibrate", help="measure the alpha-beta model (2-rank ping-pong), or "
                                         "fit the performance model (--model)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--model", action="store_true",
                   help="fit the compute and communication model and write it to --output")
    p.add_argument("--output", default=None, metavar="FILE",
                   help="calibration file (default $SPGNN_CALIBRATION or "
                        "~/.cache/spgnn/calibration.json)")
    p.add_argument("--backend", default=None, help="local kernel backend (default numba)")
    p.add_argument("--reps", type=int, default=5, help="timed repetitions per sample (median)")
    p.add_argument("--validate", action="store_true",
                   help="with --model: predicted vs measured kernel times on held-out shapes")
    from .plan import add_node_arguments

    add_node_arguments(p)           # with --model: stored in the file
    p.set_defaults(command="calibrate")
    return p


def _run_model(args, comm):
    from spgnn.plan.calibrate import calibrate, validate_compute
    from spgnn.plan.model import Calibration, default_calibration_path

    from .plan import apply_node_arguments

    if args.reps < 1:
        raise ValueError(f"calibrate: --reps must be >= 1, but got {args.reps}")
    if args.validate and comm.size > 1:
        raise ValueError("calibrate: --validate times kernels, run it in one process (without "
                         "mpiexec)")
    path = args.output or default_calibration_path()
    # every rank reads the file: a corrupt one raises everywhere before any collective
    previous = Calibration.load(path) if os.path.exists(path) else None
    log = None if args.json else (lambda s: print(s, file=sys.stderr, flush=True))
    cal = calibrate(comm, args.backend, args.reps, log, previous)
    if previous is not None and previous.comm_inter is not None:      # kept, like the rest
        cal = cal.with_nodes(previous.ranks_per_node, previous.comm_inter)
    cal = apply_node_arguments(cal, args, "calibrate")
    if comm.rank != 0:
        return 0
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    cal.save(path)
    out = {"path": path, "comm": cal.comm, "spmm": cal.spmm, "gemm_table_rows":
           len(cal.gemm_table), "comm_measured": "comm" in cal.meta,
           "compute_measured": "compute" in cal.meta}
    if args.validate:
        v = validate_compute(cal, args.backend, args.reps, log)
        out.update(spmm_median_error=v["spmm_median_error"],
                   gemm_median_error=v["gemm_median_error"])
    if args.json:
        print(json.dumps(out))
    else:
        for kind, (a, b) in cal.comm.items():
            print(f"{kind:>14}: alpha = {a * 1e6:.2f} us, beta = {b * 1e9:.4f} ns/byte")
        if cal.ranks_per_node is not None:
            a, b = cal.comm_inter["default"]
            print(f"{cal.ranks_per_node} ranks per node; inter-node default: alpha = "
                  f"{a * 1e6:.2f} us, beta = {b * 1e9:.4f} ns/byte (given)")
        if not out["comm_measured"]:
            print("communication: defaults (mpiexec -n 2 python -m spgnn calibrate --model "
                  "measures it)")
        if not out["compute_measured"]:
            print("compute: defaults (python -m spgnn calibrate --model, in one process, "
                  "measures it)")
        if args.validate:
            print(f"held-out median error: SpMM {out['spmm_median_error']:.1%}, "
                  f"GEMM {out['gemm_median_error']:.1%}")
        print(f"calibration written to {path}")
    return 0


def run(args):
    from spgnn import Communicator
    from spgnn.plan.calibrate import measure_alpha_beta

    comm = Communicator.world()
    if args.model:
        return _run_model(args, comm)
    alpha, beta = measure_alpha_beta(comm)
    if comm.rank == 0:
        if args.json:
            print(json.dumps({"alpha": alpha, "beta": beta, "ranks": comm.size,
                              "measured": comm.size >= 2}))
        else:
            what = "measured" if comm.size >= 2 else "defaults (run with 2 ranks to measure)"
            print(f"alpha = {alpha * 1e6:.2f} us, beta = {beta * 1e9:.4f} ns/byte "
                  f"({1 / beta / 1e9:.2f} GB/s), {what}")
    return 0
