"""Synthetic graphs, so that every job runs with no data files.

* :func:`rmat` — R-MAT / Kronecker graphs with Graph500 parameters
  (a, b, c, d) = (0.57, 0.19, 0.19, 0.05): power-law degrees like social graphs.
* :func:`sbm` — a stochastic block model whose node features are noisy
  copies of a per-class mean, so labels are learnable from both structure
  and features (a contextual SBM); with ``degree_exponent`` its vertices get
  heavy-tailed (Chung-Lu, Pareto) degrees, like ogbn-products.

**Chunks.**  Edges are drawn in fixed-size chunks of :data:`CHUNK_EDGES`
edges, chunk ``i`` from its own generator ``numpy.random.default_rng([seed,
tag, i])``; per-vertex values (classes, degree weights, features) are drawn
in blocks of :data:`VERTEX_BLOCK` vertices the same way.  So any subset of
chunks can be drawn anywhere, in any order: a parallel job draws chunks
``r, r + P, ...`` on rank ``r`` and routes each edge to its row's owner
(:func:`spgnn.gnn.rows.generate_rows`), and the graph of a spec is the same at
every rank count.  The whole-graph :func:`rmat` / :func:`sbm` is the union of
all chunks (:func:`rmat_chunk`, :func:`sbm_chunk`), symmetrised, without
self-loops, duplicates collapsed to one unit edge (:func:`rows_to_csr`): the
same CSR, bit for bit, as the rows every rank builds.  Drawing is O(edges);
nothing sorts all edges at once.

All generators are deterministic functions of their ``seed``.  Local, pure.
"""


import numpy as np
import scipy.sparse as sp

from ._files import check_alloc

__all__ = ["rmat", "sbm", "parse_generator_spec", "GeneratorSpec", "parse_spec", "CHUNK_EDGES",
           "VERTEX_BLOCK", "rmat_chunk", "sbm_chunk", "SbmVertices", "rows_to_csr",
           "vertex_blocks", "symmetric_entries"]

#: Edges per chunk (part of a spec's definition: changing it changes every graph).
CHUNK_EDGES = 1 << 20
#: Vertices per block of per-vertex draws.
VERTEX_BLOCK = 1 << 12

# stream tags of default_rng([seed, tag, i])
_RMAT, _SCRAMBLE, _SBM_EDGES, _SBM_CLASS, _SBM_WEIGHT, _SBM_MEANS, _SBM_FEAT = range(7)

#: The default power-law SBM's Pareto degree exponent and weight cap (relative to the
#: smallest weight 1): heavy-tailed degrees with a maximum near 1000 times the minimum.
PL_EXPONENT = 2.5
PL_MAX_WEIGHT = 1000.0


def _rng(seed, tag, i):
    return np.random.default_rng([int(seed), int(tag), int(i)])


def vertex_blocks(lo, hi, seed, tag, draw):
    """``draw(rng, k)`` for vertices ``lo:hi``, drawn in blocks of :data:`VERTEX_BLOCK`. Pure.

    Block ``b`` (vertices ``b*VERTEX_BLOCK ...``) uses
    ``default_rng([seed, tag, b])``; the rows of the blocks overlapping
    ``lo:hi`` are drawn whole and sliced, so any range gives the rows the
    whole range ``0:n`` gives.
    """
    lo, hi = int(lo), int(hi)
    if hi <= lo:
        return draw(np.random.default_rng(0), 0)
    out = []
    for b in range(lo // VERTEX_BLOCK, (hi - 1) // VERTEX_BLOCK + 1):
        b0 = b * VERTEX_BLOCK
        vals = draw(_rng(seed, tag, b), VERTEX_BLOCK)
        out.append(vals[max(lo, b0) - b0:min(hi, b0 + VERTEX_BLOCK) - b0])
    return np.concatenate(out) if len(out) > 1 else out[0]


def symmetric_entries(rows, cols, self_loops=False):
    """Both directions of the edges ``(rows, cols)``, self-loops dropped unless asked. Pure."""
    r, c = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    if not self_loops:
        keep = r != c
        r, c = r[keep], c[keep]
    return r, c


def rows_to_csr(rows, cols, lo, hi, n, dtype=np.float32):
    """Rows ``lo:hi`` (global ids in ``rows``) of the simple graph of the entries. Pure.

    Duplicates collapse to one edge of weight 1; sorted indices.  Shape
    ``(hi - lo, n)``, global column ids.
    """
    a = sp.coo_array((np.ones(rows.size, dtype=dtype), (rows - lo, cols)),
                     shape=(hi - lo, n)).tocsr()
    a.sum_duplicates()
    a.data[:] = 1  # a simple graph: duplicates collapse to one edge
    a.sort_indices()
    return sp.csr_array(a)


# ---------------------------------------------------------------------------------- R-MAT
def _scramble(v, scale, seed):
    """A bijection of ``scale``-bit vertex ids keyed by ``seed`` (Graph500's relabelling). Pure.

    Rounds of multiply by an odd constant, add a constant (mod ``2**scale``)
    and xor-shift right: each step is a bijection, so the whole is a
    permutation of ``0..2**scale-1`` computed per id, with no O(n) table.
    """
    if scale == 0:
        return v
    mask = np.uint64((1 << scale) - 1)
    keys = np.random.SeedSequence([int(seed), _SCRAMBLE]).generate_state(6, np.uint64)
    shift = np.uint64((scale + 1) // 2)
    x = v.astype(np.uint64)
    with np.errstate(over="ignore"):
        for r in range(3):
            x = (x * (keys[2 * r] | np.uint64(1))) & mask
            x = (x + keys[2 * r + 1]) & mask
            x ^= x >> shift
    return x.astype(np.int64)


def _rmat_check(scale, edge_factor, a, b, c):
    if not 0 <= int(scale) <= 40:
        raise ValueError(f"rmat: scale must lie in [0, 40], but got {scale}")
    if edge_factor < 0:
        raise ValueError(f"rmat: edge_factor must be non-negative, but got {edge_factor}")
    d = 1.0 - a - b - c
    if min(a, b, c, d) < 0:
        raise ValueError(f"rmat: probabilities must be non-negative and sum to at most 1, "
                         f"but got a={a}, b={b}, c={c} (d={d})")


def rmat_edge_count(scale, edge_factor):
    """Edges an R-MAT spec draws (before symmetrisation and de-duplication)."""
    return int(edge_factor) << int(scale)


def num_chunks(m):
    """Chunks of :data:`CHUNK_EDGES` edges holding ``m`` edges."""
    return -(-int(m) // CHUNK_EDGES)


def rmat_chunk(scale, edge_factor, chunk, *, a=0.57, b=0.19, c=0.19, seed=0, scramble=True):
    """``(rows, cols)`` int64 of the directed edges of chunk ``chunk`` of an R-MAT graph. Pure.

    Chunk ``i`` holds edges ``i*CHUNK_EDGES ...`` of the ``edge_factor *
    2**scale`` drawn; each edge picks a quadrant per bit from one float32
    uniform (``default_rng([seed, 0, i])``).
    """
    scale = int(scale)
    m = rmat_edge_count(scale, edge_factor)
    k = max(0, min(CHUNK_EDGES, m - int(chunk) * CHUNK_EDGES))
    rng = _rng(seed, _RMAT, chunk)
    rows = np.zeros(k, dtype=np.int64)
    cols = np.zeros(k, dtype=np.int64)
    ta, tab, tabc = np.float32(a), np.float32(a + b), np.float32(a + b + c)
    for bit in range(scale):
        u = rng.random(k, dtype=np.float32)
        row_bit = u >= tab                                  # quadrants c, d
        col_bit = ((u >= ta) & (u < tab)) | (u >= tabc)     # quadrants b, d
        rows |= row_bit.astype(np.int64) << bit
        cols |= col_bit.astype(np.int64) << bit
    if scramble and scale > 0:
        rows, cols = _scramble(rows, scale, seed), _scramble(cols, scale, seed)
    return rows, cols


def rmat(scale, edge_factor=16, *, a=0.57, b=0.19, c=0.19, seed=0, symmetric=True,
         self_loops=False, scramble=True, dtype=np.float32):
    """An R-MAT graph with ``2**scale`` vertices and about ``edge_factor * 2**scale`` edges.

    The union of its chunks (:func:`rmat_chunk`, module docstring).

    Parameters
    ----------
    scale : int
        log2 of the number of vertices (0 ≤ scale ≤ 40).
    edge_factor : int
        Edges drawn per vertex before symmetrisation and de-duplication.
    a, b, c : float
        Quadrant probabilities; ``d = 1 - a - b - c``.
    scramble : bool
        Relabel vertices by a seeded bijection (Graph500 permutes them) so that
        vertex ids carry no locality; set False to keep the recursive (local)
        ordering.

    Returns
    -------
    scipy.sparse.csr_array of shape (n, n) with unit weights, sorted indices.

    Examples
    --------
    >>> from spgnn import rmat
    >>> a = rmat(6, 4, seed=0)     # the same graph on every rank for the same seed
    >>> a.shape, a.nnz, (a != a.T).nnz   # symmetric
    ((64, 64), 338, 0)
    """
    _rmat_check(scale, edge_factor, a, b, c)
    n = 1 << int(scale)
    m = rmat_edge_count(scale, edge_factor)
    # int64 rows and cols of both directions, and the CSR.
    check_alloc(8 * (n + 1) + 48 * m, f"rmat:{int(scale)}:{int(edge_factor)}",
                f"an R-MAT graph of {n:,} vertices and {m:,} edges")
    rs, cs = [], []
    for i in range(num_chunks(m)):
        r, cc = rmat_chunk(scale, edge_factor, i, a=a, b=b, c=c, seed=seed, scramble=scramble)
        if symmetric:
            r, cc = symmetric_entries(r, cc, self_loops)
        elif not self_loops:
            keep = r != cc
            r, cc = r[keep], cc[keep]
        rs.append(r)
        cs.append(cc)
    rows = np.concatenate(rs) if rs else np.zeros(0, np.int64)
    cols = np.concatenate(cs) if cs else np.zeros(0, np.int64)
    del rs, cs
    return rows_to_csr(rows, cols, 0, n, n, dtype)


# ------------------------------------------------------------------------------------ SBM
class SbmVertices:
    """Every vertex's class and degree weight of an SBM, and the samplers of its edges. Pure.

    O(n) per process (what each rank of a parallel draw holds): the classes
    (``default_rng([seed, 4, block])``, uniform), the Chung-Lu weights
    (``degree_exponent`` None: all 1; else Pareto ``(1-U)^(-1/(γ-1))``
    capped at ``max_weight``; ``default_rng([seed, 5, block])``), the
    vertices sorted by class and their cumulative weights.
    """

    def __init__(self, n, num_classes, seed, degree_exponent=None, max_weight=PL_MAX_WEIGHT):
        self.n, self.num_classes = int(n), int(num_classes)
        self.labels = vertex_blocks(0, n, seed, _SBM_CLASS,
                                    lambda rng, k: rng.integers(0, num_classes, size=k))
        if degree_exponent is None:
            w = np.ones(self.n)
        else:
            g = float(degree_exponent)
            w = vertex_blocks(0, n, seed, _SBM_WEIGHT,
                              lambda rng, k: np.minimum((1.0 - rng.random(k)) ** (-1.0 / (g - 1.0)),
                                                        max_weight))
        self.order = np.argsort(self.labels, kind="stable")
        self.cw = np.cumsum(w[self.order])
        starts = np.searchsorted(self.labels[self.order], np.arange(num_classes + 1))
        self.class_lo, self.class_hi = starts[:-1], starts[1:]
        before = np.concatenate([[0.0], self.cw])
        self.cw_lo, self.cw_hi = before[self.class_lo], before[self.class_hi]

    def _pick(self, t, lo, hi):
        idx = np.searchsorted(self.cw, t, side="right")
        return self.order[np.clip(idx, lo, hi - 1)]

    def draw(self, rng, k, homophily):
        """``(src, dst)`` of ``k`` edges: ``src`` ∝ weight, ``dst`` ∝ weight in src's class
        with probability ``homophily``, else ∝ weight among all vertices."""
        total = self.cw[-1]
        src = self._pick(rng.random(k) * total, 0, self.n)
        same = rng.random(k) < homophily
        u = rng.random(k)
        cls = self.labels[src]
        w_lo = np.where(same, self.cw_lo[cls], 0.0)
        w_hi = np.where(same, self.cw_hi[cls], total)
        i_lo = np.where(same, self.class_lo[cls], 0)
        i_hi = np.where(same, self.class_hi[cls], self.n)
        dst = self._pick(w_lo + u * (w_hi - w_lo), i_lo, i_hi)
        return src.astype(np.int64), dst.astype(np.int64)


def sbm_edge_count(n, avg_degree):
    """Edges an SBM draws: ``round(avg_degree * n / 2)``."""
    return int(round(avg_degree * n / 2))


def sbm_chunk(vertices, avg_degree, homophily, seed, chunk):
    """``(src, dst)`` of chunk ``chunk`` of an SBM's edges (``default_rng([seed, 2, chunk])``). Pure."""
    m = sbm_edge_count(vertices.n, avg_degree)
    k = max(0, min(CHUNK_EDGES, m - int(chunk) * CHUNK_EDGES))
    return vertices.draw(_rng(seed, _SBM_EDGES, chunk), k, homophily)


def sbm_features(labels, lo, hi, num_classes, num_features, feature_noise, seed, dtype):
    """Rows ``lo:hi`` of an SBM's features: the class mean plus Gaussian noise. Pure."""
    means = np.random.default_rng([int(seed), _SBM_MEANS]).normal(size=(num_classes, num_features))
    noise = vertex_blocks(lo, hi, seed, _SBM_FEAT,
                          lambda rng, k: rng.normal(size=(k, num_features)))
    return (means[labels[lo:hi]] + feature_noise * noise).astype(dtype)


def _sbm_check(n, num_classes, homophily, degree_exponent):
    if n <= 0 or num_classes <= 0:
        raise ValueError(f"sbm: n and num_classes must be positive, but got n={n}, "
                         f"num_classes={num_classes}")
    if not 0 <= homophily <= 1:
        raise ValueError(f"sbm: homophily must lie in [0, 1], but got {homophily}")
    if degree_exponent is not None and not degree_exponent > 1:
        raise ValueError(f"sbm: degree_exponent must exceed 1, but got {degree_exponent}")


def sbm(n, num_classes=4, *, avg_degree=10.0, homophily=0.8, num_features=32,
        feature_noise=1.0, seed=0, degree_exponent=None, max_weight=PL_MAX_WEIGHT,
        dtype=np.float32):
    """A stochastic block model with label-correlated Gaussian features.

    Each vertex gets a class uniformly at random and a degree weight (1, or
    with ``degree_exponent`` γ a Pareto weight of tail exponent γ - 1 capped
    at ``max_weight``: Chung-Lu, expected degree ∝ weight).  Each of the
    ``round(avg_degree * n / 2)`` edges picks its source ∝ weight and its
    target ∝ weight within the source's class with probability
    ``homophily``, else among all vertices.  Features are the class's random
    mean vector plus ``feature_noise``-scaled Gaussian noise.  The union of
    its chunks (:func:`sbm_chunk`, module docstring).

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
    _sbm_check(n, num_classes, homophily, degree_exponent)
    m = sbm_edge_count(n, avg_degree)
    check_alloc(8 * (n + 1) + 48 * m + 8 * n * (num_features + num_classes),
                f"sbm:{n}:{num_classes}", f"an SBM graph of {n:,} vertices, {m:,} edges, "
                f"{num_classes:,} classes and {num_features} features")
    v = SbmVertices(n, num_classes, seed, degree_exponent, max_weight)
    rs, cs = [], []
    for i in range(num_chunks(m)):
        r, c = symmetric_entries(*sbm_chunk(v, avg_degree, homophily, seed, i))
        rs.append(r)
        cs.append(c)
    rows = np.concatenate(rs) if rs else np.zeros(0, np.int64)
    cols = np.concatenate(cs) if cs else np.zeros(0, np.int64)
    adj = rows_to_csr(rows, cols, 0, n, n, dtype)
    feats = sbm_features(v.labels, 0, n, num_classes, num_features, feature_noise, seed, dtype)
    return adj, feats, v.labels.astype(np.int64)


# ---------------------------------------------------------------------------------- specs
_USAGE = {"rmat": "rmat:SCALE[:EDGE_FACTOR[:SEED]]", "sbm": "sbm:N[:CLASSES[:SEED]]",
          "plsbm": "plsbm:N:CLASSES:AVG_DEGREE[:FEATURES[:SEED]]"}


class GeneratorSpec:
    """A parsed generator spec (``rmat:...``, ``sbm:...``, ``plsbm:...``). Pure.

    ``kind``, ``seed``, ``n``, ``m`` (edges drawn), ``chunks``; ``chunk(i)``
    the directed edges of chunk ``i``; ``has_data`` (sbm kinds: their own
    features and labels); ``labels(lo, hi)``, ``features(lo, hi)`` (sbm
    kinds); ``num_features``, ``num_classes`` (sbm kinds, else None).

    ``plsbm:N:CLASSES:AVG_DEGREE[:FEATURES[:SEED]]`` is :func:`sbm` with
    power-law degrees (``degree_exponent`` :data:`PL_EXPONENT`, weights
    capped at :data:`PL_MAX_WEIGHT`), homophily 0.8, ``FEATURES`` (default
    100) feature columns, noise 1.0.
    """

    def __init__(self, kind, args, text):
        self.kind, self.text = kind, text
        self._vertices = None
        if kind == "rmat":
            scale, ef, seed = args
            _rmat_check(scale, ef, 0.57, 0.19, 0.19)
            self.scale, self.edge_factor, self.seed = int(scale), int(ef), int(seed)
            self.n = 1 << self.scale
            self.m = rmat_edge_count(scale, ef)
            self.num_features = self.num_classes = None
        else:
            if kind == "sbm":
                n, classes, seed = args
                self.avg_degree, self.num_features, self.degree_exponent = 10.0, 32, None
            else:
                n, classes, avg, feats, seed = args
                if avg <= 0 or feats <= 0:
                    raise ValueError(f"generator spec {text!r}: AVG_DEGREE and FEATURES must be "
                                     f"positive")
                self.avg_degree, self.num_features = float(avg), int(feats)
                self.degree_exponent = PL_EXPONENT
            _sbm_check(n, classes, 0.8, self.degree_exponent)
            self.n, self.num_classes, self.seed = int(n), int(classes), int(seed)
            self.homophily, self.feature_noise = 0.8, 1.0
            self.m = sbm_edge_count(self.n, self.avg_degree)
        self.chunks = num_chunks(self.m)

    @property
    def has_data(self):
        return self.kind != "rmat"

    @property
    def vertices(self):
        if self._vertices is None:
            self._vertices = SbmVertices(self.n, self.num_classes, self.seed, self.degree_exponent)
        return self._vertices

    def chunk(self, i):
        if self.kind == "rmat":
            return rmat_chunk(self.scale, self.edge_factor, i, seed=self.seed)
        return sbm_chunk(self.vertices, self.avg_degree, self.homophily, self.seed, i)

    def labels(self, lo, hi):
        return self.vertices.labels[lo:hi].astype(np.int64)

    def features(self, lo, hi, dtype=np.float32):
        return sbm_features(self.vertices.labels, lo, hi, self.num_classes, self.num_features,
                            self.feature_noise, self.seed, dtype)

    def whole(self):
        """``(adj, features or None, labels or None)`` of the whole graph."""
        if self.kind == "rmat":
            return rmat(self.scale, self.edge_factor, seed=self.seed), None, None
        return sbm(self.n, self.num_classes, avg_degree=self.avg_degree,
                   homophily=self.homophily, num_features=self.num_features,
                   feature_noise=self.feature_noise, seed=self.seed,
                   degree_exponent=self.degree_exponent)


def parse_spec(spec):
    """The :class:`GeneratorSpec` of ``spec``, or ``None`` when it is not a generator spec.

    Raises ValueError for a generator spec with bad arguments.
    """
    if not isinstance(spec, str) or ":" not in spec:
        return None
    kind, *args = spec.split(":")
    if kind not in _USAGE:
        return None
    try:
        nums = [int(x) for x in args]
    except ValueError:
        raise ValueError(f"generator spec {spec!r}: arguments must be integers") from None
    usage = _USAGE[kind]
    if kind == "plsbm":
        if not 3 <= len(nums) <= 5:
            raise ValueError(f"generator spec {spec!r}: expected {usage}")
        nums = nums + [100, 0][len(nums) - 3:]
        return GeneratorSpec(kind, nums, spec)
    if not 1 <= len(nums) <= 3:
        raise ValueError(f"generator spec {spec!r}: expected {usage}")
    defaults = {"rmat": [16, 0], "sbm": [4, 0]}[kind]
    return GeneratorSpec(kind, nums + defaults[len(nums) - 1:], spec)


def parse_generator_spec(spec):
    """Build a graph from ``rmat:SCALE[:EDGE_FACTOR[:SEED]]``, ``sbm:N[:CLASSES[:SEED]]`` or
    ``plsbm:N:CLASSES:AVG_DEGREE[:FEATURES[:SEED]]``.

    Returns ``None`` when ``spec`` is not a generator spec, else a dict with
    ``kind``, ``seed``, ``adj`` (csr_array) and, for the SBMs, ``features``
    and ``labels`` (``None`` for ``rmat``).
    """
    g = parse_spec(spec)
    if g is None:
        return None
    adj, features, labels = g.whole()
    return dict(kind=g.kind, seed=g.seed, adj=adj, features=features, labels=labels)
