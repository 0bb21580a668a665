"""Opening user files with limits: the one place every loader reads input through.

A graph file is hostile until proven otherwise: 14 bytes can declare a
billion vertices, a 1 MB gzip stream can expand to a terabyte, a path can be a
FIFO that blocks forever.  The rules, each ending in a typed error that names
the file and the number, before the allocation or the blocking read:

* only regular files are read (``open`` with ``O_NONBLOCK``, then ``fstat``:
  a FIFO, a device or a socket is refused without blocking; a symbolic-link
  loop is reported as one, not as a missing file);
* archive formats spgnn does not read (zip, zstd, bzip2, xz, 7z) are refused
  by their magic bytes, rather than parsed as text (gzip is read, whatever the
  file's name);
* gzip is decompressed in chunks, stopping at the byte limit and at a
  decompression ratio above :data:`MAX_RATIO` once the output passes
  :data:`RATIO_FLOOR` (a compression bomb; real edge lists compress 3-10x);
* a vertex count may exceed what the edges can touch (``2 * edges``) by at
  most :data:`MAX_ISOLATED` vertices unless the caller confirms it
  (``num_nodes=`` / ``--num-nodes``), and every large allocation a loader
  makes from declared sizes is estimated first (:func:`check_alloc`).

The byte limit is ``SPGNN_MAX_INPUT_BYTES`` when set, else half the memory
available when the limit is asked for (``MemAvailable``).
"""

from __future__ import annotations

import errno
import os
import stat
import zlib

from ..errors import GraphFormatError, InputTooLarge

__all__ = ["memory_limit", "check_alloc", "check_vertices", "open_regular", "read_input",
           "refuse_archive", "gunzip", "MAX_RATIO", "RATIO_FLOOR", "MAX_ISOLATED"]

GZIP_MAGIC = b"\x1f\x8b"
#: decompression ratio above which a gzip stream is taken for a bomb
MAX_RATIO = 100
#: output size below which no ratio is enforced (small files may compress very well)
RATIO_FLOOR = 16 << 20
#: vertices beyond ``2 * edges`` (those no edge can touch) accepted without ``num_nodes``
MAX_ISOLATED = 1 << 20

_ARCHIVES = ((b"PK\x03\x04", "a zip archive"), (b"PK\x05\x06", "an (empty) zip archive"),
             (b"\x28\xb5\x2f\xfd", "a zstd stream"), (b"BZh", "a bzip2 stream"),
             (b"\xfd7zXZ\x00", "an xz stream"), (b"7z\xbc\xaf\x27\x1c", "a 7z archive"))


def _fmt(nbytes: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if nbytes < 1024 or unit == "PiB":
            return f"{nbytes:,.0f} {unit}" if unit == "bytes" else f"{nbytes:,.1f} {unit}"
        nbytes /= 1024
    return str(nbytes)   # not reached


def memory_limit() -> int:
    """Bytes one input may occupy: ``SPGNN_MAX_INPUT_BYTES``, else half of MemAvailable."""
    env = os.environ.get("SPGNN_MAX_INPUT_BYTES")
    if env:
        try:
            value = int(env)
        except ValueError:
            raise ValueError(f"SPGNN_MAX_INPUT_BYTES must be an integer number of bytes, "
                             f"but got {env!r}") from None
        if value <= 0:
            raise ValueError(f"SPGNN_MAX_INPUT_BYTES must be positive, but got {value}")
        return value
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def _limit_note() -> str:
    return ("SPGNN_MAX_INPUT_BYTES" if os.environ.get("SPGNN_MAX_INPUT_BYTES")
            else "half the available memory; set SPGNN_MAX_INPUT_BYTES to change it")


def check_alloc(nbytes: int, label: str, what: str) -> None:
    """Raise :class:`InputTooLarge` if ``what`` (about ``nbytes``) exceeds the limit. Local."""
    limit = memory_limit()
    if nbytes > limit:
        raise InputTooLarge(f"{label}: {what} needs about {_fmt(nbytes)}, more than the "
                            f"{_fmt(limit)} allowed ({_limit_note()})")


def check_vertices(n: int, m: int, label: str, *, declared: str = "", hint: str = "") -> None:
    """Refuse a vertex count the ``m`` edges cannot justify, and estimate the CSR's memory.

    ``n`` vertices with ``m`` edges: at most ``2m`` vertices have an edge, so
    ``n > 2m + MAX_ISOLATED`` is a sparse id space or a corrupt header, not a
    graph to allocate.  ``declared`` says where ``n`` comes from (``"the
    header (line 1)"``); ``hint`` how the caller can confirm or avoid it.
    Local.
    """
    n, m = int(n), int(m)
    if n > 2 * m + MAX_ISOLATED:
        where = declared or "the largest vertex id"
        raise InputTooLarge(
            f"{label}: {where} implies {n:,} vertices, but its {m:,} edge{'s' * (m != 1)} "
            f"touch{'es' * (m == 1)} at most {2 * m:,}; more than {MAX_ISOLATED:,} isolated vertices are refused"
            + (f" ({hint})" if hint else ""))
    # indptr (int64) + per edge: both directions, int64 coordinates, float32 values.
    check_alloc(8 * (n + 1) + 40 * m, label, f"a graph of {n:,} vertices and {m:,} edges")


def refuse_archive(head: bytes, label: str) -> None:
    """Raise :class:`GraphFormatError` if ``head`` starts an archive spgnn does not read."""
    for magic, what in _ARCHIVES:
        if head.startswith(magic):
            raise GraphFormatError(f"{label}: the file is {what}, which spgnn does not read "
                                   f"here; unpack it (plain text or gzip is read)")


def open_regular(path, label: str | None = None):
    """Open ``path`` for binary reading if it is a regular file, never blocking. Local.

    Raises ``FileNotFoundError`` / ``OSError`` (a symbolic-link loop says so)
    or :class:`GraphFormatError` for a FIFO, a device, a socket or a folder.
    """
    label = label or os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise GraphFormatError(f"{label}: a folder, not a regular file") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, f"{label}: a loop of symbolic links "
                                       f"(too many levels of symbolic links)") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else
                    "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else
                    "a socket" if stat.S_ISSOCK(mode) else
                    "a folder" if stat.S_ISDIR(mode) else "not a regular file")
            raise GraphFormatError(f"{label}: {kind}; spgnn reads input only from regular files")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def gunzip(raw: bytes, label: str, limit: int | None = None) -> bytes:
    """Decompress one or more gzip members within the byte and ratio limits. Local.

    Errors name the line where a damaged stream stops
    (:class:`GraphFormatError`) or the size reached (:class:`InputTooLarge`).
    """
    limit = memory_limit() if limit is None else limit
    ratio_cap = max(MAX_RATIO * len(raw), min(RATIO_FLOOR, limit))
    cap = min(limit, ratio_cap)
    out, total = [], 0
    data = raw
    chunk = 1 << 20

    def lines():
        return sum(b.count(b"\n") for b in out) + 1

    while True:
        d = zlib.decompressobj(wbits=31)
        pending = data
        while True:
            try:
                piece = d.decompress(pending, chunk)
            except zlib.error as e:
                raise GraphFormatError(f"{label}:{lines()}: corrupt gzip data ({e})") from None
            out.append(piece)
            total += len(piece)
            if total > cap:
                why = (f"{_fmt(limit)} allowed ({_limit_note()})" if cap == limit else
                       f"{MAX_RATIO}x its compressed size of {_fmt(len(raw))} "
                       f"(a compression bomb?)")
                raise InputTooLarge(f"{label}: decompresses to more than {_fmt(cap)}, "
                                    f"beyond the {why}")
            pending = d.unconsumed_tail
            if d.eof or (not pending and not piece):
                break
        if not d.eof:
            raise GraphFormatError(f"{label}:{lines()}: gzip stream ends early "
                                   f"(the file is truncated)")
        data = d.unused_data
        if not data.strip(b"\x00"):   # gzip allows trailing zero padding
            return b"".join(out)
        if not data.startswith(GZIP_MAGIC):
            raise GraphFormatError(f"{label}: unexpected bytes after the end of the gzip stream")


def read_input(path, label: str | None = None, *, decompress: bool = True) -> bytes:
    """The bytes of a regular file within the limits, gunzipped when it is gzip. Local.

    Refuses a FIFO/device (without blocking), an archive it does not read and
    a file or stream past :func:`memory_limit`.
    """
    label = label or os.fspath(path)
    limit = memory_limit()
    with open_regular(path, label) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise InputTooLarge(f"{label}: {_fmt(size)} on disk, more than the {_fmt(limit)} "
                                f"allowed ({_limit_note()})")
        # Read what the file holds, not ``limit`` bytes: ``read(n)`` allocates n bytes up
        # front, which fails under any ``ulimit -v`` below the limit, even for a tiny file.
        parts = [f.read(size + 1)]
        total = len(parts[0])
        while total > size and total <= limit:   # grew while we read it: on to the limit
            piece = f.read(min(1 << 20, limit + 1 - total))
            if not piece:
                break
            parts.append(piece)
            total += len(piece)
        raw = parts[0] if len(parts) == 1 else b"".join(parts)
    if len(raw) > limit:   # grew past the limit while we read it
        raise InputTooLarge(f"{label}: more than the {_fmt(limit)} allowed ({_limit_note()})")
    if decompress and raw.startswith(GZIP_MAGIC):
        return gunzip(raw, label, limit)
    refuse_archive(raw[:8], label)
    return raw
