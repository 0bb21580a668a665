"""Semiring op codes and the scalar helpers every kernel shares.

Kernels take the additive monoid and the multiplicative operator as small
integers instead of Python callables: a callable argument would make numba
compile (and cache) one specialisation per operator, whereas an integer keeps
exactly one compiled kernel per dtype signature.  The branches below are
loop-invariant, so LLVM unswitches or predicts them in the hot loops.

Pure numba, no spgnn imports (this package is installed as
``spgnn._kernels.numba``).
"""

import platform
from contextlib import contextmanager

import numba
import numpy as np
from llvmlite import ir
from llvmlite.ir.values import MDValue
from numba.core import cgutils, types
from numba.core.extending import intrinsic

__all__ = [
    "ADD_PLUS", "ADD_MIN", "ADD_MAX", "ADD_TIMES",
    "MUL_TIMES", "MUL_PLUS", "MUL_FIRST", "MUL_SECOND", "MUL_PAIR",
    "ADD_CODES", "MUL_CODES", "semiring_add", "semiring_mul", "row_partition", "clamp_parts",
    "atomic_fetch_add", "emit_prefetch", "emit_prefetch_span", "prefetch_row", "prefetch_at",
    "chunk_count", "CACHE_LINE", "PREFETCH_BYTES", "PREFETCH_DIST", "atomic_load", "spin_pause",
    "wait_for_chunks", "SPIN_PAUSES", "rolled_loop", "trailing_zeros",
]

#: SDDMM prefetches the row of ``Y`` needed ``PREFETCH_DIST`` nonzeros ahead
#: only when ``Y`` is larger than this (bytes): below it ``Y`` stays in the
#: L2/L3 caches and the extra instruction per nonzero is pure overhead
#: (measured on the former memory-accumulating SpMM: about -20 % at 4 MB,
#: +20-40 % from 16 MB up, 2-core EPYC).  SpMM, now register-accumulating,
#: always prefetches (see ``spmm.csr_spmm_plus_times``).
PREFETCH_BYTES = 8 << 20
#: Prefetch distance in nonzeros: far enough ahead to cover a DRAM miss
#: (about 100 ns) with a few tens of ns of work per nonzero, near enough that
#: the line is still in L1/L2 when used.  8 and 32 measured worse than 16
#: (re-measured for the register-accumulating SpMM: 16 is still the best
#: overall).
PREFETCH_DIST = 16

# Additive monoids.
ADD_PLUS = 0
ADD_MIN = 1
ADD_MAX = 2
ADD_TIMES = 3

# Multiplicative operators a (x) b.
MUL_TIMES = 0
MUL_PLUS = 1
MUL_FIRST = 2
MUL_SECOND = 3
MUL_PAIR = 4

#: Name -> code maps, for the Python side that converts a semiring.
ADD_CODES = {"plus": ADD_PLUS, "min": ADD_MIN, "max": ADD_MAX, "times": ADD_TIMES}
MUL_CODES = {"times": MUL_TIMES, "plus": MUL_PLUS, "first": MUL_FIRST,
             "second": MUL_SECOND, "pair": MUL_PAIR}


@numba.njit(cache=True, nogil=True)
def semiring_add(op, acc, v):
    """``acc (+) v``.

    ``min``/``max`` propagate NaN like ``np.minimum``/``np.maximum`` (the
    numpy reference uses those ufuncs), hence the ``v != v`` test instead of
    the builtin ``min``/``max``.
    """
    if op == ADD_PLUS:
        return acc + v
    if op == ADD_MIN:
        return v if (v < acc or v != v) else acc
    if op == ADD_MAX:
        return v if (v > acc or v != v) else acc
    return acc * v


@numba.njit(cache=True, nogil=True)
def semiring_mul(op, a, b, one):
    """``a (x) b``; ``one`` is 1 in the value dtype.

    ``one`` is passed in (callers take it from ``out.dtype.type(1)``) because a
    float literal would be float64 and silently promote float32 accumulators.
    """
    if op == MUL_TIMES:
        return a * b
    if op == MUL_PLUS:
        return a + b
    if op == MUL_FIRST:
        return a
    if op == MUL_SECOND:
        return b
    return one


@numba.njit(cache=True, nogil=True)
def row_partition(indptr, nparts):
    """Split rows into ``nparts`` contiguous chunks of about equal work.

    Work of a row is its nonzero count plus one (the ``+ 1`` accounts for
    per-row costs such as initialising a dense output row, and keeps long
    runs of empty rows from landing in one chunk).  Returns ``bounds``
    (int64, ``nparts + 1``): chunk ``p`` holds rows ``bounds[p]:bounds[p+1]``.

    Why: ``prange`` schedules its iteration space statically in equal
    contiguous blocks, so iterating over rows directly puts all the hub rows of
    a power-law graph on one thread.  Balanced chunks (several per thread)
    fix that at O(nparts log nrows) cost.
    """
    nrows = indptr.shape[0] - 1
    bounds = np.empty(nparts + 1, dtype=np.int64)
    bounds[0] = 0
    total = np.int64(indptr[nrows]) + nrows
    for p in range(1, nparts):
        target = (total * p) // nparts
        # first row r with indptr[r] + r >= target (binary search)
        lo = bounds[p - 1]
        hi = np.int64(nrows)
        while lo < hi:
            mid = (lo + hi) // 2
            if np.int64(indptr[mid]) + mid < target:
                lo = mid + 1
            else:
                hi = mid
        bounds[p] = lo
    bounds[nparts] = nrows
    return bounds


@numba.njit(cache=True, nogil=True)
def chunk_starts(chunk_counts):
    """Where each chunk's output starts: the exclusive prefix sum of ``chunk_counts``
    (int64).  Kernels that count per row chunk and then fill each chunk in parallel
    (band select, the masked kernels' packing) place chunk ``c`` here."""
    starts = np.empty(chunk_counts.shape[0], dtype=np.int64)
    d = 0
    for c in range(chunk_counts.shape[0]):
        starts[c] = d
        d += chunk_counts[c]
    return starts


@numba.njit(cache=True, nogil=True)
def clamp_parts(nparts, nrows):
    """``nparts`` clamped to ``[min(1, nrows), nrows]``: never an empty chunk list for rows.

    The chunk count is an argument of every row-parallel kernel rather than
    ``numba.get_num_threads()`` read inside: that call is a dynamic global
    which would stop numba from caching the compiled kernel on disk.  Callers
    pass a few chunks per thread (``4 * numba.get_num_threads()``).
    """
    if nparts > nrows:
        return nrows
    if nparts < 1 and nrows > 0:
        return 1
    return nparts


@intrinsic
def atomic_fetch_add(typingctx, arr, idx, val):
    """``old = arr[idx]; arr[idx] += val; return old`` as one atomic instruction.

    The work counter of the dynamic row scheduler (see :func:`chunk_count`).
    ``arr`` is a 1-D integer array, ``idx`` is trusted (no bounds or
    wraparound handling); memory order ``monotonic``: the counter only hands
    out chunk numbers, it publishes no data.
    """
    def codegen(context, builder, sig, args):
        aryty = sig.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = context.cast(builder, args[1], sig.args[1], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [idx], wraparound=False)
        v = context.cast(builder, args[2], sig.args[2], aryty.dtype)
        return builder.atomic_rmw("add", ptr, v, "monotonic")
    return arr.dtype(arr, idx, val), codegen


@intrinsic
def atomic_load(typingctx, arr, idx):
    """``arr[idx]`` read atomically (``monotonic``): a load the compiler may not hoist
    out of a polling loop.  ``arr`` is a 1-D integer array, ``idx`` is trusted."""
    def codegen(context, builder, sig, args):
        aryty = sig.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = context.cast(builder, args[1], sig.args[1], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [idx], wraparound=False)
        return builder.load_atomic(ptr, "monotonic", aryty.dtype.bitwidth // 8)
    return arr.dtype(arr, idx), codegen


@intrinsic
def trailing_zeros(typingctx, word):
    """The index of the lowest set bit of a ``uint64`` (64 when it is zero).

    One ``tzcnt`` on x86 with BMI1 (``llvm.cttz``): the SpGEMM bitmap walks
    a row's set bits with it.  numba exposes no bit-scan of its own.
    """
    if word != types.uint64:
        return None

    def codegen(context, builder, sig, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))
    return types.uint64(types.uint64), codegen


_X86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")


@intrinsic
def spin_pause(typingctx):
    """The CPU's spin-wait hint (``pause`` on x86; nothing elsewhere)."""
    def codegen(context, builder, sig, args):
        if _X86:
            fn = cgutils.get_or_insert_function(builder.module,
                                                ir.FunctionType(ir.VoidType(), []),
                                                "llvm.x86.sse2.pause")
            builder.call(fn, [])
        return context.get_dummy_value()
    return types.none(), codegen


#: How many spin-wait hints (``pause``: 25 ns each on the benchmark's Zen 4,
#: so ~100 us; ~40 ns on recent Intel cores) the calling thread of a parallel
#: kernel spends waiting for the other threads' last chunks before it leaves
#: them to OpenMP's barrier (see :func:`wait_for_chunks`).
SPIN_PAUSES = 4000


@numba.njit(cache=True, nogil=True, inline="always")
def wait_for_chunks(done, nchunks):
    """Spin, at most :data:`SPIN_PAUSES` times, until ``done[0] >= nchunks``; returns ``done[0]``.

    Why: a parallel region ends at OpenMP's barrier, and with passive
    waiting (``OMP_WAIT_POLICY=passive``, or once libgomp's spin count is
    used up) a thread that arrives there first *sleeps*: the calling thread,
    if it runs out of chunks first, returns only a whole wake-up (40-60 us
    on the benchmark VM, measured on an empty region) after the other
    thread's last chunk.  Worker ``0`` of the dynamic scheduler runs on the
    calling thread (OpenMP's static split gives iteration 0 to thread 0);
    spinning there until every chunk is done makes it arrive last, so it
    never sleeps, and the threads that do sleep are off the critical path.
    Measured on luxembourg SpMM f = 16 (0.37 ms): 1.06-1.10x.  Bounded, so
    that an oversubscribed machine (the thread we wait for descheduled)
    costs at most ~100 us of busy waiting.  Only timing depends on it: the
    barrier still orders every write.  It cannot deadlock whichever thread
    runs worker 0: every chunk counted as taken is being worked on by a
    thread that is not spinning.
    """
    seen = atomic_load(done, 0)
    k = 0
    while seen < nchunks and k < SPIN_PAUSES:
        spin_pause()
        seen = atomic_load(done, 0)
        k += 1
    return seen


def emit_prefetch(builder, ptr):
    """Emit ``llvm.prefetch`` (read, keep in all cache levels) of the address ``ptr``."""
    i32 = ir.IntType(32)
    vp = ir.PointerType(ir.IntType(8))
    fnty = ir.FunctionType(ir.VoidType(), [vp, i32, i32, i32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
    builder.call(fn, [builder.bitcast(ptr, vp), i32(0), i32(3), i32(1)])


@contextmanager
def rolled_loop(builder, start, stop):
    """Emit ``for i in range(start, stop)`` (LLVM integers of one type) that LLVM may not unroll.

    Yields ``i`` with the builder inside the loop body; on exit the builder
    is after the loop.  Why: LLVM unrolls a loop with a run-time trip count
    by 8 behind a remainder loop, which is right for long loops and wrong for
    SpMM's loop over one row's nonzeros: a road network's rows have 2.1 on
    average, so every row paid the trip-count arithmetic and the entry tests
    of both loops to run two remainder iterations.  Marking the loop
    ``llvm.loop.unroll.disable`` (kernels/README.md, "rolled nonzero loops")
    measured 1.05-1.3x at f = 16 and neutral at f = 256.
    """
    bb_cond = builder.append_basic_block("rolled.cond")
    bb_body = builder.append_basic_block("rolled.body")
    bb_end = builder.append_basic_block("rolled.end")
    bb_start = builder.basic_block
    builder.branch(bb_cond)
    with builder.goto_block(bb_cond):
        index = builder.phi(start.type)
        builder.cbranch(builder.icmp_signed("<", index, stop), bb_body, bb_end)
    with builder.goto_block(bb_body):
        yield index
        following = builder.add(index, ir.Constant(start.type, 1))
        latch = builder.basic_block
        back_edge = builder.branch(bb_cond)
        back_edge.set_metadata("llvm.loop", _loop_id(builder.module, "llvm.loop.unroll.disable"))
    index.add_incoming(start, bb_start)
    index.add_incoming(following, latch)
    builder.position_at_end(bb_end)


def _loop_id(module, *hints):
    """A new ``!llvm.loop`` node: ``!{self, !{!"hint"}, ...}``.

    LLVM identifies a loop's metadata by a node whose first operand is the
    node itself; llvmlite's ``add_metadata`` cannot build a cycle (and would
    share equal nodes), so the node is made directly, named as
    ``add_metadata`` names its nodes, and pointed at itself.
    """
    hint_nodes = [module.add_metadata([ir.MetaDataString(module, h)]) for h in hints]
    node = MDValue(module, [], name=str(len(module.metadata)))
    node.operands = (node, *hint_nodes)
    return node


#: Bytes per cache line (x86-64, and the line a prefetch brings in).
CACHE_LINE = 64


def emit_prefetch_span(builder, ptr, nbytes):
    """Prefetch every cache line that ``[ptr, ptr + nbytes)`` touches (``nbytes``: a Python int).

    A prefetch brings in one line; a column block of a gathered row of
    SpMM's ``x`` spans several (256 bytes at 64 float32).  Leaving all but
    the first line to the hardware prefetcher measured 5-19 % slower at
    f = 64 and 256 (luxembourg, slashdot, rmat:18); a row found at a random
    address is not a stream the hardware has seen.  ``ptr`` need not be
    line-aligned (rows of ``x`` are only element-aligned), hence the extra
    prefetch of the last byte.  The lines are emitted unrolled.
    """
    i8p = ir.PointerType(ir.IntType(8))
    first = builder.bitcast(ptr, i8p)
    offsets = list(range(0, nbytes, CACHE_LINE))
    if nbytes > CACHE_LINE:
        offsets.append(nbytes - 1)
    for off in offsets:
        emit_prefetch(builder, builder.gep(first, [ir.Constant(ir.IntType(64), off)]))


def _prefetch_codegen(context, builder, sig, args):
    """``llvm.prefetch`` (read, keep in all cache levels) of ``arr[i, 0, ...]``."""
    aryty = sig.args[0]
    ary = context.make_array(aryty)(context, builder, args[0])
    zero = context.get_constant(types.intp, 0)
    i = context.cast(builder, args[1], sig.args[1], types.intp)
    idx = [i] + [zero] * (aryty.ndim - 1)
    emit_prefetch(builder, cgutils.get_item_pointer(context, builder, aryty, ary, idx,
                                                    wraparound=False))
    return context.get_dummy_value()


@intrinsic
def prefetch_row(typingctx, arr, row):
    """Software prefetch (``llvm.prefetch``, read, keep in all cache levels) of
    the first cache line of row ``row`` of a C-contiguous 2-D array.

    SDDMM gathers one row of ``Y`` per nonzero at a random address: the
    hardware prefetcher cannot guess it, but the kernel knows it
    ``PREFETCH_DIST`` nonzeros ahead (``indices[e + dist]``).  Only the first
    line: prefetching every line of a 256-byte row (as SpMM's register
    blocks do, :func:`emit_prefetch_span`) measured 1.16-1.4x faster on
    luxembourg but 1.2x slower on rmat:18 at d = 64.  A prefetch never
    faults, but ``row`` must still be in range so that the address
    computation stays inside the array.
    """
    return types.none(arr, row), _prefetch_codegen


@intrinsic
def prefetch_at(typingctx, arr, idx):
    """Software prefetch (read, all cache levels) of ``arr[idx]`` of a 1-D array.

    For gathers of whole CSR rows at random addresses (the selection
    SpGEMM's copy of rows of ``B``): the kernel knows the rows a few
    iterations ahead, the hardware prefetcher does not.  ``idx`` must be in
    range (the address computation must stay inside the array).
    """
    return types.none(arr, idx), _prefetch_codegen


@numba.njit(cache=True, nogil=True)
def chunk_count(nparts, nrows):
    """Number of row chunks for the dynamic scheduler: ``4 * nparts`` clamped to ``[.., nrows]``.

    Row-parallel kernels ``prange`` over ``nparts`` *workers* (a few per
    thread, as before) and each worker pulls chunk numbers from one shared
    atomic counter until none is left (OpenMP's ``schedule(dynamic)``, built
    from :func:`atomic_fetch_add`).  The workers that ``prange`` puts on one
    thread run one after the other, so the first takes chunks until they run
    out and the others find nothing: the thread count never has to be known
    inside the kernel (reading it would disable the on-disk cache).  Why
    dynamic: chunks are balanced by ``nnz + rows`` but not by cache misses
    (hub rows hit, tail rows miss), and on a shared machine a thread that is
    descheduled for a while simply takes fewer chunks instead of making the
    other one wait at the end.  Each finished chunk is counted in a second
    counter, and worker 0 (the calling thread) ends with
    :func:`wait_for_chunks` on it, so that it never sleeps at the region's
    barrier.
    """
    return clamp_parts(4 * nparts, nrows)
