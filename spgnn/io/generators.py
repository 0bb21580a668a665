"""Synthetic graphs, so that every job runs with no data files.

* :func:`rmat` — R-MAT / Kronecker graphs with Graph500 parameters
  (a, b, c, d) = (0.57, 0.19, 0.19, 0.05): power-law degrees like social graphs.
* :func:`sbm` — a stochastic block model whose node features are noisy
  copies of a per-class mean, so labels are learnable from both structure
  and features (a contextual SBM).

All generators are deterministic functions of their ``seed``: every rank can
build the same graph independently.
"""

import numpy as np
import scipy.sparse as sp

from ._files import check_alloc

__all__ = ["rmat", "sbm", "parse_generator_spec"]


def _finish(rows, cols, n, symmetric, self_loops, dtype):
    if symmetric:
        rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    if not self_loops:
        keep = rows != cols
        rows, cols = rows[keep], cols[keep]
    a = sp.csr_array((np.ones(rows.size, dtype=dtype), (rows, cols)), shape=(n, n))
    a.sum_duplicates()
    a.data[:] = 1  # a simple graph: duplicates collapse to one edge
    a.sort_indices()
    return a


def rmat(scale, edge_factor=16, *, a=0.57, b=0.19, c=0.19, seed=0, symmetric=True,
         self_loops=False, scramble=True, dtype=np.float32):
    """An R-MAT graph with ``2**scale`` vertices and about ``edge_factor * 2**scale`` edges.

    Parameters
    ----------
    scale : int
        log2 of the number of vertices (0 ≤ scale ≤ 40).
    edge_factor : int
        Edges drawn per vertex before symmetrisation and de-duplication.
    a, b, c : float
        Quadrant probabilities; ``d = 1 - a - b - c``.
    scramble : bool
        Randomly relabel vertices (Graph500 does) so that vertex ids carry no
        locality; set False to keep the recursive (local) ordering.

    Returns
    -------
    scipy.sparse.csr_array of shape (n, n) with unit weights, sorted indices.

    Examples
    --------
    >>> from spgnn import rmat
    >>> a = rmat(6, 4, seed=0)     # the same graph on every rank for the same seed
    >>> a.shape, a.nnz, (a != a.T).nnz   # symmetric
    ((64, 64), 330, 0)
    """
    if not 0 <= int(scale) <= 40:
        raise ValueError(f"rmat: scale must lie in [0, 40], but got {scale}")
    if edge_factor < 0:
        raise ValueError(f"rmat: edge_factor must be non-negative, but got {edge_factor}")
    d = 1.0 - a - b - c
    if min(a, b, c, d) < 0:
        raise ValueError(f"rmat: probabilities must be non-negative and sum to at most 1, "
                         f"but got a={a}, b={b}, c={c} (d={d})")
    n = 1 << int(scale)
    m = int(edge_factor) * n
    # int64 rows and cols, their random bits, and the symmetrised CSR.
    check_alloc(8 * (n + 1) + 64 * m, f"rmat:{int(scale)}:{int(edge_factor)}",
                f"an R-MAT graph of {n:,} vertices and {m:,} edges")
    rng = np.random.default_rng(seed)
    rows = np.zeros(m, dtype=np.int64)
    cols = np.zeros(m, dtype=np.int64)
    for bit in range(int(scale)):
        u = rng.random(m)
        row_bit = u >= a + b                       # quadrants c, d
        col_bit = ((u >= a) & (u < a + b)) | (u >= a + b + c)  # quadrants b, d
        rows |= row_bit.astype(np.int64) << bit
        cols |= col_bit.astype(np.int64) << bit
    if scramble and n > 1:
        perm = rng.permutation(n)
        rows, cols = perm[rows], perm[cols]
    return _finish(rows, cols, n, symmetric, self_loops, dtype)


def sbm(n, num_classes=4, *, avg_degree=10.0, homophily=0.8, num_features=32,
        feature_noise=1.0, seed=0, dtype=np.float32):
    """A stochastic block model with label-correlated Gaussian features.

    Each vertex gets a class uniformly at random; an edge joins two vertices
    of the same class with probability ``homophily`` (in expectation over
    edges), else two of different classes.  Features are the class's random
    mean vector plus ``feature_noise``-scaled Gaussian noise.

    Returns
    -------
    (adjacency csr_array (n, n) symmetric without self-loops,
     features ndarray (n, num_features), labels ndarray (n,) int64)

    Examples
    --------
    >>> from spgnn import sbm
    >>> a, x, y = sbm(100, 4, num_features=8, seed=0)
    >>> a.shape, x.shape, y.shape, sorted(set(y.tolist()))
    ((100, 100), (100, 8), (100,), [0, 1, 2, 3])
    """
    if n <= 0 or num_classes <= 0:
        raise ValueError(f"sbm: n and num_classes must be positive, but got n={n}, "
                         f"num_classes={num_classes}")
    if not 0 <= homophily <= 1:
        raise ValueError(f"sbm: homophily must lie in [0, 1], but got {homophily}")
    m = int(round(avg_degree * n / 2))
    check_alloc(8 * (n + 1) + 64 * m + 8 * n * (num_features + num_classes),
                f"sbm:{n}:{num_classes}", f"an SBM graph of {n:,} vertices, {m:,} edges, "
                f"{num_classes:,} classes and {num_features} features")
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, size=n)
    m = int(round(avg_degree * n / 2))
    src = rng.integers(0, n, size=m)
    same = rng.random(m) < homophily
    by_class = [np.flatnonzero(labels == k) for k in range(num_classes)]
    dst = rng.integers(0, n, size=m)
    for k in range(num_classes):
        members = by_class[k]
        pick = same & (labels[src] == k)
        if members.size and pick.any():
            dst[pick] = members[rng.integers(0, members.size, size=int(pick.sum()))]
    adj = _finish(src, dst, n, True, False, dtype)
    means = rng.normal(size=(num_classes, num_features))
    feats = means[labels] + feature_noise * rng.normal(size=(n, num_features))
    return adj, feats.astype(dtype), labels.astype(np.int64)


def parse_generator_spec(spec):
    """Build a graph from ``rmat:SCALE[:EDGE_FACTOR[:SEED]]`` or ``sbm:N[:CLASSES[:SEED]]``.

    Returns ``None`` when ``spec`` is not a generator spec, else a dict with
    ``kind``, ``seed``, ``adj`` (csr_array) and, for ``sbm``, ``features``
    and ``labels`` (``None`` for ``rmat``).
    """
    if not isinstance(spec, str) or ":" not in spec:
        return None
    kind, *args = spec.split(":")
    if kind not in ("rmat", "sbm"):
        return None
    try:
        nums = [int(x) for x in args]
    except ValueError:
        raise ValueError(f"generator spec {spec!r}: arguments must be integers") from None
    usage = {"rmat": "rmat:SCALE[:EDGE_FACTOR[:SEED]]", "sbm": "sbm:N[:CLASSES[:SEED]]"}[kind]
    if not 1 <= len(nums) <= 3:
        raise ValueError(f"generator spec {spec!r}: expected {usage}")
    defaults = {"rmat": [16, 0], "sbm": [4, 0]}[kind]
    first, second, seed = nums + defaults[len(nums) - 1:]
    if kind == "rmat":
        return dict(kind=kind, seed=seed, adj=rmat(first, second, seed=seed), features=None,
                    labels=None)
    adj, features, labels = sbm(first, second, seed=seed)
    return dict(kind=kind, seed=seed, adj=adj, features=features, labels=labels)
