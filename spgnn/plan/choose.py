"""``--algo auto``: the configuration the performance model ranks first, agreed by every rank.

Rank 0 (which holds the graph) ranks every candidate with
:func:`spgnn.plan.model.rank_configs` (1d, 1d-aware, 15d / 15d-aware with c
up to 8, 3d on every grid shape; only 3d shapes when ``--grid`` is given)
on the partition the run will use (3d: with the run's ``--permute`` and
``--agg-blocks``), then broadcasts its choice: the ranks never compute it
separately.  The calibration is
``$SPGNN_CALIBRATION`` / ``~/.cache/spgnn/calibration.json`` when present
(``spgnn calibrate --model``), else the built-in defaults.
"""

import numpy as np
import scipy.sparse as sp

from ..grid import parse_grid
from ..partition import double_permutation, partition_graph, permute
from .model import candidate_configs, load_calibration, rank_configs, rank_spmm_configs

__all__ = ["choose", "choose_spmm", "describe", "aggregation_pattern"]


def aggregation_pattern(adj):
    """The nonzeros of the GCN's Â: the symmetrised graph with self-loops."""
    a = sp.csr_array(adj, dtype=np.float32)
    a = ((a + a.T) != 0).astype(np.float32)
    return sp.csr_array(a + sp.eye_array(a.shape[0], dtype=np.float32, format="csr") != 0,
                        dtype=np.float32)


def _offsets_for(a, pattern, partition, seed):
    """``offsets_for(blocks)``: ``a`` permuted by ``partition`` of ``pattern`` into that many blocks."""
    cache = {}

    def offsets_for(blocks):
        if blocks not in cache:
            if partition == "none":
                cache[blocks] = (a, None)
            else:
                perm, offsets, _ = partition_graph(pattern, partition, blocks, seed)
                cache[blocks] = (permute(a, perm), offsets)
        return cache[blocks]

    return offsets_for


def _configs(p, grid, algorithms):
    configs = ([("3d", 1, tuple(grid))] if grid else
               candidate_configs(p, algorithms) if algorithms else candidate_configs(p))
    # one rank: nothing moves and every candidate does the same local work, so
    # ranking them would only cost setup time (issue 37): price the first alone
    return configs[:1] if p == 1 else configs


def _rank_on_root(graph, p, dims, partition, seed, grid, algorithms, permute="none",
                  agg_blocks=1, memory_limit=None, quantize="none"):
    a = aggregation_pattern(graph.adj)
    pattern = sp.csr_array(a - sp.eye_array(a.shape[0], format="csr") != 0, dtype=np.float32)
    # --permute double: the P_r, P_c the run draws (DistGraph: after the partition, from the
    # seed), so 3d is priced on the very shards it will multiply
    offsets_for = _offsets_for(a, pattern, partition, seed)
    ranked = rank_configs(a, p, dims, load_calibration(), configs=_configs(p, grid, algorithms),
                          offsets_for=offsets_for,
                          agg_blocks=agg_blocks,
                          permutation_for=(lambda m: double_permutation(m, seed))
                          if permute == "double" else None)
    if memory_limit is None:
        return [r.to_dict() for r in ranked[:3]]
    return _fitting(ranked, memory_limit, a, dims, offsets_for=offsets_for, quantize=quantize)


def _fitting(ranked, limit, a, dims, training=True, offsets_for=None, quantize="none",
             spmm_source=None):
    """The top 3 of ``ranked`` whose predicted per-rank peak fits ``limit`` (ValueError if none).

    ``offsets_for`` as :func:`~spgnn.plan.model.rank_configs` took it (each
    configuration is priced on the row blocks it was ranked on).
    ``spmm_source`` (``"memory"`` or ``"shards"``): the ranked configurations
    are one ``spgnn spmm`` command's, priced by
    :func:`spgnn.plan.memory_spmm.spmm_within_limit` (``dims[0]``: the
    columns of X) instead of the training model."""
    from .memory import within_limit

    def priced(lim):
        if spmm_source is not None:
            from .memory_spmm import spmm_within_limit

            return spmm_within_limit(ranked, lim, a=a, feat=dims[0], source=spmm_source,
                                     offsets_for=offsets_for)
        return within_limit(ranked, lim, a=a, dims=dims, training=training,
                            offsets_for=offsets_for, quantize=quantize)

    fits = priced(limit)
    if not fits:
        best = min(peak for _, peak in priced(float("inf")))
        raise ValueError(f"--algo auto: no configuration fits in --memory-limit {int(limit):,d} "
                         f"bytes per rank (the smallest predicted peak is {best:,d} bytes; "
                         f"--memory-limit none turns the check off)")
    skipped = [r.label for r in ranked if all(r is not f for f, _ in fits)]
    out = []
    for r, peak in fits[:3]:
        d = r.to_dict()
        d["memory_peak_bytes"] = peak
        d["memory_skipped"] = skipped
        out.append(d)
    return out


def _agree(comm, compute):
    """Rank 0 runs ``compute()`` (the top 3 as dicts); every rank gets them. Collective."""
    top, err = None, None
    if comm.rank == 0:
        try:
            top = compute()
        except (ValueError, OSError) as exc:        # a bad calibration file included
            err = exc
    comm.agree(err)
    top = comm.bcast_obj(top, root=0, label="auto:choice")
    best = top[0]
    shape = tuple(int(v) for v in best["grid"].split("x")) if best["grid"] else None
    return best["algorithm"], int(best["replication"]), shape, top


def choose(comm, graph, dims, *, partition="none", seed=0, grid=None, algorithms=(),
           permute="none", agg_blocks=1, memory_limit=None, quantize="none"):
    """``(algorithm, replication, grid or None, top3)`` on every rank. Collective.

    ``graph`` is needed on rank 0 only; ``grid`` (a ``XxYxZ`` string)
    restricts the choice to 3d on that grid, ``algorithms`` (non-empty) to
    those algorithms (a model's :attr:`ModelSpec.algorithms`, or one 1.5D
    algorithm for ``--replication auto``).  ``permute`` and ``agg_blocks``
    (``train --permute double --agg-blocks K``) are priced on the 3d
    candidates: the nnz of the double-permuted shards, the K chunked
    all-reduces.  ``memory_limit`` (bytes per rank): skip the configurations
    whose predicted per-rank peak (:mod:`spgnn.plan.memory`) exceeds it;
    the returned dicts then carry ``memory_peak_bytes`` and
    ``memory_skipped`` (the labels skipped); a ValueError on every rank when
    none fits.  ``quantize`` (``train --quantize``): 1d-aware candidates
    price their codec buffers.
    """
    g = parse_grid(grid, comm.size, ndim=3, what="train: --grid") if grid else None
    return _agree(comm, lambda: _rank_on_root(graph, comm.size, dims, partition, seed, g,
                                              tuple(algorithms), permute, agg_blocks,
                                              memory_limit, quantize))


def choose_spmm(comm, adj, feat, *, partition="none", seed=0, grid=None, algorithms=(),
                memory_limit=None):
    """``spmm --algo auto`` / ``--replication auto``: the fastest predicted single SpMM. Collective.

    ``adj`` (rank 0 only) is the matrix as ``spgnn spmm`` multiplies it,
    partitioned like it (``partition`` of ``adj`` itself); the ranking is
    :func:`spgnn.plan.model.rank_spmm_configs`.  Returns what :func:`choose`
    returns; ``memory_limit`` as there, priced for one ``spmm`` command with the
    matrix loaded on rank 0 (:func:`spgnn.plan.memory_spmm.spmm_peak_bytes`,
    ``source="memory"``).
    """
    g = parse_grid(grid, comm.size, ndim=3, what="spmm: --grid") if grid else None

    def compute():
        offsets_for = _offsets_for(adj, adj, partition, seed)
        ranked = rank_spmm_configs(adj, comm.size, feat, load_calibration(),
                                   configs=_configs(comm.size, g, tuple(algorithms)),
                                   offsets_for=offsets_for)
        if memory_limit is not None:    # priced on the blocks each was ranked on
            return _fitting(ranked, memory_limit, adj, [feat, feat], training=False,
                            offsets_for=offsets_for, spmm_source="memory")
        return [r.to_dict() for r in ranked[:3]]

    return _agree(comm, compute)


def describe(top, unit="epoch"):
    """One line per ranked configuration, for the log."""
    out = []
    for k, r in enumerate(top):
        shape = (f" {r['grid']}" if r["grid"] else
                 f" c={r['replication']}" if r["algorithm"].startswith("15d") else "")
        if r.get("permute", "none") != "none":
            shape += f" --permute {r['permute']}"
        if r.get("agg_blocks", 1) != 1:
            shape += f" --agg-blocks {r['agg_blocks']}"
        out.append(f"  {k + 1}. {r['algorithm']}{shape}: {r['seconds'] * 1e3:.3f} ms/{unit} "
                   f"predicted (compute {r['compute_seconds'] * 1e3:.3f}, communication "
                   f"{r['comm_seconds'] * 1e3:.3f})"
                   + (f", peak {r['memory_peak_bytes'] / 2 ** 20:,.0f} MiB/rank"
                      if r.get("memory_peak_bytes") is not None else ""))
    if top and top[0].get("memory_skipped"):
        out.append(f"  skipped (predicted peak over --memory-limit): "
                   f"{', '.join(top[0]['memory_skipped'])}")
    if len(top) == 1 and top[0].get("ranks") == 1:
        out.append("  (one rank: every configuration does the same work, so none was ranked)")
    return "\n".join(out)
