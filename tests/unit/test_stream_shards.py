"""Issue 37: text edge lists to shards in bounded memory, LDG, and ``--graph DIR`` in spmm / graph.

Small graphs, chunk sizes forcing many chunks; loopback ranks for the commands.
"""

import argparse
import gzip
import re

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.comm import run_loopback
from spgnn.errors import GraphFormatError, GridError, InputTooLarge, ShardError
from spgnn.io import load_graph
from spgnn.io import shards as shard_io
from spgnn.io.edgelist_stream import iter_edge_chunks
from spgnn.io.synthetic import with_synthetic
from spgnn.partition import ldg_partition, random_partition
from spgnn.partition.ldg import ldg_capacity
from spgnn.partition.stream_shards import edge_list_to_shards, generator_to_shards
from spgnn.partition.to_shards import partition_to_shards

try:
    import pymetis  # noqa: F401
    HAVE_METIS = True
except ImportError:
    HAVE_METIS = False


def _edges(seed=1, n=240, m=1500):
    rng = np.random.default_rng(seed)
    block = rng.integers(0, 4, m)                 # four communities, a few edges between
    u = block * (n // 4) + rng.integers(0, n // 4, m)
    v = np.where(rng.random(m) < 0.9, block * (n // 4) + rng.integers(0, n // 4, m),
                 rng.integers(0, n, m))
    e = np.stack([u, v], axis=1)
    e[:20, 1] = e[:20, 0]                         # self-loops
    return np.concatenate([e, e[:80], e[80:160, ::-1]])   # duplicates, both directions


@pytest.fixture(scope="module")
def edge_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("edges")
    p = d / "g.txt"
    lines = ["# a comment", "src dst"] + [f"{a} {b}" for a, b in _edges()]
    lines.insert(300, "")
    p.write_text("\r\n".join(lines) + "\r\n")
    return p


def _arrays(directory, k):
    with np.load(directory / shard_io.part_file(k)) as z:
        return {name: z[name] for name in z.files}


@pytest.mark.parametrize("method,features", [("none", "random:5"), ("random", "degree"),
                                             ("ldg", "onehot"), ("metis", "random:3")])
def test_streaming_equals_the_in_memory_path(tmp_path, edge_file, method, features):
    if method == "metis" and not HAVE_METIS:
        pytest.skip("pymetis not installed")
    g = with_synthetic(load_graph(str(edge_file)), features, "random:4").random_split(0.6, 0.2)
    mem = partition_to_shards(g, tmp_path / "mem", 3, method, 0, source=str(edge_file))
    man = edge_list_to_shards(edge_file, tmp_path / "str", 3, method, 0, features=features,
                              labels="random:4", chunk_bytes=256, chunk_entries=64,
                              source=str(edge_file))
    assert {k: v for k, v in mem.items() if k != "fingerprint"} == \
        {k: v for k, v in man.items() if k != "fingerprint"}
    for k in range(3):
        a, b = _arrays(tmp_path / "mem", k), _arrays(tmp_path / "str", k)
        assert sorted(a) == sorted(b)
        for name in a:
            assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
            assert a[name].tobytes() == b[name].tobytes(), name
    assert not (tmp_path / "str" / shard_io.WORK).exists()


def _same_shards(mem_dir, mem, str_dir, man, parts):
    assert {k: v for k, v in mem.items() if k != "fingerprint"} == \
        {k: v for k, v in man.items() if k != "fingerprint"}
    for k in range(parts):
        a, b = _arrays(mem_dir, k), _arrays(str_dir, k)
        assert sorted(a) == sorted(b)
        for name in a:
            assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
            assert a[name].tobytes() == b[name].tobytes(), name
    assert not (str_dir / shard_io.WORK).exists()


@pytest.mark.parametrize("spec,method,features,labels,split", [
    ("plsbm:700:5:8:6:3", "ldg", None, None, None),          # its own data and split
    ("sbm:500:3:2", "random", "degree", None, (0.5, 0.25)),  # replaced features, stratified
    ("rmat:8:4:1", "none", "random:3", "random:4", None),    # no data of its own
])
def test_a_generator_streams_to_the_in_memory_shards(tmp_path, spec, method, features, labels,
                                                     split):
    """Issue 37: ``spgnn partition --graph plsbm:...`` held the whole graph (the products-scale
    spec died at 23 GB); drawn chunk by chunk it never does, with the same shards."""
    g = with_synthetic(load_graph(spec), features, labels)
    if split is not None or g.train_mask is None:
        g = g.random_split(*(split or (0.6, 0.2)))
    mem = partition_to_shards(g, tmp_path / "mem", 3, method, 0, source=spec)
    man = generator_to_shards(spec, tmp_path / "str", 3, method, 0, features=features,
                              labels=labels, split=split, chunk_entries=256)
    _same_shards(tmp_path / "mem", mem, tmp_path / "str", man, 3)


def test_chunks_of_gzip_crlf_header_comments(tmp_path, edge_file):
    want = _edges()
    gz = tmp_path / "g.txt.gz"
    raw = edge_file.read_bytes()
    gz.write_bytes(gzip.compress(raw[:700]) + gzip.compress(raw[700:]))    # two members
    for path in (edge_file, gz):
        for chunk in (64, 1000):
            got = np.concatenate([c for c, _ in iter_edge_chunks(path, chunk_bytes=chunk)])
            assert np.array_equal(got, want)
    bad = tmp_path / "bad.txt"
    bad.write_text("0 1\n" * 50 + "3 x\n")
    with pytest.raises(GraphFormatError, match=r"bad.txt:51: expected two integer"):
        list(iter_edge_chunks(bad, chunk_bytes=64))


def test_interrupted_streaming_write_resumes(tmp_path, edge_file, monkeypatch):
    kw = dict(features="random:2", labels="random:3", chunk_bytes=512, chunk_entries=128)
    whole = edge_list_to_shards(edge_file, tmp_path / "whole", 4, "ldg", **kw)
    real, calls = shard_io._write_part, []

    def interrupted(path, arrays):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(path)
        real(path, arrays)

    monkeypatch.setattr(shard_io, "_write_part", interrupted)
    with pytest.raises(KeyboardInterrupt):
        edge_list_to_shards(edge_file, tmp_path / "d", 4, "ldg", **kw)
    monkeypatch.setattr(shard_io, "_write_part", real)
    assert not shard_io.is_shard_dir(tmp_path / "d")
    kept = []
    man = edge_list_to_shards(edge_file, tmp_path / "d", 4, "ldg",
                              progress=lambda k, was: kept.append(was), **kw)
    assert kept == [True, True, False, False]
    assert man["files"] == whole["files"]        # the same bytes (sha256) as an uninterrupted run
    with pytest.raises(ShardError, match="another graph or partition"):
        edge_list_to_shards(edge_file, tmp_path / "d", 4, "random", **kw)


def test_ldg_is_a_valid_balanced_partition_cutting_less_than_random():
    e = _edges(seed=3, n=400, m=3000)
    A = sp.csr_array((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(400, 400))
    for passes in (1, 3):
        p = ldg_partition(A, 4, passes=passes)
        assert np.array_equal(np.sort(p.perm), np.arange(400))
        sizes = np.bincount(p.parts, minlength=4)
        assert sizes.max() <= ldg_capacity(400, 4) == 100 and sizes.sum() == 400
        assert p.stats.edge_cut < 0.8 * random_partition(A, 4, seed=0).stats.edge_cut
    with pytest.raises(ValueError, match="slack"):
        ldg_partition(A, 4, slack=0.5)


# ------------------------------------------------------------------ --graph DIR in the commands
def _spmm_args(graph, **kw):
    base = dict(graph=str(graph), feat=5, algo="1d-aware", partition="none", partition_file=None,
                replication=1, grid=None, backend=None, repeat=1, seed=3, check=False,
                json=True, num_nodes=None, relabel=False)
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.fixture(scope="module")
def shard_dirs(tmp_path_factory, edge_file):
    d = tmp_path_factory.mktemp("cmd")
    out = {}
    for k in (2, 3):
        out[k] = d / f"k{k}"
        edge_list_to_shards(edge_file, out[k], k, "random", 3, features="random:2",
                            labels="random:2", chunk_bytes=512)
    return out


@pytest.mark.parametrize("p,algo", [(2, "1d-aware"), (3, "1d-aware"), (2, "15d-aware"),
                                    (3, "3d")])
def test_spmm_from_shards_equals_the_whole_graph_run(shard_dirs, edge_file, p, algo):
    """K = P shards of --partition random --seed 3: the blocks of A and X of the whole-graph run."""
    from spgnn.cli import spmm

    def fn(comm):
        args = _spmm_args(edge_file, partition="random", algo=algo)
        a = x = meta = None
        if comm.rank == 0:
            a, x, _, meta = spmm._prepare_root(args, comm.size)
        meta = comm.bcast_obj(meta, root=0)
        grid3d = (1, 1, comm.size) if algo == "3d" else None
        A, X = spmm._distribute(comm, args, a, x, meta, grid3d)
        sargs = _spmm_args(shard_dirs[p], algo=algo,
                           grid=f"1x1x{comm.size}" if algo == "3d" else None)
        _, _, B, Y, _ = spmm._from_shards(comm, sargs, comm.size)
        a_loc, b_loc = A.local.to_scipy(), B.local.to_scipy()
        return ((a_loc != b_loc).nnz == 0 and a_loc.dtype == b_loc.dtype
                and np.asarray(X.local).tobytes() == np.asarray(Y.local).tobytes())

    assert all(run_loopback(p, fn))


def test_spmm_check_from_shards_and_k_not_p(shard_dirs):
    from spgnn.cli import spmm

    def fn(comm):
        out = spmm.measure(comm, _spmm_args(shard_dirs[2], check=True))
        return out["check_passed"], out["nnz"]

    got = run_loopback(1, fn)                    # K = 2 parts on 1 rank: coarsened
    assert got[0][0]
    assert all(ok for ok, _ in run_loopback(2, fn))

    def bad(comm):
        try:
            spmm.measure(comm, _spmm_args(shard_dirs[3]))
        except GridError as exc:
            return str(exc)
        return None

    msgs = run_loopback(2, bad)
    assert all(m and "--parts 2" in m for m in msgs)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_graph_from_shards_equals_the_whole_graph_run(shard_dirs, edge_file, p):
    from spgnn.cli import graph as graph_cli
    from spgnn import DistSparseMatrix, Layout, grid_1d
    from spgnn.io import load_adjacency

    adj, _ = load_adjacency(str(edge_file))
    adj = sp.csr_array(adj, dtype=np.float64)

    def fn(comm):
        out = {}
        for alg in ("triangles", "bfs", "pagerank"):
            args = argparse.Namespace(algorithm=alg, graph=str(shard_dirs[3 if p != 2 else 2]),
                                      source=7, backend="numpy", alpha=0.85, tol=1e-9,
                                      max_iter=100, json=True)
            _, res = graph_cli.sharded_result(args, comm)
            # numpy: the shards are the thing tested, not numba's kernels (their first compile
            # cost 15 s here)
            A = DistSparseMatrix.from_global(adj, grid_1d(comm), Layout("row"), check_same=False,
                                             backend="numpy")
            ref = {"algorithm": alg}
            graph_cli._algorithm(comm, args, A, ref, lambda ids: ids, 7)
            out[alg] = (res, ref)
        return out

    for got in run_loopback(p, fn):
        for alg, (res, ref) in got.items():
            if alg == "pagerank":
                assert [i for i, _ in res["top10"]] == [i for i, _ in ref["top10"]]
                assert np.allclose([v for _, v in res["top10"]], [v for _, v in ref["top10"]],
                                   rtol=1e-12, atol=1e-15)
            else:
                keep = ("triangles", "reached", "levels_histogram")
                assert {k: res.get(k) for k in keep} == {k: ref.get(k) for k in keep}


@pytest.mark.parametrize("damage,words", [("truncate", "truncated"), ("remove", "missing"),
                                          ("flip", "checksum mismatch")])
def test_a_damaged_shard_is_one_error_on_every_rank(tmp_path, edge_file, damage, words):
    from spgnn.cli import graph as graph_cli
    from spgnn.cli import spmm

    d = tmp_path / "d"
    edge_list_to_shards(edge_file, d, 2, "none", features="random:2", labels="random:2")
    part = d / shard_io.part_file(1)
    raw = part.read_bytes()
    if damage == "truncate":
        part.write_bytes(raw[:-10])
    elif damage == "remove":
        part.unlink()
    else:
        part.write_bytes(raw[:100] + bytes([raw[100] ^ 1]) + raw[101:])

    def fn(comm):
        msgs = []
        for run in (lambda: spmm.measure(comm, _spmm_args(d)),
                    lambda: graph_cli.sharded_result(argparse.Namespace(
                        algorithm="bfs", graph=str(d), source=0, backend=None, json=True), comm)):
            try:
                run()
                msgs.append(None)
            except ShardError as exc:
                msgs.append(str(exc))
        return msgs

    for msgs in run_loopback(2, fn):
        assert all(m and words in m and "part-00001.npz" in m for m in msgs)


def test_partition_command_streams_a_text_edge_list(tmp_path, edge_file):
    import json
    import subprocess
    import sys

    outs = {}
    for mode in ("stream", "in-memory"):
        cmd = [sys.executable, "-m", "spgnn", "partition", "--graph", str(edge_file), "--parts",
               "2", "--method", "ldg", "--features", "random:3", "--labels", "random:2",
               "--out", str(tmp_path / mode), "--chunk-mb", "0.001", "--json"]
        cmd += ["--in-memory"] if mode == "in-memory" else []
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        outs[mode] = json.loads(run.stdout)
    assert outs["stream"]["streamed"] and "streamed" not in outs["in-memory"]
    files = [json.loads((tmp_path / m / "manifest.json").read_text())["files"] for m in outs]
    assert files[0] == files[1]                  # same bytes (sha256) either way


# -- MatrixMarket coordinate files streamed (issue 37) ---------------------------------------

def _write_mtx(path, field, symmetry, n=60, m=400, seed=3):
    """A MatrixMarket file with duplicates, zeros and negative weights (sums exact in float32)."""
    rng = np.random.default_rng(seed)
    r, c = rng.integers(1, n + 1, m), rng.integers(1, n + 1, m)
    if symmetry != "general":                      # one triangle stored
        r, c = np.maximum(r, c), np.minimum(r, c)
        if symmetry == "skew-symmetric":
            r, c = r[r != c], c[r != c]
    r, c = np.concatenate([r, r[:30]]), np.concatenate([c, c[:30]])
    vals = rng.choice([0.0, -1.5, 0.25, 2.0, 3.0, 0.5] if field == "real" else [-3, 0, 1, 2, 5],
                      r.size)
    lines = [f"%%MatrixMarket matrix coordinate {field} {symmetry}", "% a comment", "",
             f"{n} {n} {r.size}"]
    lines += [f"{a} {b}" if field == "pattern" else f"{a} {b} {v}" for a, b, v in zip(r, c, vals)]
    data = ("\n".join(lines) + "\n").encode()
    if str(path).endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


@pytest.mark.filterwarnings("ignore:.*weight 0")
@pytest.mark.parametrize("field,symmetry,method,name", [
    ("pattern", "symmetric", "ldg", "g.mtx"), ("real", "general", "random", "g.mtx.gz"),
    ("integer", "symmetric", "ldg", "g.mtx"), ("real", "skew-symmetric", "none", "g.mtx")])
def test_matrix_market_streams_to_the_in_memory_shards(tmp_path, field, symmetry, method, name):
    from spgnn.partition.stream_shards import mtx_to_shards

    p = _write_mtx(tmp_path / name, field, symmetry)
    g = with_synthetic(load_graph(str(p)), "random:3", "random:4").random_split(0.6, 0.2)
    mem = partition_to_shards(g, tmp_path / "mem", 3, method, 0, source=str(p))
    man = mtx_to_shards(p, tmp_path / "str", 3, method, 0, features="random:3",
                        labels="random:4", chunk_bytes=200, chunk_entries=64, source=str(p))
    _same_shards(tmp_path / "mem", mem, tmp_path / "str", man, 3)
    assert not (tmp_path / "str" / shard_io.WORK).exists()


def test_matrix_market_weight_zero_warns_as_in_memory(tmp_path):
    from spgnn.errors import SpgnnDataWarning
    from spgnn.partition.stream_shards import mtx_to_shards

    p = tmp_path / "z.mtx"
    p.write_text("%%MatrixMarket matrix coordinate real general\n3 3 3\n1 2 0\n2 3 1.5\n3 1 2\n")
    with pytest.warns(SpgnnDataWarning, match="1 stored entry of weight 0"):
        man = mtx_to_shards(p, tmp_path / "s", 1, "none", features="random:2",
                            labels="random:2")
    assert man["nnz"] == 4 and man["min_edge_weight"] == 1.5


@pytest.mark.parametrize("text,err,words", [
    ("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 2 1 0\n", GraphFormatError,
     ":1: expected '%%MatrixMarket matrix coordinate"),
    ("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", GraphFormatError,
     ":1: expected '%%MatrixMarket"),
    ("%%MatrixMarket matrix coordinate real hermitian\n2 2 1\n1 2 1\n", GraphFormatError,
     ":1: expected '%%MatrixMarket"),
    ("%%MatrixMarket matrix coordinate pattern general\n% c\n2 x 1\n1 2\n", GraphFormatError,
     ":3: expected the size line"),
    ("%%MatrixMarket matrix coordinate pattern general\n2 3 1\n1 2\n", GraphFormatError,
     ":2: an adjacency matrix must be square"),
    ("%%MatrixMarket matrix coordinate pattern general\n% only comments\n", GraphFormatError,
     "ends before the size line"),
    ("%%MatrixMarket matrix coordinate pattern general\n3 3 4\n1 2\n2 3\n3 1\n",
     GraphFormatError, "announces 4 entries but only 3 follow (the file is truncated)"),
    ("%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2\n2 3\n", GraphFormatError,
     ":4: more entries than the 1"),
    ("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 1\n2 4 1\n", GraphFormatError,
     ":4: index outside 1..3: (2, 4)"),
    ("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 1\n2 3\n", GraphFormatError,
     ":4:"),
    ("%%MatrixMarket matrix coordinate real general\n3 3 1\n1.5 2 1\n", GraphFormatError,
     ":3: row and column must be integers"),
    ("%%MatrixMarket matrix coordinate pattern general\n99999999999 99999999999 1\n1 2\n",
     InputTooLarge, "size line (line 2) implies 99,999,999,999 vertices"),
])
def test_matrix_market_stream_errors_are_typed_and_name_the_line(tmp_path, text, err, words):
    from spgnn.partition.stream_shards import mtx_to_shards

    p = tmp_path / "bad.mtx"
    p.write_text(text)
    with pytest.raises(err, match=re.escape(words)):
        mtx_to_shards(p, tmp_path / "s", 1, "none", features="random:2", labels="random:2",
                      chunk_bytes=64)
    assert not (tmp_path / "s").exists()          # refused in the scan, before any write


def test_partition_command_streams_matrix_market(tmp_path, capsys):
    import json

    from spgnn.__main__ import main

    p = _write_mtx(tmp_path / "g.mtx", "integer", "general")
    outs = {}
    for mode in ("stream", "in-memory"):
        argv = ["partition", "--graph", str(p), "--parts", "2", "--method", "random",
                "--features", "random:3", "--labels", "random:2", "--out", str(tmp_path / mode),
                "--chunk-mb", "0.001", "--json"] + (["--in-memory"] if mode == "in-memory" else [])
        with pytest.warns(Warning, match="weight 0"):
            assert main(argv) == 0
        outs[mode] = json.loads(capsys.readouterr().out)
    assert outs["stream"]["streamed"] and "streamed" not in outs["in-memory"]
    files = [json.loads((tmp_path / m / "manifest.json").read_text())["files"] for m in outs]
    assert files[0] == files[1]
    assert main(["partition", "--graph", str(p), "--parts", "2", "--num-nodes", "60",
                 "--features", "random:3", "--labels", "random:2",
                 "--out", str(tmp_path / "n")]) == 2
    assert "--num-nodes applies to a bare edge list" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore:.*weight 0")
def test_interrupted_matrix_market_write_resumes_with_its_values(tmp_path, monkeypatch):
    from spgnn.partition.stream_shards import mtx_to_shards

    p = _write_mtx(tmp_path / "g.mtx", "real", "symmetric")
    kw = dict(features="random:2", labels="random:3", chunk_bytes=256, chunk_entries=64)
    whole = mtx_to_shards(p, tmp_path / "whole", 4, "random", **kw)
    real, calls = shard_io._write_part, []

    def interrupted(path, arrays):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(path)
        real(path, arrays)

    monkeypatch.setattr(shard_io, "_write_part", interrupted)
    with pytest.raises(KeyboardInterrupt):
        mtx_to_shards(p, tmp_path / "d", 4, "random", **kw)
    monkeypatch.setattr(shard_io, "_write_part", real)
    kept = []
    man = mtx_to_shards(p, tmp_path / "d", 4, "random", progress=lambda k, was: kept.append(was),
                        **kw)
    assert kept == [True, True, False, False]
    assert man == whole                           # same bytes, degrees and smallest weight
