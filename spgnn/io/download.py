"""Downloading dataset files into a local cache: verified, atomic, resumable, one at a time.

The cache is a folder of dataset folders (``<cache>/planetoid/ind.cora.x``,
``<cache>/snap_ego_twitter/ego-twitter-undirected.jlg``, ...), laid out like the
project's shared data folder, so that ``SPGNN_DATA=../shared/data`` uses that
copy without downloading anything.  :func:`cache_dir` finds it:

1. ``SPGNN_DATA`` when set;
2. else the platform's user cache directory: ``$XDG_CACHE_HOME/spgnn`` or
   ``~/.cache/spgnn`` (Linux and other POSIX), ``~/Library/Caches/spgnn``
   (macOS), ``%LOCALAPPDATA%\\spgnn\\Cache`` (Windows).

:func:`ensure_files` makes the files of one dataset folder present and
verified:

* a file already in place is checked (size, then SHA-256 -- or the git blob
  id where the registry could not establish a SHA-256) and used;
* a missing one is downloaded with :mod:`urllib` into ``<name>.part`` and
  renamed to ``<name>`` only once its size and checksum match, so no reader
  ever sees a half-written or unverified file under the final name;
* an interrupted transfer (dropped connection, truncated body, killed
  process) leaves ``<name>.part``; the next attempt -- at once, up to
  ``retries`` times, or in a later run -- asks for the rest with an HTTP
  ``Range`` request and appends, or starts again from byte 0 when the server
  ignores ranges.  A file that fails its checksum after a resumed transfer
  is downloaded once more from scratch; a fresh one that fails raises
  :class:`~spgnn.errors.ChecksumError` (the ``.part`` is deleted);
* processes that race for the same folder take turns through an exclusive
  lock on ``<folder>/.spgnn-download.lock`` (``fcntl.flock``; POSIX): the
  first downloads, the others wait and then find the verified files;
* with downloads off (``offline=True`` or ``SPGNN_OFFLINE=1``) or failing,
  :class:`~spgnn.errors.DownloadError` lists every missing file with its URL,
  size, checksum and the exact path to place it at.

``SPGNN_DATA_MIRROR`` (or ``mirror=``) replaces every URL with
``<mirror>/<folder>/<file>``: a site mirror, and how the tests serve
``../shared/data`` from a local HTTP server.

Everything here is local to the calling process; the collective form (rank 0
downloads while the other ranks wait) is :func:`spgnn.io.datasets.fetch_dataset`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import ChecksumError, DownloadError

__all__ = ["RemoteFile", "cache_dir", "ensure_files", "verify_file", "file_status",
           "offline_default", "mirror_default", "USER_AGENT"]

USER_AGENT = "spgnn-datasets/0.1 (+python urllib)"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class RemoteFile:
    """One file of a dataset: where it comes from and how it is verified.

    Parameters
    ----------
    name : str
        File name inside the dataset folder.
    url : str
        Canonical download URL.
    size : int or None
        Size in bytes; None when no published size could be established.
    sha256 : str or None
        Hex SHA-256 of the file's bytes; None when it could not be established.
    git_blob : str or None
        The git blob id (SHA-1 of ``b"blob <size>\\0" + bytes``) of the file in
        the pinned source repository: the checksum used where no SHA-256
        could be established (it also fixes the size).
    extract : str or None
        For a zip archive: the folder it holds, extracted next to it after
        verification (its presence marks a finished extraction).
    note : str
        Where the size and checksum come from, or why they are missing.
    """

    name: str
    url: str
    size: int | None = None
    sha256: str | None = None
    git_blob: str | None = None
    extract: str | None = None
    note: str = ""

    @property
    def verified_by(self) -> str:
        """``"sha256"``, ``"git-blob-sha1"``, ``"size"`` or ``"format"`` (nothing but the loader)."""
        if self.sha256:
            return "sha256"
        if self.git_blob:
            return "git-blob-sha1"
        return "size" if self.size is not None else "format"

    def describe(self) -> str:
        """``size, checksum`` for messages."""
        size = f"{self.size:,} bytes" if self.size is not None else "size not published"
        if self.sha256:
            return f"{size}, sha256 {self.sha256}"
        if self.git_blob:
            return f"{size}, git blob {self.git_blob}"
        return f"{size}, no published checksum (checked by loading it)"


def _truthy(text):
    return str(text).strip().lower() in ("1", "true", "yes", "on")


def offline_default() -> bool:
    """``SPGNN_OFFLINE`` as a bool (unset: False)."""
    return _truthy(os.environ.get("SPGNN_OFFLINE", ""))


def mirror_default() -> str | None:
    """``SPGNN_DATA_MIRROR``, or None."""
    return os.environ.get("SPGNN_DATA_MIRROR") or None


def cache_dir(cache=None) -> Path:
    """The dataset cache folder (not created): ``cache``, ``SPGNN_DATA``, or the user cache."""
    if cache is not None:
        return Path(cache).expanduser()
    env = os.environ.get("SPGNN_DATA")
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "spgnn" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "spgnn"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "spgnn"


# ------------------------------------------------------------------ verification
def _digests(path):
    """``(size, sha256 hex, git blob id)`` of a file, reading it once."""
    size = os.path.getsize(path)
    sha = hashlib.sha256()
    blob = hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            sha.update(chunk)
            blob.update(chunk)
    return size, sha.hexdigest(), blob.hexdigest()


def verify_file(path, remote: RemoteFile) -> None:
    """Raise :class:`ChecksumError` unless ``path`` has ``remote``'s size and checksum.

    Files without a published size or checksum pass (their loader checks the
    format and the registry the published counts).
    """
    path = Path(path)
    size = os.path.getsize(path)
    if remote.size is not None and size != remote.size:
        raise ChecksumError(f"{path}: {size:,} bytes, but {remote.url} has {remote.size:,} "
                            f"bytes (delete the file to download it again)")
    if not (remote.sha256 or remote.git_blob):
        return
    _, sha, blob = _digests(path)
    if remote.sha256 and sha != remote.sha256:
        raise ChecksumError(f"{path}: sha256 {sha}, but the registry expects {remote.sha256} "
                            f"for {remote.url} (corrupted or a different version; delete it "
                            f"to download it again)")
    if remote.git_blob and blob != remote.git_blob:
        raise ChecksumError(f"{path}: git blob id {blob}, but the registry expects "
                            f"{remote.git_blob} for {remote.url} (corrupted or a different "
                            f"version; delete it to download it again)")


def _done(folder, remote):
    """Whether ``remote`` is in place (an archive: its extracted folder)."""
    if remote.extract:
        return (folder / remote.extract).is_dir()
    return (folder / remote.name).is_file()


def file_status(folder, remote: RemoteFile) -> str:
    """``"ok"``, ``"missing"``, ``"partial"`` (a ``.part`` is waiting) or ``"bad: ..."``. Local."""
    folder = Path(folder)
    if remote.extract and (folder / remote.extract).is_dir():
        return "ok"
    path = folder / remote.name
    if not path.is_file():
        return "partial" if (folder / (remote.name + ".part")).is_file() else "missing"
    try:
        verify_file(path, remote)
    except ChecksumError as exc:
        return f"bad: {exc}"
    return "ok"


# ------------------------------------------------------------------ locking
@contextlib.contextmanager
def _folder_lock(folder):
    """Exclusive lock on the folder's lock file (waits); a no-op without fcntl."""
    try:
        import fcntl
    except ImportError:            # Windows: one downloader at a time is the user's job
        yield
        return
    fd = os.open(folder / ".spgnn-download.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


# ------------------------------------------------------------------ transfer
def _url_of(remote, folder_name, mirror):
    if mirror:
        return f"{mirror.rstrip('/')}/{folder_name}/{remote.name}"
    return remote.url


class _Truncated(Exception):
    """The body ended before its announced length (the ``.part`` keeps what came)."""


def _transfer(url, part, *, timeout, progress, label):
    """Append the rest of ``url`` to ``part``; True when the server resumed (206).

    Raises ``_Truncated`` or a network error when the transfer stops early;
    whatever arrived stays in ``part``.
    """
    import http.client
    import urllib.error
    import urllib.request

    offset = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": USER_AGENT}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                      timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:       # nothing left to send: the .part may be whole
            return True
        raise
    with resp:
        resumed = offset > 0 and resp.status == 206
        if offset and not resumed:           # the server ignored the range: start again
            offset = 0
        length = resp.headers.get("Content-Length")
        expected = int(length) + offset if length is not None else None
        bar = _progress_bar(progress, label, expected, offset)
        got = offset
        try:
            with open(part, "ab" if resumed else "wb") as out:
                while True:
                    try:
                        chunk = resp.read(_CHUNK)
                    except http.client.IncompleteRead as exc:
                        out.write(exc.partial)
                        got += len(exc.partial)
                        raise _Truncated(f"{got:,} of {expected:,} bytes") from None
                    if not chunk:
                        break
                    out.write(chunk)
                    got += len(chunk)
                    if bar is not None:
                        bar.update(len(chunk))
                out.flush()
                os.fsync(out.fileno())
        finally:
            if bar is not None:
                bar.close()
        if expected is not None and got < expected:
            raise _Truncated(f"{got:,} of {expected:,} bytes")
    return resumed


def _progress_bar(progress, label, total, initial):
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1024,
                desc=label, file=sys.stderr, leave=False, dynamic_ncols=True)


def _network_errors():
    # urllib and http.client load ssl and email (~0.1 s): only when downloading
    import http.client
    import urllib.error

    return (urllib.error.URLError, http.client.HTTPException, ConnectionError, socket.timeout,
            TimeoutError, _Truncated)


def _download(remote, folder, url, *, retries, timeout, progress):
    """Download ``remote`` into ``folder`` (verified, renamed into place)."""
    import urllib.error

    network_errors = _network_errors()
    final = folder / remote.name
    part = folder / (remote.name + ".part")
    if part.exists() and remote.size is not None and part.stat().st_size > remote.size:
        part.unlink()                        # longer than the file: not a prefix of it
    started_resumed = part.exists() and part.stat().st_size > 0
    attempt, fresh_retry_done = 0, False
    while True:
        try:
            resumed = _transfer(url, part, timeout=timeout, progress=progress,
                                label=remote.name)
        except urllib.error.HTTPError as exc:
            raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}") from None
        except network_errors as exc:
            attempt += 1
            if attempt > retries:
                got = part.stat().st_size if part.exists() else 0
                raise DownloadError(f"{url}: download interrupted after {retries + 1} "
                                    f"attempt(s) ({type(exc).__name__}: {exc}); "
                                    f"{got:,} bytes kept in {part}, the next run resumes "
                                    f"from there") from None
            time.sleep(min(2.0, 0.1 * 2 ** attempt))
            started_resumed = True
            continue
        try:
            verify_file(part, remote)
        except ChecksumError as exc:
            part.unlink()
            if (started_resumed or resumed) and not fresh_retry_done:
                # a resumed transfer may have glued two versions together:
                # one clean download from byte 0 decides
                fresh_retry_done, started_resumed = True, False
                continue
            raise ChecksumError(str(exc).replace(str(part), f"{final} (downloaded from {url})")
                                .replace(" (delete the file to download it again)", "")
                                .replace("; delete it to download it again", "")) from None
        os.replace(part, final)
        return


def _extract(archive, folder, inner):
    """Extract the zip ``archive`` into ``folder``; it must hold the folder ``inner``."""
    import zipfile

    tmp = folder / f".extract-{os.getpid()}"
    with zipfile.ZipFile(archive) as z:
        for member in z.namelist():
            p = Path(member)
            if p.is_absolute() or ".." in p.parts:
                raise ChecksumError(f"{archive}: refusing the archive member {member!r} "
                                    f"(outside the archive's folder)")
        z.extractall(tmp)
    if not (tmp / inner).is_dir():
        raise ChecksumError(f"{archive}: the archive holds no folder {inner!r}")
    os.replace(tmp / inner, folder / inner)
    for leftover in sorted(tmp.rglob("*"), reverse=True):
        leftover.rmdir() if leftover.is_dir() else leftover.unlink()
    tmp.rmdir()


def _missing_message(dataset, folder, remotes, folder_name, why):
    lines = [f"{dataset}: {len(remotes)} file(s) missing from the dataset cache and {why}. "
             f"Download them and place them as follows (or set SPGNN_DATA to a folder that "
             f"holds them):"]
    for r in remotes:
        lines.append(f"  {r.url}\n    -> {folder / r.name}  ({r.describe()})")
        if r.extract:
            lines.append(f"    (a zip archive: it is extracted into {folder / r.extract})")
    return "\n".join(lines)


def ensure_files(dataset, folder_name, remotes, *, cache=None, mirror=None, offline=None,
                 progress=None, retries=3, timeout=60.0) -> Path:
    """Make every file of ``remotes`` present and verified in ``<cache>/<folder_name>``.

    Local (the calling process only; see :func:`spgnn.io.datasets.fetch_dataset` for
    the collective form).  Returns the folder.

    Parameters
    ----------
    dataset : str
        The dataset's name, for messages.
    folder_name : str
        The dataset folder inside the cache.
    remotes : sequence of RemoteFile
    cache : path, optional
        The cache folder (default :func:`cache_dir`).
    mirror : str, optional
        Base URL replacing every file's URL (default ``SPGNN_DATA_MIRROR``).
    offline : bool, optional
        Never download (default ``SPGNN_OFFLINE``).
    progress : bool, optional
        A progress bar on stderr (default: when stderr is a terminal).
    retries : int
        Resumed attempts after an interrupted transfer.
    timeout : float
        Seconds a connection may stay silent.

    Raises
    ------
    DownloadError
        Files are missing and downloads are off or fail; the message says
        which file to place where.
    ChecksumError
        A file in the cache, or a downloaded one, has the wrong size or checksum.
    """
    folder = cache_dir(cache) / folder_name
    offline = offline_default() if offline is None else bool(offline)
    mirror = mirror_default() if mirror is None else mirror
    if progress is None:
        progress = sys.stderr.isatty()
    missing = [r for r in remotes if not _done(folder, r)]
    if not missing:                        # the fast path takes no lock: folders may be read-only
        for r in remotes:
            if not r.extract:
                verify_file(folder / r.name, r)
        return folder
    if offline:
        raise DownloadError(_missing_message(dataset, folder, missing, folder_name,
                                             "downloads are off (SPGNN_OFFLINE or offline=True)"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DownloadError(_missing_message(dataset, folder, missing, folder_name,
                                             f"the cache folder cannot be created ({exc})")
                            ) from None
    with _folder_lock(folder):
        for r in remotes:
            if _done(folder, r):           # another process may have fetched it meanwhile
                if not r.extract:
                    verify_file(folder / r.name, r)
                continue
            url = _url_of(r, folder_name, mirror)
            try:
                _download(r, folder, url, retries=retries, timeout=timeout, progress=progress)
            except DownloadError as exc:
                if isinstance(exc, ChecksumError):
                    raise
                still = [m for m in remotes if not _done(folder, m)]
                raise DownloadError(f"{exc}\n" + _missing_message(
                    dataset, folder, still, folder_name, "could not be downloaded")) from None
            if r.extract:
                _extract(folder / r.name, folder, r.extract)
    return folder
