"""Communication layer: the accounted :class:`Communicator` and its transports.

``import spgnn.comm`` does not import mpi4py; MPI starts only when an
:class:`MPITransport` is built (e.g. by :meth:`Communicator.world`).
"""

from spgnn.comm.communicator import CHUNK_TAG, Communicator, Request
from spgnn.comm.stats import CommEvent, CommStats, Ledger, ReducedStats
from spgnn.comm.transport import LoopbackTransport, MPITransport, Transport, run_loopback

__all__ = [
    "Communicator", "Request", "CHUNK_TAG",
    "CommEvent", "CommStats", "ReducedStats", "Ledger",
    "Transport", "MPITransport", "LoopbackTransport", "run_loopback",
]
