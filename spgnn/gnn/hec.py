"""Historical Embedding Cache with Asynchronous Embedding Push (DistGNN-MB, paper 001 §2).

:class:`HECRunner` is the context factory of :class:`~spgnn.gnn.sources.Halo`
(``--hec on``).  One :class:`~spgnn.gnn.hec_cache.HistoricalCache` per rank
per level: level 0 holds raw input features of halo vertices, level ℓ ≥ 1
the owner's input of graph layer ℓ (the post-dropout output of layer ℓ-1).

At level ℓ of iteration ``k`` (of ``M`` per epoch), when the model first
touches hop ℓ (``BlockContext.root`` / ``propagate``), in this order on
every rank (ranks on an empty step run the same collectives with nothing):

1. **push** (``k < M - d``): the solid vertices of the level's frontier that
   are halos on peer ``p`` (``db_halo``), at most ``nc`` per peer (below),
   are sent with the communicator's non-blocking ``ialltoallv``: ids under
   ``hec:push:L{ℓ}:ids`` (int64; its counts exchange is the only blocking
   part) and rows under ``hec:push:L{ℓ}:rows`` (the counts are reused, so
   that call has no counts exchange);
2. **receive** (``k ≥ d``): the push posted at ``(k - d, ℓ)`` is completed,
   the cache ticks once (every line ages by one iteration) and stores it
   (values computed at iteration ``k - d``);
3. **load**: the level's halo vertices are searched; hits overwrite their
   rows of ``H`` (constants: their gradient is cut), misses follow the
   policy: ``drop`` (the paper's: the missed halo's edges leave the block and
   the mean renormalises over the rest), ``keep-local`` (the locally
   computed value: zero input features at level 0, a self-only transform
   above) or ``zero``.  No load for ``k < d`` (those halos are misses).

**Push cap (the paper's degree-biased rule, research/001 §2.6).** When more
than ``nc`` candidates go to one peer: ``hil = floor(log2(max in-degree))``
over the whole graph, each candidate in frontier order draws ``r`` uniform
in ``[0, 2**hil)`` (``default_rng([seed, epoch, k, ℓ, rank, p])``) and is
accepted iff ``r < deg``; the first ``nc`` accepted are sent.  So often fewer
than ``nc`` go.

**Staleness.** A value computed at iteration ``j`` is stored at ``j + d``
with age 0 and valid through age ``ls``: at use, ``d ≤ k - j ≤ d + ls``
parameter updates (level 0 values are exact).  Checked on every load.

**Options.** ``reset="epoch"`` (default, as the reference code) empties the
caches at every epoch start, so a checkpoint at an epoch boundary needs no
cache state: a resumed run is bit-identical; ``reset="never"`` keeps them
(then a resume starts with empty caches).  ``prefill=True`` stores every
halo's input features in the level-0 cache at each epoch start (one
``gather_rows`` under ``hec:prefill``): with ``cs`` and ``ls`` unbounded and
``levels=1`` (no cache above level 0) training then equals ``--hec off`` bit
for bit.
"""

import dataclasses
from collections import deque

import numpy as np

from ..backends import get_backend
from ..local.csr import LocalCSR
from .blocks import BlockOperator
from .context import BlockContext
from .hec_cache import INFINITE, HistoricalCache
from .layers import SAGEConv

__all__ = ["HECConfig", "HECRunner", "HECBlockContext", "MISS_POLICIES", "push_selection"]

#: ``--miss-policy`` choices.
MISS_POLICIES = ("drop", "keep-local", "zero")


@dataclasses.dataclass(frozen=True)
class HECConfig:
    """HEC parameters (paper 001 §2.3).  ``None`` for ``ls`` / ``nc`` / ``cs`` = unbounded.

    cs : capacity (rows per level per rank); ls : life span in iterations;
    nc : push cap per peer per level per iteration; d : delay in iterations;
    miss_policy : one of :data:`MISS_POLICIES`; levels : cached levels
    ``0..levels-1`` (None: all); reset : ``"epoch"`` or ``"never"``;
    prefill : fill level 0 with every halo's features each epoch; min_life.
    """

    cs: int = 1_000_000
    ls: int = 2
    nc: int = 2000
    d: int = 1
    miss_policy: str = "drop"
    levels: int = None
    reset: str = "epoch"
    prefill: bool = False
    min_life: int = 0

    def validate(self, nranks):
        """Raise ``ValueError`` for a bad combination. Local (every rank knows the config)."""
        bad = []
        for name, lo in (("cs", 1), ("nc", 1), ("ls", 0), ("d", 0), ("min_life", 0)):
            v = getattr(self, name)
            if v is not None and int(v) < lo:
                bad.append(f"{name} must be >= {lo}, but got {v}")
        if self.levels is not None and int(self.levels) < 0:
            bad.append(f"levels must be >= 0, but got {self.levels}")
        if self.miss_policy not in MISS_POLICIES:
            bad.append(f"miss policy must be one of {MISS_POLICIES}, but got {self.miss_policy!r}")
        if self.reset not in ("epoch", "never"):
            bad.append(f"reset must be 'epoch' or 'never', but got {self.reset!r}")
        if not bad and self.cs is not None and nranks > 1:
            limit = -(-int(self.cs) // (nranks - 1))
            if self.nc is None or int(self.nc) > limit:
                bad.append(f"the push cap nc={self.nc} exceeds ceil(cs / (P - 1)) = {limit} "
                           f"(cs={self.cs}, P={nranks}): one iteration's receives could "
                           f"overwrite each other in the ring")
        if bad:
            raise ValueError("HEC: " + "; ".join(bad))


def push_selection(cands, degree, nc, hil, rng):
    """The degree-biased cap: the first ``nc`` candidates accepted w.p. ``min(1, deg/2**hil)``. Pure.

    ``cands`` (positions, frontier order) are returned unchanged when there
    are at most ``nc`` of them.
    """
    if nc is None or cands.size <= nc:
        return cands
    r = rng.integers(0, 1 << int(hil), size=cands.size)
    acc = cands[r < degree]
    return acc[:int(nc)]


def _mask_columns(block, keep_col):
    """``block`` with the entries of columns where ``keep_col`` is False removed. Local."""
    adj = block.adj
    indptr = np.asarray(adj.indptr, dtype=np.int64)
    indices = np.asarray(adj.indices, dtype=np.int64)
    keep = keep_col[indices]
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    new_ptr = np.zeros_like(indptr)
    np.cumsum(np.bincount(rows[keep], minlength=indptr.size - 1), out=new_ptr[1:])
    data = np.asarray(adj.data)[keep]
    return dataclasses.replace(block, adj=LocalCSR(new_ptr, indices[keep], data, adj.shape,
                                                   check=None))


class HECBlockContext(BlockContext):
    """A :class:`BlockContext` that runs the HEC step of hop ℓ when the model first touches it.

    Collective, unlike its base class: the first :meth:`root` or
    :meth:`propagate` of each hop runs the runner's push / receive
    (:meth:`HECRunner.level`: a counts all-to-all and two non-blocking
    all-to-alls), so every rank must touch every hop, in level order, once per
    iteration (:meth:`HECRunner.end` checks it); ranks on an empty step run
    the same collectives through :meth:`HECRunner.empty_iteration`.  The
    transposes are local (they cut the gradient of cached rows).
    """

    def __init__(self, runner, blocks, **kw):
        super().__init__(blocks, **kw)
        self.runner = runner
        self.raw_blocks = list(blocks)
        self.done = {}                  # hop -> rows whose gradient is cut

    def _hec(self, H, hop):
        if hop not in self.done:
            self.done[hop] = self.runner.level(self, H, hop)

    def root(self, H, hop=0):
        self._hec(H, hop)
        return super().root(H, hop)

    def propagate(self, H, hop=0):
        self._hec(H, hop)
        return super().propagate(H, hop)

    def _cut(self, G, hop):
        rows = self.done.get(hop)
        if rows is not None and rows.size:
            G.local[rows] = 0
        return G

    def propagate_transpose(self, G, hop=0):
        return self._cut(super().propagate_transpose(G, hop), hop)

    def root_transpose(self, G, hop=0, into=None):
        return self._cut(super().root_transpose(G, hop, into), hop)


class HECRunner:
    """The per-rank HEC state and protocol (module docstring).

    Build one per rank and pass it to :class:`~spgnn.gnn.sources.Halo`
    (``hec=``): it is that source's context factory (:meth:`context`) and
    supplies block 0's input rows (:meth:`input_rows`); the source drives the
    rest (:meth:`attach`, :meth:`start_epoch`, :meth:`begin` /
    :meth:`empty_iteration`, :meth:`end`).
    """

    def __init__(self, config):
        self.config = config
        self.source = None

    # ------------------------------------------------------------------ set-up
    def config_record(self):
        return dataclasses.asdict(self.config)

    def attach(self, source, model):
        """Size the caches, exchange halo lists (``db_halo``). Collective (``hec:setup``).

        ``source``: the :class:`~spgnn.gnn.sources.Halo` source (its graph,
        lockstep iteration count and dtype); ``model``: checked to be made of
        :class:`~spgnn.gnn.layers.SAGEConv` graph layers.
        """
        cfg = self.config
        if self.source is not None:
            raise ValueError("HECRunner: already attached to a source; build one per source "
                             "(and per rank: it holds that rank's caches)")
        cfg.validate(source.comm.size)
        self.source = source
        self.dtype = source.dtype
        hg = self.hg = source.halo
        self.comm = comm = source.comm
        convs = [l for l in getattr(model, "layers", [model]) if l.hops == 1]
        if not convs or any(not isinstance(c, SAGEConv) for c in convs):
            raise ValueError("HEC: the model's graph layers must be SAGEConv (--model sage): the "
                             "cache replaces rows of each layer's input")
        self.dims = [int(c.in_dim) for c in convs]
        L = len(self.dims)
        self.levels = L if cfg.levels is None else min(int(cfg.levels), L)
        # my halo vertices, and which of my solids are halos on each peer
        a = hg.view.a
        cols = np.unique(np.asarray(a.indices, dtype=np.int64))
        self.my_halos = cols[hg.is_halo(cols)]
        owner = hg.owner(self.my_halos)
        order = np.argsort(owner, kind="stable")
        counts = np.bincount(owner, minlength=comm.size)
        got = comm.alltoallv(self.my_halos[order], counts, label="hec:setup")
        rc = comm.alltoall(counts.astype(np.int64), label="hec:setup")
        src = np.repeat(np.arange(comm.size), rc)
        self.halo_on = np.zeros((hg.hi - hg.lo, comm.size), dtype=bool)
        self.halo_on[got - hg.lo, src] = True
        # The ring's real size.  With the per-epoch reset at most
        # |my halos| rows arrive per level per iteration (each is pushed by
        # its one owner, once), so a ring of |halos|·(M + 1) rows (+1: the
        # prefill) never wraps within an epoch: any larger cs behaves the
        # same, and cs=None (unbounded) is exactly that.
        n = hg.mg.n
        bound = max(1, self.my_halos.size * (source.steps_per_epoch + 1))
        if cfg.cs is None:
            cs = bound
        else:
            cs = min(int(cfg.cs), bound) if cfg.reset == "epoch" else int(cfg.cs)
        ls = INFINITE if cfg.ls is None else int(cfg.ls)
        self.capacity = cs
        self.backend = get_backend(hg.mg.backend)
        self.caches = [HistoricalCache(n, cs, self.dims[lv], ls, min_life=cfg.min_life,
                                       check_age=lv > 0, dtype=self.dtype,
                                       backend=hg.mg.backend)
                       for lv in range(self.levels)]
        dmax = int(hg.degree.max(initial=1))
        self.hil = int(np.floor(np.log2(max(dmax, 1))))
        self.inflight = [deque() for _ in range(self.levels)]
        self.global_iter = 0

    def context(self, blocks, **kw):
        """The context factory of the source: a :class:`HECBlockContext` (collective). Local."""
        return HECBlockContext(self, blocks, **kw)

    # ------------------------------------------------------------------ epochs
    def start_epoch(self, epoch, iterations, seed):
        """Reset (option), prefill (option). Collective when prefilling.

        ``seed`` (the trainer's) keys the push cap's draws of this epoch.
        """
        self.epoch, self.M, self.seed = int(epoch), int(iterations), int(seed)
        self.stats = {l: dict(hits=0, requests=0, pushed=0, received=0, stale_min=None,
                          stale_max=None)
                      for l in range(self.levels)}
        if self.config.reset == "epoch":
            for c in self.caches:
                c.reset()
        if self.config.prefill and self.levels:
            rows = self.hg.features.matrix.gather_rows(self.my_halos, validate=False,
                                                       label="hec:prefill")
            self.caches[0].store(self.my_halos, rows, born=self.global_iter - 1)

    def input_rows(self, src):
        """Block 0's input rows: my solids' features, halos zero (the cache fills them). Local."""
        hg = self.hg
        x = np.zeros((src.size, hg.features.width), dtype=hg.features.dtype)
        mine = ~hg.is_halo(src)
        x[mine] = hg.features.local[src[mine] - hg.lo]
        if self.levels == 0:
            # no cached level: halos are fetched exactly, as --hec off does
            return hg.features.fetch(src, validate=False)
        return x

    def begin(self, k, ctx):
        self.k = int(k)
        self.ctx = ctx

    def empty_iteration(self, k):
        """An empty step's share of every level's collectives. Collective."""
        self.k, self.ctx = int(k), None
        for l in range(self.levels):
            self._push(l, None, None)
            self._receive(l)

    def end(self, k):
        if self.ctx is not None and len(self.ctx.done) < len(self.dims):
            raise RuntimeError(f"HEC: the model touched hops {sorted(self.ctx.done)} of "
                               f"{len(self.dims)}; every level's push is collective")
        self.global_iter += 1

    # ------------------------------------------------------------------ a level
    def level(self, ctx, H, hop):
        """Push, receive, load at ``hop``; returns the rows whose gradient is cut. Collective."""
        if hop >= self.levels:
            return None
        block = ctx.raw_blocks[hop]
        src = np.asarray(block.src_ids, dtype=np.int64)
        self._push(hop, src, H.local)
        self._receive(hop)
        halo_pos = np.flatnonzero(self.hg.is_halo(src))
        st = self.stats[hop]
        st["requests"] += int(halo_pos.size)
        policy = self.config.miss_policy
        hit_rows = np.zeros(0, dtype=np.int64)
        if self.k >= self.config.d and halo_pos.size:
            cache = self.caches[hop]
            pos, slots = cache.search(src[halo_pos])
            hit_rows = halo_pos[pos]
            cache.load(slots, hit_rows, H.local)
            st["hits"] += int(pos.size)
            if hop > 0 and pos.size:
                stale = self.global_iter - cache.born[slots]
                lo, hi = int(stale.min()), int(stale.max())
                st["stale_min"] = lo if st["stale_min"] is None else min(lo, st["stale_min"])
                st["stale_max"] = hi if st["stale_max"] is None else max(hi, st["stale_max"])
                ls = cache.ls
                if lo < self.config.d or hi > self.config.d + ls:
                    raise RuntimeError(f"HEC: staleness {lo}..{hi} outside d..d+ls at level {hop}")
        missed = np.setdiff1d(halo_pos, hit_rows, assume_unique=True)
        cut = hit_rows
        if missed.size and policy == "zero":
            H.local[missed] = 0
            cut = np.concatenate([hit_rows, missed])
        elif missed.size and policy == "drop":
            keep = np.ones(src.size, dtype=bool)
            keep[missed] = False
            masked = _mask_columns(block, keep)
            ctx.blocks[hop] = BlockOperator(masked, ctx.dtype, ctx.backend)
            if hop == 0:
                H.local[missed] = 0      # absent features (only their root terms see them)
        return cut

    def _push(self, hop, src, h):
        cfg, comm, hg = self.config, self.comm, self.hg
        P = comm.size
        if self.k >= self.M - cfg.d:
            return
        ids_by_peer = [np.zeros(0, dtype=np.int64)] * P
        rows_by_peer = [np.zeros(0, dtype=np.int64)] * P
        if src is not None and P > 1:
            _, first = np.unique(src, return_index=True)
            first = np.sort(first)
            solid = first[~hg.is_halo(src[first])]
            loc = src[solid] - hg.lo
            for p in range(P):
                if p == comm.rank:
                    continue
                cand = solid[self.halo_on[loc, p]]
                if cfg.nc is not None and cand.size > cfg.nc:
                    rng = np.random.default_rng([self.seed, self.epoch, self.k, hop,
                                                 comm.rank, p])
                    cand = push_selection(cand, hg.degree[src[cand]], cfg.nc, self.hil, rng)
                ids_by_peer[p] = src[cand]
                rows_by_peer[p] = cand
        counts = np.array([a.size for a in ids_by_peer], dtype=np.int64)
        ids = np.concatenate(ids_by_peer)
        rows = np.concatenate(rows_by_peer)
        vals = (h[rows] if h is not None else np.zeros((0, self.dims[hop]),
                                                       dtype=self.dtype))
        # the caches live in host memory (a device backend's rows are copied down here,
        # and up again by the load): the pushed rows travel as host arrays
        vals = np.ascontiguousarray(self.backend.to_host(vals), dtype=self.dtype)
        self.stats[hop]["pushed"] += int(ids.size)
        # the counts travel once, blocking (as in the reference code); the two
        # payloads are then posted without a counts exchange or split vote
        # (a push is at most nc rows per peer, far below MPI's count limit)
        rc = comm.alltoall(counts, label=f"hec:push:L{hop}:counts")
        r_ids = comm.ialltoallv(ids, counts, rc, label=f"hec:push:L{hop}:ids", split=False)
        r_vals = comm.ialltoallv(vals, counts, rc, label=f"hec:push:L{hop}:rows", split=False)
        self.inflight[hop].append((r_ids, r_vals, self.global_iter))

    def _receive(self, hop):
        cache = self.caches[hop]
        cache.tick()                    # every iteration: ages count iterations
        if self.k < self.config.d:
            return
        r_ids, r_vals, born = self.inflight[hop].popleft()
        ids, vals = r_ids.wait(), r_vals.wait()
        self.stats[hop]["received"] += int(ids.size)
        cache.store(ids, vals, born)

    # ------------------------------------------------------------------ results
    def epoch_record(self):
        """This rank's per-level ``hits``, ``requests``, ``pushed``, staleness range. Local."""
        return {f"L{l}": dict(v) for l, v in self.stats.items()}
