"""``spmm --graph DIR --algo auto`` under ``--memory-limit`` (issue 37 item 4): each candidate's
predicted per-rank peak of one SpMM is priced from the shards' rows, and those over the limit
are skipped, as the in-memory ``spmm --algo auto`` does.

On loopback ranks: :func:`choose_spmm_from_rows` with ``memory_limit`` ranks exactly as
``choose_spmm`` on the whole matrix, each peak priced by the one-SpMM model
(:mod:`spgnn.plan.memory_spmm`) from shards, ``choose_spmm``'s in memory (rank 0 holds the whole
matrix and X: larger); on uneven row blocks (a shard directory's parts) each peak is the
model's on those blocks; every configuration over the limit is one ValueError on every rank.
``spmm.measure`` on shards ranks as the in-memory run on the same generated graph, explicit
limit and the default one.
Under ``mpiexec -n 2``, the default limit refusing everything is one line and no MPI_Abort.
"""

import argparse

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.comm import run_loopback
from spgnn.plan.choose import choose_spmm
from spgnn.plan.from_rows import choose_spmm_from_rows

SPEC = "rmat:8:4"


def _args(graph, **kw):
    base = dict(graph=str(graph), feat=5, algo="auto", partition="none", partition_file=None,
                replication=2, grid=None, backend="numpy", repeat=1, seed=3, check=True,
                json=True, num_nodes=None, relabel=False, memory_limit=None)
    base.update(kw)
    return argparse.Namespace(**base)


def _matrix(n=48, seed=4):
    a = sp.random_array((n, n), density=0.1, rng=np.random.default_rng(seed), format="csr")
    a = sp.csr_array(a + a.T)
    a.sort_indices()
    return a


def _peaks(top):
    return [d["memory_peak_bytes"] for d in top]


def _unpriced(top):
    return [{k: v for k, v in d.items() if not k.startswith("memory_")} for d in top]


def _spmm_peak(a, d, p, f, source, row_blocks=None):
    """The one-SpMM model's peak of the ranked dict ``d`` (an explicit pricing of it)."""
    from spgnn.plan.memory_spmm import spmm_peak_bytes
    from spgnn.plan.model import DEFAULT_CALIBRATION, rank_spmm_configs

    cf = (d["algorithm"], d["replication"],
          tuple(int(v) for v in d["grid"].split("x")) if d["grid"] else None)
    blocks = None if cf[0] == "3d" else p // cf[1]
    off = None if blocks is None or row_blocks is None else row_blocks(blocks)
    pred = rank_spmm_configs(a, p, f, DEFAULT_CALIBRATION, configs=[cf],
                             offsets_for=lambda b: (a, off))[0]
    return spmm_peak_bytes(a, pred, f, source=source, offsets=off)


def test_memory_limit_from_rows_equals_choose_spmm_on_the_whole_matrix():
    a, n, p, f = _matrix(), 48, 2, 6
    off = np.linspace(0, n, p + 1).astype(int)

    def fn(comm, limit, whole=True):
        r = comm.rank
        mine = choose_spmm_from_rows(comm, a[off[r]:off[r + 1]], int(off[r]), n, f,
                                     memory_limit=limit)
        return mine, (choose_spmm(comm, a if r == 0 else None, f, memory_limit=limit)
                      if whole else None)

    free = run_loopback(p, lambda comm: fn(comm, 2 ** 62))
    mine, whole = free[0]
    assert mine[:3] == whole[:3] and _unpriced(mine[3]) == _unpriced(whole[3])
    assert not mine[3][0]["memory_skipped"]
    for s, m in zip(mine[3], whole[3]):     # priced as one spmm command from shards / in memory
        assert s["memory_peak_bytes"] == _spmm_peak(a, s, p, f, "shards")
        assert m["memory_peak_bytes"] == _spmm_peak(a, m, p, f, "memory")
        assert m["memory_peak_bytes"] > s["memory_peak_bytes"]   # rank 0 holds A and X
    # the smallest peak of the top 3: the configurations above it are skipped
    limit = min(_peaks(mine[3]))
    for mine, _ in run_loopback(p, lambda comm: fn(comm, limit, whole=False)):
        assert mine[3][0]["memory_skipped"] and max(_peaks(mine[3])) <= limit


def test_memory_limit_prices_the_parts_row_blocks_and_none_fitting_is_agreed():
    a, n, p, f = _matrix(), 48, 2, 6
    parts = [0, 7, 20, 31, 48]              # K = 4 uneven parts, coarsened to P / c blocks

    def row_blocks(blocks):
        k = len(parts) - 1
        return parts[::k // blocks] if k % blocks == 0 else None

    off = row_blocks(p)

    def fn(comm, limit):
        r = comm.rank
        try:
            return choose_spmm_from_rows(comm, a[off[r]:off[r + 1]], int(off[r]), n, f,
                                         row_blocks=row_blocks, memory_limit=limit)
        except ValueError as exc:
            return exc

    top = run_loopback(p, lambda comm: fn(comm, 2 ** 62))[0][3]
    for d in top:
        assert d["memory_peak_bytes"] == _spmm_peak(a, d, p, f, "shards", row_blocks), d
    errs = run_loopback(p, lambda comm: fn(comm, 1000))
    assert all(isinstance(e, ValueError) for e in errs)
    # the same error on every rank (the others' say it was rank 0's)
    assert len({str(e).removeprefix("rank 0: ") for e in errs}) == 1
    assert "no configuration fits" in str(errs[0])


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    from spgnn.partition.stream_shards import generator_to_shards

    d = tmp_path_factory.mktemp("spmm-auto-mem") / "k2"
    generator_to_shards(SPEC, d, 2, "none", 0, features="random:2", labels="random:2")
    return d


def test_spmm_auto_on_shards_under_a_limit_equals_the_in_memory_run(shards, capfd):
    from spgnn.cli import spmm

    # price the top 3 first (a generous explicit limit), then a limit under the largest peak
    priced = run_loopback(2, lambda comm: spmm.measure(comm, _args(shards, memory_limit="8G")))
    limit = str(min(_peaks(priced[0]["auto"])))
    got = run_loopback(2, lambda comm: spmm.measure(comm, _args(shards, memory_limit=limit)))
    want = run_loopback(2, lambda comm: spmm.measure(comm, _args(SPEC, memory_limit="8G")))
    for g, w in zip(got, want):      # the same ranking; in memory rank 0 holds A and X: more
        assert g["check_passed"] and _unpriced(priced[0]["auto"]) == _unpriced(w["auto"])
        assert all(m > s for m, s in zip(_peaks(w["auto"]), _peaks(priced[0]["auto"])))
        assert g["auto"][0]["memory_skipped"] and g["algorithm"] == g["auto"][0]["algorithm"]
    err = capfd.readouterr().err
    assert "(from the shards' rows)" in err and "skipped (predicted peak over --memory-limit)" in err


def test_spmm_auto_on_shards_default_limit_refuses_alike(shards, monkeypatch):
    from spgnn.cli import spmm

    monkeypatch.setenv("SPGNN_HOST_MEMORY", "2000000")     # 1 MB a rank: nothing fits

    def fn(comm):
        try:
            spmm.measure(comm, _args(shards))
        except ValueError as exc:
            return str(exc)

    got = run_loopback(2, fn)
    assert got[1] in (got[0], "rank 0: " + got[0]) and "that limit is the default" in got[0]
    assert "no configuration fits in --memory-limit 1,000,000 bytes" in got[0]
    with pytest.raises(ValueError, match="--memory-limit must be bytes"):
        spmm.check_args(_args(shards, memory_limit="lots"))


def test_spmm_auto_on_shards_over_the_default_limit_is_one_line_under_mpiexec(shards):
    from spgnn.testing.mpi import find_mpiexec, run_mpi

    if find_mpiexec() is None:
        pytest.skip("no mpiexec beside this interpreter")
    proc = run_mpi(["-m", "spgnn", "spmm", "--graph", str(shards), "--algo", "auto",
                    "--repeat", "1"], 2, env={"SPGNN_HOST_MEMORY": "2000000"}, timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if "error:" in ln]
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout[-3000:]
    assert "that limit is the default" in lines[0] and "Abort" not in proc.stdout


@pytest.mark.parametrize("algo", ["1d-aware", "15d", "3d"])
def test_explicit_algo_over_an_explicit_limit_is_refused_alike_and_under_it_runs(shards, algo):
    """An explicit ``--algo`` under an explicit ``--memory-limit`` is priced (its own
    replication or grid) by the one-SpMM model, from shards and in memory: over its peak by
    one byte it is one ValueError on every rank; at its peak the run is the unpriced run."""
    from spgnn.cli import spmm

    def fn(graph, limit):
        def body(comm):
            try:
                return spmm.measure(comm, _args(graph, algo=algo, memory_limit=limit))
            except ValueError as exc:
                return exc
        return run_loopback(2, body)

    def peak(exc):
        return int(str(exc).split("the predicted peak is ")[1].split(" ")[0].replace(",", ""))

    peaks = {}
    for graph, source in ((shards, "shards"), (SPEC, "memory")):
        errs = fn(graph, "1000")
        assert all(isinstance(e, ValueError) for e in errs), errs
        assert len({str(e).removeprefix("rank 0: ") for e in errs}) == 1
        assert str(errs[0]).startswith(f"--algo {algo}: does not fit in --memory-limit 1,000 ")
        want = peaks[source] = peak(errs[0])
        assert all(isinstance(e, ValueError) and peak(e) == want for e in fn(graph, str(want - 1)))
        free = fn(graph, None)
        for got, base in zip(fn(graph, str(want)), free):
            assert got["check_passed"] and "auto" not in got
            assert {k: v for k, v in got.items() if not k.startswith("seconds")} == \
                {k: v for k, v in base.items() if not k.startswith("seconds")}
    assert peaks["memory"] > peaks["shards"]        # in memory rank 0 holds A and X
