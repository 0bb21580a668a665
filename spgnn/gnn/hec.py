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
   ``hec:push:L{ℓ}:ids`` (int64) and rows under ``hec:push:L{ℓ}:rows``.
   Their counts: under ``nc="auto"`` both sides know them from the epoch's
   plan (one ``hec:plan:counts`` table per epoch), so nothing in the push
   blocks; with a numeric ``nc`` one blocking ``hec:push:L{ℓ}:counts``
   all-to-all first.  Posted pushes are progressed (``Request.test``) between
   the layers' kernels, forward and backward (:meth:`HECRunner.progress`);
2. **receive** (``k ≥ d``): the push posted at ``(k - d, ℓ)`` is completed,
   the cache ticks once (every line ages by one iteration) and stores it
   (values computed at iteration ``k - d``);
3. **load**: the level's halo vertices are searched; hits overwrite their
   rows of ``H`` (constants: their gradient is cut), misses follow the
   policy: ``fallback`` (the default: at level 0 ``drop``; above, a halo whose
   level-0 row arrived keeps its local value, as ``--hec off``, others are
   dropped), ``drop`` (the paper's: the missed halo's edges leave the block and
   the mean renormalises over the rest), ``keep-local`` (the locally
   computed value: zero input features at level 0, a self-only transform
   above) or ``zero``.  No load for ``k < d`` (those halos are misses).

**Planned pushes** (``nc="auto"``, the default; :meth:`HECRunner.plan`):
each epoch the ranks exchange the halo reads their (pre-sampled) minibatches
will make and the owners push exactly those they can serve within a byte
budget (:data:`AUTO_BUDGET` of the exact fetch, cumulative); level 0 then
travels once, at the epoch start, and stays cached across epochs.

**Push cap (numeric nc: the paper's degree-biased rule, research/001 §2.6).** When more
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
import os
import socket
from collections import deque

import numpy as np

from ..backends import get_backend
from ..local.csr import LocalCSR
from ..plan.host import host_memory_bytes
from .blocks import BlockOperator
from .context import BlockContext
from .hec_cache import INFINITE, HistoricalCache
from .layers import SAGEConv

__all__ = ["HECConfig", "HECRunner", "HECBlockContext", "MISS_POLICIES", "AUTO", "AUTO_BUDGET",
           "push_selection", "host_memory_bytes", "drop_halo_columns"]


#: ``--miss-policy`` choices.
MISS_POLICIES = ("fallback", "drop", "keep-local", "zero")
#: ``--hec-push-cap auto``: pushes planned from the peers' wants (:meth:`HECRunner.plan`).
AUTO = "auto"
#: ``auto``'s byte budget: this fraction of what ``--hec off`` would fetch for the same reads.
AUTO_BUDGET = 0.25
ID_BYTES = 8


@dataclasses.dataclass(frozen=True)
class HECConfig:
    """HEC parameters (paper 001 §2.3).  ``None`` for ``ls`` / ``nc`` / ``cs`` = unbounded.

    cs : capacity (rows per level per rank); ls : life span in iterations;
    nc : push cap per peer per level per iteration, or ``"auto"`` (pushes planned
    from what the peers will read, under a byte budget: :meth:`HECRunner.plan`);
    d : delay in iterations;
    miss_policy : one of :data:`MISS_POLICIES`; levels : cached levels
    ``0..levels-1`` (None: all); reset : ``"epoch"`` or ``"never"``;
    prefill : fill level 0 with every halo's features each epoch; min_life.
    """

    cs: int = 1_000_000
    ls: int = 2
    nc: object = AUTO
    d: int = 1
    miss_policy: str = "fallback"
    levels: int = None
    reset: str = "epoch"
    prefill: bool = False
    min_life: int = 0

    def validate(self, nranks):
        """Raise ``ValueError`` for a bad combination. Local (every rank knows the config)."""
        bad = []
        for name, lo in (("cs", 1), ("nc", 1), ("ls", 0), ("d", 0), ("min_life", 0)):
            v = getattr(self, name)
            if name == "nc" and v == AUTO:
                continue
            if v is not None and int(v) < lo:
                bad.append(f"{name} must be >= {lo}, but got {v}")
        if self.levels is not None and int(self.levels) < 0:
            bad.append(f"levels must be >= 0, but got {self.levels}")
        if self.miss_policy not in MISS_POLICIES:
            bad.append(f"miss policy must be one of {MISS_POLICIES}, but got {self.miss_policy!r}")
        if self.reset not in ("epoch", "never"):
            bad.append(f"reset must be 'epoch' or 'never', but got {self.reset!r}")
        if not bad and self.cs is not None and nranks > 1 and self.nc != AUTO:
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


def drop_halo_columns(blocks, is_halo):
    """``--hec none``: every block without its halo columns (no remote neighbour at all). Local.

    ``is_halo(ids)`` tells the halo vertices; each destination's mean then runs
    over its local neighbours only (zero where it has none).
    """
    return [_mask_columns(b, ~is_halo(np.asarray(b.src_ids, dtype=np.int64))) for b in blocks]


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
    (:meth:`HECRunner.level`: two non-blocking all-to-alls, after a blocking
    counts all-to-all under a numeric push cap), so every rank must touch every hop, in level order, once per
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
            self.runner.progress()      # between the previous layer's kernel and this one's
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
        self.runner.progress()          # between the backward kernels
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

    def __init__(self, config, overlap=None):
        self.config = config
        self.source = None
        # overlap=False (or SPGNN_HEC_OVERLAP=0): each push is waited as soon as it is
        # posted and nothing is progressed between kernels -- the measured baseline
        # (docs/hec.md, "Overlapped pushes"); same results, only the timing differs
        if overlap is None:
            overlap = os.environ.get("SPGNN_HEC_OVERLAP", "1") != "0"
        self.overlap = bool(overlap)

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
        self.planned = cfg.nc == AUTO
        self._check_memory(n, cs)
        self.backend = get_backend(hg.mg.backend)
        self.caches = [HistoricalCache(n, cs, self.dims[lv], ls, min_life=cfg.min_life,
                                       check_age=lv > 0, dtype=self.dtype,
                                       backend=hg.mg.backend)
                       for lv in range(self.levels)]
        dmax = int(hg.degree.max(initial=1))
        self.hil = int(np.floor(np.log2(max(dmax, 1))))
        self.inflight = [deque() for _ in range(self.levels)]
        self.global_iter = 0
        # auto: per peer, the bytes the budget has allowed and those spent so far
        self.allowed = np.zeros(comm.size)
        self.spent = np.zeros(comm.size)

    def cache_bytes(self, n, cs):
        """Bytes the caches allocate: per level a ``cs``-row ring and its tags
        (:func:`spgnn.plan.memory.hec_cache_bytes`). Local."""
        from ..plan.memory import hec_cache_bytes

        return hec_cache_bytes(n, cs, self.dims[:self.levels], np.dtype(self.dtype).itemsize)

    def _check_memory(self, n, cs):
        """Refuse caches larger than this host's memory shared by its ranks. Collective.

        Only ``--hec-reset never`` can allocate the whole ``cs`` ring (with the
        per-epoch reset the ring is at most ``|halos|·(M + 1)`` rows); a plain
        estimate: rows x width x levels x dtype (+ tags) against the physical
        memory divided by the ranks on this host.  Raises ``ValueError`` on
        every rank, naming the largest capacity that fits.
        """
        comm = self.comm
        hosts = comm.allgather_obj(socket.gethostname(), label="hec:setup")
        local_ranks = max(1, hosts.count(hosts[comm.rank]))
        limit = host_memory_bytes() // local_ranks
        need = self.cache_bytes(n, cs)
        err = None
        if need > limit:
            per_row = max(1, (self.cache_bytes(n, 2) - self.cache_bytes(n, 1)))
            fits = max(0, (limit - self.cache_bytes(n, 0)) // per_row)
            err = ValueError(
                f"HEC: the caches need {need / 2**30:.2f} GiB per rank ({cs:,} rows x widths "
                f"{self.dims[:self.levels]} x {np.dtype(self.dtype).itemsize} B, "
                f"--hec-reset {self.config.reset}) but this host gives each of its "
                f"{local_ranks} ranks {limit / 2**30:.2f} GiB: give --hec-capacity {fits:,} "
                f"or less" + (", or --hec-reset epoch (its ring holds one epoch's receives)"
                              if self.config.reset == "never" else ""))
        comm.agree(err)

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
        for lv, c in enumerate(self.caches):
            # planned: level-0 lines are raw features, exact forever: kept across epochs
            keep = self.config.reset == "never" or (self.planned and lv == 0)
            c.settle() if keep else c.reset()
        self.schedule, self.plan_record = {}, None
        if self.config.prefill and self.levels:
            rows = self.hg.features.matrix.gather_rows(self.my_halos, validate=False,
                                                       label="hec:prefill")
            self.caches[0].store(self.my_halos, rows, born=self.global_iter - 1)

    def input_rows(self, src):
        """Block 0's input rows: my solids' features, halos zero (the cache fills them). Local."""
        hg = self.hg
        if self.levels == 0:
            # no cached level: halos are fetched exactly, as --hec off does
            return hg.features.fetch(src, validate=False)
        return hg.local_input(src)

    def begin(self, k, ctx):
        self.k = int(k)
        self.ctx = ctx

    def empty_iteration(self, k):
        """An empty step's share of every level's collectives. Collective."""
        self.k, self.ctx = int(k), None
        for l in range(self.levels):
            if self.planned and l == 0:
                continue                # level 0 arrived with the plan
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
        if not (self.planned and hop == 0):     # planned: level 0 arrived with the plan
            self._push(hop, src, H.local)
            self._receive(hop)
        halo_pos = np.flatnonzero(self.hg.is_halo(src))
        st = self.stats[hop]
        st["requests"] += int(halo_pos.size)
        policy = self.config.miss_policy
        hit_rows = np.zeros(0, dtype=np.int64)
        if (self.k >= self.config.d or self.planned) and halo_pos.size:
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
        if policy == "fallback":
            # as --hec off where the halo's level-0 row arrived (its local value
            # is computed from it), dropped where it did not
            if hop == 0:
                ctx.lost = np.sort(src[missed])
                policy = "drop"
            else:
                lost = getattr(ctx, "lost", np.zeros(0, dtype=np.int64))
                missed = missed[np.isin(src[missed], lost, assume_unique=False)]
                policy = "drop"
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
        if self.planned:
            if src is not None:
                ids_by_peer, rows_by_peer = self._planned_push(hop, src)
        elif src is not None and P > 1:
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
        if self.planned:
            # auto: both sides know the counts from the epoch's plan (hec:plan:counts),
            # so nothing in the push blocks
            rc = self.recv_counts[:, self._count_column(hop, self.k)]
            if not np.array_equal(counts, self.send_counts[:, self._count_column(hop, self.k)]):
                raise RuntimeError(f"HEC: the level-{hop} push of iteration {self.k} differs "
                                   f"from the plan's counts")
        else:
            # numeric nc: the counts travel once, blocking (as in the reference code)
            rc = comm.alltoall(counts, label=f"hec:push:L{hop}:counts")
        # the payloads are posted without a counts exchange or split vote
        # (a push is at most nc rows per peer, far below MPI's count limit)
        r_ids = comm.ialltoallv(ids, counts, rc, label=f"hec:push:L{hop}:ids", split=False)
        r_vals = comm.ialltoallv(vals, counts, rc, label=f"hec:push:L{hop}:rows", split=False)
        if not self.overlap:
            r_ids.wait()                # measured baseline: completed at once
            r_vals.wait()
        self.inflight[hop].append((r_ids, r_vals, self.global_iter))

    def progress(self):
        """Progress every posted push without blocking (:meth:`Request.test`). Local.

        mpich moves a non-blocking collective only inside MPI calls; the
        contexts call this between the layers' kernels (forward and backward)
        so that a push advances while the model computes, not only in the
        gradient all-reduce or the receiving :meth:`wait`.
        """
        if not self.overlap:
            return
        for q in self.inflight:
            for r_ids, r_vals, _ in q:
                r_ids.test()
                r_vals.test()

    def _count_column(self, hop, k):
        """Column of the plan's count table for the level-``hop`` push of iteration ``k``. Pure."""
        return 1 + (hop - 1) * self.push_iters + k

    def _receive(self, hop):
        cache = self.caches[hop]
        cache.tick()                    # every iteration: ages count iterations
        if self.k < self.config.d:
            return
        r_ids, r_vals, born = self.inflight[hop].popleft()
        ids, vals = r_ids.wait(), r_vals.wait()
        self.stats[hop]["received"] += int(ids.size)
        cache.store(ids, vals, born)

    def _planned_push(self, hop, src):
        """Per peer: the planned ids of iteration ``k`` at ``hop`` and their rows in ``src``. Local."""
        P = self.comm.size
        ids_by_peer = [np.zeros(0, dtype=np.int64)] * P
        rows_by_peer = [np.zeros(0, dtype=np.int64)] * P
        plan = self.schedule.get((hop, self.k))
        if plan is None:
            return ids_by_peer, rows_by_peer
        peers, ids = plan
        order = np.argsort(src, kind="stable")
        pos = order[np.searchsorted(src, ids, sorter=order)]
        if not np.array_equal(src[pos], ids):
            raise RuntimeError(f"HEC: planned push of ids not in the level-{hop} frontier")
        bounds = np.searchsorted(peers, np.arange(P + 1))
        for p in range(P):
            ids_by_peer[p] = ids[bounds[p]:bounds[p + 1]]
            rows_by_peer[p] = pos[bounds[p]:bounds[p + 1]]
        return ids_by_peer, rows_by_peer

    # ------------------------------------------------------------------ the plan
    def _affordable_wants(self, keys, reads0, row_bytes):
        """The wants worth sending: per owner, within the receiver's budget. Local.

        The same cumulative budget as the owner's (:data:`AUTO_BUDGET` of the
        fetch's bytes for my level-0 reads), charged pessimistically: a want
        costs its 8 bytes plus its row, as if each read needed its own push.
        Level 0 first (a row serves every read of it, for the rest of the
        run), most-read first; then levels >= 1, lower levels and vertices read
        more often first.
        """
        hg, P, L, n = self.hg, self.comm.size, self.levels, int(self.hg.mg.n)
        if not hasattr(self, "want_allowed"):
            self.want_allowed, self.want_spent = np.zeros(P), np.zeros(P)
        self.want_allowed += AUTO_BUDGET * reads0 * row_bytes[0]
        if not keys.size:
            return keys
        lvl, v = (keys // n) % L, keys % n
        _, inv, cnt = np.unique(lvl * n + v, return_inverse=True, return_counts=True)
        reads = cnt[inv]
        if (lvl == 0).any():           # one want per level-0 vertex: it serves every read
            z = np.flatnonzero(lvl == 0)
            _, first = np.unique(v[z], return_index=True)
            keep = np.ones(keys.size, dtype=bool)
            keep[z] = False
            keep[z[first]] = True
            keys, lvl, v, reads = keys[keep], lvl[keep], v[keep], reads[keep]
        owner = hg.owner(v)
        cost = ID_BYTES + np.asarray(row_bytes, dtype=np.float64)[lvl]
        out = []
        for q in range(P):
            m = np.flatnonzero(owner == q)
            if not m.size:
                continue
            m = m[np.lexsort((-reads[m], lvl[m]))]
            take = m[np.cumsum(cost[m]) <= self.want_allowed[q] - self.want_spent[q]]
            self.want_spent[q] += cost[take].sum()
            out.append(keys[take])
        return np.concatenate(out) if out else keys[:0]

    def plan(self, minibatches):
        """``--hec-push-cap auto``: plan this epoch's pushes from what each peer will read. Collective.

        ``minibatches``: this rank's sampled minibatches of the epoch, in
        iteration order (the sampler is keyed by seed, epoch and minibatch, so
        each rank knows its own frontiers before the epoch runs).

        1. **Wants** (``hec:want``): every rank sends each owner the halo
           reads ``(iteration j, level ℓ, vertex v)`` its minibatches will make
           (one int64 each), and per owner its number of level-0 reads.
        2. **Choice** (owner, per peer): a level-0 row (raw features, exact at
           any time) serves all of the peer's reads of it in the epoch; a
           level-ℓ ≥ 1 read at ``j`` can be served by the owner's own value of
           ``v`` at an iteration ``k`` with ``j - d - ls <= k <= j - d`` in
           which ``v`` is in the owner's level-ℓ frontier (the latest such
           ``k``, the freshest).  Candidates are taken by reads served per
           byte until their bytes reach :data:`AUTO_BUDGET` of what ``--hec
           off`` would fetch for the peer's level-0 reads, less the wants' bytes,
           counted over the run so far (cumulative: level-0 rows, exact forever,
           stay in the level-0 cache across epochs whatever ``reset`` says and
           are not sent again, so later epochs spend on what is still missing
           and on levels >= 1).
        3. **Level 0** travels now (``hec:push:L0:*``) into the level-0
           cache; the level ≥ 1 pushes go at their iterations
           (:meth:`_push`).  Every push is read unless the trainer stops early.
        4. **Counts** (``hec:plan:counts``, one all-to-all of a ``P x (1 +
           (levels - 1)(M - d))`` int64 table): what each owner will push to
           each reader at level 0 now and at every ``(level, iteration)``, so
           the per-iteration pushes post their payloads with no counts exchange.
        """
        cfg, comm, hg = self.config, self.comm, self.hg
        P, L, n, M = comm.size, self.levels, int(hg.mg.n), max(1, self.M)
        isz = np.dtype(self.dtype).itemsize
        row_bytes = [ID_BYTES + isz * d for d in self.dims[:L]]
        # 1. my wants, per owner, within my own view of the budget
        keys, reads0 = [np.zeros(0, dtype=np.int64)], np.zeros(P, dtype=np.int64)
        for k, mb in enumerate(minibatches):
            for l in range(L):
                src = np.asarray(mb.forward_blocks[l].src_ids, dtype=np.int64)
                h = np.unique(src[hg.is_halo(src)])
                if l == 0:
                    reads0 += np.bincount(hg.owner(h), minlength=P)
                    h = h[self.caches[0].tag2slot[h] < 0]     # held rows never go stale
                keys.append((k * L + l) * n + h)
        keys = self._affordable_wants(np.concatenate(keys), reads0, row_bytes)
        owner = hg.owner(keys % n)
        order = np.argsort(owner, kind="stable")
        counts = np.bincount(owner, minlength=P).astype(np.int64)
        got = comm.alltoallv(keys[order], counts, label="hec:want")
        rc = comm.alltoall(counts, label="hec:want")
        their_reads0 = comm.alltoall(reads0, label="hec:want")
        # my frontiers at levels >= 1: sorted codes (l·n + v)·M + k of my solids
        occ = [np.zeros(0, dtype=np.int64)]
        for k, mb in enumerate(minibatches):
            for l in range(1, L):
                src = np.unique(np.asarray(mb.forward_blocks[l].src_ids, dtype=np.int64))
                occ.append((l * n + src[~hg.is_halo(src)]) * M + k)
        occ = np.sort(np.concatenate(occ))
        # 2. per peer, the candidates and the budget
        j, rest = got // (L * n), got % (L * n)
        lvl, v = rest // n, rest % n
        peer = np.repeat(np.arange(P), rc)
        ls = INFINITE if cfg.ls is None else int(cfg.ls)
        base = (lvl * n + v) * M
        at = np.searchsorted(occ, base + (j - cfg.d), side="right") - 1
        k_push = np.where(at >= 0, occ[np.maximum(at, 0)] - base, -1)
        ok = (lvl == 0) | ((at >= 0) & (k_push >= 0) & (k_push <= j - cfg.d)
                           & (k_push >= j - cfg.d - min(ls, M)))
        k_push = np.where(lvl == 0, -1, k_push)
        # a candidate push: (peer, level, v, k); its value = reads served / bytes
        cand = np.stack([peer[ok], lvl[ok], v[ok], k_push[ok]], axis=1)
        uniq, inv, reads = np.unique(cand, axis=0, return_inverse=True, return_counts=True)
        bytes_ = np.asarray(row_bytes, dtype=np.int64)[uniq[:, 1]] if uniq.size else \
            np.zeros(0, dtype=np.int64)
        off_cost = their_reads0 * row_bytes[0] if L else np.zeros(P, dtype=np.int64)
        # the budget is cumulative: what earlier epochs did not spend (level-0 rows
        # already held are not sent again) is spent later
        self.allowed += AUTO_BUDGET * off_cost
        self.spent += ID_BYTES * rc
        budget = self.allowed - self.spent
        chosen = np.zeros(uniq.shape[0], dtype=bool)
        for p in range(P):
            mine = np.flatnonzero(uniq[:, 0] == p)
            if not mine.size or budget[p] <= 0:
                continue
            rank_ = mine[np.lexsort((uniq[mine, 1], -reads[mine] / bytes_[mine]))]
            take = np.cumsum(bytes_[rank_]) <= budget[p]
            chosen[rank_[take]] = True
            self.spent[p] += bytes_[rank_[take]].sum()
        sel = uniq[chosen]
        # 3. level 0 now; levels >= 1 scheduled by (level, iteration)
        zero = sel[sel[:, 1] == 0] if L else sel[:0]
        zc = np.bincount(zero[:, 0], minlength=P).astype(np.int64)
        ids0 = zero[:, 2]
        rows0 = np.ascontiguousarray(self.backend.to_host(hg.features.local[ids0 - hg.lo]),
                                     dtype=self.dtype) if L else None
        self.schedule = {}
        upper = sel[sel[:, 1] > 0]
        for (l, k) in {(int(a), int(b)) for a, b in upper[:, [1, 3]]}:
            m = (upper[:, 1] == l) & (upper[:, 3] == k)
            self.schedule[(l, k)] = (upper[m, 0], upper[m, 2])      # sorted by peer
        self.plan_record = dict(wants=int(got.size), budget_bytes=float(max(budget.sum(), 0)),
                                off_level0_bytes=int(off_cost.sum()),
                                chosen=[int((sel[:, 1] == l).sum()) for l in range(L)],
                                candidates=[int((uniq[:, 1] == l).sum()) for l in range(L)])
        # the counts of every push of the epoch, once: column 0 level 0 (now), then per
        # level >= 1 and iteration k < M - d; the per-iteration pushes need no counts exchange
        self.push_iters = T = max(0, M - cfg.d)
        table = np.zeros((P, 1 + max(L - 1, 0) * T), dtype=np.int64)
        table[:, 0] = zc
        for (l, k), (peers, _) in self.schedule.items():
            table[:, self._count_column(l, k)] = np.bincount(peers, minlength=P)
        self.send_counts = table
        self.recv_counts = comm.alltoall(table, label="hec:plan:counts") if L else table
        if L:
            rzc = self.recv_counts[:, 0]
            r_ids = comm.alltoallv(ids0, zc, rzc, label="hec:push:L0:ids")
            r_rows = comm.alltoallv(rows0, zc, rzc, label="hec:push:L0:rows")
            self.stats[0]["pushed"] += int(ids0.size)
            self.stats[0]["received"] += int(r_ids.size)
            self.caches[0].store(r_ids, r_rows.reshape(r_ids.size, self.dims[0]),
                                 self.global_iter - 1)

    # ------------------------------------------------------------------ results
    def epoch_record(self):
        """This rank's per-level ``hits``, ``requests``, ``pushed``, staleness range, and the
        received lines' use: ``read`` + ``wasted`` (expired or overwritten unread) + ``live``
        (unread, still valid at the epoch's end) = ``received``. Local."""
        out = {}
        for l, v in self.stats.items():
            rec = dict(v)
            stored, first, wasted, live = self.caches[l].use_counts()
            rec.update(stored=stored, read=first, wasted=wasted, live=live)
            out[f"L{l}"] = rec
        return out
