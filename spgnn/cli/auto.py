"""``--algo auto``: the configuration the performance model ranks first, agreed by every rank.

Rank 0 (which holds the graph) ranks every candidate with
:func:`spgnn.perfmodel.rank_configs` (1d, 1d-aware, 15d / 15d-aware with c
up to 8, 3d on every grid shape; only 3d shapes when ``--grid`` is given)
on the partition the run will use, then broadcasts its choice: the ranks
never compute it separately.  The calibration is
``$SPGNN_CALIBRATION`` / ``~/.cache/spgnn/calibration.json`` when present
(``spgnn calibrate --model``), else the built-in defaults.
"""

import numpy as np
import scipy.sparse as sp

from spgnn.grid import parse_grid

__all__ = ["choose", "describe"]


def _aggregation_pattern(adj):
    """The nonzeros of the GCN's Â: the symmetrised graph with self-loops."""
    a = sp.csr_array(adj, dtype=np.float32)
    a = ((a + a.T) != 0).astype(np.float32)
    return sp.csr_array(a + sp.eye_array(a.shape[0], dtype=np.float32, format="csr") != 0,
                        dtype=np.float32)


def _rank_on_root(graph, p, dims, partition, seed, grid, algorithms):
    from spgnn.partition import partition_graph, permute
    from spgnn.perfmodel import candidate_configs, load_calibration, rank_configs

    a = _aggregation_pattern(graph.adj)
    cache = {}

    def offsets_for(blocks):
        if blocks not in cache:
            if partition == "none":
                cache[blocks] = (a, None)
            else:
                pattern = sp.csr_array(a - sp.eye_array(a.shape[0], format="csr") != 0,
                                       dtype=np.float32)
                perm, offsets, _ = partition_graph(pattern, partition, blocks, seed)
                cache[blocks] = (permute(a, perm), offsets)
        return cache[blocks]

    configs = ([("3d", 1, tuple(grid))] if grid else
               candidate_configs(p, algorithms) if algorithms else candidate_configs(p))
    ranked = rank_configs(a, p, dims, load_calibration(), configs=configs,
                          offsets_for=offsets_for)
    return [r.to_dict() for r in ranked[:3]]


def choose(comm, graph, dims, *, partition="none", seed=0, grid=None, algorithms=()):
    """``(algorithm, replication, grid or None, top3)`` on every rank. Collective.

    ``graph`` is needed on rank 0 only; ``grid`` (a ``XxYxZ`` string)
    restricts the choice to 3d on that grid, ``algorithms`` (non-empty) to
    those algorithms (a model's :attr:`ModelSpec.algorithms`).
    """
    g = parse_grid(grid, comm.size, ndim=3, what="train: --grid") if grid else None
    top = None
    err = None
    if comm.rank == 0:
        try:
            top = _rank_on_root(graph, comm.size, dims, partition, seed, g, tuple(algorithms))
        except (ValueError, OSError) as exc:        # a bad calibration file included
            err = exc
    comm.agree(err)
    top = comm.bcast_obj(top, root=0, label="auto:choice")
    best = top[0]
    shape = tuple(int(v) for v in best["grid"].split("x")) if best["grid"] else None
    return best["algorithm"], int(best["replication"]), shape, top


def describe(top):
    """One line per ranked configuration, for the log."""
    out = []
    for k, r in enumerate(top):
        shape = (f" {r['grid']}" if r["grid"] else
                 f" c={r['replication']}" if r["algorithm"].startswith("15d") else "")
        out.append(f"  {k + 1}. {r['algorithm']}{shape}: {r['seconds'] * 1e3:.3f} ms/epoch "
                   f"predicted (compute {r['compute_seconds'] * 1e3:.3f}, communication "
                   f"{r['comm_seconds'] * 1e3:.3f})")
    return "\n".join(out)
