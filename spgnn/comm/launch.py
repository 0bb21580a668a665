"""Finding the MPI launcher that belongs to this interpreter.

The launcher is the ``mpiexec`` that sits next to ``sys.executable`` (the
pip ``mpich`` wheel installs it into the venv's ``bin``): an ``mpiexec`` from
another MPI found on ``PATH`` would silently start P independent singleton
ranks.  Used by commands that start helper jobs (``python -m spgnn plan``
measures alpha and beta with a 2-rank ping-pong) and by the test launcher
(:mod:`spgnn.testing.mpi`).
"""

from __future__ import annotations

import os
import shutil
import sys

__all__ = ["find_mpiexec"]


def find_mpiexec() -> str | None:
    """Path of the ``mpiexec`` beside ``sys.executable``, or ``None``.

    Looks only in the interpreter's directory, never on ``PATH`` (see the
    module docstring).  ``sys.executable`` itself is not resolved, so a venv's
    ``bin`` is searched even when its ``python`` is a symlink.  Local.
    """
    return shutil.which("mpiexec", path=os.path.dirname(sys.executable))
