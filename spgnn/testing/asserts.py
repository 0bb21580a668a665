"""Collective assertions for tests under MPI (and the loopback transport).

A plain ``assert`` that fails on one rank while its peers go on to the next
collective hangs the job.  These helpers make every rank evaluate its local
condition, agree through one allreduce, and raise ``AssertionError`` on every
rank together, with the failing ranks' messages.
"""

import numpy as np

__all__ = ["collective_assert", "assert_dist_allclose", "assert_dist_equal", "TOLERANCES"]

#: (rtol, atol) per dtype for sums whose order differs between algorithms.
TOLERANCES = {np.dtype(np.float32): (2e-4, 2e-4), np.dtype(np.float64): (1e-10, 1e-10)}


def collective_assert(comm, ok, message=""):
    """Raise ``AssertionError`` on every rank if ``ok`` is false on any rank. Collective."""
    failures = comm.allgather_obj(None if ok else str(message), label="test:assert")
    bad = [(r, m) for r, m in enumerate(failures) if m is not None]
    if bad:
        detail = "; ".join(f"rank {r}: {m}" for r, m in bad[:4])
        raise AssertionError(f"{len(bad)} of {comm.size} ranks failed: {detail}")


def _tol(dtype, rtol, atol):
    d_rtol, d_atol = TOLERANCES.get(np.dtype(dtype), (1e-6, 1e-6))
    return (d_rtol if rtol is None else rtol), (d_atol if atol is None else atol)


def assert_dist_allclose(comm, actual, expected, rtol=None, atol=None, what="result"):
    """Collective ``assert_allclose`` with a dtype-keyed default tolerance (scaled by |expected|)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    ok, msg = True, ""
    if actual.shape != expected.shape:
        ok, msg = False, f"{what}: shape {actual.shape} != expected {expected.shape}"
    else:
        rtol, atol = _tol(actual.dtype, rtol, atol)
        scale = max(1.0, float(np.abs(expected[np.isfinite(expected)]).max(initial=0.0)))
        same_inf = np.array_equal(np.isinf(actual), np.isinf(expected)) and np.array_equal(
            actual[np.isinf(actual)], expected[np.isinf(expected)])
        fin = np.isfinite(expected)
        close = np.allclose(actual[fin], expected[fin], rtol=rtol, atol=atol * scale)
        if not (same_inf and close):
            diff = np.abs(actual[fin] - expected[fin]).max(initial=0.0)
            ok, msg = False, f"{what}: max abs diff {diff:.3e} (rtol={rtol}, atol={atol * scale:.1e})"
    collective_assert(comm, ok, msg)


def assert_dist_equal(comm, actual, expected, what="result"):
    """Collective exact equality (shapes, values, NaN and inf positions)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    ok = actual.shape == expected.shape and np.array_equal(actual, expected, equal_nan=True)
    collective_assert(comm, ok, f"{what}: arrays differ" if not ok else "")
