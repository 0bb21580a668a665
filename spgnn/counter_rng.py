"""SplitMix64's finaliser on numpy uint64 arrays: the numpy twin of ``spgnn._kernels.numba.splitmix``.

Counter-based random numbers (dropout masks in :mod:`spgnn.gnn.functional`,
sampling keys in :mod:`spgnn.sampling.rng`) are pure functions of integer
keys mixed by this bijection, so they do not depend on ranks, threads or
processing order, and numpy, Numba (and later CUDA) produce the same bits.
"""

import numpy as np

__all__ = ["GOLDEN", "mix64", "counter_uniform"]

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def mix64(z):
    """SplitMix64 finaliser, element-wise on uint64 (wrap-around arithmetic)."""
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def counter_uniform(counters, base):
    """Uniform float64 in ``[0, 1)``, one per uint64 counter, keyed by ``base``. Pure.

    ``(mix64((counter ^ base) + GOLDEN) >> 11) * 2**-53`` in wrap-around
    uint64 arithmetic: the hash of the dropout kernels
    (``spgnn._kernels.numba.gnn``), bit for bit.
    """
    with np.errstate(over="ignore"):
        z = (np.asarray(counters, dtype=np.uint64) ^ np.uint64(base)) + GOLDEN
    return (mix64(z) >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
