"""This host's memory and how many ranks share it: the default ``--memory-limit`` (issue 37).

``--algo auto`` skips the configurations whose predicted per-rank peak
(:mod:`spgnn.plan.memory`) exceeds ``--memory-limit``; without one it uses
this host's physical memory divided by the ranks running on this host
(:func:`default_memory_limit`), and ``--memory-limit none`` turns the check
off.  :func:`host_memory_bytes` is also the HEC's (``spgnn.gnn.hec``).
"""

from __future__ import annotations

import os
import socket

__all__ = ["host_memory_bytes", "ranks_on_host", "default_memory_limit", "memory_limit_bytes",
           "note_default", "NO_LIMIT"]

#: ``--memory-limit none``: no check.
NO_LIMIT = "none"


def host_memory_bytes():
    """This host's physical memory in bytes (``SPGNN_HOST_MEMORY`` overrides it). Local."""
    env = os.environ.get("SPGNN_HOST_MEMORY")
    if env:
        return int(float(env))
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def ranks_on_host(comm, *, label="auto:host"):
    """How many ranks of ``comm`` run on this rank's host (by host name). Collective.

    Each rank's host name is gathered and the ranks naming this rank's host
    are counted (loopback ranks, threads of one process, all count).
    """
    here = socket.gethostname()
    return sum(h == here for h in comm.allgather_obj(here, label=label))


def default_memory_limit(comm):
    """The default ``--memory-limit``: host memory // ranks on this host, the smallest over
    the ranks (so every rank gets the same limit). Collective."""
    import numpy as np

    mine = host_memory_bytes() // max(ranks_on_host(comm), 1)
    return int(comm.allreduce(np.array([mine], dtype=np.int64), op="min", label="auto:host")[0])


def memory_limit_bytes(comm, text):
    """``--memory-limit`` ``text`` in bytes: None -> :func:`default_memory_limit` (collective),
    ``"none"`` -> None (no check), else :func:`spgnn.plan.memory.parse_bytes` (ValueError on
    bad text, the same on every rank). Collective when ``text`` is None, else local."""
    if text is None:
        return default_memory_limit(comm)
    if str(text).strip().lower() == NO_LIMIT:
        return None
    from .memory import parse_bytes

    return parse_bytes(text)


def note_default(exc, text):
    """``exc`` (a ValueError of ``--algo auto``), saying where the limit came from when
    ``--memory-limit`` was not given (``text`` None): the default. Local."""
    if text is not None or "no configuration fits" not in str(exc):
        return exc
    from ..comm.communicator import agreed_like

    return agreed_like(ValueError(f"{exc}; that limit is the default, this host's memory over "
                                  f"the ranks on it (SPGNN_HOST_MEMORY sets the host's memory)"),
                       exc)
