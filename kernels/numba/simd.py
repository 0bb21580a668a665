"""Explicit LLVM vector code (numba intrinsics): the SpMM row loops and the CSR row copy.

``out[i, j0:j0+W] = sum_e data[e] * x[indices[e], j0:j0+W]`` for a range of
rows ``i``, with each row's sum held in one ``<W x float>`` LLVM vector value
-- that is, in registers -- and stored once.

Why an intrinsic: written in numba, the accumulator is either the output row
itself (``out[i, j] += a * x[c, j]``: every nonzero loads and stores the
row, and the next nonzero waits on that store through store-to-load
forwarding) or a local array/scalars that numba cannot hand to LLVM as
non-aliasing, so LLVM leaves them in memory or scalar (measured 2-4x slower,
kernels/README.md).  Emitting the vector type directly gives LLVM nothing to
prove: one unaligned vector load of the row of ``x``, a multiply by the
broadcast value and an add into the register accumulator per nonzero.

The arithmetic is exactly the scalar kernel's: each lane starts from ``+0``
and adds the products in storage order, with separate ``fmul`` and ``fadd``
(no contraction to FMA), so results are bit-identical to scipy's
``csr_matvecs`` and to the previous memory-accumulating kernel.

The same code, with the monoid's identity as the start and its combine
(``fadd``, or a NaN-propagating min/max ``select``) and the semiring's
multiply, gives ``rows_semiring`` for the other registered semirings, which
also walks each row's column blocks (64, 16, 4, 1).

``copy_row_times`` copies one CSR row (indices, and values times a scalar)
and checks its order with AVX-512-style *masked* vector loads and stores, 16
entries per step: the selection product ``Q @ A`` copies rows of a dozen
entries, for which a compiled scalar loop spends most of its time in loop
control and LLVM's own vectoriser never enters its vector body.

Pure numba/llvmlite, no spgnn imports.  The intrinsic names (``.p0``) assume
LLVM's opaque pointers (llvmlite >= 0.45, numba >= 0.62).
"""

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic

from ._ops import (ADD_MAX, ADD_MIN, ADD_PLUS, MUL_FIRST, MUL_PAIR, MUL_PLUS, MUL_SECOND,
                   MUL_TIMES, emit_prefetch_span, rolled_loop)

__all__ = ["rows_block_64", "rows_block_32", "rows_block_16", "rows_block_8",
           "rows_block_4", "rows_block_2", "rows_block_1", "SEMIRING_WIDTHS", "REGISTER_SEMIRINGS",
           "rows_semiring", "copy_row_times", "COPY_LANES", "STREAM_ALIGN", "store_fence"]


class _RowBlocks:
    """Code generation shared by the SpMM intrinsics: row bounds and one column block.

    ``args`` are the intrinsic's ``(indptr, indices, data, x, out, ...)``;
    ``block`` emits, for one row, ``out[i, col0:col0+W] = (+)_e data[e] (x)
    x[indices[e], col0:col0+W]`` with the accumulator in one ``<W x float>``
    value, starting from the monoid's identity and combining terms in
    storage order exactly as the scalar ``_ops.semiring_add``/``semiring_mul``
    do, then one store.
    """

    def __init__(self, context, builder, sig, args):
        self.context, self.builder = context, builder
        self.types = sig.args[:5]
        self.arrays = [context.make_array(t)(context, builder, v)
                       for t, v in zip(sig.args[:5], args[:5])]
        self.dtype = self.types[4].dtype
        self.elem = context.get_value_type(self.dtype)
        self.align = self.dtype.bitwidth // 8      # rows of x are only element-aligned
        self.one = ir.Constant(context.get_value_type(types.intp), 1)
        self.acc = {}

    def intp(self, v, t):
        return self.context.cast(self.builder, v, t, types.intp)

    def _load(self, k, idx):
        return self.builder.load(cgutils.get_item_pointer(
            self.context, self.builder, self.types[k], self.arrays[k], idx, wraparound=False))

    def row_bounds(self, i, pf_end):
        """``lo, mid, hi`` of row ``i``; nonzeros below ``mid = clamp(pf_end, lo, hi)`` prefetch."""
        b, ptr_t = self.builder, self.types[0]
        lo = self.intp(self._load(0, [i]), ptr_t.dtype)
        hi = self.intp(self._load(0, [b.add(i, self.one)]), ptr_t.dtype)
        mid = b.select(b.icmp_signed("<", hi, pf_end), hi, pf_end)
        mid = b.select(b.icmp_signed(">", mid, lo), mid, lo)
        return lo, mid, hi

    def _x_block(self, e, col0):
        c = self.intp(self._load(1, [e]), self.types[1].dtype)
        return cgutils.get_item_pointer(self.context, self.builder, self.types[3], self.arrays[3],
                                        [c, col0], wraparound=False)

    def block(self, i, lo, mid, hi, col0, dist, width, add, mul, stream=None):
        b = self.builder
        vec_t = ir.VectorType(self.elem, width)
        if width not in self.acc:
            # an entry-block alloca: LLVM's mem2reg turns it into a register (phi)
            self.acc[width] = cgutils.alloca_once(b, vec_t)
        acc = self.acc[width]
        i32 = ir.IntType(32)
        undef = ir.Constant(vec_t, ir.Undefined)

        def splat(v):
            return b.shuffle_vector(b.insert_element(undef, v, i32(0)), undef,
                                    ir.Constant(ir.VectorType(i32, width), [0] * width))

        def term(e):
            v = b.load(b.bitcast(self._x_block(e, col0), vec_t.as_pointer()), align=self.align)
            a_vec = splat(self._load(2, [e]))
            if mul == MUL_TIMES:
                t = b.fmul(a_vec, v)
            elif mul == MUL_PLUS:
                t = b.fadd(a_vec, v)
            elif mul == MUL_FIRST:
                t = a_vec
            elif mul == MUL_SECOND:
                t = v
            else:                                   # MUL_PAIR
                t = ir.Constant(vec_t, [1.0] * width)
            old = b.load(acc)
            if add == ADD_PLUS:
                new = b.fadd(old, t)
            else:
                # min/max keep the incoming NaN like _ops.semiring_add / np.minimum
                better = b.fcmp_ordered("<" if add == ADD_MIN else ">", t, old)
                new = b.select(b.or_(better, b.fcmp_unordered("uno", t, t)), t, old)
            b.store(new, acc)

        b.store(ir.Constant(vec_t, [_IDENTITY[add]] * width), acc)
        # a row's nonzeros: few on most graphs, so the loops stay rolled (_ops.rolled_loop)
        with rolled_loop(b, lo, mid) as e:
            emit_prefetch_span(b, self._x_block(b.add(e, dist), col0), width * self.align)
            term(e)
        with rolled_loop(b, mid, hi) as e:
            term(e)
        out_ptr = b.bitcast(cgutils.get_item_pointer(self.context, b, self.types[4],
                                                     self.arrays[4], [i, col0], wraparound=False),
                            vec_t.as_pointer())
        value = b.load(acc)
        if stream is None or width * self.align < STREAM_ALIGN:
            b.store(value, out_ptr, align=self.align)
            return
        with b.if_else(stream) as (streamed, cached):
            with streamed:
                # the caller guarantees the 64-byte alignment (MOVNTPS faults without it)
                st = b.store(value, out_ptr, align=STREAM_ALIGN)
                st.set_metadata("nontemporal",
                                b.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))
            with cached:
                b.store(value, out_ptr, align=self.align)


#: Blocks of at least this many bytes may be stored non-temporally (see
#: ``rows_block_<W>``'s ``stream``): one AVX-512 register, the alignment a
#: non-temporal vector store requires.
STREAM_ALIGN = 64


@intrinsic
def store_fence(typingctx):
    """A full memory fence (``mfence`` on x86) after a worker's non-temporal stores.

    Non-temporal stores are weakly ordered (they drain from write-combining
    buffers), unlike ordinary stores; a worker that streamed its rows
    fences before the parallel region's barrier, so that the thread that
    reads the output afterwards sees every row.
    """
    def codegen(context, builder, sig, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()
    return types.none(), codegen

#: Accumulator start per monoid (``Monoid.identity``): an empty row stores it.
_IDENTITY = {ADD_PLUS: 0.0, ADD_MIN: float("inf"), ADD_MAX: float("-inf")}


def _make_rows_block(width):
    """The intrinsic ``rows_block_<width>`` (documented by :func:`_rows_block_doc`)."""

    def codegen(context, builder, sig, args):
        g = _RowBlocks(context, builder, sig, args)
        r0, r1, col0, pf_end, dist = [g.intp(v, t) for v, t in zip(args[5:10], sig.args[5:10])]
        stream = context.cast(builder, args[10], sig.args[10], types.boolean)
        with cgutils.for_range_slice(builder, r0, r1, g.one, inc=True) as (i, _):
            lo, mid, hi = g.row_bounds(i, pf_end)
            g.block(i, lo, mid, hi, col0, dist, width, ADD_PLUS, MUL_TIMES, stream)
        return context.get_dummy_value()

    def rows_block(typingctx, indptr, indices, data, x, out, r0, r1, col0, pf_end, dist, stream):
        sig = types.none(indptr, indices, data, x, out, r0, r1, col0, pf_end, dist, stream)
        return sig, codegen

    rows_block.__name__ = f"rows_block_{width}"
    rows_block.__doc__ = _rows_block_doc(width)
    return intrinsic(rows_block)


def _rows_block_doc(width):
    return f"""``out[i, col0:col0+{width}] = sum_e data[e] * x[indices[e], col0:col0+{width}]``
    for every row ``i`` in ``[r0, r1)``, over the row's nonzeros ``e``,
    accumulated in registers and stored once per row.

    Nonzeros ``e < pf_end`` first prefetch the block of row
    ``indices[e + dist]`` of ``x`` (pass ``pf_end = nnz - dist``, so that
    ``e + dist`` stays in range).  ``stream`` (bool): store blocks of at
    least :data:`STREAM_ALIGN` bytes non-temporally (no read of the output
    lines before writing them; they bypass the caches); every such block of
    ``out`` must then be 64-byte aligned.  ``x`` and ``out`` must be
    C-contiguous with at least ``col0 + {width}`` columns, and ``data``,
    ``x`` and ``out`` share one float dtype; nothing is checked (trusted
    kernel arguments, like every kernel here).
    """


# Widest first; 64 float32 are four AVX-512 registers (a 128-wide block
# measured no faster at f = 256).
rows_block_64 = _make_rows_block(64)
rows_block_32 = _make_rows_block(32)
rows_block_16 = _make_rows_block(16)
rows_block_8 = _make_rows_block(8)
rows_block_4 = _make_rows_block(4)
rows_block_2 = _make_rows_block(2)
rows_block_1 = _make_rows_block(1)


#: Column-block widths of the semiring SpMM intrinsics, widest first (any
#: ``n`` is covered greedily; fewer widths than plus_times's seven keep the
#: compile time of eight semirings in check).
SEMIRING_WIDTHS = (64, 16, 4, 1)


#: ``(add_op, mul_op)`` codes with a register kernel besides plus_times: the
#: registered semirings (spgnn.local.semiring) plus_second, plus_pair,
#: min/max x plus/times/second.  Other pairs run the generic scalar kernel.
REGISTER_SEMIRINGS = (
    (ADD_PLUS, MUL_SECOND), (ADD_PLUS, MUL_PAIR),
    (ADD_MIN, MUL_PLUS), (ADD_MIN, MUL_TIMES), (ADD_MIN, MUL_SECOND),
    (ADD_MAX, MUL_PLUS), (ADD_MAX, MUL_TIMES), (ADD_MAX, MUL_SECOND))


def _rows_semiring_codegen(context, builder, sig, args):
    g = _RowBlocks(context, builder, sig, args)
    add_op, mul_op, r0, r1, pf_end, dist = [g.intp(v, t) for v, t in zip(args[5:], sig.args[5:])]
    n = cgutils.unpack_tuple(builder, g.arrays[4].shape, 2)[1]
    for add, mul in REGISTER_SEMIRINGS:
        this = builder.and_(builder.icmp_signed("==", add_op, ir.Constant(add_op.type, add)),
                            builder.icmp_signed("==", mul_op, ir.Constant(mul_op.type, mul)))
        with builder.if_then(this):
            with cgutils.for_range_slice(builder, r0, r1, g.one, inc=True) as (i, _):
                lo, mid, hi = g.row_bounds(i, pf_end)
                j = ir.Constant(n.type, 0)
                for width in SEMIRING_WIDTHS:
                    w = ir.Constant(n.type, width)
                    end = builder.add(j, builder.mul(builder.sdiv(builder.sub(n, j), w), w))
                    with cgutils.for_range_slice(builder, j, end, w, inc=True) as (col0, _):
                        g.block(i, lo, mid, hi, col0, dist, width, add, mul)
                    j = end
    return context.get_dummy_value()


@intrinsic
def rows_semiring(typingctx, indptr, indices, data, x, out, add_op, mul_op, r0, r1, pf_end, dist):
    """``out[i, :] = (+)_e data[e] (x) x[indices[e], :]`` for the rows ``i`` in
    ``[r0, r1)`` over the semiring ``(add_op, mul_op)``, one of
    :data:`REGISTER_SEMIRINGS` (any other pair writes nothing; callers check).

    Each row in register column blocks of :data:`SEMIRING_WIDTHS` (widest
    first, all blocks of a row before the next row), each started from the
    monoid's identity (so an empty row holds it) and stored once; terms in
    storage order, bit-identical to the scalar ``_ops`` loops.  The pair is
    tested once per call: each semiring's loops are emitted separately.
    ``pf_end``, ``dist``: as for ``rows_block_<W>``.
    """
    sig = types.none(indptr, indices, data, x, out, add_op, mul_op, r0, r1, pf_end, dist)
    return sig, _rows_semiring_codegen


#: Entries per masked step of :func:`copy_row_times` (16 int32 = one AVX-512 register).
COPY_LANES = 16


def _vector_suffix(vec_t):
    """LLVM's overload suffix of a vector type, e.g. ``v16i32``, ``v16f32``."""
    el = vec_t.element
    name = {ir.FloatType(): "f32", ir.DoubleType(): "f64"}.get(el)
    return f"v{vec_t.count}{name or f'i{el.width}'}"


def _masked_load(builder, ptr, vec_t, align, mask):
    """``llvm.masked.load``: lanes outside ``mask`` are not read (no fault past a row's end)."""
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(vec_t, [ptr.type, i32, mask.type, vec_t])
    fn = cgutils.get_or_insert_function(builder.module, fnty,
                                        f"llvm.masked.load.{_vector_suffix(vec_t)}.p0")
    return builder.call(fn, [ptr, i32(align), mask, ir.Constant(vec_t, ir.Undefined)])


def _masked_store(builder, value, ptr, align, mask):
    """``llvm.masked.store``: lanes outside ``mask`` are not written."""
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [value.type, ptr.type, i32, mask.type])
    fn = cgutils.get_or_insert_function(builder.module, fnty,
                                        f"llvm.masked.store.{_vector_suffix(value.type)}.p0")
    builder.call(fn, [value, ptr, i32(align), mask])


def _copy_row_times_codegen(context, builder, sig, args):
    si_t, sv_t, di_t, dv_t = sig.args[:4]
    si, sv, di, dv = [context.make_array(t)(context, builder, v)
                      for t, v in zip(sig.args[:4], args[:4])]
    src, dst, r = [context.cast(builder, v, t, types.intp)
                   for v, t in zip(args[4:7], sig.args[4:7])]
    scale = context.cast(builder, args[7], sig.args[7], sv_t.dtype)
    lanes = COPY_LANES
    i32 = ir.IntType(32)
    ivec_t = ir.VectorType(context.get_data_type(si_t.dtype), lanes)
    fvec_t = ir.VectorType(context.get_data_type(sv_t.dtype), lanes)
    nvec_t = ir.VectorType(r.type, lanes)

    def splat(v, vec_t):
        one_lane = builder.insert_element(ir.Constant(vec_t, ir.Undefined), v, i32(0))
        return builder.shuffle_vector(one_lane, ir.Constant(vec_t, ir.Undefined),
                                      ir.Constant(ir.VectorType(i32, lanes), [0] * lanes))

    def at(aty, ary, idx):
        return cgutils.get_item_pointer(context, builder, aty, ary, [idx], wraparound=False)

    lane_ids = ir.Constant(nvec_t, list(range(lanes)))
    scale_vec = splat(scale, fvec_t)
    # lane t of "previous" = entry t - 1: the last lane of the previous step,
    # then lanes 0..14 of this one; -1 precedes the first entry (indices >= 0)
    prev = cgutils.alloca_once_value(builder, ir.Constant(ivec_t, [-1] * lanes))
    shift = ir.Constant(ir.VectorType(i32, lanes), [lanes - 1 + t for t in range(lanes)])
    bad = cgutils.alloca_once_value(builder, ir.Constant(ir.IntType(1), 0))
    zero_bits = ir.Constant(ir.IntType(lanes), 0)
    start = ir.Constant(r.type, 0)
    with cgutils.for_range_slice(builder, start, r, ir.Constant(r.type, lanes), inc=True) as (q, _):
        mask = builder.icmp_signed("<", lane_ids, splat(builder.sub(r, q), nvec_t))
        s, d = builder.add(src, q), builder.add(dst, q)
        idx = _masked_load(builder, at(si_t, si, s), ivec_t, si_t.dtype.bitwidth // 8, mask)
        _masked_store(builder, idx, at(di_t, di, d), di_t.dtype.bitwidth // 8, mask)
        val = _masked_load(builder, at(sv_t, sv, s), fvec_t, sv_t.dtype.bitwidth // 8, mask)
        _masked_store(builder, builder.fmul(scale_vec, val), at(dv_t, dv, d),
                      dv_t.dtype.bitwidth // 8, mask)
        before = builder.shuffle_vector(builder.load(prev), idx, shift)
        out_of_order = builder.and_(builder.icmp_signed("<=", idx, before), mask)
        any_bad = builder.icmp_unsigned("!=", builder.bitcast(out_of_order, ir.IntType(lanes)),
                                        zero_bits)
        builder.store(builder.or_(builder.load(bad), any_bad), bad)
        builder.store(idx, prev)
    return builder.zext(builder.load(bad), context.get_value_type(types.intp))


@intrinsic
def copy_row_times(typingctx, src_indices, src_data, dst_indices, dst_data, src, dst, r, scale):
    """Copy a CSR row: ``dst_indices[dst:dst+r] = src_indices[src:src+r]`` and
    ``dst_data[dst:dst+r] = scale * src_data[src:src+r]``; returns 1 if the
    copied indices are not strictly increasing (unsorted or duplicated), else 0.

    Masked vector steps of :data:`COPY_LANES` entries (the last one partial),
    so a row of any length takes ``ceil(r / 16)`` steps with no scalar tail.
    Indices must be non-negative; the two index arrays share one integer
    dtype, the two value arrays one float dtype.  Each product is one IEEE
    multiply, exactly the scalar ``scale * v``.  Nothing is checked (trusted
    kernel arguments).
    """
    sig = types.intp(src_indices, src_data, dst_indices, dst_data, src, dst, r, scale)
    return sig, _copy_row_times_codegen
