"""Predicted time of a full-graph GCN epoch per configuration (Plexus's performance model). Pure.

A configuration is an SpMM algorithm with its shape: ``1d``, ``1d-aware``,
``15d`` / ``15d-aware`` with a replication ``c``, or ``3d`` with a grid
``(X, Y, Z)``.  Its epoch is a list of :class:`Step` (the bulk-synchronous
steps of every layer, forward and backward), each timed for the slowest rank:

compute (fitted on this machine by ``spgnn calibrate``, :class:`Calibration`)
    SpMM ``Y = A X`` on a rank's block (``m`` rows, ``nnz`` stored entries,
    ``f`` columns): ``s0 + s1·nnz·f + s2·nnz + s3·m·f + s4·nnz·f·spill``
    (the multiply-adds, the index stream, the output rows, and the
    multiply-adds whose rows of X miss the cache, :func:`spmm_features`).
    GEMM ``(m×k)·(k×n)``: ``2mkn`` flops at the rate measured for the
    nearest shapes of a table (``gemm_table``: the four nearest in
    ``(log m, log k, log n)``, inverse-distance weights on log GFLOP/s), never
    less than the table's fastest call; BLAS's rate moves 7-fold between the
    thin products of a GNN (k or n of 8-16) and square ones, which no single
    rate or two-term roofline followed within 25 % here.  Without a table:
    ``g0 + g1·2mkn + g2·w·(mk + kn + mn)``, a roofline with additive compute
    and memory terms.
communication (α–β per collective kind)
    ``α_k·messages + β_k·bytes`` with ``messages`` and ``bytes`` (the larger
    of sent and received) the ledger's byte model for the slowest rank
    (:mod:`spgnn.comm.stats`): the 1D and 1.5D SpMMs are the planner's exact
    events (:func:`spgnn.plan.events.plan_spmm`, tested equal to the ledger);
    3D is spgnn's own 3D GCN epoch (:func:`spgnn.plan.events.plan_gcn_3d`, also
    tested equal to the ledger; Plexus's closed form over-counted it ~3x).
    With a rank-to-node mapping, groups spanning nodes use the inter-node
    α–β (:meth:`Calibration.comm_seconds`).

The epoch of a GCN layer ``l`` (``D → D'``, ``GCNConv(order="auto")``:
transform first when ``D' < D``, so the SpMM width is ``min(D, D')``)::

    forward   GEMM (n_r, D, D') and SpMM (width min(D, D'))
    backward  GEMM (D, n_r, D') for dW, all-reduce of dW over the row axis,
              SpMM with Aᵀ and GEMM (n_r, D', D) for dX (skipped on layer 0
              when aggregating first: no input gradient is needed)

where ``n_r`` is the rank's rows.  Losses, biases, dropout and the optimizer
are left out (a few vectors per epoch).  What was validated and what is
extrapolated: docs/performance_model.md.
"""

import json
import math
import os
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..comm.stats import allreduce_messages, model_allreduce
from ..errors import CalibrationError, GridError
from ..grid import AXES_3D, roles_for_layer, shapes_3d
from ..layout import block_offsets
from .events import as_counts, csr_block_nnz, gcn_3d_layers, plan_gcn_3d, plan_spmm

__all__ = ["Calibration", "DEFAULT_CALIBRATION", "Step", "Prediction", "kind_of", "fit_nonneg",
           "fit_spmm", "fit_gemm", "fit_comm", "spmm_features", "gemm_features",
           "local_work", "predict_epoch", "candidate_configs", "rank_configs",
           "default_calibration_path", "load_calibration", "FORMAT", "FORMATS",
           "axis_groups", "predict_spmm", "rank_spmm_configs"]

#: ``format`` field of a calibration file (written).  Version 2 added
#: ``comm_inter`` and ``ranks_per_node``; version 1 files still load.
FORMAT = "spgnn-calibration/2"
#: Formats a calibration file may have.
FORMATS = ("spgnn-calibration/1", FORMAT)

#: Table rows a GEMM prediction interpolates between.
GEMM_NEIGHBOURS = 4

#: Collective kinds with their own α and β (``default`` serves the others).
KINDS = ("allreduce", "allgather", "alltoall", "bcast", "reduce_scatter", "default")


def kind_of(op):
    """The α–β kind of a ledger op: ``allgatherv`` → ``allgather``, ``alltoall:counts`` → ``alltoall``."""
    base = op.split(":")[0]
    if base in ("allgatherv", "alltoallv"):
        base = base[:-1]
    return base if base in KINDS else "default"


#: Bytes of dense rows that stay in cache (the SpMM cache term's threshold).
CACHE_BYTES = 1 << 18


def spmm_features(m, nnz, f, itemsize=4):
    """The regressors of the SpMM model: ``[1, nnz·f, nnz, m·f, nnz·f·max(0, log₂(m·f·w / C))]``.

    The last term charges the gathered rows of X once they no longer fit in
    cache (``C`` = :data:`CACHE_BYTES`; the rows of a square block's X are
    about its ``m``): per multiply-add, email-enron at f = 96 costs twice
    f = 32 here.
    """
    spill = max(0.0, math.log2(max(float(m) * f * itemsize, 1.0) / CACHE_BYTES))
    return np.array([1.0, float(nnz) * f, float(nnz), float(m) * f, float(nnz) * f * spill])


def gemm_features(m, k, n, itemsize=4):
    """The regressors of the GEMM model: ``[1, 2mkn, w·(mk + kn + mn)]``."""
    m, k, n = float(m), float(k), float(n)
    return np.array([1.0, 2.0 * m * k * n, itemsize * (m * k + k * n + m * n)])


def _finite_nonneg(values, what):
    try:
        out = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise CalibrationError(f"calibration: {what} must be numbers, but got {values!r}") from None
    if not all(math.isfinite(v) and v >= 0 for v in out):
        raise CalibrationError(f"calibration: {what} must be finite and >= 0, but got {out}")
    return out


@dataclass(frozen=True)
class Calibration:
    """Fitted coefficients of the model (seconds). Immutable; JSON through :meth:`to_dict`.

    ``comm`` maps a kind of :data:`KINDS` to ``(alpha, beta)`` (seconds per
    message, seconds per byte); ``spmm`` and ``gemm`` are the coefficients of
    :func:`spmm_features` and :func:`gemm_features`; ``gemm_table`` holds
    measured ``(m, k, n, seconds)`` (used instead of ``gemm`` when it has
    :data:`GEMM_NEIGHBOURS` rows or more); ``meta`` says where and how they
    were measured.
    """

    comm: dict
    spmm: tuple
    gemm: tuple
    meta: dict = field(default_factory=dict)
    gemm_table: tuple = ()
    #: α–β of collectives whose group spans several nodes (same kinds as ``comm``).
    comm_inter: dict = None
    #: Consecutive world ranks per node (rank ``r`` on node ``r // ranks_per_node``);
    #: ``None``: one node, every collective uses ``comm``.
    ranks_per_node: int = None

    @staticmethod
    def _check_comm(table, name):
        if not isinstance(table, dict) or "default" not in table:
            raise CalibrationError(f"calibration: {name} must map kinds to [alpha, beta] and hold "
                                   f"'default', but got {table!r}")
        out = {}
        for kind, ab in table.items():
            if kind not in KINDS:
                raise CalibrationError(f"calibration: unknown collective kind {kind!r} in {name}; "
                                       f"expected one of {KINDS}")
            if not isinstance(ab, (list, tuple)) or len(ab) != 2:
                raise CalibrationError(f"calibration: {name}[{kind!r}] must be [alpha, beta], "
                                       f"but got {ab!r}")
            out[kind] = _finite_nonneg(ab, f"{name}[{kind!r}]")
        return out

    def __post_init__(self):
        object.__setattr__(self, "comm", self._check_comm(self.comm, "comm"))
        if self.comm_inter is not None:
            object.__setattr__(self, "comm_inter", self._check_comm(self.comm_inter, "comm_inter"))
        if self.ranks_per_node is not None:
            rpn = self.ranks_per_node
            if isinstance(rpn, bool) or not isinstance(rpn, (int, np.integer)) or rpn < 1:
                raise CalibrationError(f"calibration: ranks_per_node must be an int >= 1, but "
                                       f"got {rpn!r}")
            if self.comm_inter is None:
                raise CalibrationError("calibration: ranks_per_node needs comm_inter (the "
                                       "inter-node [alpha, beta] per kind)")
            object.__setattr__(self, "ranks_per_node", int(rpn))
        for name, size in (("spmm", 5), ("gemm", 3)):
            value = getattr(self, name)
            if not isinstance(value, (list, tuple)) or len(value) != size:
                raise CalibrationError(f"calibration: {name} must be {size} coefficients, but got "
                                       f"{value!r}")
            object.__setattr__(self, name, _finite_nonneg(value, name))
        table = []
        for row in self.gemm_table:
            if not isinstance(row, (list, tuple)) or len(row) != 4:
                raise CalibrationError(f"calibration: gemm_table rows must be [m, k, n, seconds], "
                                       f"but got {row!r}")
            m, k, n, t = _finite_nonneg(row, "gemm_table")
            if min(m, k, n, t) <= 0:
                raise CalibrationError(f"calibration: gemm_table entries must be > 0, but got "
                                       f"{row!r}")
            table.append((m, k, n, t))
        object.__setattr__(self, "gemm_table", tuple(table))

    def with_nodes(self, ranks_per_node, comm_inter=None):
        """A copy with a rank-to-node mapping (and inter-node α–β, default: this one's). Pure."""
        import dataclasses

        return dataclasses.replace(self, ranks_per_node=ranks_per_node,
                                   comm_inter=self.comm_inter if comm_inter is None
                                   else comm_inter)

    def comm_seconds(self, op, messages, nbytes, groups=None):
        """Seconds of a collective: ``α·messages + β·bytes``. Pure.

        Without ``groups`` (or without a node mapping): the kind's intra-node
        ``comm`` α–β, elementwise over ``messages`` and ``nbytes`` (scalars
        or arrays).  With ``groups`` (a sequence of equal-length sequences of
        world ranks: the groups that run this collective at the same time,
        e.g. every x-line of a 3D grid) and ``ranks_per_node``: returns an
        array indexed by world rank (``messages``, ``nbytes``: scalars or
        arrays indexed by world rank).  A group inside one node uses
        ``comm``; a group spanning nodes uses ``comm_inter`` with its β
        multiplied by its contention: the most crossing groups that have a
        member on one of its nodes (they share that node's links).  On a
        Plexus grid this is its ``β_inter / min(G_node, P_a)`` (report §3.2).
        """
        kind = kind_of(op)
        alpha, beta = self.comm.get(kind, self.comm["default"])
        if groups is None or self.ranks_per_node is None:
            return alpha * messages + beta * nbytes
        g = np.asarray(groups, dtype=np.int64)
        if g.ndim != 2:
            raise GridError(f"comm_seconds: groups must be equal-length rank lists, but got "
                            f"shape {g.shape}")
        nodes = g // self.ranks_per_node
        crosses = nodes.min(axis=1) != nodes.max(axis=1)
        # contention: crossing groups per node, then the worst node of each group
        pairs = {(int(nd), k) for k in np.flatnonzero(crosses) for nd in nodes[k]}
        per_node = {}
        for nd, _ in pairs:
            per_node[nd] = per_node.get(nd, 0) + 1
        size = int(g.max(initial=-1)) + 1
        a = np.full(size, alpha)
        b = np.full(size, beta)
        ai, bi = self.comm_inter.get(kind, self.comm_inter["default"])
        for k in np.flatnonzero(crosses):
            a[g[k]] = ai
            b[g[k]] = bi * max(per_node[int(nd)] for nd in nodes[k])
        m = np.broadcast_to(np.asarray(messages, dtype=np.float64), (size,))
        v = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), (size,))
        return a * m + b * v

    def spmm_seconds(self, m, nnz, f):
        return float(np.dot(self.spmm, spmm_features(m, nnz, f)))

    def gemm_seconds(self, m, k, n, itemsize=4):
        if min(m, k, n) <= 0:
            return 0.0
        if len(self.gemm_table) < GEMM_NEIGHBOURS:
            return float(np.dot(self.gemm, gemm_features(m, k, n, itemsize)))
        table = np.asarray(self.gemm_table)
        dist = np.sqrt(((np.log(table[:, :3]) - np.log([m, k, n])) ** 2).sum(axis=1))
        near = np.argsort(dist, kind="stable")[:GEMM_NEIGHBOURS]
        weight = 1.0 / (dist[near] + 0.1)
        log_rate = np.log(2 * table[near, :3].prod(axis=1) / table[near, 3])
        rate = np.exp(np.dot(weight, log_rate) / weight.sum())
        return float(max(2.0 * m * k * n / rate, table[:, 3].min()))

    def to_dict(self):
        out = {"format": FORMAT, "comm": {k: list(v) for k, v in self.comm.items()},
               "spmm": list(self.spmm), "gemm": list(self.gemm),
               "gemm_table": [list(r) for r in self.gemm_table], "meta": dict(self.meta)}
        if self.comm_inter is not None:
            out["comm_inter"] = {k: list(v) for k, v in self.comm_inter.items()}
        if self.ranks_per_node is not None:
            out["ranks_per_node"] = self.ranks_per_node
        return out

    @classmethod
    def from_dict(cls, d, source="calibration"):
        if not isinstance(d, dict) or d.get("format") not in FORMATS:
            got = d.get("format") if isinstance(d, dict) else type(d).__name__
            raise CalibrationError(f"{source}: expected a JSON object with format {FORMAT!r} "
                                   f"(or {FORMATS[0]!r}), but got {got!r}")
        missing = [k for k in ("comm", "spmm", "gemm") if k not in d]
        if missing:
            raise CalibrationError(f"{source}: missing {missing}")
        extra = [k for k in ("comm_inter", "ranks_per_node") if k in d]
        if extra and d["format"] == FORMATS[0]:
            raise CalibrationError(f"{source}: {extra} need format {FORMAT!r}, but the file says "
                                   f"{FORMATS[0]!r}")
        try:
            return cls(d["comm"], d["spmm"], d["gemm"], dict(d.get("meta") or {}),
                       tuple(d.get("gemm_table") or ()), d.get("comm_inter"),
                       d.get("ranks_per_node"))
        except CalibrationError as e:
            raise CalibrationError(f"{source}: {e}") from None

    def save(self, path):
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as fh:
            json.dump(self.to_dict(), fh, indent=1)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path):
        try:
            with open(path) as fh:
                d = json.load(fh)
        except OSError as e:
            raise CalibrationError(f"calibration: cannot read {path}: {e.strerror}") from None
        except ValueError as e:
            raise CalibrationError(f"calibration: {path} is not JSON: {e}") from None
        return cls.from_dict(d, source=f"calibration {path}")


#: Used when no calibration file exists: 2 µs and 10 GB/s for every
#: collective, SpMM at 1 ns per nnz·f, GEMM at 20 GFLOP/s and 10 GB/s.
DEFAULT_CALIBRATION = Calibration(comm={"default": (2e-6, 1e-10)},
                                  spmm=(5e-6, 1e-9, 2e-9, 5e-10, 2e-10),
                                  gemm=(5e-6, 5e-11, 1e-10), meta={"source": "defaults"})


def default_calibration_path():
    """``$SPGNN_CALIBRATION``, else ``~/.cache/spgnn/calibration.json``."""
    return os.environ.get("SPGNN_CALIBRATION") or os.path.join(
        os.path.expanduser("~"), ".cache", "spgnn", "calibration.json")


def load_calibration(path=None):
    """The calibration at ``path`` (an error if unreadable), else the default file if it exists,
    else :data:`DEFAULT_CALIBRATION`. Local."""
    if path is not None:
        return Calibration.load(path)
    default = default_calibration_path()
    return Calibration.load(default) if os.path.exists(default) else DEFAULT_CALIBRATION


# ------------------------------------------------------------------------------- fitting
def fit_nonneg(features, seconds):
    """Non-negative coefficients minimising the squared *relative* error. Pure.

    Each sample's row is divided by its time, so a 10 µs kernel weighs as
    much as a 10 ms one (absolute least squares would fit the large ones
    only).
    """
    from scipy.optimize import nnls

    x = np.asarray(features, dtype=np.float64)
    t = np.asarray(seconds, dtype=np.float64)
    if x.ndim != 2 or len(t) != len(x) or len(t) < x.shape[1] or np.any(t <= 0):
        raise CalibrationError(f"fit: need at least {x.shape[-1]} samples with positive times, "
                               f"but got {len(t)}")
    scale = x.max(axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls(x / t[:, None] / scale, np.ones(len(t)))
    return tuple(float(c) for c in coef / scale)


def fit_spmm(samples):
    """Coefficients of the SpMM model from ``[(m, nnz, f, seconds), ...]``."""
    return fit_nonneg([spmm_features(m, z, f) for m, z, f, _ in samples], [s[-1] for s in samples])


def fit_gemm(samples, itemsize=4):
    """Coefficients of the GEMM model from ``[(m, k, n, seconds), ...]``."""
    return fit_nonneg([gemm_features(m, k, n, itemsize) for m, k, n, _ in samples],
                      [s[-1] for s in samples])


#: Messages from this size on (bytes) fit β; the smaller ones fit α.
LARGE_MESSAGE = 1 << 16


def _fit_alpha_beta(rows):
    large = [r for r in rows if r[2] >= LARGE_MESSAGE]
    small = [r for r in rows if r[2] < LARGE_MESSAGE and r[1] > 0]
    if len({r[2] for r in large}) >= 2:
        # absolute least squares: the largest messages, where the epochs' bytes are, decide β
        from scipy.optimize import nnls

        x = np.array([[r[1], r[2]] for r in large], dtype=np.float64)
        scale = x.max(axis=0)
        scale[scale == 0] = 1.0
        coef, _ = nnls(x / scale, np.array([r[3] for r in large]))
        alpha, beta = coef / scale
        if small:
            alpha = float(np.median([max(0.0, (r[3] - beta * r[2]) / r[1]) for r in small]))
        return float(alpha), float(beta)
    return fit_nonneg([[r[1], r[2]] for r in rows], [r[3] for r in rows])


def fit_comm(samples):
    """``{kind: (alpha, beta)}`` from ``[(op, messages, bytes, seconds), ...]`` (ledger rows).

    β is fitted on the messages of :data:`LARGE_MESSAGE` bytes or more and
    α on the smaller ones (a relative-error fit over 8 B to 4 MB lets the
    small messages decide β, 5-fold too low for the megabytes of an epoch
    here).  ``default`` is fitted on all samples together.
    """
    out = {}
    groups = {"default": samples}
    for s in samples:
        groups.setdefault(kind_of(s[0]), []).append(s)
    for kind, rows in groups.items():
        rows = [r for r in rows if r[3] > 0]
        if len(rows) >= 2 and len({(r[1], r[2]) for r in rows}) >= 2:
            out[kind] = _fit_alpha_beta(rows)
    if "default" not in out:
        raise CalibrationError("fit_comm: need samples of at least two message sizes")
    return out


# ------------------------------------------------------------------------------- the epoch
@dataclass
class Step:
    """One bulk-synchronous step: ``kind`` is ``"compute"`` or a ledger op."""

    layer: int
    phase: str          # "forward" or "backward"
    name: str
    kind: str
    seconds: float
    nbytes: int = 0     # the most bytes (max of sent and received) of a rank; communication only
    messages: int = 0   # the most messages of a rank
    rank_bytes: np.ndarray = None      # per world rank, when known (1D, 1.5D)
    rank_messages: np.ndarray = None


@dataclass
class Prediction:
    """The predicted epoch of one configuration."""

    algorithm: str
    ranks: int
    replication: int = 1
    grid: tuple = None
    steps: list = field(default_factory=list)
    #: 3d: the training options priced (``{"permute": ..., "agg_blocks": K}``).
    options: dict = None

    @property
    def seconds(self):
        return sum(s.seconds for s in self.steps)

    def split(self):
        """``(compute seconds, communication seconds)``."""
        comp = sum(s.seconds for s in self.steps if s.kind == "compute")
        return comp, self.seconds - comp

    @property
    def label(self):
        if self.algorithm == "3d":
            return f"3d {'x'.join(map(str, self.grid))}"
        if self.algorithm.startswith("15d"):
            return f"{self.algorithm} c={self.replication}"
        return self.algorithm

    def to_dict(self):
        comp, comm = self.split()
        return {"algorithm": self.algorithm, "ranks": self.ranks,
                "replication": self.replication,
                "grid": "x".join(map(str, self.grid)) if self.grid else None,
                "seconds": self.seconds, "compute_seconds": comp, "comm_seconds": comm,
                "comm_bytes_max_rank": int(sum(s.nbytes for s in self.steps)),
                **(self.options or {})}


def _block_nnz(a, row_off, col_off):
    """``z[i, j]``: stored entries of ``a[row block i, column block j]``."""
    return csr_block_nnz(sp.csr_array(a), row_off, col_off)


def local_work(a, algorithm, ranks, *, offsets=None, replication=1, grid=None, layer=0):
    """``(rows, nnz)`` of every rank's local SpMM (arrays by rank; 3D: by grid position). Pure.

    1D: the rank's row block.  1.5D: row block ``i`` restricted to column
    slab ``j`` for rank ``i·c + j``.  3D, layer ``l`` with roles ``(o, i,
    d)``: the ``(d, o)`` block of A (even splits).  ``a``: a matrix or its
    :class:`~spgnn.plan.events.BlockCounts`.
    """
    a = as_counts(a)
    n = a.shape[0]
    if algorithm == "3d":
        g = dict(zip(AXES_3D, grid))
        o, _, d = roles_for_layer(layer)
        z = a.block_nnz(block_offsets(n, g[d]), block_offsets(n, g[o]))
        rows = np.diff(block_offsets(n, g[d]))
        return np.repeat(rows, g[o]), z.ravel()
    c = replication if algorithm.startswith("15d") else 1
    blocks = ranks // c
    off = np.asarray(block_offsets(n, blocks) if offsets is None else offsets, dtype=np.int64)
    if c == 1:
        return np.diff(off), np.asarray(a.row_block_nnz(off), dtype=np.int64)
    slab = np.asarray([off[block_offsets(blocks, c)[j]] for j in range(c)] + [n])
    z = a.block_nnz(off, slab)                    # rank i*c + j holds z[i, j]
    return np.repeat(np.diff(off), c), z.ravel()


def axis_groups(shape, names, axes):
    """World ranks of every group along ``axes`` of a grid, one row per group. Pure.

    Ranks are row-major over ``shape`` (:mod:`spgnn.grid`: the last axis
    varies fastest), so a group along the last axis is consecutive ranks.
    """
    shape, names = tuple(int(v) for v in shape), tuple(names)
    keep = [names.index(a) for a in axes]
    other = [k for k in range(len(shape)) if k not in keep]
    idx = np.arange(int(np.prod(shape))).reshape(shape)
    return np.transpose(idx, other + keep).reshape(-1, int(np.prod([shape[k] for k in keep])))


def _comm_steps(plan, cal, layer, phase, shape, names):
    """One step per (op, label) of one SpMM: a rank's time is the sum over its calls.

    Summed per rank, not per planned event: the 1.5D broadcast stages of
    different process columns run at the same time, each rank taking part in
    its column's stages only.  ``shape`` and ``names`` are the grid's (for
    the groups of each event's axis: intra- or inter-node α–β).
    """
    groups = {}
    for e in plan.select("spmm"):
        key = (e.op, e.label, e.axis)
        b, m = groups.get(key, (0, 0))
        groups[key] = (b + np.maximum(e.sent, e.recv), m + e.messages)
    out = []
    for (op, label, axis), (b, m) in groups.items():
        t = cal.comm_seconds(op, m, b, axis_groups(shape, names, axis))
        out.append(Step(layer, phase, label, op, float(np.max(t, initial=0.0)),
                        int(b.max(initial=0)), int(m.max(initial=0)), b, m))
    return out


def _allreduce_step(cal, layer, phase, name, elements, p, itemsize, group_of, groups):
    """An all-reduce of ``elements`` over ``groups`` of ``p`` ranks; ``group_of[r]`` is rank r's index."""
    if p <= 1 or elements == 0:
        return []
    b = np.array([model_allreduce(int(elements), itemsize, p, int(i))[0] for i in group_of])
    m = np.full(len(group_of), allreduce_messages(p), dtype=np.int64)
    t = cal.comm_seconds("allreduce", m, b, groups)
    return [Step(layer, phase, name, "allreduce", float(t.max()), int(b.max()), int(m.max()),
                 b, m)]


def _predict_rowwise(a, algorithm, ranks, dims, cal, offsets, c, itemsize):
    """1D and 1.5D: the planner's SpMM events, then the local kernels and the dW all-reduce."""
    at = a.transpose()
    rows, nnz = local_work(a, algorithm, ranks, offsets=offsets, replication=c)
    rows_t, nnz_t = local_work(at, algorithm, ranks, offsets=offsets, replication=c)
    n_r = int(rows.max(initial=0))
    plans = {}
    shape, names = ((ranks // c, c), ("row", "layer")) if c > 1 else ((ranks,), ("row",))

    def plan(matrix, key, width):
        if (key, width) not in plans:
            extra = {"replication": c} if algorithm.startswith("15d") else {}
            plans[key, width] = plan_spmm(matrix, algorithm, ranks, width, offsets=offsets,
                                          itemsize=itemsize, **extra)
        return plans[key, width]

    def spmm(layer, phase, transpose, width):
        r, z = (rows_t, nnz_t) if transpose else (rows, nnz)
        t = max(cal.spmm_seconds(int(ri), int(zi), width) for ri, zi in zip(r, z)) if len(r) else 0
        steps = _comm_steps(plan(at if transpose else a, transpose, width), cal, layer, phase,
                            shape, names)
        return steps + [Step(layer, phase, "spmm" + ("-t" if transpose else ""), "compute", t)]

    def gemm(layer, phase, name, m, k, n):
        return [Step(layer, phase, name, "compute", cal.gemm_seconds(m, k, n, itemsize))]

    steps = []
    for layer, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
        width, first = min(d_in, d_out), d_out < d_in          # transform first when it narrows
        if first:
            steps += gemm(layer, "forward", "H W", n_r, d_in, d_out)
        steps += spmm(layer, "forward", False, width)
        if not first:
            steps += gemm(layer, "forward", "(A H) W", n_r, d_in, d_out)
        if first:
            steps += spmm(layer, "backward", True, width)
        steps += gemm(layer, "backward", "dW", d_in, n_r, d_out)
        steps += _allreduce_step(cal, layer, "backward", "allreduce dW", d_in * d_out,
                                 ranks // c, itemsize, np.arange(ranks) // c,
                                 axis_groups(shape, names, ("row",)))
        if layer > 0:
            steps += gemm(layer, "backward", "dX", n_r, d_out, d_in)
            if not first:
                steps += spmm(layer, "backward", True, width)
    return steps


def _predict_3d(a, ranks, dims, cal, grid, itemsize, agg_blocks=1, permutation=None):
    """3D: spgnn's exact epoch events (:func:`plan_gcn_3d`) and the local kernels of every layer.

    The kernels follow the same layouts (:func:`gcn_3d_layers`): the SpMM
    on Â's ``(d, o)`` block (even splits) at width ``width / G_i``, forward
    and, except on a first layer that aggregates first, backward (the
    transposed block); the GEMMs on ``(n/G_r) × (D/G_c) × (D'/G_t)``.
    ``permutation`` (a :class:`~spgnn.partition.DoublePermutation`): layer
    ``l`` multiplies by variant ``l % 2`` of ``permutation.matrices(a)``, so
    the slowest rank's SpMM is priced on the permuted blocks' nnz (the same
    shards :func:`~spgnn.plan.events.nnz_per_rank_3d` counts).  ``agg_blocks=K``:
    the planner's K chunked all-reduces per aggregation, and the SpMM called
    K times (K - 1 more call overheads ``s0``; the other terms add up over
    the chunks to the unblocked kernel's).
    """
    g = dict(zip(AXES_3D, grid))
    n = a.shape[0]
    steps = []
    variants = [a] if permutation is None else list(a.permuted(permutation))
    blocks = {}

    def block_nnz(layer, d, o):
        key = (layer % len(variants), g[d], g[o])
        if key not in blocks:
            blocks[key] = variants[key[0]].block_nnz(block_offsets(n, g[d]),
                                                     block_offsets(n, g[o])).ravel()
        return blocks[key]

    chunk_calls = (int(agg_blocks) - 1) * cal.spmm[0]
    events = plan_gcn_3d(n, dims, grid, itemsize=itemsize, agg_blocks=agg_blocks)
    comm = {}
    for layer, phase, e in events:
        b = np.maximum(e.sent, e.recv)
        t = np.asarray(cal.comm_seconds(e.op, e.messages, b, axis_groups(grid, AXES_3D, e.axis)),
                       dtype=np.float64)
        comm.setdefault((layer, phase), []).append(
            Step(layer, phase, e.label, e.op, float(t.max(initial=0.0)), int(b.max(initial=0)),
                 int(e.messages.max(initial=0)), b, e.messages))
    for layer, info in enumerate(gcn_3d_layers(dims)):
        d_in, d_out = dims[layer], dims[layer + 1]
        o, i, d = info["prop"]
        r, c, t = info["mm"]
        z = block_nnz(layer, d, o)
        rows_d, rows_o = math.ceil(n / g[d]), math.ceil(n / g[o])
        width = math.ceil(info["width"] / g[i])
        spmm_f = max(cal.spmm_seconds(rows_d, int(v), width) for v in z) + chunk_calls
        spmm_b = max(cal.spmm_seconds(rows_o, int(v), width) for v in z) + chunk_calls
        m, k, nn = math.ceil(n / g[r]), math.ceil(d_in / g[c]), math.ceil(d_out / g[t])
        steps += comm.get((layer, "forward"), [])
        steps += [Step(layer, "forward", "spmm", "compute", spmm_f),
                  Step(layer, "forward", "H W", "compute", cal.gemm_seconds(m, k, nn, itemsize))]
        steps += comm.get((layer, "backward"), [])
        steps.append(Step(layer, "backward", "dW", "compute",
                          cal.gemm_seconds(k, m, nn, itemsize)))
        if layer > 0:
            steps.append(Step(layer, "backward", "dX", "compute",
                              cal.gemm_seconds(m, nn, k, itemsize)))
        if layer > 0 or info["first"]:
            steps.append(Step(layer, "backward", "spmm-t", "compute", spmm_b))
    return steps


def predict_epoch(a, algorithm, ranks, dims, cal=DEFAULT_CALIBRATION, *, offsets=None,
                  replication=1, grid=None, itemsize=4, agg_blocks=1, permutation=None):
    """The :class:`Prediction` of one GCN epoch on ``ranks`` ranks. Pure (nothing is launched).

    ``a`` is the (permuted) n×n aggregation matrix (or its
    :class:`~spgnn.plan.events.BlockCounts`), ``dims`` the widths
    ``[D_0, ..., D_L]``, ``offsets`` the row partition (1D: P blocks, 1.5D:
    P/c blocks; default even), ``grid`` the 3D shape.  3d only (the options
    of ``train --algo 3d``): ``agg_blocks`` (``--agg-blocks K``) and
    ``permutation`` (``--permute double``: the
    :class:`~spgnn.partition.DoublePermutation` the run draws,
    ``double_permutation(a, seed)``); they are ignored by 1D and 1.5D,
    which cannot use them.
    """
    dims = [int(v) for v in dims]
    ranks = int(ranks)
    a = as_counts(a)
    if algorithm == "3d":
        if grid is None or len(grid) != 3 or int(np.prod(grid)) != ranks:
            raise GridError(f"predict_epoch: 3d needs grid=(X, Y, Z) with product {ranks}, but "
                            f"got {grid}")
        grid = tuple(int(v) for v in grid)
        steps = _predict_3d(a, ranks, dims, cal, grid, itemsize, agg_blocks, permutation)
        options = {"permute": "none" if permutation is None else "double",
                   "agg_blocks": int(agg_blocks)}
        return Prediction("3d", ranks, 1, grid, steps, options)
    c = int(replication) if algorithm.startswith("15d") else 1
    if c < 1 or ranks % c:
        raise GridError(f"predict_epoch: replication c={c} must divide ranks={ranks}")
    steps = _predict_rowwise(a, algorithm, ranks, dims, cal, offsets, c, itemsize)
    return Prediction(algorithm, ranks, c, None, steps)


def candidate_configs(ranks, algorithms=("1d", "1d-aware", "15d", "15d-aware", "3d"),
                      max_replication=8):
    """``[(algorithm, replication, grid), ...]`` worth comparing on ``ranks`` ranks. Pure.

    1.5D: every c > 1 dividing P up to ``max_replication`` (c = 1 is 1D);
    3D: every grid shape.
    """
    out = []
    for algo in algorithms:
        if algo.startswith("15d"):
            out += [(algo, c, None) for c in range(2, min(ranks, max_replication) + 1)
                    if ranks % c == 0]
        elif algo == "3d":
            out += [("3d", 1, g) for g in shapes_3d(ranks)]
        else:
            out.append((algo, 1, None))
    return out


def rank_configs(a, ranks, dims, cal=DEFAULT_CALIBRATION, *, configs=None, offsets_for=None,
                 itemsize=4, agg_blocks=1, permutation_for=None):
    """Every candidate's :class:`Prediction`, fastest first (ties: the order of ``configs``). Pure.

    ``offsets_for(blocks)`` returns ``(a_permuted, offsets)`` for a row
    partition into ``blocks`` (default: ``a`` and even blocks); 3d gets the
    matrix of ``offsets_for(ranks)`` (training partitions into P parts,
    then splits evenly).  3d candidates are priced with ``agg_blocks`` and,
    when ``permutation_for`` is given, the double permutation
    ``permutation_for(matrix)`` of their matrix (``--permute double``: a
    user's choice the model prices, not one it makes; docs/performance_model.md).
    """
    def predict(m, algo, **kw):
        if algo == "3d":
            kw.update(agg_blocks=agg_blocks,
                      permutation=permutation_for(m) if permutation_for else None)
        return predict_epoch(m, algo, ranks, dims, cal, itemsize=itemsize, **kw)

    return _rank(predict, a, ranks, configs, offsets_for)


def _rank(predict, a, ranks, configs, offsets_for):
    """``predict(matrix, algorithm, **shape)`` for every candidate, fastest first (ties: the
    order of ``configs``); a 1D/1.5D candidate gets the permuted matrix and offsets of its
    ``ranks // c`` row blocks, a 3d one the matrix of ``ranks`` blocks."""
    configs = candidate_configs(ranks) if configs is None else configs
    preds = []
    for algo, c, grid in configs:
        if algo == "3d":
            preds.append(predict(offsets_for(ranks)[0] if offsets_for else a, "3d", grid=grid))
            continue
        ap, off = offsets_for(ranks // c) if offsets_for else (a, None)
        preds.append(predict(ap, algo, offsets=off, replication=c))
    order = sorted(range(len(preds)), key=lambda k: (preds[k].seconds, k))
    return [preds[k] for k in order]


def predict_spmm(a, algorithm, ranks, feat, cal=DEFAULT_CALIBRATION, *, offsets=None,
                 replication=1, grid=None, itemsize=4):
    """The :class:`Prediction` of one ``Y = A X`` (X ``n × feat``), as ``spgnn spmm`` runs it. Pure.

    Its steps: the planner's exact events of one multiply (setup excluded;
    3d: layer 0's roles with X row-sharded over z, :func:`plan_spmm`) and
    the slowest rank's local SpMM.
    """
    ranks, feat = int(ranks), int(feat)
    a = as_counts(a)
    c = int(replication) if algorithm.startswith("15d") else 1
    extra = {}
    if algorithm == "3d":
        if grid is None or len(grid) != 3 or int(np.prod(grid)) != ranks:
            raise GridError(f"predict_spmm: 3d needs grid=(X, Y, Z) with product {ranks}, but "
                            f"got {grid}")
        grid = tuple(int(v) for v in grid)
        extra = {"grid": grid, "shard_input": True}
        shape, names = grid, AXES_3D
        rows, nnz = local_work(a, "3d", ranks, grid=grid, layer=0)
        width = math.ceil(feat / grid[1])                      # X's columns split over y
    else:
        if c < 1 or ranks % c:
            raise GridError(f"predict_spmm: replication c={c} must divide ranks={ranks}")
        if c > 1:
            extra = {"replication": c}
        shape, names = ((ranks // c, c), ("row", "layer")) if c > 1 else ((ranks,), ("row",))
        rows, nnz = local_work(a, algorithm, ranks, offsets=offsets, replication=c)
        width = feat
    plan = plan_spmm(a, algorithm, ranks, feat, offsets=offsets, itemsize=itemsize, **extra)
    steps = _comm_steps(plan, cal, 0, "forward", shape, names)
    t = max((cal.spmm_seconds(int(r), int(z), width) for r, z in zip(rows, nnz)), default=0.0)
    steps.append(Step(0, "forward", "spmm", "compute", t))
    return Prediction(algorithm, ranks, c, grid if algorithm == "3d" else None, steps)


def rank_spmm_configs(a, ranks, feat, cal=DEFAULT_CALIBRATION, *, configs=None,
                      offsets_for=None, itemsize=4):
    """Every candidate's :func:`predict_spmm`, fastest first (ties: the order of ``configs``). Pure.

    ``configs`` and ``offsets_for`` as in :func:`rank_configs`.
    """
    return _rank(lambda m, algo, **kw: predict_spmm(m, algo, ranks, feat, cal, itemsize=itemsize,
                                                    **kw),
                 a, ranks, configs, offsets_for)
