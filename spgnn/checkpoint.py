"""Atomic training checkpoints: model, optimizer and RNG state on disk.

A checkpoint is one ``.npz`` file (a zip of ``.npy`` members, never a pickle)
holding every array of the state plus a JSON description of its structure in
the member ``__structure__``.  The structure keeps what JSON alone would lose:
tuples stay tuples, numpy scalars keep their dtype, dictionaries may have int
keys, and arrays come back with their dtype, shape, memory order and bytes.

Atomicity
---------
:func:`save_checkpoint` never writes a file that a reader may open:

1. the checkpoint goes to a temporary file in the same directory (same file
   system, so the rename below is atomic), which is flushed and ``fsync``-ed;
2. ``os.replace`` gives it its final name ``ckpt-<step>.npz`` and the
   directory is ``fsync``-ed so that the rename itself survives a power cut;
3. the pointer file ``latest`` (JSON naming the newest and the previous
   checkpoint) is replaced the same way;
4. only then are older checkpoints removed, keeping the newest and the
   previous one.

A crash at any point therefore leaves a ``latest`` pointer naming complete
files.  The pointer, not the step number, says which checkpoint is newest, so
that a fresh run saving step 5 into a folder that still holds step 100 of an
older run resumes from step 5.  When the pointer is missing or unreadable the
files are scanned and the highest step wins.

Integrity
---------
Every zip member carries a CRC-32 that is checked when the member is read, and
:func:`load_checkpoint` reads every member, so truncated and bit-flipped files
are detected.  :func:`load_checkpoint` then falls back to the previous
checkpoint and logs a warning naming the bad file (logger
``spgnn.checkpoint``); when no checkpoint is intact it raises
:class:`CheckpointError` naming every file it tried.

One writer per directory: concurrent savers into one folder are not
supported (in an MPI job only rank 0 writes, see
:func:`save_checkpoint_collective`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from spgnn.atomic import atomic_write, write_npz_atomic  # noqa: F401 (write_npz_atomic: re-exported)
from spgnn.errors import CheckpointError

__all__ = ["CheckpointError", "save_checkpoint", "load_checkpoint", "list_checkpoints",
           "save_checkpoint_collective", "load_checkpoint_collective", "load_training_state",
           "write_npz_atomic", "DirectoryLock"]

logger = logging.getLogger(__name__)

#: Written into every checkpoint; bumped when the layout changes incompatibly.
FORMAT = "spgnn-checkpoint"
VERSION = 1

POINTER = "latest"
_PREFIX = "ckpt-"
_SUFFIX = ".npz"
_TMP_PREFIX = ".tmp-"
_NAME_RE = re.compile(r"^ckpt-(\d+)\.npz$")
_STRUCTURE = "__structure__"
#: Key of the type tag in an encoded node.  A user dictionary that has this
#: key is stored as an item list, so the tag is never ambiguous.
_TAG = "$t"


# ---------------------------------------------------------------- encoding
def _encode(obj, arrays: dict, where: str):
    """JSON-able description of ``obj``; arrays go into ``arrays`` (name -> array).

    ``where`` is the path of ``obj`` inside the state (``state['opt']['m'][0]``),
    for error messages.
    """
    # bool before int: bool is a subclass of int and must come back as bool.
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)          # int subclasses (IntEnum) are stored as plain ints
    if isinstance(obj, float):
        # json writes repr(float), which round-trips exactly; NaN and the
        # infinities use JSON extensions that Python's json reads back.
        return float(obj)
    if isinstance(obj, (np.ndarray, np.generic)):
        arr = np.asarray(obj)
        if arr.dtype.hasobject:
            raise TypeError(f"save_checkpoint: {where} is an array of dtype {arr.dtype}; object "
                            f"arrays would need pickle, which checkpoints never use")
        name = f"a{len(arrays)}"
        arrays[name] = arr
        return {_TAG: "ndarray" if isinstance(obj, np.ndarray) else "scalar", "key": name}
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]
        return items if isinstance(obj, list) else {_TAG: "tuple", "items": items}
    if isinstance(obj, dict):
        for k in obj:
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError(f"save_checkpoint: keys of {where} must be str or int, but got "
                                f"{k!r} of type {type(k).__name__}")
        if all(isinstance(k, str) for k in obj) and _TAG not in obj:
            return {k: _encode(v, arrays, f"{where}[{k!r}]") for k, v in obj.items()}
        return {_TAG: "dict",
                "items": [[k, _encode(v, arrays, f"{where}[{k!r}]")] for k, v in obj.items()]}
    raise TypeError(f"save_checkpoint: {where} has unsupported type {type(obj).__name__}; "
                    f"supported: numpy arrays and scalars, None, bool, int, float, str, and "
                    f"lists, tuples and dicts of those")


def _decode(node, arrays, label: str):
    if isinstance(node, list):
        return [_decode(v, arrays, label) for v in node]
    if not isinstance(node, dict):
        return node
    tag = node.get(_TAG)
    if tag is None:
        return {k: _decode(v, arrays, label) for k, v in node.items()}
    if tag in ("ndarray", "scalar"):
        key = node.get("key")
        if key not in arrays:
            raise CheckpointError(f"load_checkpoint: {label} has no array member {key!r}")
        arr = arrays[key]
        # ``arr[()]`` of a 0-d array is the numpy scalar with the same dtype.
        return arr if tag == "ndarray" else arr[()]
    if tag == "tuple":
        return tuple(_decode(v, arrays, label) for v in node["items"])
    if tag == "dict":
        return {k: _decode(v, arrays, label) for k, v in node["items"]}
    raise CheckpointError(f"load_checkpoint: {label} has an unknown node type {tag!r}")


# ------------------------------------------------------------- file system
def _atomic_write(directory: Path, name: str, write) -> Path:
    """Write ``directory/name`` atomically (:func:`spgnn.atomic.atomic_write`): on any
    failure the temporary file is removed and the previous ``name`` left untouched."""
    return atomic_write(Path(directory) / name, write, tmp_prefix=_TMP_PREFIX)


def _checkpoint_name(step: int) -> str:
    return f"{_PREFIX}{step:012d}{_SUFFIX}"


def list_checkpoints(directory) -> list[tuple[int, Path]]:
    """The checkpoint files in ``directory`` as ``(step, path)``, highest step first.

    Temporary files of unfinished writes are not listed.  A missing
    directory gives an empty list.  Says nothing about whether the files are
    intact; :func:`load_checkpoint` checks that.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for p in directory.iterdir():
        m = _NAME_RE.match(p.name)
        if m and p.is_file():
            found.append((int(m.group(1)), p))
    return sorted(found, key=lambda sp: sp[0], reverse=True)


def _read_pointer(directory: Path) -> dict | None:
    """The ``latest`` pointer's content, or None when it is missing or unreadable."""
    path = directory / POINTER
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        logger.warning("checkpoint pointer %s is unreadable (%s); scanning the directory", path, e)
        return None
    if not isinstance(data, dict) or not isinstance(data.get("latest"), str):
        logger.warning("checkpoint pointer %s is malformed; scanning the directory", path)
        return None
    return data


def _safe_member(name) -> bool:
    """A pointer entry must be a bare checkpoint file name, never a path."""
    return isinstance(name, str) and _NAME_RE.match(name) is not None


# -------------------------------------------------------------------- save
def _check_step(opname: str, step) -> int:
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
        raise ValueError(f"{opname}: step must be a non-negative int, but got {step!r}")
    return int(step)


def save_checkpoint(directory, state: dict, *, step: int) -> Path:
    """Write ``state`` as the checkpoint of ``step`` in ``directory``, atomically.

    Parameters
    ----------
    directory : str or os.PathLike
        Folder of the checkpoints; created when missing.
    state : dict
        Nested dicts (str or int keys), lists and tuples of numpy arrays,
        numpy scalars, None, bool, int, float and str.  numpy
        ``Generator.bit_generator.state`` dicts and ``np.random.get_state()``
        tuples qualify.  Object arrays are refused (they would need pickle).
    step : int
        Non-negative training step; names the file ``ckpt-<step>.npz``.
        Saving a step again replaces that checkpoint.

    Returns
    -------
    pathlib.Path
        The checkpoint file written.

    Raises
    ------
    TypeError
        ``state`` is not a dict or holds an unsupported value (the message
        gives its path in the state).  Nothing is written then.
    ValueError
        ``step`` is not a non-negative int.
    OSError
        The file system failed; the previous checkpoints are untouched.

    Notes
    -----
    After it returns, the folder holds this checkpoint and the previous one
    (the one ``latest`` named before), and the ``latest`` pointer names this
    one.  Any crash before that leaves the former ``latest`` intact.  Older
    checkpoints and temporary files left by killed writers are removed.
    """
    step = _check_step("save_checkpoint", step)
    if not isinstance(state, dict):
        raise TypeError(f"save_checkpoint: state must be a dict, but got {type(state).__name__}")
    arrays: dict[str, np.ndarray] = {}
    # Encode before touching the disk so that a bad state writes nothing.
    structure = {"format": FORMAT, "version": VERSION, "step": step,
                 "state": _encode(state, arrays, "state")}
    blob = json.dumps(structure, allow_nan=True, separators=(",", ":")).encode("utf-8")
    members = dict(arrays)
    members[_STRUCTURE] = np.frombuffer(blob, dtype=np.uint8)

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    name = _checkpoint_name(step)
    old = _read_pointer(directory)
    if old is not None and _safe_member(old["latest"]):
        # Re-saving the newest step must not make it its own predecessor.
        previous = old["latest"] if old["latest"] != name else old.get("previous")
    else:
        scanned = [p.name for _, p in list_checkpoints(directory) if p.name != name]
        previous = scanned[0] if scanned else None
    if not _safe_member(previous) or not (directory / previous).is_file():
        previous = None

    # Uncompressed: checkpoints are mostly float weights that barely compress,
    # and savez_compressed would cost seconds on large models.
    path = _atomic_write(directory, name, lambda f: np.savez(f, **members))
    pointer = json.dumps({"latest": name, "step": step, "previous": previous}).encode("utf-8")
    _atomic_write(directory, POINTER, lambda f: f.write(pointer))

    keep = {name, previous}
    for _, p in list_checkpoints(directory):
        if p.name not in keep:
            _unlink_quietly(p)
    for p in directory.glob(f"{_TMP_PREFIX}*"):
        _unlink_quietly(p)    # left by writers killed mid-write
    logger.info("saved checkpoint %s (step %d)", path, step)
    return path


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError as e:     # a clean-up failure must not fail a save that succeeded
        logger.warning("could not remove old checkpoint file %s: %s", path, e)


# -------------------------------------------------------------------- load
def _load_file(path: Path) -> tuple[dict, int]:
    """Read and verify one checkpoint file; CheckpointError naming it on any defect."""
    label = str(path)
    try:
        z = np.load(path, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise CheckpointError(f"load_checkpoint: {label} is a single .npy array, "
                                  f"not an spgnn checkpoint")
        with z:
            # Read every member: zipfile checks each member's CRC-32 only when
            # it is read to the end, so this is what detects corruption.
            arrays = {k: z[k] for k in z.files}
    except CheckpointError:
        raise
    except FileNotFoundError:
        raise CheckpointError(f"load_checkpoint: {label} does not exist") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise CheckpointError(f"load_checkpoint: {label} is truncated or corrupt "
                              f"({type(e).__name__}: {e})") from e
    raw = arrays.pop(_STRUCTURE, None)
    if raw is None:
        raise CheckpointError(f"load_checkpoint: {label} is not an spgnn checkpoint "
                              f"(no {_STRUCTURE} member)")
    try:
        structure = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"load_checkpoint: {label} has a corrupt structure record "
                              f"({e})") from e
    except RecursionError:
        # json recurses per nesting level: a record nested past the interpreter's limit
        # is not one save_checkpoint wrote (its encoder recurses the same way)
        raise _too_deep(label) from None
    if not isinstance(structure, dict) or structure.get("format") != FORMAT:
        raise CheckpointError(f"load_checkpoint: {label} is not an spgnn checkpoint")
    if structure.get("version") != VERSION:
        raise CheckpointError(f"load_checkpoint: {label} has format version "
                              f"{structure.get('version')!r}; this spgnn reads version {VERSION}")
    try:
        state = _decode(structure["state"], arrays, label)
        step = int(structure["step"])
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"load_checkpoint: {label} has a malformed structure record "
                              f"({type(e).__name__}: {e})") from e
    except RecursionError:
        raise _too_deep(label) from None
    return state, step


def _too_deep(label: str) -> CheckpointError:
    return CheckpointError(f"load_checkpoint: {label} has a structure record nested too deeply "
                           f"to read (past Python's recursion limit)")


def load_checkpoint(directory, accept=None) -> tuple[dict, int]:
    """The newest intact checkpoint in ``directory`` as ``(state, step)``.

    Parameters
    ----------
    directory : str or os.PathLike
        A folder written by :func:`save_checkpoint`, or one checkpoint file
        (then exactly that file is read, with no fallback).

    Returns
    -------
    state : dict
        Equal to what was saved: arrays with the same dtype, shape and bytes
        (fresh, writable copies), numpy scalars with their dtype, tuples as
        tuples.
    step : int
        The step it was saved with.

    Parameters
    ----------
    accept : callable ``state -> None``, optional
        Further checks of a loaded state (a training command's layout); it
        raises :class:`~spgnn.errors.CheckpointError` for an unusable one,
        which is then skipped like a corrupt file.

    Raises
    ------
    CheckpointError
        No checkpoint exists (the message names the directory), or none is
        intact (the message names every file tried and what was wrong).

    Notes
    -----
    Candidates are tried in order: the file ``latest`` names, the previous
    one it names, then any other checkpoint file by decreasing step.  Each
    one skipped is logged as a warning on logger ``spgnn.checkpoint``.
    """
    directory = Path(directory)
    if directory.is_file():
        state, step = _load_file(directory)
        if accept is not None:
            accept(state)
        return state, step
    if not directory.is_dir():
        raise CheckpointError(f"load_checkpoint: checkpoint directory {directory} does not exist")
    candidates: list[Path] = []
    pointer = _read_pointer(directory)
    if pointer is not None:
        for key in ("latest", "previous"):
            if _safe_member(pointer.get(key)):
                candidates.append(directory / pointer[key])
    for _, p in list_checkpoints(directory):
        if p not in candidates:
            candidates.append(p)
    if not candidates:
        raise CheckpointError(f"load_checkpoint: no checkpoint in {directory}")
    failures = []
    for path in candidates:
        try:
            state, step = _load_file(path)
            if accept is not None:
                accept(state)
        except CheckpointError as e:
            # an ``accept`` check may not know the file: name it
            failures.append(str(e) if path.name in str(e) else f"{path}: {e}")
            logger.warning("skipping checkpoint %s: %s", path, e)
            continue
        if failures:
            logger.warning("resumed from the older checkpoint %s (step %d) because newer ones "
                           "were unusable", path, step)
        else:
            logger.info("loaded checkpoint %s (step %d)", path, step)
        return state, step
    raise CheckpointError(f"load_checkpoint: no intact checkpoint in {directory}: "
                          + "; ".join(failures))


# ----------------------------------------------------------------- MPI
def save_checkpoint_collective(comm, directory, state, step: int) -> Path | None:
    """:func:`save_checkpoint` on rank 0; returns on every rank once the file is on disk.

    Parameters
    ----------
    comm : spgnn.Communicator
        Every rank of ``comm`` calls this.
    directory, step
        As for :func:`save_checkpoint`; ``step`` must agree across ranks.
    state : dict
        Read on rank 0 only (other ranks may pass None): the state must be
        replicated, or gathered to rank 0 beforehand.

    Returns
    -------
    pathlib.Path or None
        The file written on rank 0, None elsewhere.

    Raises
    ------
    Exception
        Rank 0 re-raises its own error; the other ranks raise
        :class:`CheckpointError` carrying its message.  No rank is left
        waiting.

    Notes
    -----
    Collective: one ``bcast_obj`` from rank 0, sent after the write and its
    fsyncs, so it is the barrier: no rank returns before the checkpoint is
    durable, and it carries rank 0's error if the write failed.
    """
    error = None
    path = None
    if comm.rank == 0:
        try:
            path = save_checkpoint(directory, state, step=step)
        except Exception as e:   # reported to the peers below, then re-raised
            error = e
    message = comm.bcast_obj(None if error is None else f"{type(error).__name__}: {error}",
                             root=0, label="checkpoint:save")
    if error is not None:
        raise error
    if message is not None:
        raise CheckpointError(f"save_checkpoint_collective: rank 0 failed: {message}")
    return path


def load_checkpoint_collective(comm, directory, accept=None) -> tuple[dict, int]:
    """:func:`load_checkpoint` on rank 0, broadcast to every rank.

    Only rank 0 reads the file system, so the folder need not be visible to
    the other ranks.  Every rank gets its own copy of ``(state, step)``.

    Raises
    ------
    CheckpointError
        On every rank when rank 0 could not load (rank 0 raises its own
        error; the others carry its message).

    Notes
    -----
    Collective: one ``bcast_obj`` from rank 0 of the whole state (a pickle in
    memory, never on disk).
    """
    payload: Any = None
    error = None
    if comm.rank == 0:
        try:
            payload = ("ok", load_checkpoint(directory, accept))
        except Exception as e:
            error = e
            payload = ("error", f"{type(e).__name__}: {e}")
    payload = comm.bcast_obj(payload, root=0, label="checkpoint:load")
    if error is not None:
        raise error
    kind, value = payload
    if kind == "error":
        raise CheckpointError(f"load_checkpoint_collective: rank 0 failed: {value}")
    return value


def load_training_state(comm, directory, fmt: str, config: dict, what: str = "training",
                        defaults=None, may_differ=()):
    """The newest checkpoint in ``directory``, checked to be a ``fmt`` state saved by ``config``.

    For training commands that store ``{"format": fmt, "config": {...}, ...}``.
    Collective (:func:`load_checkpoint_collective`); every rank raises
    ``ValueError`` together for another kind of checkpoint or for one whose
    saved ``config`` differs from ``config`` in any key (each difference is
    named: resuming under other settings would not continue the same run).
    ``defaults`` (optional ``{key: value}``): what a saved config that lacks
    a key (written before the key was recorded) stands for.  ``may_differ``:
    keys whose difference is allowed (a training run's rank count and grid:
    its state is saved in a rank-count-independent form); the caller reads
    the saved values from the returned state's ``config``.
    """
    def accept(state):
        # a state of this format whose records are not what the command wrote
        # (cut short, edited) is skipped like a corrupt file: the previous
        # checkpoint is tried
        if isinstance(state, dict) and state.get("format") == fmt:
            if not (isinstance(state.get("config"), dict) and isinstance(state.get("epoch"), int)
                    and isinstance(state.get("trainer"), dict)):
                raise CheckpointError(f"{directory}: the newest {fmt} state is malformed "
                                      f"(keys {sorted(state)})")
            if "history" in state and not _is_history(state["history"]):
                raise CheckpointError(f"{directory}: the newest {fmt} state has a malformed "
                                      f"history (a list of [loss, accuracy, bytes] records is "
                                      f"expected, got {_brief(state['history'])})")

    state, _ = load_checkpoint_collective(comm, directory, accept)
    if not isinstance(state, dict) or state.get("format") != fmt:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"train: {directory} holds no {what} checkpoint (it holds {found!r}; "
                         f"this one must be {fmt!r})")
    saved = {**(defaults or {}), **state.get("config", {})}
    diff = {k: (saved.get(k), config[k]) for k in config
            if saved.get(k) != config[k] and k not in may_differ}
    if diff:
        raise ValueError(f"train: the checkpoint in {directory} was written by another "
                         f"configuration: " + ", ".join(f"{k}: saved {a!r}, now {b!r}"
                                                        for k, (a, b) in sorted(diff.items())))
    return state


def _is_history(history) -> bool:
    """Whether ``history`` is a list of ``[loss, accuracy, bytes]`` number records."""
    return isinstance(history, list) and all(
        isinstance(h, (list, tuple)) and len(h) == 3
        and all(isinstance(x, (int, float, np.number)) and not isinstance(x, bool) for x in h)
        for h in history)


def _brief(value) -> str:
    text = repr(value) if not isinstance(value, list) else f"a list of {len(value)} items"
    return text if len(text) <= 60 else text[:57] + "..."


class DirectoryLock:
    """An exclusive lock on a checkpoint directory for one run, held by one process. Local.

    ``fcntl.flock`` on ``DIR/.lock`` (the file records the holder's pid and
    host): the operating system releases it when the process ends in any
    way (``kill -9`` included), so a crashed run never leaves a stale lock.
    A second run on the same directory gets :class:`CheckpointError` naming
    the directory and the holder, instead of both runs overwriting each
    other's checkpoints.  Use as a context manager.
    """

    def __init__(self, directory):
        self.directory = Path(directory)
        self._file = None

    def acquire(self):
        import fcntl
        import socket

        self.directory.mkdir(parents=True, exist_ok=True)
        f = open(self.directory / ".lock", "a+")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            f.close()
            raise CheckpointError(f"checkpoint directory {self.directory} is in use by another "
                                  f"run ({holder}); give each run its own directory") from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        f.flush()
        self._file = f
        return self

    def release(self):
        if self._file is not None:
            self._file.close()           # closing the file releases the lock
            self._file = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False
