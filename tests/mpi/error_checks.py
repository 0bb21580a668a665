"""Bad input raises the same typed error on every rank, never a hang.

Run: ``mpiexec -n P python -m mpi4py tests/mpi/error_checks.py``.  Each case
is run on every rank; the rank records which exception it saw, and the ranks
then compare notes.  Exit status 0 only if every rank raised the expected
type in every case.
"""

import numpy as np
import scipy.sparse as sp

import spgnn
from spgnn import (Communicator, DistDenseMatrix, DistSparseMatrix, Layout, LocalCSR, ProcessGrid,
                   grid_1d, spmm)


def expect(comm, name, exc_type, fn):
    try:
        fn()
        got = "no error"
    except exc_type as exc:
        got = type(exc).__name__
        msg = str(exc)
    except Exception as exc:  # record the wrong type instead of dying: we compare below
        got = f"WRONG {type(exc).__name__}: {exc}"
        msg = ""
    seen = comm.allgather_obj(got)
    ok = all(s == exc_type.__name__ for s in seen)
    if comm.rank == 0:
        print(f"{'ok ' if ok else 'BAD'} {name}: {seen}" + (f" | {msg}" if ok else ""), flush=True)
    return ok


def main():
    comm = Communicator.world()
    p, r = comm.size, comm.rank
    grid = grid_1d(comm)
    a = sp.random_array((12, 12), density=0.3, rng=np.random.default_rng(0), format="csr")
    results = []

    # Known to every rank: checked before any communication.
    results.append(expect(comm, "grid shape", spgnn.GridError,
                          lambda: ProcessGrid(comm, (p + 1,), ("row",))))
    A = DistSparseMatrix.from_global(a, grid, Layout("row"), backend="numpy")
    X = DistDenseMatrix.from_global(np.ones((11, 3)), grid, Layout("row"), backend="numpy")
    results.append(expect(comm, "spmm inner dimension", spgnn.DimensionMismatch, lambda: spmm(A, X)))
    results.append(expect(comm, "layout axis", spgnn.LayoutMismatch,
                          lambda: DistSparseMatrix.from_global(a, grid, Layout("col"))))

    # Known to one rank only: agreed on before raising.
    (r0, r1), _ = Layout("row").bounds(grid, a.shape)
    blk = LocalCSR.from_scipy(a[r0:r1])
    if r == p - 1 and blk.nnz:
        blk.indices[0] = 99  # out of range on the last rank only
    elif r == p - 1:
        blk.indptr[-1] = 5   # lengths disagree on the last rank only
    results.append(expect(comm, "malformed CSR on one rank", spgnn.InvalidSparseStructure,
                          lambda: DistSparseMatrix.from_local(blk, a.shape, grid, Layout("row"))))
    bad_shape = np.ones((r1 - r0 + (1 if r == 0 else 0), 3))
    results.append(expect(comm, "wrong block shape on rank 0", spgnn.DimensionMismatch,
                          lambda: DistDenseMatrix.from_local(bad_shape, (12, 3), grid, Layout("row"))))
    comm.barrier()
    ok = all(results)
    if r == 0:
        print(f"{'OK' if ok else 'FAILED'} error_checks {p} ranks", flush=True)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
