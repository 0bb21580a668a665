"""What the ``bench_*.py`` wrappers share: run the installed command in this process's place.

A development checkout has the project's shared data folder next to it; when
``SPGNN_DATA`` is unset the wrappers point it there, so dataset names (``cora``,
``ego-twitter``) are read from it instead of being downloaded.
"""

import os
import sys


def run_command(args):
    """``exec`` ``python ARGS`` with ``SPGNN_DATA`` defaulting to the shared data folder."""
    if not os.environ.get("SPGNN_DATA"):
        from spgnn.testing.data import find_shared_data

        shared = find_shared_data()
        if shared is not None:
            os.environ["SPGNN_DATA"] = str(shared)
    os.execv(sys.executable, [sys.executable, *args])
