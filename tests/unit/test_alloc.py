"""Kernel output buffers (spgnn.local.alloc): layout, reuse only after free, bounds."""

import gc
import sys

import numpy as np
import pytest

from spgnn.local import alloc as _alloc

pytestmark = pytest.mark.skipif(_alloc._MADV_HUGEPAGE is None,
                                reason="no MADV_HUGEPAGE on this platform: plain np.empty")

BIG = _alloc.HUGE_MIN_BYTES  # bytes: one float32 array of BIG // 4 is at the threshold


@pytest.fixture(autouse=True)
def empty_cache():
    _alloc.release_cached()
    yield
    _alloc.release_cached()


def _span(arr):
    start = arr.ctypes.data
    return start, start + arr.nbytes


def test_small_requests_are_aligned_numpy_arrays_of_their_own():
    """Below HUGE_MIN_BYTES: one numpy allocation per array, each starting on
    a 64-byte line (numpy alone guarantees 16), none overlapping."""
    for _ in range(20):                     # numpy's own offset varies between calls
        a, b, c = _alloc.empty_arrays((10, np.int32), (3, np.float64), (0, np.float32))
        assert (a.dtype, b.dtype, c.dtype) == (np.int32, np.float64, np.float32)
        assert (a.shape, b.shape, c.shape) == ((10,), (3,), (0,))
        for arr in (a, b, c):
            assert arr.flags.c_contiguous and arr.flags.writeable
        assert a.ctypes.data % 64 == 0 and b.ctypes.data % 64 == 0   # (c has no bytes to align)
        assert a.base is not b.base
        a[:] = 1
        b[:] = 2.5
        assert (a == 1).all() and (b == 2.5).all()
    m = _alloc.empty((7, 5), np.float32)
    assert m.shape == (7, 5) and m.flags.c_contiguous and m.ctypes.data % 64 == 0


def test_large_request_layout():
    n = BIG // 4
    idx, val, tail = _alloc.empty_arrays((n, np.int32), (n + 3, np.float64), (0, np.int64))
    assert (idx.shape, val.shape, tail.shape) == ((n,), (n + 3,), (0,))
    assert (idx.dtype, val.dtype, tail.dtype) == (np.int32, np.float64, np.int64)
    for arr in (idx, val, tail):
        assert arr.flags.c_contiguous and arr.flags.writeable
        assert arr.ctypes.data % 64 == 0
    # one buffer starting on a huge page, arrays not overlapping
    assert idx.ctypes.data % _alloc.HUGE_PAGE == 0
    assert _span(idx)[1] <= _span(val)[0]
    idx[:] = 7
    val[:] = 2.5
    assert (idx == 7).all() and (val == 2.5).all()


def test_huge_pages_are_advised():
    """The mapping carries the kernel's ``hg`` (MADV_HUGEPAGE) flag in /proc/self/smaps."""
    if not sys.platform.startswith("linux"):
        pytest.skip("smaps is Linux-only")
    arr = _alloc.empty(3 * BIG // 8, np.float64)
    addr = arr.ctypes.data
    flags = None
    with open("/proc/self/smaps") as fh:
        inside = False
        for line in fh:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= addr < hi
            elif inside and head == "VmFlags:":
                flags = line.split()[1:]
                break
    assert flags is not None and "hg" in flags


def test_freed_buffer_is_reused_and_live_one_never():
    n = BIG // 4
    first = _alloc.empty(n, np.float32)
    addr = first.ctypes.data
    view = first[5:9]                 # a view keeps the whole buffer in use
    del first
    gc.collect()
    second = _alloc.empty(n, np.float32)
    assert not np.shares_memory(second, view)
    assert second.ctypes.data != addr
    del view
    assert _alloc.cached_bytes() >= n * 4
    third = _alloc.empty(n, np.float32)
    assert third.ctypes.data == addr   # the freed buffer, reused
    assert _alloc.cached_bytes() == 0
    del second, third


def test_reuse_only_within_a_factor_of_two():
    n = BIG // 4
    arr = _alloc.empty(4 * n, np.float32)
    addr = arr.ctypes.data
    del arr
    small = _alloc.empty(n, np.float32)        # a quarter of the cached buffer: new
    assert small.ctypes.data != addr
    half = _alloc.empty(2 * n, np.float32)     # half of it: reused
    assert half.ctypes.data == addr


def test_cache_bounds(monkeypatch):
    n = BIG // 4
    monkeypatch.setattr(_alloc, "CACHE_MAX_BUFFER", 4 * BIG)
    big = _alloc.empty(3 * n, np.float32)       # 3 MiB: cached when freed
    too_big = _alloc.empty(5 * n, np.float32)   # 5 MiB > CACHE_MAX_BUFFER: unmapped
    del big, too_big
    assert _alloc.cached_bytes() == 3 * n * 4
    monkeypatch.setattr(_alloc, "CACHE_MAX_BYTES", 4 * BIG)
    arrays = [_alloc.empty(3 * n, np.float32) for _ in range(3)]
    del arrays                                  # each free trims the cache to its cap
    assert 3 * BIG <= _alloc.cached_bytes() <= 4 * BIG
    _alloc.release_cached()
    assert _alloc.cached_bytes() == 0


def test_empty_shapes():
    y = _alloc.empty((BIG // 64, 16), np.float32)
    assert y.shape == (BIG // 64, 16) and y.flags.c_contiguous
    assert _alloc.empty(0, np.float32).shape == (0,)
    assert _alloc.empty((3, 0), np.float64).shape == (3, 0)


def test_concurrent_requests_never_share_a_live_buffer():
    """Threads allocating, filling, checking and freeing at once (the weakref
    callbacks then run in every thread, some while another holds the lock):
    no buffer is ever handed out while an array still uses it."""
    import threading

    n = BIG // 4
    errors = []

    def work(tag):
        rng = np.random.default_rng(tag)
        kept = []  # live arrays with the value they must still hold
        try:
            for step in range(60):
                value = tag * 1000 + step
                a, b = _alloc.empty_arrays((int(rng.integers(n, 3 * n)), np.int32),
                                           (int(rng.integers(1, n)), np.float32))
                a[:] = value
                b[:] = value
                kept.append((value, a, b))
                if any(not ((x == v).all() and (y == v).all()) for v, x, y in kept):
                    errors.append((tag, step))
                if len(kept) > 3:
                    kept.pop(0)
        except Exception as exc:  # reported below: a thread's exception is otherwise lost
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _alloc.cached_bytes() <= _alloc.CACHE_MAX_BYTES
