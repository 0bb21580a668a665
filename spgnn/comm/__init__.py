"""Communication layer: the accounted :class:`Communicator` and its transports.

``import spgnn.comm`` does not import mpi4py; MPI starts only when an
:class:`MPITransport` is built (e.g. by :meth:`Communicator.world`).  This
package is the only part of spgnn that imports ``mpi4py``: code elsewhere
asks :func:`world_rank`, :func:`mpi_library_info`, :func:`abort_if_parallel`
and :func:`find_mpiexec`.

Modules, bottom up: ``stats`` (ledger, byte model), ``transport`` (the
:class:`Transport` interface and :class:`MPITransport`), ``watchdog`` (the
collective watchdog thread), ``communicator``,
``loopback`` (threads; builds communicators), ``launch`` (``mpiexec``),
``calibrate`` (alpha-beta ping-pong).
"""

from spgnn.comm.communicator import (CHUNK_TAG, Communicator, Request, abort_if_parallel,
                                     INTERRUPT_EXIT, finalize_world, is_agreed_on_world,
                                     mpi_library_info, world_rank, world_size)
from spgnn.comm.launch import find_mpiexec
from spgnn.comm.loopback import LoopbackTransport, run_loopback, solo_communicator
from spgnn.comm.stats import CommEvent, CommStats, Ledger, ReducedStats
from spgnn.comm.transport import MPITransport, Transport

__all__ = [
    "Communicator", "Request", "CHUNK_TAG",
    "CommEvent", "CommStats", "ReducedStats", "Ledger",
    "Transport", "MPITransport", "LoopbackTransport", "run_loopback", "solo_communicator",
    "world_rank", "world_size", "INTERRUPT_EXIT", "mpi_library_info", "is_agreed_on_world",
    "abort_if_parallel", "finalize_world", "find_mpiexec",
]
