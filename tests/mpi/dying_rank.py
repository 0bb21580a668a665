"""One rank raises while the others wait in a collective: the job must abort, not hang.

Run with and without ``-m mpi4py``: spgnn's abort hook (installed by
``Communicator.world()`` when there is more than one rank) turns an uncaught
exception into ``MPI_Abort`` either way.
"""

import numpy as np

from spgnn import Communicator

comm = Communicator.world()
if comm.rank == comm.size - 1:
    raise RuntimeError("rank dies on purpose")
comm.allreduce(np.ones(1))  # the survivors wait here until the job is aborted
print("UNREACHABLE: collective completed", flush=True)
