"""Counter-based random numbers keyed to global ids (report §8.1 "RNG", §9.16).

Every random number the samplers use is a pure function of integers:

``row_key = H(H(H(H(H(base(seed), stream), epoch), minibatch), hop), row)``
    one uint64 per sampled row, where ``minibatch`` is the *global*
    minibatch id, ``hop`` the layer (0 = the hop from the batch), and ``row``
    the row's identity inside its minibatch (the global vertex id when rows
    are unique, the row's position inside the minibatch's tree otherwise).
``u = uniform(row_key, x)``
    the draw for integer ``x`` (a column's global vertex id for keyed
    exponential sampling, the draw index for Floyd and ITS).

``H(key, x) = mix(key ^ mix((x + 1) * 0x9E3779B97F4A7C15))`` with ``mix`` the
SplitMix64 finalizer (Steele, Lea, Flood 2014), in wrap-around uint64
arithmetic; ``uniform`` maps the top 53 bits to ``(k + 0.5) / 2**53``, never
0 or 1.  Nothing depends on the rank count P, the replication factor c, the
bulk size k, thread counts or the order rows are processed in, so the same
seed gives bit-identical minibatches in every mode (the property tests of
``tests/property/test_sampling_dist.py``).

The numpy functions here and the numba ones in
:mod:`spgnn._kernels.numba.sample` compute identical bits (tested); a CuPy
port needs only the same three lines of integer arithmetic.
"""

import numpy as np

from ..counter_rng import GOLDEN as _GOLDEN, mix64

__all__ = ["mix64", "hash2", "uniform", "row_keys", "STREAMS", "base_key"]

#: Domain tags: one stream per use, so no two uses share random numbers.
STREAMS = {"sage-tree": 1, "sage-unique": 2, "ladies": 3, "test": 99}


def hash2(key, x):
    """``H(key, x)`` element-wise (broadcasting); ``x`` non-negative integers."""
    x = np.asarray(x)
    if x.dtype.kind not in "iu":
        raise TypeError(f"hash2: x must hold integers, but got dtype {x.dtype}")
    with np.errstate(over="ignore"):
        inner = mix64((x.astype(np.uint64) + np.uint64(1)) * _GOLDEN)
    return mix64(np.asarray(key, dtype=np.uint64) ^ inner)


def uniform(key, x):
    """Uniform float64 in (0, 1) keyed by ``(key, x)``, element-wise."""
    h = hash2(key, x)
    return ((h >> np.uint64(11)).astype(np.float64) + 0.5) * (1.0 / 9007199254740992.0)


def base_key(seed) -> np.uint64:
    """The key of a seed (any non-negative int below 2**64)."""
    seed = int(seed)
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must lie in [0, 2**64), but got {seed}")
    return mix64(np.uint64(seed) ^ _GOLDEN)[()]


def row_keys(seed, stream, minibatch, hop, row, epoch=0):
    """One uint64 key per row (arrays broadcast): see the module docstring.

    Parameters
    ----------
    seed : int
    stream : str or int, a :data:`STREAMS` name or tag
    minibatch : int array, GLOBAL minibatch id of each row
    hop : int, 0 = the hop from the batch
    row : int array, global vertex id (unique rows) or position in the minibatch's tree
    epoch : int
    """
    tag = STREAMS[stream] if isinstance(stream, str) else int(stream)
    k = hash2(base_key(seed), np.int64(tag))
    k = hash2(k, np.int64(epoch))
    k = hash2(k, np.asarray(minibatch, dtype=np.int64))
    k = hash2(k, np.int64(hop))
    return hash2(k, np.asarray(row, dtype=np.int64))
