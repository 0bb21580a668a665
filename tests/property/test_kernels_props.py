"""Property tests: every compiled backend equals the numpy reference.

Inputs come from :mod:`spgnn.testing.strategies` (seed-driven; shapes with
zeros, unsorted and duplicate indices, int32/int64 indices, float32/float64
values, mixed value dtypes between operands).  Dtypes are sampled inside
Hypothesis rather than parametrised so that only a handful of numba
signatures get compiled (and then come from the on-disk cache).
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spgnn.backends import available_backends, get_backend
from spgnn.local.csr import LocalCSR
from spgnn.local.semiring import SEMIRINGS, get_semiring
from spgnn.testing.strategies import dense, index_array, local_csr

REF = "numpy"
COMPILED = [b for b in available_backends() if b != REF]
SEMIRING_NAMES = sorted(SEMIRINGS)
NON_MEAN = [s for s in SEMIRING_NAMES if not SEMIRINGS[s].row_mean]

#: (rtol, atol) for sums whose rounding may differ; min/max results are exact.
TOL = {np.dtype(np.float32): (1e-4, 1e-5), np.dtype(np.float64): (1e-11, 1e-12)}

pytestmark = pytest.mark.skipif(not COMPILED, reason="no compiled backend available")


@pytest.fixture(scope="module", params=COMPILED)
def be(request):
    # module scope: Hypothesis refuses function-scoped fixtures under @given,
    # and a backend instance is stateless anyway
    return get_backend(request.param)


def assert_semiring_equal(actual, expected, semiring):
    """Exact for min/max monoids (a selection, no rounding), dtype-keyed
    ``allclose`` for sums (the reference may round differently)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if semiring.add.name in ("min", "max"):
        np.testing.assert_array_equal(actual, expected)
    else:
        rtol, atol = TOL[np.dtype(actual.dtype)]
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def assert_csr_equal(c, ref):
    """Same shape, pointers, indices, values and dtypes."""
    assert c.shape == ref.shape
    assert c.dtype == ref.dtype and c.index_dtype == ref.index_dtype
    np.testing.assert_array_equal(c.indptr, ref.indptr)
    np.testing.assert_array_equal(c.indices, ref.indices)
    np.testing.assert_array_equal(c.data, ref.data)


def _row_sorted(indptr, indices, data):
    rows = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
    order = np.lexsort((data, indices, rows))
    return indices[order], data[order]


def assert_matches_scipy(c, s, exact_order=True):
    """A LocalCSR equals a scipy result (scipy may pick other index dtypes).

    ``exact_order=False`` compares each row's entries as a multiset: scipy
    orders the copies of a column repeated in ``cols`` with an unstable
    argsort, so only the set of entries per row is defined there.
    """
    assert c.shape == s.shape
    np.testing.assert_array_equal(c.indptr, s.indptr)
    if exact_order:
        np.testing.assert_array_equal(c.indices, s.indices)
        np.testing.assert_array_equal(c.data, s.data)
    else:
        for got, want in zip(_row_sorted(c.indptr, c.indices, c.data),
                             _row_sorted(s.indptr, s.indices, s.data)):
            np.testing.assert_array_equal(got, want)


@st.composite
def spmm_inputs(draw):
    a, _ = draw(local_csr())
    n = draw(st.integers(0, 5))
    x = draw(dense((a.shape[1], n), integer_values=draw(st.booleans())))
    return a, x


@pytest.mark.parametrize("semiring", SEMIRING_NAMES)
@given(inputs=spmm_inputs())
def test_spmm_equals_reference(be, semiring, inputs):
    a, x = inputs
    s = get_semiring(semiring)
    assert_semiring_equal(be.spmm(a, x, s), get_backend(REF).spmm(a, x, s), s)


def sequential_plus_times(a, x):
    """``A @ x`` summed nonzero by nonzero in storage order from +0, each
    product and sum rounded in the result dtype (numpy, so no FMA): the
    order scipy's ``csr_matvecs`` uses and the numba kernel promises."""
    dt = np.result_type(a.data, x)
    data, x = a.data.astype(dt), x.astype(dt)
    out = np.zeros((a.shape[0], x.shape[1]), dt)
    for i in range(a.shape[0]):
        for e in range(a.indptr[i], a.indptr[i + 1]):
            out[i] = out[i] + data[e] * x[a.indices[e]]
    return out


@st.composite
def wide_spmm_inputs(draw):
    # up to 30 x 30: rows longer than the prefetch distance (16 nonzeros)
    a, _ = draw(local_csr(max_dim=draw(st.sampled_from([12, 30]))))
    return a, draw(dense((a.shape[1], 200)))


@given(inputs=wide_spmm_inputs())
def test_plus_times_spmm_is_bit_identical_to_sequential_sum(be, inputs):
    # every width 0..200 (every combination of simd.py's register blocks
    # 64, 32, ..., 1); columns are independent, so one wide reference serves all
    a, x = inputs
    ref = sequential_plus_times(a, x)
    for n in range(x.shape[1] + 1):
        np.testing.assert_array_equal(be.spmm(a, np.ascontiguousarray(x[:, :n]), "plus_times"),
                                      ref[:, :n], err_msg=f"n = {n}")


REGISTER_SEMIRINGS = [s for s in NON_MEAN if s != "plus_times"]


@pytest.mark.parametrize("semiring", REGISTER_SEMIRINGS)
@given(inputs=wide_spmm_inputs(), seed=st.integers(0, 2**32 - 1))
def test_register_semiring_spmm_is_bit_identical_to_scalar_kernel(be, semiring, inputs, seed):
    # the register kernels (simd.SEMIRING_WIDTHS blocks 64, 16, 4, 1) against
    # the scalar loops of csr_spmm_rowwise, for every width 0..150 (every
    # combination of the blocks), with NaN, +-inf and -0 among the inputs:
    # same terms, same order, same NaN rule, so the same bits
    from spgnn._kernels.numba import _ops, spmm as kernels
    a, x = inputs
    s = get_semiring(semiring)
    dt = np.result_type(a.data, x)
    rng = np.random.default_rng(seed)
    x = x[:, :150].astype(dt)
    special = rng.random(x.shape) < 0.05
    x[special] = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0], dtype=dt), special.sum())
    data = a.data.astype(dt)
    add, mul = _ops.ADD_CODES[s.add.name], _ops.MUL_CODES[s.multiply]
    assert (add, mul) in kernels.REGISTER_SEMIRINGS
    bits = np.uint32 if dt == np.float32 else np.uint64
    # the scalar kernel folds each output column on its own (same terms, same order whatever
    # the width), so one full-width reference serves every width: half the kernel calls
    x = np.ascontiguousarray(x)
    ref = np.empty((a.shape[0], x.shape[1]), dt)
    kernels.csr_spmm_rowwise(a.indptr, a.indices, data, x, add, mul, dt.type(s.add.identity), 4,
                             ref)
    for n in range(x.shape[1] + 1):
        got = be.spmm(a, np.ascontiguousarray(x[:, :n]), s)
        np.testing.assert_array_equal(got.view(bits), ref[:, :n].view(bits), err_msg=f"n = {n}")


@st.composite
def spgemm_inputs(draw):
    a, _ = draw(local_csr(max_dim=10))
    b, _ = draw(local_csr(shape=(a.shape[1], draw(st.integers(0, 10)))))
    return a, b


def _structural_dense(a):
    p = np.zeros(a.shape, dtype=np.int64)
    rows = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
    p[rows, a.indices] = 1
    return p


@pytest.mark.parametrize("semiring", SEMIRING_NAMES)
@given(inputs=spgemm_inputs())
def test_spgemm_equals_reference(be, semiring, inputs):
    a, b = inputs
    s = get_semiring(semiring)
    ref = get_backend(REF)
    indptr = be.spgemm_symbolic(a, b)
    np.testing.assert_array_equal(indptr, ref.spgemm_symbolic(a, b))
    c, r = be.spgemm_numeric(a, b, indptr, s), ref.spgemm(a, b, s)
    assert c.shape == r.shape and c.index_dtype == r.index_dtype
    np.testing.assert_array_equal(c.indptr, r.indptr)
    np.testing.assert_array_equal(c.indices, r.indices)
    assert_semiring_equal(c.data, r.data, s)
    # the pattern is the boolean product of the patterns (structural zeros kept)
    pattern = (_structural_dense(a) @ _structural_dense(b)) > 0
    rows = np.repeat(np.arange(c.shape[0]), np.diff(c.indptr))
    expected_rows, expected_cols = np.nonzero(pattern)     # row-major, sorted
    np.testing.assert_array_equal(rows, expected_rows)
    np.testing.assert_array_equal(c.indices, expected_cols)


def _spread_columns(b, stride):
    """``b`` with column ``j`` moved to ``j * stride`` (same pattern, wider matrix)."""
    ncols = (b.shape[1] - 1) * stride + 1 if b.shape[1] else 0
    return LocalCSR(b.indptr, (b.indices * stride).astype(b.index_dtype), b.data,
                    (b.shape[0], ncols))


@pytest.mark.parametrize("semiring", SEMIRING_NAMES)
@given(inputs=spgemm_inputs(), stride=st.sampled_from([1, 2**15 + 3]))
def test_spgemm_row_paths_agree(be, semiring, inputs, stride):
    # Short rows are counted with a marker and reduced through a position map
    # when B is at most MARKER_MAX_COLS = 2**18 columns wide and A is not too
    # sparse, else by sorting (ESC).  Spreading B's columns ``stride`` apart
    # (up to ~3 * 10**5 columns) moves the same products across that limit:
    # same pattern with the columns mapped, bit-identical values (every path
    # reduces terms in storage order).
    a, b = inputs
    wide = _spread_columns(b, stride)
    narrow_indptr = be.spgemm_symbolic(a, b)
    np.testing.assert_array_equal(be.spgemm_symbolic(a, wide), narrow_indptr)
    c = be.spgemm_numeric(a, wide, narrow_indptr, semiring)
    narrow = be.spgemm(a, b, semiring)
    np.testing.assert_array_equal(c.indices, narrow.indices * stride)
    np.testing.assert_array_equal(c.data, narrow.data)


def _csr_from_rows(rows, shape, idt, rng, vdt, special_rate):
    """A :class:`LocalCSR` whose row ``i`` holds the columns ``rows[i]``, with
    normal values of dtype ``vdt`` of which a ``special_rate`` share are NaN,
    +-inf, -0.0 or 0.0 (the min/max rule)."""
    indptr = np.zeros(len(rows) + 1, dtype=idt)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    indices = np.concatenate(rows).astype(idt) if rows else np.zeros(0, idt)
    v = rng.standard_normal(indices.shape[0]).astype(vdt)
    special = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], dtype=vdt)
    pick = rng.random(v.shape[0]) < special_rate
    v[pick] = rng.choice(special, size=int(pick.sum()))
    return LocalCSR(indptr, indices, v, shape)


@st.composite
def short_row_products(draw):
    """``A`` with 0-3 nonzeros per row (repeated columns and any order
    included) times a canonical ``B`` (sorted, distinct rows of 0-30 entries):
    the rows the merge path takes (two nonzeros) among the copy and
    marker/ESC rows.  Values may be NaN, +-inf or -0.0 (the min/max rule)."""
    idt = draw(st.sampled_from([np.int32, np.int64]))
    vdt = draw(st.sampled_from([np.float32, np.float64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_b, ncols = draw(st.integers(1, 12)), draw(st.integers(1, 40))
    b_rows = [np.sort(rng.choice(ncols, size=int(rng.integers(0, min(ncols, 30) + 1)),
                                 replace=False)) for _ in range(n_b)]
    m = draw(st.integers(0, 12))
    a_rows = [rng.integers(0, n_b, size=int(rng.integers(0, 4))) for _ in range(m)]

    return (_csr_from_rows(a_rows, (m, n_b), idt, rng, vdt, 0.1),
            _csr_from_rows(b_rows, (n_b, ncols), idt, rng, vdt, 0.1))


@pytest.mark.parametrize("semiring", SEMIRING_NAMES)
@given(inputs=short_row_products(), stride=st.sampled_from([1, 2**15 + 3]))
def test_spgemm_merge_path(be, semiring, inputs, stride):
    """Rows of ``A`` with two nonzeros over a canonical ``B`` are merged (no
    marker, no sort).  Same result as the reference, and exactly the values of
    the other paths (same reduction order): appending one unsorted row to
    ``B`` (that ``A`` never uses) makes ``B`` non-canonical and turns the merge
    off.  ``stride`` spreads ``B``'s columns past ``MARKER_MAX_COLS`` (the
    ESC/dense regime)."""
    a, b = inputs
    s = get_semiring(semiring)
    b = _spread_columns(b, stride)
    ncols = b.shape[1]
    c, r = be.spgemm(a, b, s), get_backend(REF).spgemm(a, b, s)
    np.testing.assert_array_equal(be.spgemm_symbolic(a, b), r.indptr)
    assert c.index_dtype == r.index_dtype and c.dtype == r.dtype
    np.testing.assert_array_equal(c.indptr, r.indptr)
    np.testing.assert_array_equal(c.indices, r.indices)
    assert_semiring_equal(c.data, r.data, s)
    idt = b.index_dtype
    b_off = LocalCSR(np.append(b.indptr, b.indptr[-1] + 2).astype(idt),
                     np.append(b.indices, [1, 0]).astype(idt),
                     np.append(b.data, [1, 1]).astype(b.dtype), (b.shape[0] + 1, ncols))
    a_off = LocalCSR(a.indptr, a.indices, a.data, (a.shape[0], a.shape[1] + 1))
    off = be.spgemm(a_off, b_off, s)
    np.testing.assert_array_equal(off.indptr, c.indptr)
    np.testing.assert_array_equal(off.indices, c.indices)
    # equal values, not bits: the dense path's plus_times accumulator starts
    # from +0.0, so a sum of -0.0 terms comes out +0.0 there
    np.testing.assert_array_equal(off.data, c.data)


#: How the numeric pass emits a dense row (more than SMALL outputs), from its
#: output count ``r`` and the ``nwords = ceil(ncols / 64)`` words of its
#: bitmap: by walking the bitmap's set bits (``r * BITMAP_RATIO >= nwords``)
#: over a span of whole words (columns contiguous) or a spread one, or by
#: sorting the row's columns (sparser rows).
DENSE_EMITS = ("bitmap walk, contiguous", "bitmap walk, spread", "sort")


@st.composite
def dense_row_products(draw):
    """``A @ B`` whose rows all take the dense path, each emitted the way drawn.

    Each row of ``A`` picks 2-5 rows of ``B`` (one per row of ``A``, in any
    order, with repeats) whose union is ``r`` columns over a drawn span,
    often ending at ``B``'s last column (the bitmap's partial last word);
    the rows of ``B`` overlap, so columns get several terms.  ``B`` is wide
    enough (> 64 * BITMAP_RATIO * SMALL columns) for rows of either emit.
    ``B`` is not canonical (one unsorted row), which keeps two-nonzero rows of
    ``A`` off the merge path.  Values include NaN, +-inf and -0.0.
    """
    from spgnn._kernels.numba.spgemm import BITMAP_RATIO, SMALL
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    idt = draw(st.sampled_from([np.int32, np.int64]))
    vdt = draw(st.sampled_from([np.float32, np.float64]))
    ncols = draw(st.integers(64 * BITMAP_RATIO * (SMALL + 2), 64 * BITMAP_RATIO * (SMALL + 8)))
    nwords = -(-ncols // 64)
    walk_least = -(-nwords // BITMAP_RATIO)
    b_rows, a_rows = [np.array([3, 1])], []
    for _ in range(draw(st.integers(1, 6))):
        emit = draw(st.sampled_from(DENSE_EMITS))
        if emit == "sort":
            r = int(rng.integers(SMALL + 1, walk_least))
        else:
            r = int(rng.integers(walk_least, 4 * walk_least))
        span = r if emit == "bitmap walk, contiguous" else int(rng.integers(r, ncols + 1))
        if rng.random() < 0.3:
            c0 = ncols - span
        else:
            c0 = int(rng.integers(0, ncols - span + 1))
        inner = rng.choice(np.arange(c0 + 1, c0 + span - 1), size=r - 2, replace=False)
        cols = np.concatenate([[c0, c0 + span - 1], inner]) if span > 1 else np.array([c0])
        parts = int(rng.integers(2, 6))
        first = len(b_rows)
        for q in range(parts):      # every column in some part, and parts overlap
            own = cols[q::parts]
            extra = rng.choice(cols, size=int(rng.integers(0, r // 2 + 1)), replace=False)
            b_rows.append(np.sort(np.unique(np.concatenate([own, extra]))))
        a_rows.append(rng.permutation(np.arange(first, first + parts)))
    rng.shuffle(a_rows)

    m, n_b = len(a_rows), len(b_rows)
    return (_csr_from_rows(a_rows, (m, n_b), idt, rng, vdt, 0.02),
            _csr_from_rows(b_rows, (n_b, ncols), idt, rng, vdt, 0.02))


@pytest.mark.parametrize("semiring", SEMIRING_NAMES)
@given(inputs=dense_row_products())
def test_spgemm_dense_rows(be, semiring, inputs):
    """Rows of more than SMALL outputs (the bitmap and dense accumulator), emitted
    by walking the bitmap or by sorting, equal the reference; consecutive rows
    share a worker's bitmap and accumulator, which every row leaves all-zero
    (plus_times relies on that for the accumulator too)."""
    a, b = inputs
    s = get_semiring(semiring)
    c, r = be.spgemm(a, b, s), get_backend(REF).spgemm(a, b, s)
    np.testing.assert_array_equal(c.indptr, r.indptr)
    np.testing.assert_array_equal(c.indices, r.indices)
    assert_semiring_equal(c.data, r.data, s)


@given(inputs=dense_row_products(), row=st.integers(0, 5), delta=st.sampled_from([-1, 1]))
def test_spgemm_dense_rows_with_a_wrong_indptr_raise(be, inputs, row, delta):
    """A count one off in a dense row is reported (a slot too small or too large
    for the row's columns), never written past."""
    from spgnn.errors import InvalidSparseStructure
    a, b = inputs
    indptr = be.spgemm_symbolic(a, b).copy()
    row = row % a.shape[0]
    indptr[row + 1:] += delta
    with pytest.raises(InvalidSparseStructure):
        be.spgemm_numeric(a, b, indptr, "plus_times")


@given(pair=local_csr(max_dim=20))
def test_rows_strictly_increasing(pair):
    """The canonical-rows test of the merge path (descents counted over the whole
    array minus those at row starts) agrees with a row-by-row check."""
    from spgnn._kernels.numba.spgemm import rows_strictly_increasing
    a, _ = pair
    expected = all(bool((np.diff(a.indices[a.indptr[i]:a.indptr[i + 1]]) > 0).all())
                   for i in range(a.shape[0]))
    assert rows_strictly_increasing(a.indptr, a.indices) == expected


@st.composite
def selection_inputs(draw):
    """``A`` with exactly one nonzero per row (the sampling shape ``Q @ B``) and a ``B``
    that is canonical (the one-pass path) or not (unsorted/duplicate rows: the fallback)."""
    b, b_scipy = draw(local_csr(max_dim=10))
    if draw(st.booleans()):
        b_scipy = b_scipy.copy()
        b_scipy.sum_duplicates()
        b_scipy.sort_indices()
        b = LocalCSR.from_scipy(b_scipy, index_dtype=b.index_dtype)
    n_b = b.shape[0]
    m = draw(st.integers(0, 8)) if n_b else 0
    cols = np.asarray(draw(st.lists(st.integers(0, max(n_b - 1, 0)), min_size=m, max_size=m)),
                      dtype=b.index_dtype)
    vals = draw(dense((m,), integer_values=draw(st.booleans())))
    a = LocalCSR(np.arange(m + 1, dtype=b.index_dtype), cols, vals, (m, n_b))
    return a, b


@pytest.mark.parametrize("semiring", SEMIRING_NAMES)
@given(inputs=selection_inputs())
def test_spgemm_of_a_selection_equals_reference(be, semiring, inputs):
    """The one-pass path for one nonzero per row of ``A`` (and its fallback when the
    selected rows of ``B`` are unsorted or hold duplicates) equals the reference."""
    a, b = inputs
    s = get_semiring(semiring)
    c, r = be.spgemm(a, b, s), get_backend(REF).spgemm(a, b, s)
    assert c.shape == r.shape and c.index_dtype == r.index_dtype and c.dtype == r.dtype
    np.testing.assert_array_equal(c.indptr, r.indptr)
    np.testing.assert_array_equal(c.indices, r.indices)
    assert_semiring_equal(c.data, r.data, s)


@st.composite
def long_row_selection(draw):
    """A selection ``A`` of rows of a ``B`` whose rows are 0-80 entries long
    (several 16-entry masked steps of the vector row copy), sorted and
    distinct except, in some rows, one out-of-order or repeated entry at a
    drawn position (step boundaries included)."""
    idt = draw(st.sampled_from([np.int32, np.int64]))
    vdt = draw(st.sampled_from([np.float32, np.float64]))
    ncols = 200
    lengths = draw(st.lists(st.integers(0, 80), min_size=1, max_size=6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rows = []
    for r in lengths:
        cols = np.sort(rng.choice(ncols, size=r, replace=False))
        if r >= 2 and draw(st.booleans()):
            q = draw(st.integers(1, r - 1))
            cols[q] = cols[q - 1] - draw(st.integers(0, 1))   # repeat, or step back
            cols[q] = max(cols[q], 0)
        rows.append(cols)
    indptr = np.zeros(len(rows) + 1, dtype=idt)
    np.cumsum([r.shape[0] for r in rows], out=indptr[1:])
    indices = np.concatenate(rows).astype(idt)
    b = LocalCSR(indptr, indices, rng.standard_normal(indices.shape[0]).astype(vdt),
                 (len(rows), ncols))
    picks = np.asarray(draw(st.lists(st.integers(0, len(rows) - 1), min_size=1, max_size=8)),
                       dtype=idt)
    a = LocalCSR(np.arange(picks.shape[0] + 1, dtype=idt), picks,
                 rng.standard_normal(picks.shape[0]).astype(vdt), (picks.shape[0], len(rows)))
    return a, b


@given(inputs=long_row_selection())
def test_selection_copy_of_long_rows(be, inputs):
    """The vector row copy of ``Q @ B`` (``plus_times``): values are the exact
    products, and every row that is not strictly increasing is reported
    (the backend then takes the general product), whatever its length."""
    from spgnn._kernels.numba import _ops, spgemm as kernels
    a, b = inputs
    c, r = be.spgemm(a, b, "plus_times"), get_backend(REF).spgemm(a, b, "plus_times")
    np.testing.assert_array_equal(c.indptr, r.indptr)
    np.testing.assert_array_equal(c.indices, r.indices)
    np.testing.assert_allclose(c.data, r.data, rtol=TOL[c.dtype][0], atol=TOL[c.dtype][1])
    # the kernel itself: verbatim copy, exact products, the unsorted-row count
    lengths = np.diff(b.indptr)[a.indices]
    out_indptr = np.zeros(a.shape[0] + 1, dtype=b.index_dtype)
    np.cumsum(lengths, out=out_indptr[1:])
    out_indices = np.empty(out_indptr[-1], dtype=b.index_dtype)
    out_data = np.empty(out_indptr[-1], dtype=b.dtype)
    unsorted = kernels.csr_spgemm_onehot(a.indices, a.data, b.indptr, b.indices, b.data,
                                         _ops.MUL_TIMES, 4, out_indptr, out_indices, out_data)
    rows = [slice(b.indptr[k], b.indptr[k + 1]) for k in a.indices]
    np.testing.assert_array_equal(out_indices, np.concatenate([b.indices[s] for s in rows]))
    np.testing.assert_array_equal(
        out_data, np.concatenate([a.data[i] * b.data[s] for i, s in enumerate(rows)]))
    assert unsorted == sum(bool((np.diff(b.indices[s]) <= 0).any()) for s in rows)


@st.composite
def sddmm_inputs(draw):
    a, _ = draw(local_csr())
    d = draw(st.integers(0, 4))
    ints = draw(st.booleans())
    return (a, draw(dense((a.shape[0], d), integer_values=ints)),
            draw(dense((a.shape[1], d), integer_values=ints)))


@pytest.mark.parametrize("semiring", NON_MEAN)
@given(inputs=sddmm_inputs())
def test_sddmm_equals_reference(be, semiring, inputs):
    a, x, y = inputs
    s = get_semiring(semiring)
    c, r = be.sddmm(a, x, y, s), get_backend(REF).sddmm(a, x, y, s)
    np.testing.assert_array_equal(c.indptr, a.indptr)
    np.testing.assert_array_equal(c.indices, a.indices)
    assert_semiring_equal(c.data, r.data, s)


@given(data=st.data())
def test_extract_rows_equals_scipy(be, data):
    a, sa = data.draw(local_csr())
    rows = data.draw(index_array(a.shape[0]))
    c = be.extract_rows(a, rows)
    assert_csr_equal(c, get_backend(REF).extract_rows(a, rows))
    assert_matches_scipy(c, sa[rows, :])


@given(data=st.data())
def test_extract_cols_equals_scipy(be, data):
    a, sa = data.draw(local_csr())
    cols = data.draw(index_array(a.shape[1]))
    c = be.extract_cols(a, cols)
    assert_csr_equal(c, get_backend(REF).extract_cols(a, cols))
    assert_matches_scipy(c, sa[:, cols], exact_order=False)


@given(pair=local_csr())
def test_transpose_equals_scipy(be, pair):
    a, sa = pair
    t = be.transpose(a)
    assert_csr_equal(t, get_backend(REF).transpose(a))
    assert_matches_scipy(t, sa.T.tocsr())
    for i in range(t.shape[0]):          # sorted rows (duplicates stay adjacent)
        assert np.all(np.diff(t.indices[t.indptr[i]:t.indptr[i + 1]]) >= 0)
