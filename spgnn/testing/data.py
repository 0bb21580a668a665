"""Where the shared real-graph data lives, for tests and benchmarks.

The datasets (Planetoid, SNAP, MUSAE, SuiteSparse copies; see
``MANIFEST.md`` there) are kept outside the repository, in a folder found as:

1. the ``SPGNN_DATA_DIR`` environment variable, when set (an empty value
   counts as unset);
2. otherwise ``<repo>/../shared/data``, the repository root being found from
   this file's location (``spgnn/testing/data.py`` -> two levels up);
3. otherwise nowhere: :data:`SHARED_DATA` is None and
   :func:`shared_data_path` skips the calling test.

:func:`shared_data_path` is the one way tests and benchmarks reach the data,
so a checkout without it skips those tests instead of failing them.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["SHARED_DATA", "REPO_ROOT", "find_shared_data", "shared_data_path"]

#: The repository root: the folder holding the ``spgnn`` package.
REPO_ROOT = Path(__file__).resolve().parents[2]


def find_shared_data() -> Path | None:
    """The shared data folder, or None when there is none.

    ``SPGNN_DATA_DIR`` wins when set, even if it names no folder (then None),
    so that a wrong setting is not silently replaced by another copy.
    """
    env = os.environ.get("SPGNN_DATA_DIR")
    if env:
        p = Path(env).expanduser()
        return p if p.is_dir() else None
    p = REPO_ROOT.parent / "shared" / "data"
    return p if p.is_dir() else None


#: The shared data folder found at import time (None when absent); use
#: :func:`shared_data_path`, which looks again, so that it honours a
#: ``SPGNN_DATA_DIR`` set later (for example by ``monkeypatch``).
SHARED_DATA = find_shared_data()


def shared_data_path(*parts) -> Path:
    """The path ``<shared data>/<parts...>``; skips the calling test when it is absent.

    Parameters
    ----------
    *parts : str
        Path components inside the data folder, e.g.
        ``shared_data_path("planetoid")`` or
        ``shared_data_path("snap_ego_twitter", "ego-twitter-undirected.jlg")``.

    Raises
    ------
    pytest.skip.Exception
        When the data folder or the requested file is missing (``pytest.skip``);
        outside pytest, FileNotFoundError.
    """
    base = find_shared_data()
    env = os.environ.get("SPGNN_DATA_DIR")
    where = (f"SPGNN_DATA_DIR={env}" if env
             else f"{REPO_ROOT.parent / 'shared' / 'data'} (set SPGNN_DATA_DIR to move it)")
    if base is None:
        _skip(f"shared data folder not found: {where}")
    path = base.joinpath(*parts)
    if not path.exists():
        _skip(f"shared data file or folder not found: {path}")
    return path


def _skip(message: str):
    try:
        import pytest
    except ImportError:   # benchmarks run without pytest installed
        raise FileNotFoundError(message) from None
    pytest.skip(message)
