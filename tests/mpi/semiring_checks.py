"""Distributed SpMM and SDDMM over GraphBLAS and user-registered semirings, against a
brute-force scalar reference.  Shared by loopback tests and real mpiexec runs.

``check_semirings(comm, backend, semirings)`` is collective: on a 1-D grid it
runs SpMM (``1d``, ``1d-aware``) and SDDMM (``1d``, ``1d-aware``); on a
``P/2 x 2`` grid (even P) the 1.5D SpMM (``15d``, ``15d-aware``: partial
products reduced over the replicas -- an allgather and a fold for monoids MPI
has no reduction for) and SDDMM (``15d-aware``); on a ``2 x 1 x P/2`` grid the 3D
SpMM (Plexus roles, whole and in row blocks).  Assertions are collective.

Run under MPI: ``mpiexec -n P python tests/mpi/semiring_checks.py [--backend numba]``.
"""

import argparse

import numpy as np

from spgnn import (DistDenseMatrix, DistSparseMatrix, Layout, ProcessGrid, layouts_15d,
                   layouts_3d, register_binary_op, register_monoid, register_semiring, sddmm, spmm)
from spgnn.testing.asserts import collective_assert
from spgnn.testing.strategies_dist import random_sparse


def _absdiff(x, y):
    return abs(x - y)


def _plus_u(x, y):          # a user monoid MPI has no reduction for (no ufunc either)
    return x + y


register_binary_op("absdiff_u", _absdiff)
register_binary_op("plus_u", _plus_u)
register_monoid("plus_u", "plus_u", 0.0)
register_semiring("max_absdiff_u", "max", "absdiff_u")
register_semiring("plusu_absdiff_u", "plus_u", "absdiff_u")

#: semiring -> (add, mul, identity) as scalar Python functions, for the reference
SCALAR = {
    "max_absdiff_u": (max, _absdiff, -np.inf),
    "plusu_absdiff_u": (_plus_u, _absdiff, 0.0),
    "lor_land": (lambda x, y: float(x != 0 or y != 0), lambda x, y: float(x != 0 and y != 0), 0.0),
    "any_pair": (lambda x, y: x, lambda x, y: 1.0, 0.0),
    "max_times": (max, lambda x, y: x * y, -np.inf),
}

ALL = tuple(SCALAR)


def _fold(add, terms, identity):
    if not terms:
        return identity
    acc = terms[0]
    for t in terms[1:]:
        acc = add(acc, t)
    return acc


def ref_spmm(a, x, name):
    add, mul, ident = SCALAR[name]
    a = a.tocsr()
    out = np.empty((a.shape[0], x.shape[1]))
    for i in range(a.shape[0]):
        cols, vals = a.indices[a.indptr[i]:a.indptr[i + 1]], a.data[a.indptr[i]:a.indptr[i + 1]]
        for j in range(x.shape[1]):
            out[i, j] = _fold(add, [mul(v, x[c, j]) for c, v in zip(cols, vals)], ident)
    return out


def ref_sddmm(a, x, y, name):
    """Dense n x k: the SDDMM value at A's entries, NaN elsewhere."""
    add, mul, ident = SCALAR[name]
    c = a.tocoo()
    out = np.full(a.shape, np.nan)
    for i, j, v in zip(c.row, c.col, c.data):
        out[i, j] = mul(v, _fold(add, [mul(x[i, k], y[j, k]) for k in range(x.shape[1])], ident))
    return out


def _dense_of(C):
    g = C.to_global().tocoo()
    out = np.full(C.shape, np.nan)
    out[g.row, g.col] = g.data
    return out


def check_semirings(comm, backend="numpy", semirings=ALL, n=11, f=3, seed=0):
    p = comm.size
    a = random_sparse((n, n), 0.3, seed)
    a = a.tolil()
    a[2, :] = 0                                    # an empty row: the identity
    a = a.tocsr()
    a.eliminate_zeros()
    rng = np.random.default_rng(seed + 1)
    x = rng.uniform(-1, 1, (n, f))
    xs = rng.uniform(-1, 1, (n, f))
    grids = [("1d", ProcessGrid(comm, (p,), ("row",)))]
    if p % 2 == 0:
        grids.append(("15d", ProcessGrid(comm, (p // 2, 2), ("row", "layer"))))
        grids.append(("3d", ProcessGrid(comm, (2, 1, p // 2), ("x", "y", "z"))))
    for kind, grid in grids:
        if kind == "3d":
            # Plexus roles (o, i, d) = (x, y, z): partial products all-reduced over o,
            # whole and in row blocks
            lay = layouts_3d(grid, ("x", "y", "z"), n, f)
            A = DistSparseMatrix.from_global(a, grid, lay["A"], backend=backend)
            X = DistDenseMatrix.from_global(x, grid, lay["X"], backend=backend)
            for name in semirings:
                want = ref_spmm(a, x, name)
                for blocks in (1, 2):
                    got = spmm(A, X, name, algorithm="3d", row_blocks=blocks).to_global()
                    collective_assert(comm, np.allclose(got, want, equal_nan=True),
                                      f"spmm 3d row_blocks={blocks} {name} on {p} ranks")
            continue
        if kind == "1d":
            la = lx = Layout("row")
            spmm_algos, sddmm_algos = ("1d", "1d-aware"), ("1d", "1d-aware")
        else:
            la, lx = layouts_15d(grid, n)
            spmm_algos, sddmm_algos = ("15d", "15d-aware"), ("15d-aware",)
        A = DistSparseMatrix.from_global(a, grid, la, backend=backend)
        X = DistDenseMatrix.from_global(x, grid, lx, backend=backend)
        XS = DistDenseMatrix.from_global(xs, grid, lx, backend=backend)
        for name in semirings:
            want = ref_spmm(a, x, name)
            for algo in spmm_algos:
                got = spmm(A, X, name, algorithm=algo).to_global()
                collective_assert(comm, np.allclose(got, want, equal_nan=True),
                                  f"spmm {algo} {name} on {p} ranks: {got} != {want}")
            want = ref_sddmm(a, xs, x, name)
            for algo in sddmm_algos:
                got = _dense_of(sddmm(A, XS, X, name, algorithm=algo))
                collective_assert(comm, np.allclose(got, want, equal_nan=True),
                                  f"sddmm {algo} {name} on {p} ranks")


def main():
    from spgnn import Communicator

    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="numpy")
    parser.add_argument("--semirings", default=",".join(ALL))
    args = parser.parse_args()
    comm = Communicator.world()
    check_semirings(comm, args.backend, tuple(args.semirings.split(",")))
    comm.barrier()
    if comm.rank == 0:
        print(f"OK semiring_checks {comm.size} ranks backend={args.backend}", flush=True)


if __name__ == "__main__":
    main()
