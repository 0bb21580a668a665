"""Raw data movement between ranks, with no byte accounting.

A :class:`Transport` moves numpy buffers; :class:`~spgnn.comm.Communicator`
wraps one, validates arguments and records every call in the ledger.  Two
implementations exist:

* :class:`MPITransport` over an ``mpi4py`` communicator (buffer-based calls
  with explicit MPI datatypes derived from the numpy dtype);
* :class:`~spgnn.comm.loopback.LoopbackTransport`, ``P`` virtual ranks as
  threads of one process, started by :func:`~spgnn.comm.loopback.run_loopback`
  (in :mod:`spgnn.comm.loopback`, which builds communicators and so sits
  above :mod:`spgnn.comm.communicator`).

Conventions shared by both: buffers are C-contiguous numpy arrays, counts and
displacements are in ELEMENTS of the buffer's dtype, and the reduction ``op``
is one of :data:`REDUCE_OPS`.  Arrays a transport allocates for what it
receives come from the kernels' allocator (:func:`spgnn.local.alloc.empty`):
they start on a 64-byte cache line, because they are often the dense operand
of the next SpMM, whose rows of 16 float32 would otherwise straddle two lines
(numpy aligns to 16 bytes; kernels/README.md measures the difference).

``mpi4py`` is imported lazily (inside :class:`MPITransport`) so that
``import spgnn`` never initialises MPI.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from spgnn.comm.device import empty_like_module

__all__ = ["REDUCE_OPS", "Transport", "MPITransport"]

#: Reduction names understood by every transport.
REDUCE_OPS = ("plus", "min", "max", "times", "lor", "land")


class Transport(ABC):
    """Numpy-level point-to-point and collective primitives.

    Every method except ``rank``, ``size``, ``library_version`` and the
    point-to-point calls is collective over the transport's group.
    """

    rank: int
    size: int

    @abstractmethod
    def split(self, color: int, key: int) -> "Transport":
        """New transport over the ranks passing the same ``color``, ordered by ``key``.

        Collective: yes.
        """

    @abstractmethod
    def barrier(self) -> None:
        """Collective: yes."""

    @abstractmethod
    def allreduce(self, sendbuf: np.ndarray, op: str) -> np.ndarray:
        """Element-wise reduction of ``sendbuf`` over all ranks, returned everywhere.

        Collective: yes.
        """

    @abstractmethod
    def allgatherv(self, sendbuf: np.ndarray, counts) -> np.ndarray:
        """Concatenate every rank's flat ``sendbuf`` (``counts[j]`` elements from rank j).

        Collective: yes.
        """

    @abstractmethod
    def alltoall(self, sendbuf: np.ndarray) -> np.ndarray:
        """``out[j] = sendbuf_j[rank]`` for a buffer of shape ``(size, ...)``.

        Collective: yes.
        """

    @abstractmethod
    def alltoallv(self, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls) -> None:
        """Personalised exchange of flat buffers; ``recvbuf`` is filled in place.

        Collective: yes.
        """

    @abstractmethod
    def ialltoallv(self, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls):
        """Non-blocking :meth:`alltoallv`; returns a request with ``.wait()``.

        Collective: yes.
        """

    @abstractmethod
    def reduce_scatter(self, sendbuf: np.ndarray, recvcounts, op: str) -> np.ndarray:
        """Reduce the flat ``sendbuf`` over ranks; rank r gets its ``recvcounts[r]`` segment.

        Collective: yes.
        """

    @abstractmethod
    def bcast(self, buf: np.ndarray, root: int) -> None:
        """Overwrite ``buf`` on every rank with root's ``buf``.

        Collective: yes.
        """

    @abstractmethod
    def send(self, buf: np.ndarray, dest: int, tag: int) -> None: ...

    @abstractmethod
    def recv(self, buf: np.ndarray, source: int, tag: int) -> None: ...

    @abstractmethod
    def isend(self, buf: np.ndarray, dest: int, tag: int): ...

    @abstractmethod
    def irecv(self, buf: np.ndarray, source: int, tag: int): ...

    @abstractmethod
    def allgather_obj(self, obj: Any) -> list:
        """List of every rank's picklable ``obj``.  Collective: yes."""

    @abstractmethod
    def bcast_obj(self, obj: Any, root: int) -> Any:
        """Root's ``obj`` on every rank.  Collective: yes."""

    @abstractmethod
    def abort(self, code: int = 1) -> None:
        """Terminate every rank of the job (not only this group)."""

    @abstractmethod
    def library_version(self) -> str: ...


# --------------------------------------------------------------------------
# MPI
# --------------------------------------------------------------------------

class _MPIRequest:
    __slots__ = ("_req", "_keep")

    def __init__(self, req, keep):
        self._req = req
        # MPI reads/writes the buffers until completion: keep them alive.
        self._keep = keep

    def wait(self) -> None:
        if self._req is not None:
            self._req.Wait()
            self._req = None
            self._keep = None

    def test(self) -> bool:
        """Progress the request without blocking; True once complete (then wait is free)."""
        if self._req is not None and self._req.Test():
            self._req = None
            self._keep = None
        return self._req is None


class MPITransport(Transport):
    """:class:`Transport` over an ``mpi4py.MPI.Comm``.

    Parameters
    ----------
    mpi_comm : mpi4py.MPI.Comm
        The intra-communicator to use (not duplicated).
    """

    def __init__(self, mpi_comm):
        from mpi4py import MPI  # lazy: importing spgnn must not start MPI

        self._MPI = MPI
        self.comm = mpi_comm
        self.rank = mpi_comm.Get_rank()
        self.size = mpi_comm.Get_size()
        self._ops = {"plus": MPI.SUM, "min": MPI.MIN, "max": MPI.MAX,
                     "times": MPI.PROD, "lor": MPI.LOR, "land": MPI.LAND}
        self._dtypes: dict = {}

    def _dt(self, arr: np.ndarray):
        dt = self._dtypes.get(arr.dtype)
        if dt is None:
            # Elementary dtypes map to the predefined MPI type: reductions
            # are only defined on those, and from_numpy_dtype returns a Dup.
            dt = self._MPI._typedict.get(arr.dtype.char) if arr.dtype.isnative else None
            if dt is None:
                from mpi4py.util.dtlib import from_numpy_dtype
                dt = from_numpy_dtype(arr.dtype).Commit()
            self._dtypes[arr.dtype] = dt
        return dt

    def split(self, color, key):
        MPI = self._MPI
        new = self.comm.Split(MPI.UNDEFINED if color is None else color, key)
        return None if new == MPI.COMM_NULL else MPITransport(new)

    def barrier(self):
        self.comm.Barrier()

    def allreduce(self, sendbuf, op):
        out = empty_like_module(sendbuf, sendbuf.shape, sendbuf.dtype)
        dt = self._dt(sendbuf)
        self.comm.Allreduce([sendbuf, dt], [out, dt], op=self._ops[op])
        return out

    def allgatherv(self, sendbuf, counts):
        counts = np.asarray(counts, dtype=np.int64)
        displs = np.zeros_like(counts)
        np.cumsum(counts[:-1], out=displs[1:])
        out = empty_like_module(sendbuf, int(counts.sum()), sendbuf.dtype)
        dt = self._dt(sendbuf)
        self.comm.Allgatherv([sendbuf, dt], [out, (counts, displs), dt])
        return out

    def alltoall(self, sendbuf):
        out = empty_like_module(sendbuf, sendbuf.shape, sendbuf.dtype)
        dt = self._dt(sendbuf)
        self.comm.Alltoall([sendbuf, dt], [out, dt])
        return out

    def alltoallv(self, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls):
        dt = self._dt(sendbuf)
        self.comm.Alltoallv([sendbuf, (sendcounts, sdispls), dt],
                            [recvbuf, (recvcounts, rdispls), dt])

    def ialltoallv(self, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls):
        dt = self._dt(sendbuf)
        req = self.comm.Ialltoallv([sendbuf, (sendcounts, sdispls), dt],
                                   [recvbuf, (recvcounts, rdispls), dt])
        return _MPIRequest(req, (sendbuf, recvbuf, sendcounts, sdispls, recvcounts, rdispls))

    def reduce_scatter(self, sendbuf, recvcounts, op):
        recvcounts = np.asarray(recvcounts, dtype=np.int64)
        out = empty_like_module(sendbuf, int(recvcounts[self.rank]), sendbuf.dtype)
        dt = self._dt(sendbuf)
        self.comm.Reduce_scatter([sendbuf, dt], [out, dt], recvcounts=recvcounts,
                                 op=self._ops[op])
        return out

    def bcast(self, buf, root):
        self.comm.Bcast([buf, self._dt(buf)], root=root)

    def send(self, buf, dest, tag):
        self.comm.Send([buf, self._dt(buf)], dest=dest, tag=tag)

    def recv(self, buf, source, tag):
        self.comm.Recv([buf, self._dt(buf)], source=source, tag=tag)

    def isend(self, buf, dest, tag):
        return _MPIRequest(self.comm.Isend([buf, self._dt(buf)], dest=dest, tag=tag), buf)

    def irecv(self, buf, source, tag):
        return _MPIRequest(self.comm.Irecv([buf, self._dt(buf)], source=source, tag=tag), buf)

    def allgather_obj(self, obj):
        return self.comm.allgather(obj)

    def bcast_obj(self, obj, root):
        return self.comm.bcast(obj, root=root)

    def abort(self, code=1):
        self.comm.Abort(code)

    def library_version(self):
        return self._MPI.Get_library_version().strip()
