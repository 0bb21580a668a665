"""Atomic file writes, shared by checkpoints (:mod:`spgnn.checkpoint`) and graph
archives (:func:`spgnn.io.save_npz`).

A reader never sees a half-written file: the content goes to a temporary file
in the same folder, is flushed and fsync-ed, then renamed over the target
(``os.replace``).  On any failure (a full disk, Ctrl-C) the temporary file is
removed, the previous target is left untouched, and an ``OSError`` names the
target path.  Local: no communication.  Imports nothing from spgnn but errors,
so every part may use it (it belongs to the ``base`` part).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write", "fsync_dir", "write_npz_atomic"]


def fsync_dir(directory) -> None:
    """Make a rename inside ``directory`` durable (POSIX: fsync the directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:       # platforms that cannot open a directory (Windows)
        return
    try:
        os.fsync(fd)
    except OSError:       # some file systems refuse fsync on a directory
        pass
    finally:
        os.close(fd)


def _named(e: OSError, path: str) -> OSError:
    # A full disk says "No space left on device" without the file: add it.
    if path in str(e):
        return e
    return OSError(e.errno, f"could not write {path}: {e.strerror or e}")


def atomic_write(path, write, *, tmp_prefix: str | None = None) -> Path:
    """Write ``path`` through a fsync-ed temporary file and ``os.replace``.

    ``write(fileobj)`` produces the content.  The temporary file is
    ``<dir>/<tmp_prefix><name>.XXXX`` (default prefix ``.tmp-``).  Returns the
    final path.
    """
    path = Path(path)
    directory = path.parent
    fd, tmp = tempfile.mkstemp(prefix=f"{tmp_prefix or '.tmp-'}{path.name}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise _named(e, os.fspath(path)) from e
        raise
    fsync_dir(directory)
    return path


def write_npz_atomic(path, arrays: dict, *, compressed: bool = False) -> None:
    """``np.savez(path, **arrays)`` (or ``savez_compressed``) written atomically. Local.

    A reader never sees a half-written file; on failure no temporary file is
    left behind and the ``OSError`` names ``path``.
    """
    import numpy as np

    save = np.savez_compressed if compressed else np.savez
    atomic_write(path, lambda f: save(f, **arrays))
