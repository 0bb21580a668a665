"""``--backend`` and ``--gpu-comm``: the options of the computing commands (spmm, train), and their check.

``--backend cupy`` runs the local kernels on a CUDA device with the node data
held in device memory; ``--gpu-comm`` says how device buffers cross ranks
(:mod:`spgnn.comm.device`: ``staged`` through host memory, the default, or
``cuda-aware``).  :func:`resolve_backend` is collective: a rank without a
usable device (or an unknown backend) makes *every* rank raise
:class:`~spgnn.errors.BackendUnavailable` with that rank's one-line reason
(the command prints it once and every rank exits 2), never a hang and never
a traceback per rank.  The cupy backend is gated on a usable device
(:meth:`CupyBackend.unavailable_reason`), never on ``import cupy``.

Which device a rank uses: its node-local rank (from the launcher's
environment: ``MPI_LOCALRANKID`` (MPICH/Hydra), ``OMPI_COMM_WORLD_LOCAL_RANK``,
``SLURM_LOCALID``, ``PALS_LOCAL_RANKID``; else the world rank) modulo the
number of visible devices, so ``mpiexec -n 4`` on a 4-GPU node puts one rank
on each GPU and per-rank ``CUDA_VISIBLE_DEVICES`` keeps working.
"""

import os

from ..backends import get_backend
from ..comm.device import ENV, MODES

__all__ = ["add_backend_options", "resolve_backend", "local_rank", "LOCAL_RANK_VARS"]

#: Environment variables launchers set to the node-local rank, tried in order.
LOCAL_RANK_VARS = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                   "PALS_LOCAL_RANKID", "PMI_LOCAL_RANK")


def add_backend_options(p):
    p.add_argument("--backend", default=None,
                   help="numpy | numba | cupy (default numba; cupy needs a usable CUDA device on "
                        "every rank, docs/gpu.md)")
    p.add_argument("--gpu-comm", default=None, choices=MODES,
                   help=f"with --backend cupy: how device buffers move between ranks: staged "
                        f"through host memory (default; any MPI) or cuda-aware (an MPI built with "
                        f"CUDA support); default ${ENV} or staged")


def local_rank(world_rank):
    """This process's rank on its node (launcher environment), else ``world_rank``. Local."""
    for var in LOCAL_RANK_VARS:
        val = os.environ.get(var)
        if val is not None and val.strip().isdigit():
            return int(val)
    return int(world_rank)


def resolve_backend(comm, args):
    """The backend of ``args.backend`` on every rank, its device chosen, or the same error everywhere.

    Collective over ``comm`` (one small agreement).  Sets ``comm.gpu_comm``
    from ``--gpu-comm`` before any grid is split from ``comm`` (splits
    inherit it).  Returns the backend instance.
    """
    err = be = None
    try:
        if getattr(args, "gpu_comm", None):
            comm.gpu_comm = args.gpu_comm
        be = get_backend(args.backend)
        select = getattr(be, "select_device", None)
        if select is not None:
            select(local_rank(comm.rank))
    except (ValueError, ImportError, RuntimeError) as exc:
        err = type(exc)(f"rank {comm.rank}: {exc}")
    comm.agree(err)
    return be
