"""The minibatch memory model's counts against what a built ``--hec`` trainer holds (issue 37).

A partitioned GraphSAGE trainer (:class:`~spgnn.gnn.sources.Halo`) is built
on a small SBM (2 loopback ranks, numpy backend), in memory (``--partition
random``) and from shards, for ``--hec off``, ``on`` and ``none``, and the
replicated one without ``--hec`` (:class:`~spgnn.gnn.sources.Sampled`), and
trained one epoch; then every numpy array reachable from it is found (each
buffer once, as tests/test_memory_tracemalloc.py walks them) and summed by kind:
:func:`spgnn.plan.memory_minibatch.halo_held_bytes` must equal each sum
exactly, rank by rank, with the counts made from the whole graph
(:func:`halo_counts`) and from what each rank holds (the ``train`` path's,
``Built.memory``).  What one minibatch left behind (the model's saved
tensors, the cache plan's schedule) depends on the draws: it is checked
against the iteration bound instead.  tracemalloc cross-checks the
inventory once.
"""

import gc
import tracemalloc

import numpy as np
import pytest

from spgnn.comm import run_loopback
from spgnn.gnn.config import TrainConfig
from spgnn.plan.memory_minibatch import (halo_counts, halo_held_bytes, iteration_bytes,
                                         partitioned_view_counts, sage_dims)
from spgnn.testing.held import held_buffers


GRAPH = "sbm:400:4:0"
OPTS = dict(model="sage", epochs=1, backend="numpy", fanout="4,3", batch_size=32, hidden=8,
            memory_limit="none")


def _kind(path):
    if path.startswith(".optimizer"):
        return "parameters"
    if path.startswith(".model"):
        return "saved"
    if path.startswith((".source.hec.schedule", ".source.hec.plan", ".source.hec.ctx")):
        return "saved"              # the last plan and minibatch: data dependent
    if path.startswith(".source.hec"):
        return "hec"
    if path.startswith((".graph.view", ".graph.sampling_graph")):
        return "view"
    if ".full.A" in path:
        return "eval_graph"
    return "data"


def inventory(root):
    """``{kind: bytes}`` of the numpy buffers reachable from ``root`` (each buffer once)."""
    return held_buffers(root, _kind)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    from spgnn.io import load_graph
    from spgnn.partition.to_shards import partition_to_shards

    out = tmp_path_factory.mktemp("mbmem") / "shards"
    partition_to_shards(load_graph(GRAPH), out, 2, "random", 0)
    return str(out)


def _config(graph, hec):
    if isinstance(hec, tuple):      # ("partitioned", c): bulk partitioned sampling, no --hec
        return TrainConfig(graph=graph, partition_mode="partitioned", replication=hec[1],
                           **OPTS)
    extra = {} if graph != GRAPH or hec is None else {"partition": "random"}
    return TrainConfig(graph=graph, hec=hec, **extra, **OPTS)


def _build(comm, graph, hec):
    cfg = _config(graph, hec)
    g = cfg.load_graph() if comm.rank == 0 and not cfg.sharded else None
    built = cfg.build(comm, g)
    del g
    built.trainer.train_epoch()
    return built


def _whole_graph_counts(hec, ranks=2):
    """The counts from the whole graph, partitioned as HaloGraph.build does."""
    from spgnn.io.preprocess import neighbour_pattern
    from spgnn.partition import partition_graph, permute_graph

    cfg = _config(GRAPH, hec)
    g = cfg.load_graph()
    if hec is None or isinstance(hec, tuple):   # bulk sampling: the graph's order, even blocks
        from spgnn.layout import block_offsets
        pattern = neighbour_pattern(g.adj)
        counts = halo_counts(pattern, block_offsets(g.num_nodes, ranks), g.train_mask,
                             g.features.shape[1], g.num_classes)
        if isinstance(hec, tuple):              # the sampler's P/c even block rows
            counts = partitioned_view_counts(counts, pattern,
                                             block_offsets(g.num_nodes, ranks // hec[1]))
        return cfg, counts
    perm, off, _ = partition_graph(g.adj, "random", ranks, cfg.seed, train_mask=g.train_mask)
    pg = permute_graph(g, np.arange(g.num_nodes) if perm is None else perm)
    return cfg, halo_counts(neighbour_pattern(pg.adj), off, pg.train_mask,
                            g.features.shape[1], g.num_classes)


@pytest.mark.parametrize("where, hec", [("memory", "off"), ("memory", "on"), ("shards", "none"),
                                        ("shards", "on"), ("memory", None),
                                        ("memory", ("partitioned", 1)),
                                        ("memory", ("partitioned", 2)),
                                        ("shards", ("partitioned", 2))])
def test_held_bytes_equal_the_arrays_a_halo_trainer_holds(where, hec, shards, capsys):
    graph = GRAPH if where == "memory" else shards

    def run(comm):
        built = _build(comm, graph, hec)
        return inventory(built.trainer), built.memory

    got = run_loopback(2, run)
    counts_of = {}
    if where == "memory":                      # the whole graph's counts equal the gathered
        cfg, counts = _whole_graph_counts(hec)
        counts_of["whole"] = counts
    cfg = _config(graph, hec)
    memory = got[0][1]
    assert memory == got[1][1]                 # every rank priced the same counts
    for r, (kinds, _) in enumerate(got):
        assert kinds["view"] > 0 and kinds["parameters"] > 0 and kinds["saved"] > 0
        for key, value in memory["held"].items():
            assert kinds.get(key, 0) == value[r], (where, hec, r, key, kinds.get(key), value[r])
    for counts in counts_of.values():
        dims = sage_dims(counts.features, cfg.hidden, counts.classes, len(cfg.fanout))
        held = halo_held_bytes(counts, dims, hec=None if isinstance(hec, tuple) else hec,
                               batch_size=cfg.batch_size)
        assert {k: [int(x) for x in v] for k, v in held.items()} == memory["held"]
    if isinstance(hec, tuple):                 # plan --memory prices the same held arrays
        import json
        from spgnn.__main__ import main
        capsys.readouterr()
        main(["plan", "--memory", "--model", "sage", "--graph", graph, "--ranks", "2",
              "--partition-mode", "partitioned", "--replication", str(hec[1]), "--fanout",
              OPTS["fanout"], "--batch-size", str(OPTS["batch_size"]), "--hidden",
              str(OPTS["hidden"]), "--json"])
        rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["sage_memory"][0]
        assert rec["held"] == memory["held"] and rec["replication"] == hec[1]
    # what the last minibatch left is within one iteration's bound
    for r, (kinds, _) in enumerate(got):
        assert kinds["saved"] <= memory["iteration"][r]


def test_tracemalloc_sees_the_held_arrays_and_little_else():
    """After a build and an epoch, what stays allocated (tracemalloc, both ranks) covers the
    counted arrays (the caches' whole rings included: allocated, if not all touched), with at
    most 256 KiB more (Python objects, the last minibatch's tensors)."""
    run_loopback(2, lambda comm: _build(comm, GRAPH, "on").trainer)    # imports, compiles
    kept = []
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        kept.extend(run_loopback(2, lambda comm: _build(comm, GRAPH, "on")))
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    counted = sum(sum(v) for v in kept[0].memory["held"].values())
    assert counted > 400_000
    assert counted <= grown <= counted + 256 * 1024, (counted, grown)


def test_the_iteration_bound_covers_an_iteration_of_sampled_blocks():
    cfg, counts = _whole_graph_counts("off")
    dims = sage_dims(counts.features, cfg.hidden, counts.classes, len(cfg.fanout))
    bound = iteration_bytes(counts, dims, cfg.fanout, cfg.batch_size)
    assert (bound > 0).all()


@pytest.mark.mpi
def test_over_the_memory_limit_is_one_line_on_every_rank_without_abort():
    # the refusal is agreed (comm.agree) after every rank priced the same gathered counts:
    # one line from rank 0, exit 2, no MPI_Abort (tests/faults/test_size_options.py's check)
    from spgnn.testing.mpi import run_mpi

    proc = run_mpi(["-m", "spgnn", "train", "--graph", GRAPH, "--model", "sage", "--hec", "on",
                    "--partition", "random", "--fanout", "4,3", "--epochs", "1", "--no-progress",
                    "--memory-limit", "1M"], 2, timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if "error:" in ln]
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout[-3000:]
    assert "--hec on: predicted per-rank peak" in lines[0] and "Abort" not in proc.stdout


def test_train_reports_the_prediction_beside_the_measured_peak():
    from spgnn.cli.train import train

    out = run_loopback(2, lambda comm: train(comm, _config(GRAPH, "on")))
    for r in out:
        pred, rss = r["predicted_peak_bytes"], r["peak_rss_bytes"]
        assert len(pred["per_rank"]) == 2 and pred["max"] == max(pred["per_rank"]) > 2 ** 20
        assert set(pred) == set(rss)
