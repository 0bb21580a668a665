"""Partitioned minibatch training and the HEC on loopback ranks (checks: tests/mpi/hec_checks.py)."""

import sys
from pathlib import Path

import numpy as np
import pytest

from spgnn import run_loopback
from spgnn.partition import PARTITIONERS, local_view, partition_graph

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mpi"))
from hec_checks import CFG, check_partitioned, reference_partitioned, small_graph  # noqa: E402

TIMEOUT = 120
GRAPH = small_graph()


# 1, 2, 4 and 8 ranks run the same check under mpiexec (tests/test_hec_mpi.py); loopback
# adds 3 (and 4 with uneven minibatch counts, below)
@pytest.mark.parametrize("p", [3])
def test_partitioned_training_matches_single_process_reference(p):
    ref = reference_partitioned(GRAPH, p, CFG)
    run_loopback(p, check_partitioned, GRAPH, CFG, ref, timeout=TIMEOUT)


def test_uneven_minibatch_counts_do_not_hang():
    """A partition where ranks own very different numbers of training vertices: empty steps."""
    cfg = dict(CFG, batch_size=4, epochs=1)
    perm, off, _ = partition_graph(GRAPH.adj, cfg["partition"], 4, cfg["seed"],
                                   train_mask=GRAPH.train_mask)
    # the uneven case is real for this graph and seed (not assumed)
    counts = [int(GRAPH.train_mask[perm[off[r]:off[r + 1]]].sum()) for r in range(4)]
    assert len({-(-c // 4) for c in counts}) > 1, counts
    ref = reference_partitioned(GRAPH, 4, cfg)
    run_loopback(4, check_partitioned, GRAPH, cfg, ref, timeout=TIMEOUT)


def test_local_view_keeps_only_owned_rows():
    a = GRAPH.adj.tocsr()
    v = local_view(a, 10, 50)
    d = v.toarray()
    assert not d[:10].any() and not d[50:].any()
    assert np.array_equal(d[10:50], a.toarray()[10:50])


def test_metis_two_constraints_balance_training_vertices():
    parts = PARTITIONERS["metis"](GRAPH.adj, 4, seed=0, train_mask=GRAPH.train_mask).parts
    tr = np.bincount(parts[GRAPH.train_mask], minlength=4)
    assert tr.max() <= 1.25 * GRAPH.train_mask.sum() / 4 + 1, tr


# ------------------------------------------------------------------ the cache protocol
from hec_checks import HEC_CFG, check_hec_exact_equals_off, check_hec_protocol  # noqa: E402


@pytest.mark.parametrize("p", [3])
def test_hec_exact_configuration_equals_hec_off_bit_for_bit(p):
    run_loopback(p, check_hec_exact_equals_off, GRAPH, timeout=TIMEOUT)


@pytest.mark.parametrize("p,d,nc,ls,policy", [
    (1, 1, 3, 1, "drop"), (2, 1, 3, 1, "keep-local"), (4, 1, 3, 1, "zero"), (3, 0, 2, 0, "drop"),
    (4, 2, 50, 3, "drop")])
def test_hec_push_bytes_delivery_cap_schedule(p, d, nc, ls, policy):
    run_loopback(p, check_hec_protocol, GRAPH, None, d, nc, ls, policy, timeout=TIMEOUT)


def test_push_selection_is_the_degree_biased_prefix():
    from spgnn.gnn.hec import push_selection
    cands = np.arange(10)
    assert np.array_equal(push_selection(cands, np.ones(10), 10, 3, None), cands)
    deg = np.array([8, 0, 8, 8, 8, 0, 8, 8, 8, 8])      # 2**hil = 8: accept iff deg > r
    got = push_selection(cands, deg, 4, 3, np.random.default_rng(0))
    assert got.tolist() == [0, 2, 3, 4]                  # degree-0 never, first nc accepted


def test_drop_policy_renormalises_the_mean():
    from spgnn.gnn.blocks import BlockOperator
    from spgnn.gnn.hec import _mask_columns
    from spgnn.sampling import GraphSAGESampler
    a = GRAPH.adj.tocsr()
    mb = GraphSAGESampler((3,), frontier="unique", include_dst=True, seed=0).sample(
        a, [np.array([0, 1, 2])])
    blk = mb.forward_blocks[0]
    keep = np.ones(blk.src_ids.size, bool)
    keep[-1] = False
    op = BlockOperator(_mask_columns(blk, keep))
    h = np.random.default_rng(0).normal(size=(blk.src_ids.size, 2))
    dense = blk.adj.to_scipy().toarray() if hasattr(blk.adj, "to_scipy") else blk.adj.toarray()
    dense = (dense != 0) & keep[None, :]
    want = dense @ h / np.maximum(dense.sum(1), 1)[:, None]
    assert np.allclose(op.aggregate(h), want)


def test_bad_hec_parameters_raise_on_every_rank():
    from spgnn.gnn.hec import HECConfig, HECRunner
    from hec_checks import train_partitioned

    def body(comm, cfg):
        try:
            train_partitioned(comm, GRAPH, dict(HEC_CFG, epochs=1), hec=HECRunner(cfg))
        except ValueError as exc:
            return str(exc)
        return None

    for cfg in (HECConfig(cs=10, nc=11), HECConfig(cs=0), HECConfig(nc=-1), HECConfig(d=-1),
                HECConfig(miss_policy="ignore")):
        got = run_loopback(2, body, cfg, timeout=TIMEOUT)
        assert all(g is not None and "HEC" in g for g in got), (cfg, got)
