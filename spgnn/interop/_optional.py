"""Optional dependencies: imported on first use, a missing one named with its extra."""

from __future__ import annotations

import importlib

from ..errors import MissingDependency

__all__ = ["require", "EXTRAS", "module_of"]

#: Which ``pip install "spgnn[EXTRA]"`` brings each optional module.
EXTRAS = {"torch": "torch", "torch_geometric": "pyg", "networkx": "networkx"}


def require(module: str):
    """Import ``module``; raise :class:`MissingDependency` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra = EXTRAS.get(module.split(".")[0], module)
        raise MissingDependency(f"spgnn.interop needs {module.split('.')[0]} for this "
                                f"conversion, which is not installed ({exc}); install it with "
                                f"pip install \"spgnn[{extra}]\"") from None


def module_of(obj) -> str:
    """The top-level package that defines ``type(obj)`` (``"torch"``, ``"networkx"``, ...);
    tells types apart without importing those packages."""
    return type(obj).__module__.split(".", 1)[0]
