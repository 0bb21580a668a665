"""Run the host-built CUDA kernels inside a sanitizer: ``python sanitized_run.py VARIANT [PLANT] [PART]``.

Started by ``test_sanitizers.py`` in its own process with the sanitizer
runtime in ``LD_PRELOAD`` (numba, OpenMP and MPI are never loaded here:
numpy/scipy references only).  ``VARIANT`` is ``tsan`` or ``asan``;
``PLANT`` names a planted bug (``PLANTS``) to prove the sanitizer catches it
(``-`` for none); ``PART`` (``PARTS``) limits the run to one group of kernels.
Exit 0: every result correct and no report; 1: a wrong result; the
sanitizer's own exit code (66 TSan, 67 ASan) on a report.
"""

import sys

import numpy as np
import scipy.sparse

from spgnn.backends._cuda_host import HostModule
from spgnn.backends.cupy_backend import CupyBackend
from spgnn.testing.strategies import build_csr, build_dense

#: name -> (source, (old text, new text)): bugs the sanitizers must catch.
PLANTS = {
    # the second __syncwarp: lanes overwrite the chunk buffer while others read it
    "no_syncwarp": ("spmm.cu", ("__syncwarp();  // every lane is done",
                                "/* removed */;  // every lane is done")),
    # off-by-one: reads one entry past the row's end (past the array for the last row)
    "off_by_one": ("sddmm.cu", ("e < (long long)indptr[row + 1]", "e <= (long long)indptr[row + 1]")),
    # SpGEMM's numeric pass: lanes overwrite the chunk's slots while the leaders read them
    "spgemm_no_syncwarp": ("spgemm.cu", ("__syncwarp();  // every lane is done",
                                         "/* removed */;  // every lane is done")),
    # the codec's decode (feature axis, the default) writes one row past its group (past the
    # output for the last, short group)
    "quant_off_by_one": ("quant.cu", ("if (k >= nr) break;\n                const long long i = r0 + k;",
                                      "if (k > nr) break;\n                const long long i = r0 + k;")),
}


def codec_ok(be, vdt):
    """The message codec round trip within its error bounds (nearest S/2, stochastic < S).

    The last segment ends in a short group whose codes end mid-byte (7 rows of 21 at int2).
    """
    x = build_dense((10, 21), 4, dtype=vdt)
    segs, ok = [3, 0, 7], True
    S = (x.max(1).astype(np.float64) - x.min(1)) / 3
    for rounding, bound in (("nearest", S / 2 * (1 + 1e-4)), ("stochastic", S * (1 + 1e-5))):
        for axis in ("feature", "node"):
            codes, params = be.quantize_rows(x, segs, 2, rounding, "fp32", np.uint64(3),
                                             np.arange(10), axis)
            y = be.dequantize_rows(codes, params, segs, 2, 21, vdt, axis)
            ok &= bool(np.all(np.abs(y - x) <= bound[:, None] + 1e-6))
    return ok


def check_ported(be, idt, vdt, tol):
    """SpGEMM, transpose, column extraction, sampling, de-duplication, row sorting vs scipy/numpy
    (no numba in a sanitised process: sampling is checked for its defining properties)."""
    ok = True
    a, s = build_csr((9, 70), 0.5, 4, index_dtype=idt, value_dtype=vdt, duplicates=True,
                     unsorted=True)
    b, t = build_csr((70, 40), 0.3, 5, index_dtype=idt, value_dtype=vdt, duplicates=True)
    c = be.spgemm(a, b, "plus_times")
    ok &= np.allclose(scipy.sparse.csr_array((c.data, c.indices, c.indptr), shape=c.shape)
                      .toarray(), (s @ t).toarray(), rtol=tol, atol=tol)
    ok &= all(np.all(np.diff(c.indices[c.indptr[i]:c.indptr[i + 1]]) > 0) for i in range(9))
    at = be.transpose(a)
    ok &= np.array_equal(scipy.sparse.csr_array((at.data, at.indices, at.indptr), shape=at.shape)
                         .toarray(), s.toarray().T)
    cols = [69, 0, 69, 3]
    e = be.extract_cols(a, cols)
    ok &= np.array_equal(scipy.sparse.csr_array((e.data, e.indices, e.indptr), shape=e.shape)
                         .toarray(), s.toarray()[:, cols])
    w = np.abs(np.asarray(a.data, dtype=np.float64))
    rows = np.array([0, 8, 0, 4], dtype=np.int64)
    keys = np.arange(4, dtype=np.uint64) * np.uint64(977)
    for method, weighted in (("floyd", False), ("es", True), ("its", True)):
        ptr, pos = be.sample_rows(a.indptr, a.indices, w, rows, keys, 5, method, weighted)
        for r, i in enumerate(rows):
            got = pos[ptr[r]:ptr[r + 1]]
            lo, hi = a.indptr[i], a.indptr[i + 1]
            ok &= got.size == min(5, int(np.count_nonzero(w[lo:hi] > 0)) if weighted else hi - lo)
            ok &= bool(np.all(np.diff(got) > 0)) and bool(np.all((got >= lo) & (got < hi)))
    a_ptr, b_ptr = np.array([0, 4, 4, 9]), np.array([0, 6, 7, 7])
    xa, xb = np.arange(9) % 5, (np.arange(7) * 3) % 7
    col_a, col_b, src, col_ptr = be.first_appearance(xa, a_ptr, xb, b_ptr, 7)
    for i in range(3):
        items = np.concatenate([xa[a_ptr[i]:a_ptr[i + 1]], xb[b_ptr[i]:b_ptr[i + 1]]])
        _, first = np.unique(items, return_index=True)
        ok &= np.array_equal(src[col_ptr[i]:col_ptr[i + 1]], items[np.sort(first)])
        ok &= np.array_equal(src[np.concatenate([col_a[a_ptr[i]:a_ptr[i + 1]],
                                                 col_b[b_ptr[i]:b_ptr[i + 1]]])], items)
    ip = np.array([0, 3, 3, 7], dtype=np.int64)
    ci = np.array([5, 1, 3, 9, 0, 4, 2], dtype=idt)
    cd = np.arange(7, dtype=vdt)
    be.sort_rows_by_column(ip, ci, cd)
    ok &= np.array_equal(ci, [1, 3, 5, 0, 2, 4, 9]) and np.array_equal(cd, [1, 2, 0, 4, 6, 5, 3])
    return ok


def check_original(be, idt, vdt, tol):
    """SpMM, SDDMM, row extraction, ReLU, dropout and the codec vs numpy/scipy."""
    ok = True
    a, s = build_csr((7, 90), 0.6, 1, index_dtype=idt, value_dtype=vdt, duplicates=True)
    x = build_dense((90, 40), 2, dtype=vdt)
    ok &= np.allclose(be.spmm(a, x, "plus_times"), s @ x, rtol=tol, atol=tol)
    xr = build_dense((7, 40), 3, dtype=vdt)
    got = be.sddmm(a, xr, x, "plus_times").data
    dense = (xr @ x.T)
    rows = np.repeat(np.arange(7), np.diff(a.indptr))
    ok &= np.allclose(got, a.data * dense[rows, a.indices], rtol=tol, atol=tol)
    e = be.extract_rows(a, [6, 0, 6, 3])
    ok &= np.array_equal(scipy.sparse.csr_array((e.data, e.indices, e.indptr), shape=e.shape)
                         .toarray(), s[[6, 0, 6, 3]].toarray())
    out, mask = be.relu(x)
    ok &= np.array_equal(out, np.where(x > 0, x, 0)) and np.array_equal(mask, x > 0)
    ok &= np.array_equal(be.relu_backward(x, mask), np.where(mask, x, 0))
    d = be.dropout(x, 0.5, np.uint64(5), np.arange(90), 0, 40)
    kept = d != 0
    ok &= np.allclose(d[kept], x[kept] * 2) and 0 < kept.mean() < 1
    dc = be.dropout_csr(a.indptr, a.indices, a.data, 0.5, np.uint64(5), np.arange(7), 0, 90)
    ok &= dc.shape == a.data.shape
    ok &= codec_ok(be, vdt)
    return ok


#: ``PART`` -> its checks; a planted bug runs the part holding its kernel.
PARTS = {"original": check_original, "ported": check_ported}
_PLANT_PART = {"no_syncwarp": "original", "off_by_one": "original",
               "spgemm_no_syncwarp": "ported", "quant_off_by_one": "original"}


def main(variant, plant=None, part=None):
    src, change = PLANTS[plant] if plant else (None, None)

    def module(source):
        return HostModule(source, variant, change if source == src else None)

    be = CupyBackend(xp=np, sparse=scipy.sparse, module=module, warps=2, ew_block=64,
                     ew_max_blocks=2)
    parts = [part or _PLANT_PART[plant]] if (part or plant) else list(PARTS)
    ok = True
    for idt, vdt in ((np.int32, np.float32), (np.int64, np.float64)):
        tol = 1e-4 if vdt == np.float32 else 1e-12
        for name in parts:
            ok &= PARTS[name](be, idt, vdt, tol)
    return 0 if ok else 1


if __name__ == "__main__":
    # python sanitized_run.py VARIANT [PLANT or "-"] [PART]
    args = sys.argv[1:] + [None, None]
    sys.exit(main(args[0], None if args[1] in (None, "-") else args[1], args[2]))
