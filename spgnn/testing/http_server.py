"""A bounded local HTTP file server with fault injection, for the download tests.

:class:`FileServer` serves a folder (the shared data folder, or files a test
wrote) on ``127.0.0.1`` only, on a port the OS picks, with the standard
library's :mod:`http.server`.  It answers ``Range: bytes=K-`` requests with
``206 Partial Content`` (unless ``ranges=False``) and can misbehave on
purpose:

* ``corrupt={"planetoid/ind.cora.x"}`` -- serve that file with one byte flipped;
* ``truncate={"planetoid/ind.cora.allx": (100_000, 1)}`` -- the first response for
  that file announces the full length but closes the connection after
  100,000 bytes of body;
* ``delay`` -- seconds to sleep after every 64 KiB sent (so that two clients
  overlap in a race).

Every request is recorded in :attr:`FileServer.requests` as ``(path, range
header or None)``.  It is bounded: at most ``max_requests`` requests are
answered (then 503), every socket has a timeout, and :meth:`close` (or leaving
the ``with`` block) stops the thread.  Never bind it elsewhere than the
loopback address.
"""

from __future__ import annotations

import http.server
import threading
import time
import urllib.parse
from pathlib import Path

__all__ = ["FileServer"]

_BLOCK = 1 << 16


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "spgnn-test/1"
    timeout = 10

    def log_message(self, *args):          # quiet
        pass

    def do_GET(self):                      # noqa: N802 (http.server's name)
        owner = self.server.owner
        rel = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path).lstrip("/")
        rng = self.headers.get("Range")
        with owner.lock:
            owner.requests.append((rel, rng))
            if len(owner.requests) > owner.max_requests:
                self.send_error(503, "request limit of the test server reached")
                return
        path = (owner.root / rel).resolve()
        if owner.root not in path.parents or not path.is_file():
            self.send_error(404)
            return
        body = path.read_bytes()
        if rel in owner.corrupt and body:
            body = bytes([body[0] ^ 0xFF]) + body[1:]
        start = 0
        if rng and owner.ranges and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes="):-1])
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.send_header("Accept-Ranges", "bytes" if owner.ranges else "none")
        self.end_headers()
        cut = None
        with owner.lock:
            if owner.truncate.get(rel, (0, 0))[1] > 0:
                at, times = owner.truncate[rel]
                owner.truncate[rel] = (at, times - 1)
                cut = at
        payload = body[start:] if cut is None else body[start:max(start, cut)]
        for i in range(0, len(payload), _BLOCK):
            self.wfile.write(payload[i:i + _BLOCK])
            if owner.delay:
                time.sleep(owner.delay)
        if cut is not None:
            self.close_connection = True


class FileServer:
    """Serve ``root`` on ``http://127.0.0.1:<port>`` until closed (a context manager)."""

    def __init__(self, root, *, corrupt=(), truncate=None, ranges=True, delay=0.0,
                 max_requests=500):
        self.root = Path(root).resolve()
        self.corrupt = set(corrupt)
        self.truncate = dict(truncate or {})
        self.ranges = ranges
        self.delay = delay
        self.max_requests = max_requests
        self.requests = []
        self.lock = threading.Lock()
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.timeout = 10
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The base URL, ``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def gets(self, rel=None):
        """The recorded requests (for one path when ``rel`` is given)."""
        with self.lock:
            return [r for r in self.requests if rel is None or r[0] == rel]

    def close(self):
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
