"""Kernel output arrays: huge pages, and a small cache of freed buffers.

Why: a kernel's output is fresh memory on every call (the caller keeps the
result), and the first write to each 4 KiB page of fresh memory is a page
fault in which the OS zeroes the page.  On the benchmark VM one such fault
costs ~1.75 us (0.43 ms per MiB), about as much as computing the SpGEMM
entries that fill the page: ``A @ A`` of a road network (3.1 MB of output)
spent a quarter to a third of its time in 770 faults whenever glibc had
handed the previous call's memory back to the OS, which depends on the
process's allocation history (the same call measured 2.9 or 4.0 ms).  Two
remedies, both for buffers of at least :data:`HUGE_MIN_BYTES`:

* **Transparent huge pages** for new buffers: one fault per 2 MiB (~60 us,
  zeroing included).  numpy asks for them itself only from 4 MiB per array;
  SpGEMM outputs are mostly smaller and come as two arrays (indices,
  values) that one buffer holds here.  The buffer is an anonymous private
  ``mmap`` with 2 MiB of virtual slack, advised ``MADV_HUGEPAGE`` from its
  first 2 MiB boundary over every whole huge page it uses, plus the last,
  partial one when at least half of it is used (so at most 1 MiB is
  resident beyond the buffer).  Without ``MADV_HUGEPAGE`` or with THP off,
  the same buffer gets 4 KiB pages.
* **A cache of freed buffers**: when the last array viewing a buffer is
  freed, the buffer (its pages still mapped and resident) goes to a cache of
  at most :data:`CACHE_MAX_BYTES` (buffers up to :data:`CACHE_MAX_BUFFER`);
  a later request of between half and all of a cached buffer's size reuses
  it with no faults and no zeroing.  This is what a caching allocator does
  (CuPy's and PyTorch's GPU memory pools, jemalloc on the CPU), here for
  kernel outputs and the arrays collectives return (spgnn.comm.transport:
  they are the next kernel's operands) only.  The loop of a training or
  sampling step frees each output before the next call makes the
  same-sized one.

:func:`release_cached` empties the cache.  Measurements: docs/performance.md,
"Output allocation".
"""

import collections
import math
import mmap
import os
import threading
import weakref

import numpy as np

__all__ = ["empty", "empty_arrays", "release_cached", "cached_bytes", "HUGE_PAGE", "HUGE_MIN_BYTES",
           "CACHE_MAX_BYTES", "CACHE_MAX_BUFFER"]

#: The transparent huge page size of x86-64 and most aarch64 kernels.
HUGE_PAGE = 2 << 20
#: Below this total a request is one ``np.empty`` per array (glibc's heap
#: reuses small blocks well, and a huge page would more than double them).
HUGE_MIN_BYTES = 1 << 20
#: Freed buffers kept for reuse, in bytes at most (oldest dropped first).
CACHE_MAX_BYTES = 256 << 20
#: Larger buffers are unmapped when freed, not cached (128 MiB: the largest
#: output the kernel benchmark makes, SpMM of a 114 k-row graph at f = 256,
#: is 117 MB).
CACHE_MAX_BUFFER = 128 << 20
#: Each array starts on a cache line (64 bytes; a multiple of every dtype's
#: alignment).  Why: outputs become the dense operands of later kernels, and
#: numpy aligns only to 16 bytes (a large array starts 16 bytes past a page,
#: after glibc's chunk header), so a 64-byte row of such an ``x`` spans two
#: lines; SpMM gathering them measured 1.04-1.28x slower at f = 16 and 64
#: (kernels/README.md).
_ALIGN = 64

_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", None)
_MAP_ANONYMOUS = getattr(mmap, "MAP_ANONYMOUS", getattr(mmap, "MAP_ANON", None))

# Freed buffers arrive in ``_returned`` from weakref callbacks, which may run
# in any thread and at any allocation (even one made while ``_lock`` is held
# by the same thread): they append (atomic for a deque) and move the deque to
# ``_cache`` only if ``_lock`` is free, never waiting for it; a request or
# a later free moves what is left.
_lock = threading.Lock()
_returned = collections.deque()
_cache = []  # [(capacity, mmap, offset)], oldest first
_cached = [0]  # bytes in _cache
# weak references (by id: a weakref hashes like its referent, and arrays do
# not hash) to the base arrays of cacheable buffers in use: a weakref's
# callback only fires while the weakref itself is alive
_live = {}


def _after_fork_in_child():
    # a fork while another thread held the lock would leave it held forever
    # in the child, which has only the forking thread
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _new_buffer(nbytes):
    """``(capacity, mmap, offset)``: a fresh mapping with huge pages advised from ``offset``
    (see the module docstring)."""
    whole, rest = divmod(nbytes, HUGE_PAGE)
    huge = (whole + (rest >= HUGE_PAGE // 2)) * HUGE_PAGE
    try:
        # MAP_PRIVATE: shared anonymous memory follows shmem's huge page
        # policy, not the process's
        buf = mmap.mmap(-1, max(nbytes, huge) + HUGE_PAGE,
                        flags=mmap.MAP_PRIVATE | _MAP_ANONYMOUS,
                        prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except OSError as exc:  # ENOMEM and the like: what np.empty would raise
        raise MemoryError(f"cannot map {nbytes} bytes for a kernel output: {exc}") from None
    offset = -np.frombuffer(buf, dtype=np.uint8, count=1).ctypes.data % HUGE_PAGE
    if huge:
        try:
            buf.madvise(_MADV_HUGEPAGE, offset, huge)
        except OSError:  # THP compiled out of this kernel: 4 KiB pages
            pass
    return nbytes, buf, offset


def _drain():
    """Move freed buffers into the cache and trim it to :data:`CACHE_MAX_BYTES`; hold ``_lock``."""
    while _returned:
        entry = _returned.popleft()
        _cache.append(entry)
        _cached[0] += entry[0]
    while _cached[0] > CACHE_MAX_BYTES:
        _cached[0] -= _cache.pop(0)[0]


def _freed(ref):
    """Weakref callback: the last array of a buffer is gone."""
    _live.pop(id(ref), None)
    _returned.append(ref.entry)
    if _lock.acquire(blocking=False):
        try:
            _drain()
        finally:
            _lock.release()


def _take_cached(nbytes):
    """A cached ``(capacity, mmap, offset)`` with ``nbytes <= capacity <= 2 * nbytes``
    (the smallest), or None."""
    with _lock:
        _drain()
        best = None
        for pos, entry in enumerate(_cache):
            if nbytes <= entry[0] <= 2 * nbytes and (best is None or entry[0] < _cache[best][0]):
                best = pos
        if best is None:
            return None
        entry = _cache.pop(best)
        _cached[0] -= entry[0]
        return entry


class _BufferRef(weakref.ref):
    """A weak reference to a buffer's base array that carries its cache entry."""
    __slots__ = ("entry",)


def _buffer(nbytes):
    """A writable uint8 array of ``nbytes`` on a huge-page boundary, from the cache or new."""
    entry = _take_cached(nbytes) or _new_buffer(nbytes)
    capacity, buf, offset = entry
    view = np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=offset)
    if capacity <= CACHE_MAX_BUFFER:
        # every array carved from ``view`` has it as ``base`` (numpy collapses
        # view chains to the frombuffer array), so the callback fires when
        # the last of them is freed
        ref = _BufferRef(view, _freed)
        ref.entry = entry
        _live[id(ref)] = ref
    return view


def _aligned_numpy(n, dtype):
    """An uninitialised numpy array of ``n`` items of ``dtype`` starting on a 64-byte boundary."""
    nbytes = n * dtype.itemsize
    raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
    start = -raw.ctypes.data % _ALIGN
    return raw[start:start + nbytes].view(dtype)


def empty_arrays(*specs):
    """Uninitialised 1-D arrays, one per ``(length, dtype)`` in ``specs``, sharing one buffer.

    When the total reaches :data:`HUGE_MIN_BYTES` on a platform with
    ``MADV_HUGEPAGE``, the buffer comes from the cache of freed buffers or
    is a new huge-page mapping (see the module docstring); otherwise each
    array is a plain numpy allocation.  Each array is C-contiguous and
    starts on a 64-byte boundary (numpy alone guarantees 16 bytes; see
    :data:`_ALIGN`), except that an empty one has no address to align.
    Local, not collective; thread-safe.
    """
    specs = [(int(n), np.dtype(dt)) for n, dt in specs]
    offsets, total = [], 0
    for n, dt in specs:
        total += -total % _ALIGN
        offsets.append(total)
        total += n * dt.itemsize
    if total < HUGE_MIN_BYTES or _MADV_HUGEPAGE is None or _MAP_ANONYMOUS is None:
        return [_aligned_numpy(n, dt) for n, dt in specs]
    buf = _buffer(total)
    return [buf[o:o + n * dt.itemsize].view(dt) for o, (n, dt) in zip(offsets, specs)]


def empty(shape, dtype):
    """One uninitialised C-contiguous array of ``shape``, allocated as by :func:`empty_arrays`."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
    return empty_arrays((math.prod(shape), dtype))[0].reshape(shape)


def cached_bytes():
    """Bytes held in the cache of freed output buffers (resident memory no array uses)."""
    with _lock:
        _drain()
        return _cached[0]


def release_cached():
    """Unmap every cached output buffer (arrays still in use are not affected)."""
    with _lock:
        while _returned:
            _returned.popleft()
        _cache.clear()
        _cached[0] = 0
