"""Argument checks shared by every backend.

Each public backend method calls these before doing any work, so the
``numpy`` reference and the compiled backends raise the same error types with
the same messages (the tests compare them).  Messages follow
:mod:`spgnn.errors`: the operation, what it requires, what it got.

The checks are O(1) or O(len(index array)); the O(nnz) structure check
(indices in range, monotone ``indptr``) is left to ``LocalCSR.check(full=True)``
as scipy leaves it to ``check_format(full_check=True)``: kernels trust a
``LocalCSR`` that passed construction.
"""

import numpy as np

from ..errors import DimensionMismatch, DTypeError, InvalidSparseStructure
from ..local.csr import VALUE_DTYPES, LocalCSR
from ..local.semiring import get_semiring

__all__ = ["check_csr", "check_dense", "check_semiring", "check_spmm", "check_out",
           "check_spgemm", "check_spgemm_indptr", "check_sddmm", "normalize_index",
           "result_dtype", "index_dtype_for", "indptr_mismatch", "SAMPLE_METHOD_CODES",
           "check_sample_method", "check_drop_probability"]

_INT32_MAX = np.iinfo(np.int32).max


def check_csr(a, op, name="A"):
    """``a`` must be a :class:`LocalCSR` with valid dtypes and lengths (O(1))."""
    if not isinstance(a, LocalCSR):
        raise TypeError(f"{op}: {name} must be a LocalCSR, but got {type(a).__name__}")
    a.check(full=False)
    return a


def check_dense(x, op, name, xp=np):
    """``x`` as an ``xp`` array: 2-D, float32 or float64."""
    if not hasattr(x, "dtype") or not hasattr(x, "ndim"):
        x = xp.asarray(x)
    if x.ndim != 2:
        raise DimensionMismatch(f"{op}: {name} must be 2-D, but got {name}.ndim={x.ndim} "
                                f"({name}.shape={tuple(x.shape)})")
    if np.dtype(x.dtype) not in VALUE_DTYPES:
        raise DTypeError(f"{op}: {name} must be float32 or float64, but got {x.dtype}")
    return x


def check_semiring(semiring):
    """The :class:`~spgnn.local.semiring.Semiring` for a semiring or its name."""
    return get_semiring(semiring)


#: ``method=`` of ``spgemm_masked`` / ``mxm``: None or "auto" lets the backend choose.
SPGEMM_METHODS = ("auto", "gustavson", "dot")


def check_spgemm_method(method):
    """``None`` (auto) or one of :data:`SPGEMM_METHODS` other than "auto"; else ValueError."""
    if method is None or method == "auto":
        return None
    if method not in SPGEMM_METHODS:
        raise ValueError(f"spgemm_masked: unknown method {method!r}; expected one of "
                         f"{SPGEMM_METHODS} or None")
    return method


def result_dtype(*arrays):
    """``np.result_type`` of the arrays' dtypes (float32 only if all are)."""
    return np.result_type(*[np.dtype(a.dtype) for a in arrays])


def check_spmm(a, x, semiring, op="spmm", xp=np):
    """Validate ``spmm(a, x, semiring)``; return ``(x, semiring, result dtype)``."""
    check_csr(a, op)
    x = check_dense(x, op, "X", xp)
    semiring = check_semiring(semiring)
    if a.shape[1] != x.shape[0]:
        raise DimensionMismatch(f"{op}: inner dimensions must agree, but got "
                                f"A.shape={a.shape} and X.shape={tuple(x.shape)}")
    return x, semiring, result_dtype(a.data, x)


def check_out(out, shape, dtype, op, xp=np):
    """``out`` must be an ``xp`` array of exactly ``shape`` and ``dtype``."""
    if not isinstance(out, xp.ndarray):
        raise TypeError(f"{op}: out must be a {xp.__name__}.ndarray, but got {type(out).__name__}")
    if tuple(out.shape) != tuple(shape):
        raise DimensionMismatch(f"{op}: out must have shape {tuple(shape)}, "
                                f"but got out.shape={tuple(out.shape)}")
    if np.dtype(out.dtype) != np.dtype(dtype):
        raise DTypeError(f"{op}: out must have dtype {np.dtype(dtype)} (the result type), "
                         f"but got {out.dtype}")
    return out


def check_spgemm(a, b, op="spgemm"):
    """Validate the operands of ``spgemm``/``spgemm_symbolic``/``spgemm_numeric``."""
    check_csr(a, op, "A")
    check_csr(b, op, "B")
    if a.shape[1] != b.shape[0]:
        raise DimensionMismatch(f"{op}: inner dimensions must agree, but got "
                                f"A.shape={a.shape} and B.shape={b.shape}")


def check_spgemm_indptr(indptr, a, op="spgemm_numeric", xp=np):
    """The symbolic ``indptr`` as int64: 1-D, ``a.shape[0] + 1`` long, starting at 0."""
    if not hasattr(indptr, "dtype"):
        indptr = xp.asarray(indptr)
    if indptr.ndim != 1 or indptr.shape[0] != a.shape[0] + 1:
        raise InvalidSparseStructure(
            f"{op}: indptr must be 1-D with A.shape[0]+1={a.shape[0] + 1} entries, "
            f"but got shape {tuple(indptr.shape)}")
    if np.dtype(indptr.dtype).kind not in "iu":
        raise DTypeError(f"{op}: indptr must have an integer dtype, but got {indptr.dtype}")
    indptr = indptr.astype(np.int64, copy=False)
    if int(indptr[0]) != 0:
        raise InvalidSparseStructure(f"{op}: indptr[0] must be 0, but got {int(indptr[0])}")
    if a.shape[0] and bool((indptr[1:] < indptr[:-1]).any()):
        raise InvalidSparseStructure(f"{op}: indptr must be non-decreasing")
    return indptr


def check_sddmm(a, x, y, semiring, op="sddmm", xp=np):
    """Validate ``sddmm(a, x, y, semiring)``; return ``(x, y, semiring, result dtype)``."""
    check_csr(a, op)
    x = check_dense(x, op, "X", xp)
    y = check_dense(y, op, "Y", xp)
    semiring = check_semiring(semiring)
    if semiring.row_mean:
        raise ValueError(f"{op}: row_mean semirings (such as {semiring.name!r}) are defined "
                         f"for spmm and spgemm only, but got semiring={semiring.name!r}")
    if x.shape[0] != a.shape[0] or y.shape[0] != a.shape[1] or x.shape[1] != y.shape[1]:
        raise DimensionMismatch(
            f"{op}: X must have A.shape[0] rows, Y A.shape[1] rows and both the same number "
            f"of columns, but got A.shape={a.shape}, X.shape={tuple(x.shape)} and "
            f"Y.shape={tuple(y.shape)}")
    return x, y, semiring, result_dtype(a.data, x, y)


def normalize_index(idx, n, op, name, xp=np):
    """Row/column selector as non-negative int64 positions, as scipy/numpy index.

    Accepts an integer array-like (negative entries count from the end) or a
    boolean mask of length ``n``.  Raises :class:`IndexError` for out-of-range
    entries and :class:`DTypeError` for other dtypes.
    """
    idx = xp.asarray(idx)
    if idx.ndim != 1:
        raise DimensionMismatch(f"{op}: {name} must be 1-D, but got {name}.ndim={idx.ndim}")
    kind = np.dtype(idx.dtype).kind
    if idx.shape[0] == 0:
        return xp.zeros(0, dtype=np.int64)
    if kind == "b":
        if idx.shape[0] != n:
            raise IndexError(f"{op}: a boolean {name} mask must have length {n}, "
                             f"but got {idx.shape[0]}")
        return xp.flatnonzero(idx).astype(np.int64)
    if kind not in "iu":
        raise DTypeError(f"{op}: {name} must hold integers or booleans, but got {idx.dtype}")
    idx = idx.astype(np.int64)
    lo, hi = int(idx.min()), int(idx.max())
    if lo < -n or hi >= n:
        bad = lo if lo < -n else hi
        raise IndexError(f"{op}: {name} must lie in [-{n}, {n}), but got {bad}")
    if lo < 0:
        idx = xp.where(idx < 0, idx + n, idx)
    return idx


def index_dtype_for(nnz, dims, *preferred):
    """The output index dtype: int64 if any operand uses it or int32 cannot hold
    ``nnz`` or an index below ``max(dims)``; int32 otherwise."""
    if any(np.dtype(p) == np.int64 for p in preferred):
        return np.dtype(np.int64)
    if nnz > _INT32_MAX or max(dims, default=0) > _INT32_MAX:
        return np.dtype(np.int64)
    return np.dtype(np.int32)


def indptr_mismatch(bad_rows, op="spgemm_numeric"):
    """The error for an ``indptr`` that is not the symbolic product's."""
    return InvalidSparseStructure(
        f"{op}: indptr must be the output of spgemm_symbolic(A, B), but {bad_rows} "
        f"row(s) have a different number of entries")


#: The sampling methods of ``Backend.sample_rows`` and the codes the kernels
#: take for them (``spgnn._kernels.numba.sample.METHOD_*``).
SAMPLE_METHOD_CODES = {"floyd": 0, "es": 1, "its": 2}


def check_sample_method(method, op="sample_rows"):
    """The kernel code of a sampling method name (ValueError otherwise)."""
    try:
        return SAMPLE_METHOD_CODES[method]
    except (KeyError, TypeError):
        raise ValueError(f"{op}: method must be one of {tuple(SAMPLE_METHOD_CODES)}, but got "
                         f"{method!r}") from None


def check_drop_probability(p, op):
    """A dropout probability: a float in ``[0, 1)`` (ValueError otherwise)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{op}: p must lie in [0, 1), but got {p}")
    return float(p)
