"""The cupy backend's distributed SpMM on CPU under mpiexec (tests/cuda_host/test_dist_device_mpi.py).

Every rank runs :func:`spgnn.testing.device_cases.spmm_device_case` for each
algorithm and ``gpu_comm`` mode, then GCN training epochs
(:func:`~spgnn.testing.device_cases.gcn_device_case`), through MPITransport: device arrays are the
CPU stand-in of CuPy arrays, so in CUDA-aware mode mpi4py hands their
buffers to MPI directly.  Assertions are collective; prints one OK line.
"""

import argparse

from spgnn.comm import Communicator
from spgnn.comm.device import MODES
from spgnn.testing.asserts import collective_assert
from spgnn.testing.device_cases import SPMM_CASES, gcn_device_case, spmm_device_case


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--algorithms", default=",".join(SPMM_CASES))
    ap.add_argument("--gcn", default="1d,1d-aware", help="GCN training cases ('' for none)")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="gpu_comm modes (a real GPU with a non-CUDA-aware MPI: staged only)")
    ap.add_argument("--device", choices=("emulated", "cupy"), default="emulated",
                    help="the CPU emulation (CI) or the real cupy backend (tests/gpu)")
    args = ap.parse_args()
    comm = Communicator.world()
    backend = None if args.device == "emulated" else args.device
    for alg in args.algorithms.split(","):
        for mode in args.modes.split(","):
            res = spmm_device_case(comm, alg, mode, backend=backend)
            what = f"{alg} {mode} rank {comm.rank}: {res}"
            collective_assert(comm, res["err"] < 1e-12, what)
            collective_assert(comm, res["ledger_equal"] and res["on_device"], what)
            collective_assert(comm, res["modes"] == {mode}, what)
            if res["staged_expected"] is not None:
                collective_assert(comm, res["staged"] == res["staged_expected"], what)
            if mode == "cuda-aware":
                collective_assert(comm, res["staged"] == 0 and res["steady_d2h"] in (0, None), what)
    for alg in filter(None, args.gcn.split(",")):
        for mode in args.modes.split(","):
            res = gcn_device_case(comm, alg, mode, backend=backend)
            what = f"gcn {alg} {mode} rank {comm.rank}: {res}"
            close = all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(res["losses"], res["ref_losses"]))
            collective_assert(comm, close and res["weights_err"] < 1e-5, what)
            collective_assert(comm, res["ledger_equal"] and res["on_device"], what)
            if comm.size > 1:
                collective_assert(comm, res["modes"] == {mode}, what)
    if comm.rank == 0:
        print(f"OK device_checks {comm.size} ranks {args.algorithms} gcn {args.gcn}", flush=True)


if __name__ == "__main__":
    main()
