"""Run the host-built CUDA kernels inside a sanitizer: ``python sanitized_run.py VARIANT [PLANT]``.

Started by ``test_sanitizers.py`` in its own process with the sanitizer
runtime in ``LD_PRELOAD`` (numba, OpenMP and MPI are never loaded here:
numpy/scipy references only).  ``VARIANT`` is ``tsan`` or ``asan``;
``PLANT`` names a planted bug (``PLANTS``) to prove the sanitizer catches it.
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
    # the codec's decode writes one row past its group (past the output for the last group)
    "quant_off_by_one": ("quant.cu", ("const unsigned b = codes[t];\n        for (long long k = 0; k < nr; ++k)",
                                      "const unsigned b = codes[t];\n        for (long long k = 0; k <= nr; ++k)")),
}


def codec_ok(be, vdt):
    """The message codec round trip within its error bounds (nearest S/2, stochastic < S)."""
    x = build_dense((11, 21), 4, dtype=vdt)
    segs, ok = [3, 0, 8], True
    S = (x.max(1).astype(np.float64) - x.min(1)) / 3
    for rounding, bound in (("nearest", S / 2 * (1 + 1e-4)), ("stochastic", S * (1 + 1e-5))):
        codes, params = be.quantize_rows(x, segs, 2, rounding, "fp32", np.uint64(3),
                                         np.arange(11))
        y = be.dequantize_rows(codes, params, segs, 2, 21, vdt)
        ok &= bool(np.all(np.abs(y - x) <= bound[:, None] + 1e-6))
    return ok


def main(variant, plant=None):
    src, change = PLANTS[plant] if plant else (None, None)

    def module(source):
        return HostModule(source, variant, change if source == src else None)

    be = CupyBackend(xp=np, sparse=scipy.sparse, module=module, warps=2, ew_block=64,
                     ew_max_blocks=2)
    ok = True
    for idt, vdt in ((np.int32, np.float32), (np.int64, np.float64)):
        tol = 1e-4 if vdt == np.float32 else 1e-12
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
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
