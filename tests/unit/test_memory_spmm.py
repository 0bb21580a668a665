"""The one-SpMM memory model (:mod:`spgnn.plan.memory_spmm`, issue 37 item 4) against the arrays
an ``spgnn spmm`` run holds: for 1d, 1d-aware, 15d-aware and 3d, the counted block (with the
aware exchange plan) and X and Y equal, rank by rank, the numpy buffers reachable from the
command's A, X and Y after a multiply (numpy backend, loopback ranks, from shards); rank 0's
whole matrix and X are counted in memory only; the fitted terms are where the docs say."""

import argparse
import types

import numpy as np
import pytest

from spgnn.comm import run_loopback
from spgnn.plan import memory_spmm as ms
from spgnn.plan.model import rank_spmm_configs

SPEC, FEAT = "rmat:8:4", 6
_SKIP = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
         str, bytes, int, float)


def _buffers(*roots):
    """Bytes of the distinct numpy buffers reachable from ``roots`` (each owner once)."""
    seen, owners, stack = set(), {}, list(roots)
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, _SKIP):
            continue
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            while isinstance(o.base, np.ndarray):
                o = o.base
            owners[id(o)] = o.nbytes
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        elif not type(o).__module__.startswith(("spgnn.comm", "spgnn.grid", "spgnn.backends",
                                                 "mpi4py")):
            stack.extend(vars(o).values() if hasattr(o, "__dict__") else ())
            stack.extend(getattr(o, s) for s in getattr(type(o), "__slots__", ()) if hasattr(o, s))
    return sum(owners.values())


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    from spgnn.partition.stream_shards import generator_to_shards

    d = tmp_path_factory.mktemp("spmm-mem") / "k2"
    generator_to_shards(SPEC, d, 2, "none", 0, features="random:2", labels="random:2")
    return d


def _args(graph, algo, grid=None):
    return argparse.Namespace(graph=str(graph), feat=FEAT, algo=algo, replication=2, grid=grid,
                              backend="numpy", seed=0, check=False)


def _placed(comm, graph, algo, grid, source):
    """The command's A and X, placed as ``spgnn spmm`` places them from ``source``."""
    from spgnn.cli import spmm
    from spgnn.grid import parse_grid

    args = _args(graph, algo, grid)
    blocks = comm.size // (2 if algo.startswith("15d") else 1)
    if source == "shards":
        return spmm._from_shards(comm, args, blocks)[2:4]
    args.partition, args.partition_file, args.num_nodes, args.relabel = "none", None, None, False
    a = x = meta = None
    if comm.rank == 0:
        a, x, _, meta = spmm._prepare_root(args, blocks)
    meta = comm.bcast_obj(meta, root=0, label="test:meta")
    return spmm._distribute(comm, args, a, x, meta, parse_grid(grid, comm.size) if grid else None)


@pytest.mark.parametrize("source", ["shards", "memory"])
@pytest.mark.parametrize("algo, ranks, grid", [("1d", 2, None), ("1d-aware", 2, None),
                                              ("15d-aware", 4, None), ("3d", 4, "2x2x1")])
def test_counted_block_and_operands_equal_the_arrays_an_spmm_run_holds(shards, algo, ranks, grid,
                                                                       source):
    from spgnn import spmm as multiply
    from spgnn.io import load_adjacency

    def run(comm):
        A, X = _placed(comm, shards if source == "shards" else SPEC, algo, grid, source)
        y = multiply(A, X, algorithm=algo)
        return _buffers(A, X, y)

    got = run_loopback(ranks, run)
    a, _ = load_adjacency(SPEC)             # the matrix the shards store (method none)
    cf = (algo, 2 if algo.startswith("15d") else 1,
          tuple(int(v) for v in grid.split("x")) if grid else None)
    pred = rank_spmm_configs(a, ranks, FEAT, configs=[cf])[0]
    counted = ms.spmm_counted_bytes(a, pred, FEAT, source=source)
    want = counted["block"] + counted["operands"]
    assert list(want) == got, (algo, source, list(want), got)
    assert (counted["root"][1:] == 0).all() and (counted["root"][0] > 0) == (source == "memory")


def test_memory_source_counts_rank_0s_whole_matrix_and_x_and_prices_the_scatter():
    from spgnn.io import load_adjacency

    a, _ = load_adjacency(SPEC)
    n = a.shape[0]
    pred = rank_spmm_configs(a, 2, FEAT, configs=[("1d", 1, None)])[0]
    shards = ms.spmm_counted_bytes(a, pred, FEAT, source="shards")
    memory = ms.spmm_counted_bytes(a, pred, FEAT, source="memory")
    # load_adjacency's CSR (int64 indptr and indices, float32 values) and the float32 X
    whole = a.indptr.nbytes + a.indices.nbytes + a.data.nbytes + n * FEAT * 4
    assert a.indices.dtype == np.int64 and memory["root"].tolist() == [whole, 0]
    # int32 blocks from both: from_global's, and the shards' rows cast from their int64 ids
    nnz, rows = memory["nnz_block"], np.array([n // 2, n - n // 2])
    assert shards["block"].tolist() == memory["block"].tolist() == \
        (8 * nnz + 4 * (rows + 1)).tolist()
    peak_s, d_s = ms.spmm_peak_bytes(a, pred, FEAT, source="shards", baseline=0, detail=True)
    peak_m, d_m = ms.spmm_peak_bytes(a, pred, FEAT, source="memory", baseline=0, detail=True)
    scatter = ms.SPMM_SCATTER_BYTES_PER_NNZ * a.nnz
    assert d_m["transient"][0] - d_s["transient"][0] == pytest.approx(scatter, abs=1)
    assert peak_s == ms.SPMM_FIXED_BYTES + int((d_s["counted"] + d_s["transient"]).max())
    assert peak_m > peak_s
    with pytest.raises(ValueError, match="source"):
        ms.spmm_counted_bytes(a, pred, FEAT, source="disk")
    from spgnn.cli import spmm             # the draw's chunk is the command's
    assert ms.X_CHUNK_ROWS == spmm.X_CHUNK_ROWS


def test_spmm_within_limit_keeps_the_ranking_and_drops_what_does_not_fit():
    from spgnn.io import load_adjacency

    a, _ = load_adjacency(SPEC)
    ranked = rank_spmm_configs(a, 4, FEAT)
    peaks = [ms.spmm_peak_bytes(a, p, FEAT, baseline=0) for p in ranked]
    limit = sorted(peaks)[len(peaks) // 2]
    kept = ms.spmm_within_limit(ranked, limit, a=a, feat=FEAT, baseline=0)
    assert [p for p, _ in kept] == [p for p, k in zip(ranked, peaks) if k <= limit]
    assert ms.spmm_within_limit(ranked, 0, a=a, feat=FEAT) == []


def test_plan_op_spmm_prices_one_spmm_command_in_memory_and_from_shards(shards, capsys):
    import json

    from spgnn.__main__ import main
    from spgnn.io import load_adjacency
    from spgnn.plan.model import load_calibration

    a, _ = load_adjacency(SPEC)
    for graph, source in ((SPEC, "memory"), (str(shards), "shards")):
        assert main(["plan", "--graph", graph, "--ranks", "2", "--time", "--memory", "--op",
                     "spmm", "--feat", str(FEAT), "--partition", "none", "--alpha", "2e-6", "--beta",
                     "1e-10", "--json"]) == 0
        got = json.loads(capsys.readouterr().out)
        assert got["time"]["op"] == "spmm"
        ranking = got["timed"][0]["ranking"]
        ranked = rank_spmm_configs(a, 2, FEAT, load_calibration(),
                                   configs=None if source == "memory" else
                                   [(r["algorithm"], r["replication"],
                                     tuple(int(v) for v in r["grid"].split("x"))
                                     if r["grid"] else None) for r in ranking])
        assert [r["algorithm"] for r in ranking] == [p.algorithm for p in ranked]
        assert [r["memory_peak_bytes"] for r in ranking] == [
            ms.spmm_peak_bytes(a, p, FEAT, source=source) for p in ranked]
    # the default stays the training model's (a GCN epoch)
    assert main(["plan", "--graph", SPEC, "--ranks", "2", "--time", "--memory", "--feat",
                 str(FEAT), "--partition", "none", "--alpha", "2e-6", "--beta", "1e-10",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["time"]["op"] == "train"
