"""The numpy buffers an object holds, by kind: what the memory model's exact counts are
checked against (tests/test_memory_tracemalloc.py, tests/test_memory_minibatch_tracemalloc.py)."""

import types

import numpy as np

from ..comm import Communicator

__all__ = ["held_buffers"]

# not walked: code, types, the communicator (its buffers are MPI's), scalars and text
_SKIP = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
         types.MethodType, types.CodeType, types.FrameType, Communicator, str, bytes, int, float)


def _owner(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def held_buffers(root, kind):
    """``{kind(path): bytes}`` of the numpy buffers reachable from ``root``. Local.

    Each buffer is counted once, through the array that owns it (views count
    nothing more); ``kind(path)`` names its part from the attribute path it
    was first found at (e.g. ``".graph.view.a.indices"``).
    """
    seen, found, stack = set(), {}, [(root, "")]
    while stack:
        o, path = stack.pop()
        if id(o) in seen or isinstance(o, _SKIP):
            continue
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            w = _owner(o)
            found.setdefault(id(w), (w, path))
            continue
        if isinstance(o, dict):
            stack.extend((v, f"{path}.{k}") for k, v in o.items())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(o))
        else:
            if getattr(o, "__dict__", None) is not None:
                stack.append((o.__dict__, path))
            stack.extend((getattr(o, s), f"{path}.{s}") for s in getattr(type(o), "__slots__", ())
                         if hasattr(o, s))
    kinds = {}
    for w, path in found.values():
        kinds[kind(path)] = kinds.get(kind(path), 0) + w.nbytes
    return kinds
