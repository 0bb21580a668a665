"""Explicit LLVM vector code for the SpMM row loop (numba intrinsics).

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

Pure numba/llvmlite, no spgnn imports.
"""

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic

from ._ops import emit_prefetch

__all__ = ["rows_block_64", "rows_block_32", "rows_block_16", "rows_block_8",
           "rows_block_4", "rows_block_2", "rows_block_1"]


def _make_rows_block(width):
    """The intrinsic ``rows_block_<width>`` (documented by :func:`_rows_block_doc`)."""

    def codegen(context, builder, sig, args):
        ptr_t, ind_t, dat_t, x_t, out_t = sig.args[:5]
        ptr, ind, dat, xa, oa = [context.make_array(t)(context, builder, v)
                                 for t, v in zip(sig.args[:5], args[:5])]
        r0, r1, col0, pf_end, dist = [context.cast(builder, v, t, types.intp)
                                      for v, t in zip(args[5:], sig.args[5:])]
        vec_t = ir.VectorType(context.get_value_type(out_t.dtype), width)
        align = out_t.dtype.bitwidth // 8      # rows of x are only element-aligned
        i32 = ir.IntType(32)
        splat_mask = ir.Constant(ir.VectorType(i32, width), [0] * width)
        undef = ir.Constant(vec_t, ir.Undefined)
        one = ir.Constant(r0.type, 1)
        # an entry-block alloca: LLVM's mem2reg turns it into a register (phi)
        acc = cgutils.alloca_once(builder, vec_t)

        def load(aty, ary, idx):
            return builder.load(cgutils.get_item_pointer(context, builder, aty, ary, idx,
                                                         wraparound=False))

        def as_intp(v, aty):
            return context.cast(builder, v, aty.dtype, types.intp)

        def x_block(e):
            c = as_intp(load(ind_t, ind, [e]), ind_t)
            return cgutils.get_item_pointer(context, builder, x_t, xa, [c, col0], wraparound=False)

        def add_term(e):
            v = builder.load(builder.bitcast(x_block(e), vec_t.as_pointer()), align=align)
            a = builder.insert_element(undef, load(dat_t, dat, [e]), i32(0))
            a_vec = builder.shuffle_vector(a, undef, splat_mask)
            builder.store(builder.fadd(builder.load(acc), builder.fmul(a_vec, v)), acc)

        with cgutils.for_range_slice(builder, r0, r1, one, inc=True) as (i, _):
            lo = as_intp(load(ptr_t, ptr, [i]), ptr_t)
            hi = as_intp(load(ptr_t, ptr, [builder.add(i, one)]), ptr_t)
            # mid = clamp(pf_end, lo, hi): nonzeros below it prefetch
            mid = builder.select(builder.icmp_signed("<", hi, pf_end), hi, pf_end)
            mid = builder.select(builder.icmp_signed(">", mid, lo), mid, lo)
            builder.store(ir.Constant(vec_t, None), acc)
            with cgutils.for_range_slice(builder, lo, mid, one, inc=True) as (e, _):
                emit_prefetch(builder, x_block(builder.add(e, dist)))
                add_term(e)
            with cgutils.for_range_slice(builder, mid, hi, one, inc=True) as (e, _):
                add_term(e)
            out_ptr = cgutils.get_item_pointer(context, builder, out_t, oa, [i, col0],
                                               wraparound=False)
            builder.store(builder.load(acc), builder.bitcast(out_ptr, vec_t.as_pointer()),
                          align=align)
        return context.get_dummy_value()

    def rows_block(typingctx, indptr, indices, data, x, out, r0, r1, col0, pf_end, dist):
        return types.none(indptr, indices, data, x, out, r0, r1, col0, pf_end, dist), codegen

    rows_block.__name__ = f"rows_block_{width}"
    rows_block.__doc__ = _rows_block_doc(width)
    return intrinsic(rows_block)


def _rows_block_doc(width):
    return f"""``out[i, col0:col0+{width}] = sum_e data[e] * x[indices[e], col0:col0+{width}]``
    for every row ``i`` in ``[r0, r1)``, over the row's nonzeros ``e``,
    accumulated in registers and stored once per row.

    Nonzeros ``e < pf_end`` first prefetch the block of row
    ``indices[e + dist]`` of ``x`` (pass ``pf_end = nnz - dist``, so that
    ``e + dist`` stays in range).  ``x`` and ``out`` must be C-contiguous
    with at least ``col0 + {width}`` columns, and ``data``, ``x`` and ``out``
    share one float dtype; nothing is checked (trusted kernel arguments,
    like every kernel here).
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
