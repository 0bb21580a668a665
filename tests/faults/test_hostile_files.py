"""Fault classes 3, 7 and the loader part of 8 (issue 28): hostile files.

Class 3: a tiny file must not exhaust memory or block: a 14-byte edge list
with id 5e8, huge sizes declared by LG / MatrixMarket / Planetoid / MUSAE
files, ``rmat:40``, a label of 1e12, a gzip bomb, a FIFO or a device end in a
typed error naming the file and the number, at once.  Class 7: no silent data
change (extra LG edges, a data line taken for a header, JSON booleans as ids,
complex values, indices past 2**53, duplicates kept by one constructor and
summed by another).  Class 8 (loaders): garbage ``.npz`` is called garbage, a
bad Planetoid test index is blamed on that file, a symlink loop is named.

Every case runs the API (``load_graph``); a selection runs the command line
(one process: exit 2, one line, no traceback) and ``mpiexec -n 2`` (every rank
ends, nothing left behind).  Each case has a timeout so a hang fails fast.
"""

import bz2
import dataclasses
import gzip
import lzma
import os
import pathlib
import pickle
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn import DistSparseMatrix, Layout, grid_1d, run_loopback
from spgnn.errors import DTypeError, GraphFormatError, InputTooLarge
from spgnn.io import Graph, load_graph, load_musae, load_planetoid, save_npz
from spgnn.io._files import MAX_ISOLATED, gunzip
from spgnn.testing.jobs import Job
from spgnn.testing.mpi import find_mpiexec

pytestmark = pytest.mark.timeout(120)   # a hang fails fast
needs_mpi = pytest.mark.skipif(find_mpiexec() is None, reason="no mpiexec beside Python")

E = GraphFormatError
BIG = InputTooLarge


def _bytes(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def _npz(path, **arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def _graph_npz(path, **extra):
    a = sp.csr_array(np.ones((3, 3), np.float32))
    return _npz(path, adj_data=a.data, adj_indices=a.indices, adj_indptr=a.indptr,
                adj_shape=np.asarray(a.shape), **extra)


def _build(d):
    """name -> (path, error type, words the message must hold)."""
    f = {}

    def case(name, fname, data, err, *words):
        f[name] = (_bytes(d / fname, data), err, words)

    # --- class 3: sizes a small file declares -------------------------------------
    case("edge-id-5e8", "big.txt", "0 500000000\n", BIG, "big.txt", "500,000,001", "--num-nodes")
    case("edge-id-2e9-two-lines", "big2.txt", "0 1\n2 2000000000\n", BIG, "2,000,000,001")
    case("edge-id-beyond-int64", "huge.txt", "0 99999999999999999999\n", E, "huge.txt:1")
    case("edge-id-negative", "neg.txt", "0 1\n0 -3\n", E, "neg.txt:2", "non-negative")
    case("lg-header-nv-1e9", "nv.jlg", "1000000000,1,u,g\n1,2\n", BIG, "nv.jlg",
         "header (line 1)", "1,000,000,000")
    case("lg-header-ne-1e12", "ne.jlg", "3,1000000000000,u,g\n1,2\n", E, "ne.jlg:2",
         "announces 1000000000000 edges")
    case("lg-header-negative", "negh.jlg", "-3,1,u,g\n1,2\n", E, "negh.jlg:1")
    case("mtx-size-1e9", "size.mtx", "%%MatrixMarket matrix coordinate pattern general\n"
         "1000000000 1000000000 1\n1 1\n", BIG, "size.mtx", "size line (line 2)")
    case("mtx-nnz-1e12", "nnz.mtx", "%%MatrixMarket matrix coordinate pattern general\n"
         "3 3 1000000000000\n1 1\n", E, "nnz.mtx", "truncated")
    case("mtx-headerless-index-1e9", "hl.mtx", "1 1000000000\n2 1\n", BIG, "hl.mtx",
         "largest index")
    case("npz-declares-huge-shape", "shape.npz", b"", E, "shape.npz")
    a = np.zeros(1, np.float32)
    _npz(d / "shape.npz", adj_data=a, adj_indices=np.zeros(1, np.int64),
         adj_indptr=np.array([0, 1]), adj_shape=np.array([10**12, 10**12]))
    case("npz-label-1e12", "lab.npz", b"", BIG, "lab.npz", "1,000,000,000,000")
    _graph_npz(d / "lab.npz", labels=np.array([0, 1, 10**12]))
    case("empty-lg", "empty.jlg", "", E, "empty.jlg:1", "empty")
    case("empty-mtx", "empty.mtx", "", E, "empty.mtx:1", "no entries")
    case("empty-npz", "empty.npz", "", E, "empty.npz", "not an .npz archive")
    # --- class 3: compressed and special files ---------------------------------------
    case("gzip-bomb-ratio", "bomb.txt.gz", gzip.compress(b"0" * (20 << 20), 9), BIG,
         "bomb.txt.gz", "compression bomb")
    case("gzip-truncated", "cut.txt.gz", gzip.compress(b"0 1\n1 2\n" * 1000)[:-12], E,
         "cut.txt.gz:", "truncated")
    case("gzip-garbage-inside", "bad.txt.gz", b"\x1f\x8b\x08\x00" + os.urandom(64), E,
         "bad.txt.gz")
    case("zip-as-edge-list", "z.txt", b"PK\x03\x04" + b"\0" * 30, E, "z.txt", "zip archive")
    case("zstd-as-edge-list", "z.mtx", b"\x28\xb5\x2f\xfd" + b"\0" * 30, E, "zstd")
    case("bzip2-as-edge-list", "b.txt", bz2.compress(b"0 1\n"), E, "b.txt", "bzip2")
    case("xz-as-lg", "x.jlg", lzma.compress(b"2,1,u,g\n1,2\n"), E, "x.jlg", "xz")
    case("binary-garbage", "garbage.txt", bytes(range(256)) * 4, E, "garbage.txt:")
    case("npz-bomb", "bomb.npz", b"", BIG, "bomb.npz", "compression bomb")
    with open(d / "bomb.npz", "wb") as fh:
        np.savez_compressed(fh, adj_data=np.zeros(5 << 20, np.float32))
    case("npz-garbage", "garbage.npz", os.urandom(200), E, "not an .npz archive")
    case("npy-as-npz", "arr.npz", b"", E, ".npy array")
    with open(d / "arr.npz", "wb") as fh:
        np.save(fh, np.zeros(3))
    os.mkfifo(d / "fifo.txt")
    f["fifo"] = (d / "fifo.txt", E, ("fifo.txt", "FIFO"))
    os.symlink("/dev/zero", d / "zero.txt")
    f["device"] = (d / "zero.txt", E, ("zero.txt", "device"))
    os.symlink("loop.txt", d / "loop.txt")
    f["symlink-loop"] = (d / "loop.txt", OSError, ("loop.txt", "loop of symbolic links"))
    # --- class 7: no silent change ---------------------------------------------------
    case("edge-first-line-with-letter", "letter.txt", "1 2x\n3 4\n", E, "letter.txt:1", "2x")
    case("edge-first-line-csv-letter", "letter.csv", "1,x\n3,4\n", E, "letter.csv:1")
    case("lg-extra-edges", "extra.jlg", "3,1,u,g\n1,2\n2,3\n", E, "extra.jlg:3",
         "more edge lines than the 1")
    case("mtx-index-beyond-2p53", "p53.mtx", "9007199254740993 1 1.0\n1 1 1.0\n", E,
         "p53.mtx:1", "2**53")
    case("npz-complex-features", "cplx.npz", b"", E, "cplx.npz", "complex")
    _graph_npz(d / "cplx.npz", features=np.ones((3, 2), np.complex64))
    # --- shapes that do not fit together ---------------------------------------------
    case("npz-features-wrong-rows", "rows.npz", b"", E, "rows.npz", "features")
    _graph_npz(d / "rows.npz", features=np.ones((2, 2), np.float32))
    case("npz-labels-wrong-size", "labsz.npz", b"", E, "labsz.npz", "labels")
    _graph_npz(d / "labsz.npz", labels=np.zeros(5, np.int64))
    case("npz-mask-wrong-size", "mask.npz", b"", E, "mask.npz", "train_mask")
    _graph_npz(d / "mask.npz", train_mask=np.zeros(2, bool))
    return f


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    return d, _build(d)


def _case_names():
    with tempfile.TemporaryDirectory() as d:
        return sorted(_build(pathlib.Path(d)))


CASE_NAMES = _case_names()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", CASE_NAMES)
def test_api_typed_error_naming_the_file(name, hostile):
    _, cases = hostile
    path, err, words = cases[name]
    t0 = time.monotonic()
    with pytest.raises(err) as info:
        load_graph(str(path))
    msg = str(info.value)
    assert all(w in msg for w in words), msg
    assert path.name in msg, msg
    assert time.monotonic() - t0 < 20    # generous: a hang or a gigabyte allocation is minutes


def test_input_too_large_is_a_value_and_memory_error():
    assert issubclass(InputTooLarge, ValueError) and issubclass(InputTooLarge, MemoryError)


@pytest.mark.parametrize("spec, words", [
    ("rmat:40", ("rmat:40", "1,099,511,627,776 vertices")),
    ("rmat:36:1000", ("rmat:36:1000",)),
    ("sbm:10:1000000000000", ("1,000,000,000,000 classes",)),
    ("sbm:100000000000", ("100,000,000,000 vertices",)),
])
def test_generator_specs_past_memory(spec, words):
    with pytest.raises(InputTooLarge) as info:
        load_graph(spec)
    assert all(w in str(info.value) for w in words), info.value


def test_byte_limit_env(tmp_path, monkeypatch):
    """SPGNN_MAX_INPUT_BYTES bounds files on disk and decompressed streams."""
    plain = _bytes(tmp_path / "e.txt", "0 1\n" * 1000)
    packed = _bytes(tmp_path / "e.txt.gz", gzip.compress(b"0 1\n" * 1000))
    assert load_graph(str(plain)).num_nodes == 2 == load_graph(str(packed)).num_nodes
    monkeypatch.setenv("SPGNN_MAX_INPUT_BYTES", "3000")
    for p in (plain, packed):
        with pytest.raises(InputTooLarge, match=f"{p.name}.*SPGNN_MAX_INPUT_BYTES"):
            load_graph(str(p))
    monkeypatch.setenv("SPGNN_MAX_INPUT_BYTES", "many")
    with pytest.raises(ValueError, match="SPGNN_MAX_INPUT_BYTES must be an integer"):
        load_graph(str(plain))


def test_gunzip_ratio_floor_and_multi_member():
    small = gzip.compress(b"0" * 100_000)            # ratio ~ 1000, but far below the floor
    assert gunzip(small, "s") == b"0" * 100_000
    two = gzip.compress(b"0 1\n") + gzip.compress(b"1 2\n")
    assert gunzip(two, "t") == b"0 1\n1 2\n"
    with pytest.raises(InputTooLarge, match="more than"):
        gunzip(gzip.compress(b"0" * 10_000), "u", limit=5_000)


# ---------------------------------------------------------------- sparse id spaces

def test_num_nodes_and_relabel_for_sparse_ids(tmp_path):
    p = _bytes(tmp_path / "sparse.txt", "0 500000000\n7 500000000\n")
    g = load_graph(str(p), relabel=True)
    assert g.num_nodes == 3 and g.node_ids.tolist() == [0, 7, 500000000] and g.num_edges == 2
    q = _bytes(tmp_path / "few.txt", f"0 1\n1 {MAX_ISOLATED}\n")
    assert load_graph(str(q)).num_nodes == MAX_ISOLATED + 1     # within the slack: accepted
    assert load_graph(str(q), num_nodes=MAX_ISOLATED + 5).num_nodes == MAX_ISOLATED + 5
    with pytest.raises(GraphFormatError, match=r"few.txt:2: vertex id out of range for "
                                               r"num_nodes=10"):
        load_graph(str(q), num_nodes=10)
    with pytest.raises(InputTooLarge, match="num_nodes=1,000,000,000,000"):
        load_graph(str(q), num_nodes=10**12)
    with pytest.raises(ValueError, match="apply to bare edge lists only"):
        load_graph("rmat:4", relabel=True)
    with pytest.raises(ValueError, match="apply to bare edge lists only"):
        load_graph(str(_bytes(tmp_path / "m.mtx", "1 2\n")), num_nodes=3)


def test_header_detection_keeps_named_columns(tmp_path):
    for text in ("id_1,id_2\n0,1\n", "FromNodeId\tToNodeId\n0 1\n", "Gene ID 1,Gene ID 2\n0,1\n"):
        p = _bytes(tmp_path / "h.csv", text)
        assert load_graph(str(p)).num_edges == 1, text


def test_lg_several_graphs_still_read(tmp_path):
    p = _bytes(tmp_path / "two.jlg", "2,1,u,a\n1,2\n3,2,d,b\n1,2\n2,3\n")
    from spgnn.io import load_jlg
    assert load_jlg(p).num_nodes == 2 and load_jlg(p, graph="b").num_edges == 2


# ---------------------------------------------------------------- MUSAE and Planetoid

def _musae(folder, features='{"0": [0], "1": [1]}', target="id,target\n0,0\n1,1\n"):
    folder.mkdir(exist_ok=True)
    _bytes(folder / "t_edges.csv", "id_1,id_2\n0,1\n")
    _bytes(folder / "t_features.json", features)
    _bytes(folder / "t_target.csv", target)
    return folder


@pytest.mark.parametrize("features, target, err, words", [
    ('{"0": [true, 1]}', None, GraphFormatError, ("t_features.json", "key '0'")),
    ('{"0": [0], "1000000000000": [1]}', None, InputTooLarge,
     ("t_features.json", "1,000,000,000,000")),
    ('{"0": [1000000000000]}', None, InputTooLarge, ("t_features.json", "dense features")),
    (None, "id,target\n0,0\n1,1000000000000\n", InputTooLarge, ("t_target.csv", "class")),
    (None, "id,target\n0,0\n1000000000000,1\n", InputTooLarge,
     ("t_target.csv", "1,000,000,000,000")),
    (None, "id,target\n0,0\n99999999999999999999999,1\n", GraphFormatError,
     ("t_target.csv:3", "integer node id")),
])
def test_musae_hostile(tmp_path, features, target, err, words):
    kw = {k: v for k, v in (("features", features), ("target", target)) if v is not None}
    folder = _musae(tmp_path / "m", **kw)
    with pytest.raises(err) as info:
        load_musae(folder)
    assert all(w in str(info.value) for w in words), info.value


def _planetoid(root, test_index="4\n5\n", graph=None):
    root.mkdir(exist_ok=True)
    eye = np.eye(2, dtype=np.int32)
    feats = sp.csr_matrix(np.ones((6, 3), np.float32))
    objs = {"x": feats[:2], "y": eye[[0, 1]], "allx": feats[:4], "ally": eye[[0, 1, 0, 1]],
            "tx": feats[4:], "ty": eye[[0, 1]],
            "graph": graph or defaultdict(list, {0: [1], 1: [0], 2: [3], 3: [2], 4: [5], 5: [4]})}
    for key, obj in objs.items():
        with open(root / f"ind.toy.{key}", "wb") as fh:
            pickle.dump(obj, fh, protocol=2)
    _bytes(root / "ind.toy.test.index", test_index)
    return root


@pytest.mark.parametrize("test_index, graph, err, words", [
    ("4\n-5\n", None, GraphFormatError, ("ind.toy.test.index", "negative node id -5")),
    ("4\n1000000000000\n", None, InputTooLarge, ("ind.toy.test.index", "1,000,000,000,000")),
    ("4\n5\n", {0: [1], 1: [10**12]}, InputTooLarge, ("ind.toy.graph", "1,000,000,000,000")),
    ("4\n5\n", {0: [1], 1: [-2]}, GraphFormatError, ("ind.toy.graph", "negative node id -2")),
    ("4\nx\n", None, GraphFormatError, ("ind.toy.test.index:2",)),
])
def test_planetoid_blames_the_right_file(tmp_path, test_index, graph, err, words):
    root = _planetoid(tmp_path / "p", test_index, graph)
    with pytest.raises(err) as info:
        load_planetoid(root, "toy")
    assert all(w in str(info.value) for w in words), info.value


def test_planetoid_fifo_member_refused(tmp_path):
    root = _planetoid(tmp_path / "p")
    os.remove(root / "ind.toy.tx")
    os.mkfifo(root / "ind.toy.tx")
    with pytest.raises(GraphFormatError, match="ind.toy.tx: a FIFO"):
        load_planetoid(root, "toy")


# ---------------------------------------------------------------- the Graph type

@pytest.mark.parametrize("field", ["adj", "features"])
def test_complex_values_are_refused(field):
    adj = sp.csr_array(np.ones((2, 2)))
    kw = {"adj": adj.astype(np.complex128)} if field == "adj" else {
        "adj": adj, "features": np.ones((2, 2), np.complex64)}
    with pytest.raises(DTypeError, match=f"{field} must be real"):
        Graph(**kw)


def test_label_of_1e12_is_refused():
    with pytest.raises(InputTooLarge, match="vertex 1 has class 1,000,000,000,000"):
        Graph(adj=sp.csr_array((2, 2)), labels=np.array([0, 10**12]))


def test_npz_round_trip_is_unchanged_by_the_checks(tmp_path):
    g = load_graph("sbm:60:3:0")
    save_npz(g, tmp_path / "g.npz")
    h = load_graph(str(tmp_path / "g.npz"))
    assert (h.adj != g.adj).nnz == 0 and np.array_equal(h.labels, g.labels)
    gz = _bytes(tmp_path / "g.txt.gz", gzip.compress(b"0 1\n1 2\n"))
    assert load_graph(str(gz)).num_edges == 2
    assert dataclasses.replace(g).num_nodes == 60


# ---------------------------------------------------------------- duplicates: one rule

def _dup_matrix():
    # (0, 1) stored three times, (2, 0) twice, unsorted: not canonical.
    rows = np.array([0, 0, 2, 0, 2, 3])
    cols = np.array([1, 1, 0, 1, 0, 3])
    vals = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    return sp.csr_array(sp.coo_array((vals, (rows, cols)), shape=(4, 4)).tocsr(), copy=True)


def test_duplicates_summed_in_every_constructor():
    dup = _dup_matrix()
    dup_indices = dup.indices.copy()
    ref = sp.csr_array(dup.toarray())

    def body(comm):
        grid = grid_1d(comm)
        a = _dup_matrix()
        # scipy's tocsr already sums; build a raw CSR with duplicates instead.
        raw = sp.csr_array((np.array([1.0, 2.0, 4.0, 3.0, 5.0, 6.0]),
                            np.array([1, 1, 1, 0, 0, 3]), np.array([0, 3, 3, 5, 6])), shape=(4, 4))
        assert not raw.has_canonical_format
        out = []
        for make in ("global", "root", "local"):
            if make == "global":
                m = DistSparseMatrix.from_global(raw, grid, Layout("row"))
            elif make == "root":
                m = DistSparseMatrix.from_global(raw if comm.rank == 0 else None, grid,
                                                 Layout("row"), root=0)
            else:
                r0 = m.row_start
                r1 = r0 + m.local_shape[0]
                m = DistSparseMatrix.from_local(raw[r0:r1], (4, 4), grid, Layout("row"))
            s = m.local.to_scipy()
            out.append((m.nnz, s.has_canonical_format, s.toarray().tolist()))
        assert raw.nnz == 6        # the caller's matrix is left as it was
        del a
        return out

    results = run_loopback(2, body, timeout=60)
    for rank, per in enumerate(results):
        assert {nnz for nnz, _, _ in per} == {ref.nnz}
        assert all(canon for _, canon, _ in per)
        assert per[0][2] == per[1][2] == per[2][2]
    assert np.array_equal(dup.indices, dup_indices)


# ---------------------------------------------------------------- the command line

# A few per kind (each costs an interpreter start); the API test above covers every file.
CLI_CASES = ["edge-id-5e8", "device", "npz-garbage", "lg-extra-edges"]


def _one_line(out, cmd, words):
    lines = [ln for ln in out.splitlines() if f"spgnn {cmd}: error:" in ln]
    return len(lines) == 1 and all(w in lines[0] for w in words) and "Traceback" not in out


@pytest.mark.parametrize("name", CLI_CASES)
def test_cli_one_line(name, hostile):
    _, cases = hostile
    path, _, words = cases[name]
    proc = subprocess.run([sys.executable, "-m", "spgnn", "spmm", "--graph", str(path),
                           "--json"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and _one_line(proc.stderr, "spmm", words), proc.stderr


def test_cli_num_nodes_and_relabel(tmp_path):
    p = _bytes(tmp_path / "sparse.txt", "0 500000000\n1 500000000\n")
    run = lambda *extra: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "spgnn", "plan", "--graph", str(p), "--ranks", "2",
         "--partition", "none", *extra], capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL)
    ok = run("--relabel")
    assert ok.returncode == 0 and "n=3" in ok.stdout, ok.stderr
    bad = run("--num-nodes", "10")
    assert bad.returncode == 2 and _one_line(bad.stderr, "plan", ("sparse.txt:1",
                                                                   "num_nodes=10")), bad.stderr


def test_num_nodes_and_relabel_options_parse():
    import argparse

    from spgnn.cli._graph_options import add_graph_options, graph_options
    p = argparse.ArgumentParser(exit_on_error=False)
    add_graph_options(p)
    assert graph_options(p.parse_args([])) == {}
    assert graph_options(p.parse_args(["--num-nodes", "7"])) == {"num_nodes": 7}
    assert graph_options(p.parse_args(["--relabel"])) == {"relabel": True}
    for bad in (["--num-nodes", "0"], ["--num-nodes", "x"]):
        with pytest.raises(argparse.ArgumentError):
            p.parse_args(bad)
    with pytest.raises(argparse.ArgumentError, match="not allowed with"):
        p.parse_args(["--num-nodes", "3", "--relabel"])


@needs_mpi
@pytest.mark.mpi
@pytest.mark.parametrize("cmd, name", [("train", "edge-id-5e8"), ("spmm", "fifo")])
def test_mpi_every_rank_ends(cmd, name, hostile):
    _, cases = hostile
    path, _, words = cases[name]
    extra = ["--epochs", "1", "--no-progress"] if cmd == "train" else ["--json"]
    with Job(["-m", "spgnn", cmd, "--graph", str(path), *extra], 2) as job:
        rc, out = job.wait(timeout=60)
    assert rc == 2 and _one_line(out, cmd, words), out
    assert "Abort" not in out, out
    assert job.leftovers() == []
