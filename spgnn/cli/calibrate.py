"""``mpiexec -n 2 python -m spgnn calibrate``: measure α (latency) and β (seconds per byte)."""

import json


def add_parser(sub):
    p = sub.add_parser("calibrate", help="measure the alpha-beta model with a 2-rank ping-pong")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(command="calibrate")
    return p


def run(args):
    from spgnn import Communicator
    from spgnn.comm.calibrate import measure_alpha_beta

    comm = Communicator.world()
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
