"""SpMM and SDDMM over any semiring: the operators are module globals ``ADD`` and ``MUL``.

A template for :func:`.opcache.specialise` (unbound here): the backend runs
these for the semirings the op-code kernels (:mod:`.spmm`, :mod:`.sddmm`) do
not implement -- ``lor_land``, ``any_pair``, the user-registered ones -- and
numba caches them on disk per (ADD, MUL).  Same contracts as
:func:`.spmm.csr_spmm_rowwise` and :func:`.sddmm.csr_sddmm`, with one
difference that matters only for operators that are not true monoids (such
as ``any``): a reduction starts from its first term, not from the identity
(the identity is what an empty reduction yields).  Row-parallel with the
dynamic chunk scheduler of :mod:`._ops`.
"""

import sys

import numba
import numpy as np

from ._ops import atomic_fetch_add, chunk_count, clamp_parts, row_partition, wait_for_chunks
from .opcache import specialise

__all__ = ["spmm_kernel", "sddmm_kernel"]

#: Bound by a specialised copy of this module (:mod:`.opcache`).
ADD = MUL = None


@numba.njit(cache=True, nogil=True, parallel=True)
def spmm(indptr, indices, data, x, identity, nparts, out):
    """``out[i, j] = ADD-reduction over row i's entries e of MUL(data[e], x[indices[e], j])``;
    rows without entries hold ``identity``.  ``out`` (m, n) C-contiguous, overwritten."""
    m = indptr.shape[0] - 1
    n = out.shape[1]
    nparts = clamp_parts(nparts, m)
    nchunks = chunk_count(nparts, m)
    bounds = row_partition(indptr, nchunks)
    counter = np.zeros(1, dtype=np.int64)
    done = np.zeros(1, dtype=np.int64)
    for w in numba.prange(nparts):
        while True:
            p = atomic_fetch_add(counter, 0, 1)
            if p >= nchunks:
                break
            for i in range(bounds[p], bounds[p + 1]):
                lo, hi = indptr[i], indptr[i + 1]
                if hi == lo:
                    for j in range(n):
                        out[i, j] = identity
                    continue
                a = data[lo]
                c = indices[lo]
                for j in range(n):
                    out[i, j] = MUL(a, x[c, j])
                for e in range(lo + 1, hi):
                    a = data[e]
                    c = indices[e]
                    for j in range(n):
                        out[i, j] = ADD(out[i, j], MUL(a, x[c, j]))
            atomic_fetch_add(done, 0, 1)
        if w == 0:
            wait_for_chunks(done, nchunks)


@numba.njit(cache=True, nogil=True, parallel=True)
def sddmm(indptr, indices, data, x, y, identity, nparts, out_data):
    """``out_data[e] = MUL(data[e], ADD-reduction over k of MUL(x[i, k], y[indices[e], k]))``
    (``identity`` for the inner reduction when ``d == 0``); A's pattern and order."""
    m = indptr.shape[0] - 1
    d = x.shape[1]
    nparts = clamp_parts(nparts, m)
    nchunks = chunk_count(nparts, m)
    bounds = row_partition(indptr, nchunks)
    counter = np.zeros(1, dtype=np.int64)
    done = np.zeros(1, dtype=np.int64)
    for w in numba.prange(nparts):
        while True:
            p = atomic_fetch_add(counter, 0, 1)
            if p >= nchunks:
                break
            for i in range(bounds[p], bounds[p + 1]):
                for e in range(indptr[i], indptr[i + 1]):
                    j = indices[e]
                    acc = identity
                    if d > 0:
                        acc = MUL(x[i, 0], y[j, 0])
                        for k in range(1, d):
                            acc = ADD(acc, MUL(x[i, k], y[j, k]))
                    out_data[e] = MUL(data[e], acc)
            atomic_fetch_add(done, 0, 1)
        if w == 0:
            wait_for_chunks(done, nchunks)


def spmm_kernel(add, mul):
    """The SpMM kernel specialised on ``(add, mul)`` (scalar functions), cached on disk."""
    return specialise(sys.modules[__name__], ADD=add, MUL=mul).spmm


def sddmm_kernel(add, mul):
    """The SDDMM kernel specialised on ``(add, mul)`` (scalar functions), cached on disk."""
    return specialise(sys.modules[__name__], ADD=add, MUL=mul).sddmm
