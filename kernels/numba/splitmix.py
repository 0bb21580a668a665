"""SplitMix64's finaliser, the mixing step of every counter-based random number in spgnn.

Steele, Lea, Flood, *Fast splittable pseudorandom number generators* (2014).
Dropout masks (:mod:`.gnn`) and samplers (:mod:`.sample`) build their keyed
uniforms on this one bijection of uint64 (wrap-around arithmetic); the numpy
twin is :func:`spgnn.counter_rng.mix64` and the two give identical bits.
"""

import numba
import numpy as np

__all__ = ["GOLDEN", "M1", "M2", "S11", "INV53", "mix64"]

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
M1 = np.uint64(0xBF58476D1CE4E5B9)
M2 = np.uint64(0x94D049BB133111EB)
S30 = np.uint64(30)
S27 = np.uint64(27)
S31 = np.uint64(31)
S11 = np.uint64(11)
INV53 = 1.0 / 9007199254740992.0   # 2**-53: top 53 bits -> [0, 1)


@numba.njit(cache=True, nogil=True, inline="always")
def mix64(z):
    """SplitMix64 finaliser of a uint64 (a bijection)."""
    z = (z ^ (z >> S30)) * M1
    z = (z ^ (z >> S27)) * M2
    return z ^ (z >> S31)
