"""``python emulated_pair.py ARGS [:: ARGS ...]``: each command line with ``--backend numba``, then cupy.

One process (or one MPI job) runs every pair, so a comparison pays the
start-up (imports, MPI, Numba's cache) once; the cupy backend is the host
emulation (:func:`spgnn.testing.device_cases.register_emulated_cupy`: the
strict CuPy stand-in and the host build of the kernels).  Each run prints
its own output (``--json``: one JSON line); exits with the first non-zero
status.
"""

import sys

from spgnn.__main__ import main
from spgnn.testing.device_cases import register_emulated_cupy


def _split(argv):
    cmd = []
    for a in argv:
        if a == "::":
            yield cmd
            cmd = []
        else:
            cmd.append(a)
    yield cmd


if __name__ == "__main__":
    register_emulated_cupy()
    for cmd in _split(sys.argv[1:]):
        for backend in ("numba", "cupy"):
            rc = main([*cmd, "--backend", backend])
            sys.stdout.flush()
            if rc:
                sys.exit(rc)
