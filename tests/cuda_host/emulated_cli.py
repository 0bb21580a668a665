"""``python emulated_cli.py COMMAND ...``: ``python -m spgnn`` with ``--backend cupy`` emulated on CPU.

Registers the host emulation of the cupy backend under the name ``cupy``
(:func:`spgnn.testing.device_cases.register_emulated_cupy`) and runs the
command line unchanged, so the commands' GPU path (backend resolution,
device blocks, communicator staging, the result's ``gpu_comm``) runs in CI.
"""

import sys

from spgnn.__main__ import main
from spgnn.testing.device_cases import register_emulated_cupy

if __name__ == "__main__":
    register_emulated_cupy()
    sys.exit(main(sys.argv[1:]))
