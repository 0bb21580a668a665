"""Local kernels on every available backend: hand-checked cases, edge shapes, errors.

The numpy backend is the reference the property tests compare the others
with, so it is itself proven here: against scipy for ``plus_times`` and
against brute-force Python loops (straight from the definitions in
:mod:`spgnn.backends.base`) for every semiring on tiny matrices.
"""

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.backends import available_backends, backend_status, get_backend
from spgnn.local.csr import LocalCSR
from spgnn.local.semiring import SEMIRINGS, get_semiring
from spgnn.errors import DimensionMismatch, DTypeError, InvalidSparseStructure
from spgnn.testing.strategies import build_csr, build_dense

BACKENDS = available_backends()
SEMIRING_NAMES = sorted(SEMIRINGS)
NON_MEAN = [s for s in SEMIRING_NAMES if not SEMIRINGS[s].row_mean]


@pytest.fixture(params=BACKENDS)
def be(request):
    return get_backend(request.param)


# -- brute-force definitions (Python loops over stored entries) -------------

def _reduce(semiring, terms, dtype):
    acc = dtype.type(semiring.add.identity)
    for t in terms:
        acc = semiring.add.ufunc(acc, dtype.type(t))
    return acc


def _stored(a):
    """(i, j, value) for every stored entry, in storage order (duplicates kept)."""
    for i in range(a.shape[0]):
        for e in range(int(a.indptr[i]), int(a.indptr[i + 1])):
            yield i, int(a.indices[e]), a.data[e]


def brute_spmm(a, x, semiring):
    dt = np.result_type(a.data, x)
    m, n = a.shape[0], x.shape[1]
    terms = [[[] for _ in range(n)] for _ in range(m)]
    count = np.zeros(m)
    for i, k, v in _stored(a):
        count[i] += 1
        for j in range(n):
            terms[i][j].append(semiring.mul(dt.type(v), dt.type(x[k, j])))
    y = np.array([[_reduce(semiring, terms[i][j], dt) for j in range(n)] for i in range(m)],
                 dtype=dt).reshape(m, n)
    if semiring.row_mean:
        y = y / np.maximum(count, 1).astype(dt)[:, None]
    return y


def brute_spgemm(a, b, semiring):
    """{(i, j): value} over the structural product."""
    dt = np.result_type(a.data, b.data)
    terms, count = {}, np.zeros(a.shape[0])
    for i, k, av in _stored(a):
        count[i] += 1
        for kk, j, bv in _stored(b):
            if kk == k:
                terms.setdefault((i, j), []).append(semiring.mul(dt.type(av), dt.type(bv)))
    out = {}
    for (i, j), t in terms.items():
        v = _reduce(semiring, t, dt)
        out[i, j] = v / dt.type(count[i]) if semiring.row_mean else v
    return out


def brute_sddmm(a, x, y, semiring):
    dt = np.result_type(a.data, x, y)
    return np.array([semiring.mul(dt.type(v), _reduce(
        semiring, [semiring.mul(dt.type(x[i, k]), dt.type(y[j, k])) for k in range(x.shape[1])],
        dt)) for i, j, v in _stored(a)], dtype=dt)


def _as_dict(c):
    return {(i, j): v for i, j, v in _stored(c)}


def _tiny_cases():
    """Tiny matrices with unsorted indices, duplicates and empty rows, both dtypes."""
    for seed, idt, vdt in [(1, np.int32, np.float64), (2, np.int64, np.float32),
                           (3, np.int64, np.float64)]:
        yield build_csr((5, 4), 0.4, seed, idt, vdt, unsorted=True, duplicates=True)[0]


# -- the reference is proven ------------------------------------------------

@pytest.mark.parametrize("semiring", SEMIRING_NAMES)
def test_reference_spmm_equals_brute_force(semiring):
    s, ref = get_semiring(semiring), get_backend("numpy")
    for a in _tiny_cases():
        x = build_dense((4, 3), 7, np.float64)
        np.testing.assert_allclose(ref.spmm(a, x, s), brute_spmm(a, x, s), rtol=1e-6)


@pytest.mark.parametrize("semiring", SEMIRING_NAMES)
def test_reference_spgemm_equals_brute_force(semiring):
    s, ref = get_semiring(semiring), get_backend("numpy")
    for a in _tiny_cases():
        b = build_csr((4, 6), 0.4, 11, a.index_dtype, np.float64, unsorted=True,
                      duplicates=True)[0]
        c = ref.spgemm(a, b, s)
        expected = brute_spgemm(a, b, s)
        got = _as_dict(c)
        assert sorted(got) == sorted(expected)
        np.testing.assert_allclose([got[k] for k in sorted(got)],
                                   [expected[k] for k in sorted(got)], rtol=1e-6)
        for i in range(c.shape[0]):                 # sorted, duplicate-free rows
            row = c.indices[c.indptr[i]:c.indptr[i + 1]]
            assert np.all(np.diff(row) > 0)


@pytest.mark.parametrize("semiring", NON_MEAN)
def test_reference_sddmm_equals_brute_force(semiring):
    s, ref = get_semiring(semiring), get_backend("numpy")
    for a in _tiny_cases():
        x, y = build_dense((5, 3), 1, np.float64), build_dense((4, 3), 2, np.float32)
        np.testing.assert_allclose(ref.sddmm(a, x, y, s).data, brute_sddmm(a, x, y, s),
                                   rtol=1e-6)


@pytest.mark.parametrize("vdt,xdt", [(np.float64, np.float64), (np.float32, np.float32),
                                     (np.float32, np.float64), (np.float64, np.float32)])
def test_reference_plus_times_is_scipy(vdt, xdt):
    a, A = build_csr((30, 20), 0.2, 5, np.int32, vdt, unsorted=True, duplicates=True)
    x = build_dense((20, 6), 6, xdt)
    y = get_backend("numpy").spmm(a, x, "plus_times")
    assert y.dtype == np.result_type(vdt, xdt)
    tol = 1e-12 if y.dtype == np.float64 else 1e-5
    np.testing.assert_allclose(y, A @ x, rtol=tol, atol=tol)


# -- hand-checked cases on every backend ------------------------------------

# A = [[1, 0, 2],      X = [[1, 2],
#      [0, 0, 0],           [3, 4],
#      [0, 3, 0]]           [5, 6]]      (row 1 of A is empty)
_A = LocalCSR(np.array([0, 2, 2, 3]), np.array([2, 0, 1]), np.array([2.0, 1.0, 3.0]), (3, 3))
_X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
_INF = np.inf
_SPMM_EXPECTED = {
    "plus_times": [[11, 14], [0, 0], [9, 12]],
    "min_plus": [[2, 3], [_INF, _INF], [6, 7]],
    "max_plus": [[7, 8], [-_INF, -_INF], [6, 7]],
    "max_times": [[10, 12], [-_INF, -_INF], [9, 12]],
    "min_times": [[1, 2], [_INF, _INF], [9, 12]],
    "plus_pair": [[2, 2], [0, 0], [1, 1]],
    "plus_second": [[6, 8], [0, 0], [3, 4]],
    "max_second": [[5, 6], [-_INF, -_INF], [3, 4]],
    "min_second": [[1, 2], [_INF, _INF], [3, 4]],
    "mean": [[5.5, 7], [0, 0], [9, 12]],
}


@pytest.mark.parametrize("semiring", SEMIRING_NAMES)
def test_spmm_hand_checked(be, semiring):
    assert sorted(_SPMM_EXPECTED) == SEMIRING_NAMES
    y = be.spmm(_A, _X, semiring)
    np.testing.assert_array_equal(y, np.array(_SPMM_EXPECTED[semiring]))


def test_spmm_empty_row_identity(be):
    """An empty row holds the additive identity (+inf for min), and 0 for mean."""
    assert np.all(be.spmm(_A, _X, "min_plus")[1] == np.inf)
    assert np.all(be.spmm(_A, _X, "mean")[1] == 0.0)


@pytest.mark.skipif("numba" not in BACKENDS, reason="numba backend not installed")
@pytest.mark.parametrize("dtype, f", [(np.float32, 64), (np.float64, 32), (np.float32, 100)])
def test_spmm_streamed_output_equals_scipy(dtype, f):
    """Outputs of 16 MiB and more are written with non-temporal stores when
    each row is a multiple of 64 bytes and the array is 64-byte aligned (the
    backend's own outputs are); a misaligned ``out`` or rows of 400 bytes
    (f = 100) take ordinary stores.  Same bits as scipy in every case."""
    from spgnn._kernels.numba.spmm import STREAM_BYTES
    m = STREAM_BYTES // (f * np.dtype(dtype).itemsize) + 1
    rng = np.random.default_rng(f)
    rows, cols = rng.integers(0, m, 4 * m), rng.integers(0, m, 4 * m)
    a_sp = sp.csr_array((rng.standard_normal(4 * m).astype(dtype), (rows, cols)), shape=(m, m))
    a = LocalCSR.from_scipy(a_sp)
    x = rng.standard_normal((m, f)).astype(dtype)
    expected = a_sp @ x
    be = get_backend("numba")
    np.testing.assert_array_equal(be.spmm(a, x, "plus_times"), expected)
    misaligned = np.empty(m * f + 1, dtype=dtype)[1:].reshape(m, f)
    assert misaligned.ctypes.data % 64 != 0
    np.testing.assert_array_equal(be.spmm(a, x, "plus_times", out=misaligned), expected)


def test_spmm_out_and_dtypes(be):
    out = np.full((3, 2), 99.0)
    assert be.spmm(_A, _X, "plus_times", out=out) is out
    np.testing.assert_array_equal(out, _SPMM_EXPECTED["plus_times"])
    a32 = _A.astype(np.float32, np.int32)
    assert be.spmm(a32, _X.astype(np.float32), "min_plus").dtype == np.float32
    assert be.spmm(a32, _X, "min_plus").dtype == np.float64
    # non-contiguous X and out are fine
    xf = np.asfortranarray(_X)
    outf = np.zeros((2, 3)).T
    be.spmm(_A, xf, "max_plus", out=outf)
    np.testing.assert_array_equal(outf, _SPMM_EXPECTED["max_plus"])


def test_spgemm_hand_checked(be):
    # A @ A: row 0 = 1*A[0] + 2*A[2] = [1, 6, 2]; rows 1 and 2 empty
    c = be.spgemm(_A, _A, "plus_times")
    np.testing.assert_array_equal(c.indptr, [0, 3, 3, 3])
    np.testing.assert_array_equal(c.indices, [0, 1, 2])
    np.testing.assert_array_equal(c.data, [1, 6, 2])
    c = be.spgemm(_A, _A, "min_plus")   # (0,0): 1+1, (0,1): 2+3, (0,2): 1+2
    np.testing.assert_array_equal(c.data, [2, 5, 3])
    np.testing.assert_array_equal(be.spgemm_symbolic(_A, _A), [0, 3, 3, 3])
    assert be.spgemm_symbolic(_A, _A).dtype == np.int64


@pytest.mark.skipif("numba" not in BACKENDS, reason="numba backend not installed")
def test_spgemm_index_overflow_is_retried_in_int64(monkeypatch):
    """The symbolic kernel writes the output ``indptr`` in its final dtype and
    returns -1 when the total does not fit it; the backend then counts again
    in int64.  Shown with int16 (40 000 entries) instead of int32 (2**31)."""
    from spgnn._kernels.numba.spgemm import csr_spgemm_symbolic
    from spgnn.backends import _validate
    dense = sp.csr_array(np.ones((200, 200), dtype=np.float32))
    ip, idx = dense.indptr.astype(np.int32), dense.indices.astype(np.int32)
    narrow, wide = np.empty(201, np.int16), np.empty(201, np.int32)
    assert csr_spgemm_symbolic(ip, idx, ip, idx, 200, True, 4, narrow) == -1
    assert csr_spgemm_symbolic(ip, idx, ip, idx, 200, True, 4, wide) == 40000
    np.testing.assert_array_equal(wide, np.arange(201) * 200)

    first_guess = _validate.index_dtype_for
    monkeypatch.setattr(_validate, "index_dtype_for", lambda nnz, dims, *p: (
        np.dtype(np.int16) if nnz == 0 else first_guess(nnz, dims, *p)))
    a = LocalCSR(ip, idx, dense.data, (200, 200))
    c = get_backend("numba").spgemm(a, a, "plus_times")
    assert c.index_dtype == np.int64 and c.nnz == 40000
    np.testing.assert_array_equal(c.data, 200)


def test_spgemm_keeps_structural_zeros(be):
    a = LocalCSR(np.array([0, 2, 2]), np.array([0, 1]), np.array([1.0, -1.0]), (2, 2))
    b = LocalCSR(np.array([0, 1, 2]), np.array([0, 0]), np.array([1.0, 1.0]), (2, 1))
    c = be.spgemm(a, b, "plus_times")
    assert c.nnz == 1 and c.data[0] == 0.0 and c.indices[0] == 0


def test_sddmm_hand_checked(be):
    y = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    c = be.sddmm(_A, _X, y, "plus_times")
    # storage order of _A: (0,2) -> 2*(1+2), (0,0) -> 1*(1*1+2*0), (2,1) -> 3*(6)
    np.testing.assert_array_equal(c.data, [6.0, 1.0, 18.0])
    np.testing.assert_array_equal(c.indices, _A.indices)
    c = be.sddmm(_A, _X, y, "max_plus")   # data + max_k (x + y)
    np.testing.assert_array_equal(c.data, [2 + 3.0, 1 + 2.0, 3 + 7.0])


def test_extract_and_transpose_hand_checked(be):
    r = be.extract_rows(_A, [2, 0, -1])
    np.testing.assert_array_equal(r.toarray(), [[0, 3, 0], [1, 0, 2], [0, 3, 0]])
    c = be.extract_cols(_A, [2, 2, 0])
    np.testing.assert_array_equal(c.toarray(), [[2, 2, 1], [0, 0, 0], [0, 0, 0]])
    t = be.transpose(_A)
    np.testing.assert_array_equal(t.indptr, [0, 1, 2, 3])
    np.testing.assert_array_equal(t.indices, [0, 2, 0])
    np.testing.assert_array_equal(t.data, [1.0, 3.0, 2.0])
    mask = be.extract_rows(_A, np.array([True, False, True]))
    assert mask.shape == (2, 3) and mask.nnz == 3


# -- 0-sized shapes -----------------------------------------------------------

_ZERO = [((0, 3), (3, 2)), ((3, 0), (0, 2)), ((2, 3), (3, 0)), ((0, 0), (0, 0))]


@pytest.mark.parametrize("semiring", SEMIRING_NAMES)
@pytest.mark.parametrize("ashape,xshape", _ZERO)
def test_zero_sized(be, semiring, ashape, xshape):
    s = get_semiring(semiring)
    ref = get_backend("numpy")
    a = build_csr(ashape, 0.5, 0)[0]
    x = np.zeros(xshape)
    y = be.spmm(a, x, s)
    assert y.shape == (ashape[0], xshape[1]) and y.dtype == np.float64
    np.testing.assert_array_equal(y, ref.spmm(a, x, s))
    if ashape[0] and xshape[1]:       # rows without terms hold the identity (mean: 0)
        assert np.all(y == (0.0 if s.row_mean else s.add.identity))
    b = build_csr(xshape, 0.5, 1)[0]
    c = be.spgemm(a, b, s)
    assert c.shape == (ashape[0], xshape[1]) and c.nnz == 0
    if not s.row_mean:
        d = be.sddmm(a, np.zeros((ashape[0], 2)), np.zeros((ashape[1], 2)), s)
        assert d.shape == a.shape
    assert be.transpose(a).shape == (ashape[1], ashape[0])
    assert be.extract_rows(a, []).shape == (0, ashape[1])
    assert be.extract_cols(a, []).shape == (ashape[0], 0)


@pytest.mark.parametrize("semiring", NON_MEAN)
def test_sddmm_zero_inner_dimension(be, semiring):
    """With d == 0 the inner reduction is the identity: data (x) identity."""
    s = get_semiring(semiring)
    c = be.sddmm(_A, np.zeros((3, 0)), np.zeros((3, 0)), s)
    ident = np.float64(s.add.identity)
    np.testing.assert_array_equal(c.data, s.mul(_A.data, ident))


# -- errors: same type and message on every backend ------------------------

def _error_cases():
    a = _A
    b_bad = build_csr((4, 2), 0.5, 0)[0]
    return {
        "spmm-inner": (lambda be: be.spmm(a, np.zeros((4, 2)), "plus_times"), DimensionMismatch),
        "spmm-1d": (lambda be: be.spmm(a, np.zeros(3), "plus_times"), DimensionMismatch),
        "spmm-int-x": (lambda be: be.spmm(a, np.zeros((3, 2), dtype=np.int64), "min_plus"),
                       DTypeError),
        "spmm-f16-x": (lambda be: be.spmm(a, np.zeros((3, 2), np.float16), "plus_times"),
                       DTypeError),
        "spmm-out-shape": (lambda be: be.spmm(a, _X, "plus_times", out=np.zeros((2, 2))),
                           DimensionMismatch),
        "spmm-out-dtype": (lambda be: be.spmm(a, _X, "plus_times",
                                              out=np.zeros((3, 2), np.float32)), DTypeError),
        "spmm-semiring": (lambda be: be.spmm(a, _X, "nope"), ValueError),
        "spmm-not-csr": (lambda be: be.spmm(np.eye(3), _X, "plus_times"), TypeError),
        "spgemm-inner": (lambda be: be.spgemm(a, b_bad, "plus_times"), DimensionMismatch),
        "symbolic-inner": (lambda be: be.spgemm_symbolic(a, b_bad), DimensionMismatch),
        "numeric-indptr-len": (lambda be: be.spgemm_numeric(a, a, np.zeros(2, np.int64),
                                                            "plus_times"),
                               InvalidSparseStructure),
        "numeric-indptr-wrong": (lambda be: be.spgemm_numeric(a, a, np.array([0, 2, 3, 3]),
                                                              "plus_times"),
                                 InvalidSparseStructure),
        "sddmm-shape": (lambda be: be.sddmm(a, _X, np.zeros((2, 2)), "plus_times"),
                        DimensionMismatch),
        "sddmm-dtype": (lambda be: be.sddmm(a, _X, np.zeros((3, 2), np.int32), "plus_times"),
                        DTypeError),
        "sddmm-mean": (lambda be: be.sddmm(a, _X, _X, "mean"), ValueError),
        "rows-range": (lambda be: be.extract_rows(a, [0, 3]), IndexError),
        "rows-float": (lambda be: be.extract_rows(a, [0.5]), DTypeError),
        "cols-range": (lambda be: be.extract_cols(a, [-4]), IndexError),
        "bad-value-dtype": (lambda be: be.transpose(LocalCSR(
            a.indptr, a.indices, a.data.astype(np.float16), a.shape, check=None)), DTypeError),
    }


@pytest.mark.parametrize("case", sorted(_error_cases()))
def test_errors_identical_between_backends(case):
    call, exc = _error_cases()[case]
    messages = set()
    for name in BACKENDS:
        with pytest.raises(exc) as info:
            call(get_backend(name))
        messages.add(str(info.value))
    assert len(messages) == 1, messages


def test_dimension_mismatch_names_both_shapes(be):
    with pytest.raises(DimensionMismatch, match=r"A.shape=\(3, 3\).*X.shape=\(4, 2\)"):
        be.spmm(_A, np.zeros((4, 2)), "plus_times")
    with pytest.raises(DimensionMismatch, match=r"A.shape=\(3, 3\).*B.shape=\(4, 2\)"):
        be.spgemm(_A, build_csr((4, 2), 0.5, 0)[0], "plus_times")


# -- packaging: lazy numba, cached kernels, cupy slot -------------------------

def test_import_spgnn_does_not_import_numba():
    code = ("import sys, spgnn\n"
            "from spgnn.backends import backend_status, get_backend\n"
            "backend_status()\n"
            "assert 'numba' not in sys.modules, 'numba imported'\n"
            "if backend_status().get('numba') is None:\n"
            "    get_backend('numba')\n"
            "    assert 'numba' not in sys.modules, 'numba imported by get_backend'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif("numba" not in BACKENDS, reason="numba backend unavailable")
def test_numba_kernels_are_cached_on_disk():
    from numba.core.caching import NullCache

    from spgnn._kernels.numba import _ops, extract, sddmm, spgemm, spmm

    kernels = {"spmm": ["csr_spmm_rowwise", "csr_spmm_plus_times"],
               "spgemm": ["csr_spgemm_symbolic", "csr_spgemm_numeric", "csr_spgemm_onehot",
                          "selection_indptr", "spgemm_work_at_least"],
               "sddmm": ["csr_sddmm"],
               "extract": ["csr_extract_rows_indptr", "csr_extract_rows",
                           "csr_extract_cols_indptr", "csr_extract_cols", "csr_transpose"],
               "_ops": ["semiring_add", "semiring_mul", "row_partition", "clamp_parts"]}
    modules = {"spmm": spmm, "spgemm": spgemm, "sddmm": sddmm, "extract": extract, "_ops": _ops}
    row_parallel = {"csr_spmm_rowwise", "csr_spmm_plus_times", "csr_spgemm_symbolic",
                    "csr_spgemm_numeric", "csr_spgemm_onehot", "csr_sddmm", "csr_extract_rows",
                    "csr_extract_cols_indptr", "csr_extract_cols"}
    for mod, names in kernels.items():
        for name in names:
            disp = getattr(modules[mod], name)
            assert disp._cache is not None and not isinstance(disp._cache, NullCache), name
            assert disp.targetoptions.get("nogil") is True, name
            assert bool(disp.targetoptions.get("parallel")) == (name in row_parallel), name


def test_cupy_slot_reports_a_reason():
    why = backend_status()["cupy"]
    assert why is None or isinstance(why, str)
    if why is not None:
        assert "cupy" in why or "GPU" in why


@pytest.mark.skipif("numba" not in BACKENDS, reason="numba backend unavailable")
def test_spgemm_work_estimate_is_exact_below_the_cap():
    from spgnn._kernels.numba.spgemm import spgemm_work_at_least

    a = sp.random_array((40, 30), density=0.2, rng=np.random.default_rng(1), format="csr")
    b = sp.random_array((30, 50), density=0.3, rng=np.random.default_rng(2), format="csr")
    flops = int(np.diff(b.indptr)[a.indices].sum())
    exact = flops + 8 * a.shape[0]
    assert spgemm_work_at_least(a.indptr, a.indices, b.indptr, 8, 10**9) == exact
    assert spgemm_work_at_least(a.indptr, a.indices, b.indptr, 8, exact) == exact
    assert spgemm_work_at_least(a.indptr, a.indices, b.indptr, 8, exact - 1) == exact - 1
    assert spgemm_work_at_least(a.indptr, a.indices, b.indptr, 8, 5) == 5    # rows alone reach it


@pytest.mark.skipif("numba" not in BACKENDS, reason="numba backend unavailable")
def test_wait_for_chunks_returns_when_done_and_is_bounded():
    from spgnn._kernels.numba._ops import SPIN_PAUSES, atomic_load, wait_for_chunks
    import numba

    @numba.njit
    def load(a, i):
        return atomic_load(a, i)

    done = np.array([3, 7], dtype=np.int64)
    assert load(done, 1) == 7
    assert wait_for_chunks(done, 3) == 3          # already done: no spin
    assert wait_for_chunks(done, 2) == 3
    # never done (nobody else counts): gives up after SPIN_PAUSES, value unchanged
    assert SPIN_PAUSES > 0
    assert wait_for_chunks(done, 4) == 3


@pytest.mark.parametrize("shape", [(37, 5, 16), (1, 1, 1), (200, 64, 64), (6, 0, 3), (0, 4, 2)])
@pytest.mark.parametrize("dtypes", [(np.float32, np.float32), (np.float64, np.float64),
                                    (np.float32, np.float64)])
def test_backend_matmul_is_numpys_product_in_an_aligned_array(be, shape, dtypes):
    """``Backend.matmul`` (a GCN layer's ``H W``, the next SpMM's x): the same
    bits as ``a @ b``, b transposed or not, in a 64-byte-aligned C array."""
    m, k, n = shape
    rng = np.random.default_rng(m * 31 + k)
    a = rng.standard_normal((m, k)).astype(dtypes[0])
    b = rng.standard_normal((k, n)).astype(dtypes[1])
    for rhs in (b, np.ascontiguousarray(b.T).T):
        got = be.matmul(a, rhs)
        want = a @ rhs
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.flags.c_contiguous
        assert got.size == 0 or got.ctypes.data % 64 == 0     # (no address to align when empty)
        np.testing.assert_array_equal(got, want)


@pytest.mark.skipif("numba" not in BACKENDS, reason="numba backend unavailable")
def test_rolled_loop_runs_every_trip_count_and_is_not_unrolled():
    """``_ops.rolled_loop`` (SpMM's loop over a row's nonzeros) sums exactly
    ``a[lo:hi]`` for every trip count, empty and reversed ranges included,
    and the compiled loop keeps one add per iteration (not unrolled)."""
    import numba
    from numba.core import types
    from numba.core.extending import intrinsic
    from spgnn._kernels.numba._ops import rolled_loop

    @intrinsic
    def rolled_sum(typingctx, a, lo, hi):
        def codegen(context, builder, sig, args):
            arr = context.make_array(sig.args[0])(context, builder, args[0])
            acc = builder.alloca(context.get_value_type(types.float64))
            builder.store(context.get_constant(types.float64, 0.0), acc)
            with rolled_loop(builder, args[1], args[2]) as i:
                ptr = builder.gep(arr.data, [i])
                builder.store(builder.fadd(builder.load(acc), builder.load(ptr)), acc)
            return builder.load(acc)
        return types.float64(a, lo, hi), codegen

    @numba.njit
    def total(a, lo, hi):
        return rolled_sum(a, lo, hi)

    a = np.arange(1, 41, dtype=np.float64)
    for lo in range(0, 12):
        for hi in range(lo - 2, 41):
            assert total(a, np.int64(lo), np.int64(hi)) == a[lo:max(hi, lo)].sum()
    asm = total.inspect_asm(total.signatures[0])
    # unrolled by LLVM's default (x8 behind a remainder loop) it would hold 9 adds
    assert asm.count("addsd") == 1, asm


@pytest.mark.skipif("numba" not in BACKENDS, reason="numba backend unavailable")
def test_trailing_zeros_is_the_lowest_set_bit():
    """``_ops.trailing_zeros`` (the SpGEMM bitmap walk's bit scan) gives the
    index of the lowest set bit for every position, the sign bit included,
    with any higher bits set, and 64 for zero."""
    import numba
    from spgnn._kernels.numba._ops import trailing_zeros

    @numba.njit
    def tz(w):
        return trailing_zeros(w)

    rng = np.random.default_rng(0)
    for b in range(64):
        low = np.uint64(1) << np.uint64(b)
        assert tz(low) == b
        high = np.uint64(rng.integers(0, 2**63, dtype=np.uint64)) << np.uint64(1)
        assert tz(low | (high << np.uint64(b))) == b
    assert tz(np.uint64(0)) == 64


@pytest.mark.skipif("numba" not in BACKENDS, reason="numba backend unavailable")
@pytest.mark.parametrize("kernel", ["spmm", "max_second", "sddmm", "spgemm"])
def test_parallel_kernels_with_every_thread_and_many_chunks(kernel, monkeypatch):
    """The dynamic-scheduler kernels equal scipy when small calls are *not* run
    serially (SERIAL_WORK = 0): all threads take chunks and worker 0 waits
    for the others' last ones (``_ops.wait_for_chunks``)."""
    from spgnn.backends import numba_backend

    monkeypatch.setattr(numba_backend, "SERIAL_WORK", 0)
    be = get_backend("numba")
    rng = np.random.default_rng(5)
    a = sp.random_array((257, 190), density=0.05, rng=rng, format="csr", dtype=np.float32)
    la = LocalCSR(a.indptr, a.indices, a.data, a.shape)
    if kernel in ("spmm", "max_second"):
        x = rng.random((190, 33), dtype=np.float32)
        got = be.spmm(la, x, "plus_times" if kernel == "spmm" else "max_second")
        if kernel == "spmm":
            ref = a @ x
        else:
            ref = np.full((257, 33), -np.inf, dtype=np.float32)
            for i in range(257):
                cols = a.indices[a.indptr[i]:a.indptr[i + 1]]
                if cols.size:
                    ref[i] = x[cols].max(axis=0)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    elif kernel == "sddmm":
        x = rng.random((257, 9), dtype=np.float32)
        y = rng.random((190, 9), dtype=np.float32)
        got = be.sddmm(la, x, y, "plus_times")
        rows = np.repeat(np.arange(257), np.diff(a.indptr))
        expected = a.data * np.einsum("ek,ek->e", x[rows], y[a.indices])
        np.testing.assert_allclose(got.data, expected, rtol=1e-5)
    else:
        b = sp.random_array((190, 150), density=0.05, rng=rng, format="csr", dtype=np.float32)
        lb = LocalCSR(b.indptr, b.indices, b.data, b.shape)
        got = be.spgemm(la, lb, "plus_times")
        dense = sp.csr_array((got.data, got.indices, got.indptr), shape=got.shape).toarray()
        np.testing.assert_allclose(dense, (a @ b).toarray(), rtol=1e-5, atol=1e-6)
