"""spgnn.io: the Graph type, every loader on tiny files, errors naming file and line, real data.

The real-data tests reach ``../shared/data`` through ``shared_data_path`` and
skip when it is absent; the two ~1M-edge graphs are marked ``slow``
(deselect with ``-m "not slow"``).
"""

import gzip
import os
import pickle
import re
from collections import defaultdict

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn import SpgnnError
from spgnn.io import (Graph, GraphFormatError, load_graph, load_jlg, load_matrix_market,
                      load_musae, load_npz, load_planetoid, load_snap_edgelist, save_npz)
from spgnn.testing.data import shared_data_path


def write(path, data, *, gz=False):
    data = data.encode() if isinstance(data, str) else data
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def edges_of(g):
    a = g.adj.tocoo()
    return sorted(zip(a.row.tolist(), a.col.tolist()))


def raises_at(fname, line, match=None):
    """pytest.raises for a GraphFormatError naming ``fname:line``."""
    pattern = re.escape(f"{fname}:{line}:") + (f".*{match}" if match else "")
    return pytest.raises(GraphFormatError, match=pattern)


# --------------------------------------------------------------------------- #
# Graph
# --------------------------------------------------------------------------- #

def test_graph_type_coerces_and_counts():
    a = sp.coo_matrix(([2.0, 1.0, 1.0], ([0, 1, 2], [1, 2, 2])), shape=(3, 3))
    g = Graph(adj=a, labels=np.array([0, 1, -1], dtype=np.int32), name="t")
    assert isinstance(g.adj, sp.csr_array) and g.adj.dtype == np.float32
    assert g.labels.dtype == np.int64
    assert (g.num_nodes, g.num_edges, g.num_self_loops, g.num_classes) == (3, 3, 1, 2)
    assert not g.is_symmetric()
    s = g.symmetrize()
    assert s.is_symmetric() and s.num_edges == 3          # {0,1}, {1,2}, {2,2}
    assert s.adj[1, 0] == 2.0                              # max(a_uv, a_vu)
    assert s.without_self_loops().num_edges == 2
    assert "3 nodes" in g.summary() and "directed" in g.summary()


def test_graph_validates_shapes():
    a = sp.eye(3, format="csr")
    with pytest.raises(ValueError, match="square"):
        Graph(adj=sp.random(3, 4, format="csr"))
    with pytest.raises(ValueError, match="features"):
        Graph(adj=a, features=np.zeros((2, 4)))
    with pytest.raises(ValueError, match="labels"):
        Graph(adj=a, labels=np.zeros(4, dtype=int))
    with pytest.raises(ValueError, match="train_mask"):
        Graph(adj=a, train_mask=np.zeros(2, dtype=bool))


def test_random_split_stratified_and_plain():
    n = 1000
    labels = np.arange(n) % 4
    labels[:10] = -1
    g = Graph(adj=sp.csr_array((n, n), dtype=np.float32), labels=labels)
    s = g.random_split(0.6, 0.2, seed=3)
    masks = np.stack([s.train_mask, s.val_mask, s.test_mask])
    assert masks.sum(axis=0).max() == 1                      # disjoint
    assert not masks[:, :10].any()                            # unknown labels in no set
    for k in range(4):                                        # stratified: 60/20/20 per class
        members = labels == k
        assert abs(s.train_mask[members].mean() - 0.6) < 0.01
        assert abs(s.val_mask[members].mean() - 0.2) < 0.01
    again = g.random_split(0.6, 0.2, seed=3)
    assert np.array_equal(again.train_mask, s.train_mask)     # deterministic in the seed
    plain = Graph(adj=g.adj).random_split(0.5, 0.25, seed=0)
    assert (plain.train_mask.sum(), plain.val_mask.sum(), plain.test_mask.sum()) == (500, 250, 250)
    with pytest.raises(ValueError, match="train"):
        g.random_split(0.8, 0.5)


# --------------------------------------------------------------------------- #
# Edge lists
# --------------------------------------------------------------------------- #

@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_snap_edgelist_plain_gz_crlf_comments(tmp_path, gz, eol):
    text = eol.join(["# Directed graph", "# FromNodeId\tToNodeId", "0\t1", "", "1\t2",
                     "  # an indented comment", "3 0", ""])
    p = write(tmp_path / "g.txt", text, gz=gz)   # .txt even when gzip: detected by magic
    g = load_snap_edgelist(p)
    assert g.num_nodes == 4 and g.is_symmetric() and g.num_edges == 3
    d = load_snap_edgelist(p, directed=True)
    assert edges_of(d) == [(0, 1), (1, 2), (3, 0)]
    assert g.name == "g"


def test_snap_edgelist_csv_header_relabel_num_nodes(tmp_path):
    p = write(tmp_path / "e.csv", "Gene ID 1,Gene ID 2\r100,7\r7,100\r7,9000\r")
    g = load_snap_edgelist(p, relabel=True)
    assert g.node_ids.tolist() == [7, 100, 9000]
    assert edges_of(g) == [(0, 1), (0, 2), (1, 0), (2, 0)]
    q = write(tmp_path / "f.txt", "0 1\n1 2\n")
    assert load_snap_edgelist(q, num_nodes=10).num_nodes == 10
    with raises_at("f.txt", 2, "out of range"):
        load_snap_edgelist(q, num_nodes=2)


@pytest.mark.parametrize("gz", [False, True])
def test_snap_edgelist_bad_token_names_line(tmp_path, gz):
    lines = [f"{i} {i + 1}" for i in range(16)] + ["a b"] + ["1 2"] * 5
    p = write(tmp_path / "graph.txt", "\n".join(lines), gz=gz)
    with raises_at("graph.txt", 17, "expected two integer vertex ids, got 'a b'"):
        load_snap_edgelist(p)


@pytest.mark.parametrize("bad, line", [("1 2 3", 3), ("1", 3), ("1.5 2", 3), ("-1 2", 3),
                                       ("99999999999999999999 1", 3)])
def test_snap_edgelist_wrong_columns_and_values(tmp_path, bad, line):
    p = write(tmp_path / "graph.txt", f"# c\n0 1\n{bad}\n2 3\n")
    with raises_at("graph.txt", line):
        load_snap_edgelist(p)


def test_snap_edgelist_mixed_column_counts_caught(tmp_path):
    # 3 + 1 tokens make the right total; the per-line count still catches it.
    p = write(tmp_path / "graph.txt", "0 1\n0 1 2\n3\n")
    with raises_at("graph.txt", 2, "got '0 1 2'"):
        load_snap_edgelist(p)


def test_truncated_and_corrupt_gzip(tmp_path):
    data = gzip.compress("".join(f"{i} {i + 1}\n" for i in range(20000)).encode())
    p = write(tmp_path / "cut.txt.gz", data[: len(data) // 2])
    with pytest.raises(GraphFormatError, match=r"cut\.txt\.gz:\d+: gzip stream ends early"):
        load_snap_edgelist(p)
    broken = bytearray(data)
    broken[len(data) // 2: len(data) // 2 + 40] = b"\xff" * 40
    q = write(tmp_path / "bad.txt.gz", bytes(broken))
    with pytest.raises(GraphFormatError, match=r"bad\.txt\.gz:\d+: (corrupt gzip|gzip stream)"):
        load_snap_edgelist(q)


def test_empty_edge_list(tmp_path):
    g = load_snap_edgelist(write(tmp_path / "e.txt", "# nothing\n"))
    assert g.num_nodes == 0 and g.num_edges == 0


# --------------------------------------------------------------------------- #
# JuliaGraphs LG
# --------------------------------------------------------------------------- #

@pytest.mark.parametrize("gz", [False, True])
def test_jlg_undirected_and_directed(tmp_path, gz):
    p = write(tmp_path / "u.jlg", "4,3,u,graph\n1,2\n2,3\n4,4\n", gz=gz)
    g = load_jlg(p)
    assert g.num_nodes == 4 and g.is_symmetric() and g.num_edges == 3 and g.num_self_loops == 1
    q = write(tmp_path / "d.jlg", "3,2,d,graph,2,Int64,simplegraph\r\n1,2\r\n3,1\r\n", gz=gz)
    assert edges_of(load_jlg(q)) == [(0, 1), (2, 0)]


def test_jlg_several_graphs(tmp_path):
    p = write(tmp_path / "m.jlg", "2,1,u,first\n1,2\n3,2,d,second\n1,3\n3,2\n")
    assert load_jlg(p).num_nodes == 2
    g = load_jlg(p, graph="second")
    assert edges_of(g) == [(0, 2), (2, 1)]
    with pytest.raises(GraphFormatError, match="no graph named 'third'"):
        load_jlg(p, graph="third")


def test_jlg_errors(tmp_path):
    with raises_at("t.jlg", 3, "announces 5 edges but only 2"):
        load_jlg(write(tmp_path / "t.jlg", "4,5,u,graph\n1,2\n2,3\n"))
    with raises_at("r.jlg", 3, r"outside 1\.\.4"):
        load_jlg(write(tmp_path / "r.jlg", "4,3,u,graph\n1,2\n2,5\n1,3\n"))
    with raises_at("r0.jlg", 2, r"outside 1\.\.4"):
        load_jlg(write(tmp_path / "r0.jlg", "4,1,u,graph\n0,2\n"))
    with raises_at("h.jlg", 1, "LG header"):
        load_jlg(write(tmp_path / "h.jlg", "four,3,u,graph\n1,2\n"))
    with raises_at("x.jlg", 3, "got '2,x'"):
        load_jlg(write(tmp_path / "x.jlg", "4,3,u,graph\n1,2\n2,x\n1,3\n"))


# --------------------------------------------------------------------------- #
# MatrixMarket
# --------------------------------------------------------------------------- #

def test_matrix_market_with_header_general_and_symmetric(tmp_path):
    p = write(tmp_path / "g.mtx", "%%MatrixMarket matrix coordinate pattern general\n"
                                  "% a comment\n3 3 2\n1 2\n3 1\n")
    assert edges_of(load_matrix_market(p)) == [(0, 1), (2, 0)]
    s = write(tmp_path / "s.mtx", "%%MatrixMarket matrix coordinate real symmetric\n"
                                  "3 3 3\n2 1 0.5\n3 3 2.0\n3 2 4\n", gz=True)
    g = load_matrix_market(s)
    assert g.is_symmetric() and g.num_edges == 3
    assert g.adj[0, 1] == 0.5 and g.adj[1, 0] == 0.5 and g.adj[2, 2] == 2.0  # diagonal once


def test_matrix_market_agrees_with_scipy(tmp_path):
    import scipy.io
    a = sp.random(30, 30, density=0.1, random_state=np.random.default_rng(1), format="coo")
    p = tmp_path / "r.mtx"
    scipy.io.mmwrite(str(p), a)
    g = load_matrix_market(p)
    np.testing.assert_allclose(g.adj.toarray(), a.toarray().astype(np.float32), rtol=1e-6)


def test_matrix_market_headerless(tmp_path):
    # Entries only, strictly lower triangle -> one-triangle storage of a symmetric matrix.
    p = write(tmp_path / "lux.mtx", "2 1\n4 1\n3 2\n")
    g = load_matrix_market(p)
    assert g.num_nodes == 4 and g.is_symmetric() and g.num_edges == 3
    assert not load_matrix_market(p, symmetric=False).is_symmetric()
    # Lower triangle with diagonal, as bcsstk25.txt.
    d = write(tmp_path / "bc.txt", "1 1\n2 1\n2 2\n3 3\n")
    g = load_matrix_market(d)
    assert g.num_nodes == 3 and g.num_self_loops == 3 and g.without_self_loops().num_edges == 1
    # A size line without banner, then a general (both-triangle) pattern.
    s = write(tmp_path / "sz.mtx", "% c\n5 5 3\n1 2\n2 1\n3 4\n")
    g = load_matrix_market(s)
    assert g.num_nodes == 5 and edges_of(g) == [(0, 1), (1, 0), (2, 3)]


def test_matrix_market_errors(tmp_path):
    with raises_at("o.mtx", 4, r"outside 1\.\.3"):
        load_matrix_market(write(tmp_path / "o.mtx",
                                 "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n4 1\n"))
    with raises_at("t.mtx", 3, "announces 3 entries but only 1"):
        load_matrix_market(write(tmp_path / "t.mtx",
                                 "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n2 1\n"))
    with raises_at("b.mtx", 1, "MatrixMarket"):
        load_matrix_market(write(tmp_path / "b.mtx", "%%MatrixMarket matrix array real general\n2 2\n"))
    with raises_at("n.mtx", 2, "square"):
        load_matrix_market(write(tmp_path / "n.mtx",
                                 "%%MatrixMarket matrix coordinate pattern general\n3 4 1\n1 1\n"))
    with raises_at("c.mtx", 3, "got '2 q'"):
        load_matrix_market(write(tmp_path / "c.mtx", "1 1\n2 1\n2 q\n"))
    with raises_at("z.mtx", 2, r"outside 1\.\.2"):
        load_matrix_market(write(tmp_path / "z.mtx", "2 1\n0 1\n"))


# --------------------------------------------------------------------------- #
# MUSAE
# --------------------------------------------------------------------------- #

def make_musae(folder, prefix="toy", features='{"0": [0, 2], "1": [1], "3": [2]}'):
    folder.mkdir(exist_ok=True)
    write(folder / f"{prefix}_edges.csv", "id_1,id_2\n0,1\n1,2\n3,3\n")
    write(folder / f"{prefix}_features.json", features)
    write(folder / f"{prefix}_target.csv",
          'id,facebook_id,page_name,page_type\n0,11,"Acme, Inc.",company\n'
          '1,12,Gov,government\n2,13,"say ""hi""",company\n3,14,TV,tvshow\n')
    return folder


def test_musae_tiny(tmp_path):
    folder = make_musae(tmp_path / "m")
    g = load_musae(folder)
    assert g.num_nodes == 4 and g.num_edges == 3 and g.num_self_loops == 1
    assert g.features.dtype == np.float32 and g.features.shape == (4, 3)
    assert g.features[0].tolist() == [1, 0, 1] and g.features[2].tolist() == [0, 0, 0]
    assert g.class_names == ("company", "government", "tvshow")
    assert g.labels.tolist() == [0, 1, 0, 2]
    sparse = load_musae(folder / "toy", sparse_features=True)   # a prefix works too
    assert sp.issparse(sparse.features)
    np.testing.assert_array_equal(sparse.features.toarray(), g.features)


def test_musae_bad_json_and_target(tmp_path):
    folder = make_musae(tmp_path / "m", features='{"0": [0, 2],\n "1": [1]\n "3": [2]}')
    with raises_at("toy_features.json", 3, "invalid JSON"):
        load_musae(folder)
    folder = make_musae(tmp_path / "k", features='{"0": ["x"]}')
    with pytest.raises(GraphFormatError, match=r"toy_features\.json: key '0'"):
        load_musae(folder)
    folder = make_musae(tmp_path / "t")
    write(folder / "toy_target.csv", "id,page_type\n0,company\n1\n")
    with raises_at("toy_target.csv", 3, "expected 2 fields"):
        load_musae(folder)


# --------------------------------------------------------------------------- #
# npz
# --------------------------------------------------------------------------- #

def test_npz_roundtrip_and_scipy(tmp_path):
    g = load_graph("sbm:60:3:1")
    save_npz(g, tmp_path / "g.npz")
    h = load_npz(tmp_path / "g.npz")
    assert (h.adj != g.adj).nnz == 0 and h.name == g.name
    for key in ("features", "labels", "train_mask", "val_mask", "test_mask"):
        np.testing.assert_array_equal(getattr(h, key), getattr(g, key))
    sp.save_npz(tmp_path / "a.npz", sp.csr_matrix(g.adj))
    assert (load_npz(tmp_path / "a.npz").adj != g.adj).nnz == 0


def test_npz_errors(tmp_path):
    with pytest.raises(GraphFormatError, match=r"junk\.npz: not a readable \.npz"):
        load_npz(write(tmp_path / "junk.npz", b"PK\x03\x04 this is no zip"))
    np.savez(tmp_path / "obj.npz", adj_data=np.array([1.0]), adj_indices=np.array([0]),
             adj_indptr=np.array([0, 1]), adj_shape=np.array([1, 1]),
             labels=np.array([{"evil": 1}], dtype=object))
    with pytest.raises(GraphFormatError, match="'labels'"):
        load_npz(tmp_path / "obj.npz")
    np.savez(tmp_path / "bad.npz", adj_data=np.array([1.0]), adj_indices=np.array([5]),
             adj_indptr=np.array([0, 1]), adj_shape=np.array([1, 1]))
    with pytest.raises(GraphFormatError, match="adj_indices"):
        load_npz(tmp_path / "bad.npz")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(GraphFormatError, match="unknown .npz layout"):
        load_npz(tmp_path / "other.npz")
    good = tmp_path / "g.npz"
    save_npz(load_graph("rmat:6"), good)
    data = good.read_bytes()
    with pytest.raises(GraphFormatError, match="trunc.npz"):
        load_npz(write(tmp_path / "trunc.npz", data[: len(data) // 2]))


# --------------------------------------------------------------------------- #
# Planetoid (tiny synthetic files) and the restricted unpickler
# --------------------------------------------------------------------------- #

def make_planetoid(root, name="toy"):
    """Six nodes: 2 labelled train nodes, 4 'all', test ids 4 and 5 listed as 5, 4."""
    root.mkdir(exist_ok=True)
    eye = np.eye(3, dtype=np.int32)
    feats = sp.csr_matrix(np.arange(24, dtype=np.float32).reshape(6, 4) % 2)
    objs = {
        "x": feats[:2], "y": eye[[0, 1]], "allx": feats[:4], "ally": eye[[0, 1, 2, 0]],
        "tx": feats[[5, 4]], "ty": eye[[1, 2]],
        "graph": defaultdict(list, {0: [1, 2], 1: [0], 2: [0, 3, 3], 3: [2, 4], 4: [3], 5: [5]}),
    }
    for key, obj in objs.items():
        with open(root / f"ind.{name}.{key}", "wb") as f:
            pickle.dump(obj, f, protocol=2)
    write(root / f"ind.{name}.test.index", "5\n4\n")
    return root, feats


def test_planetoid_tiny(tmp_path):
    root, feats = make_planetoid(tmp_path / "p")
    g = load_planetoid(root, "toy", val_size=1)
    assert g.num_nodes == 6 and g.num_edges == 5 and g.num_self_loops == 1
    np.testing.assert_array_equal(g.features, feats.toarray())   # tx rows land on test ids
    assert g.labels.tolist() == [0, 1, 2, 0, 2, 1]
    assert g.train_mask.tolist() == [1, 1, 0, 0, 0, 0]
    assert g.val_mask.tolist() == [0, 0, 1, 0, 0, 0]
    assert g.test_mask.tolist() == [0, 0, 0, 0, 1, 1]
    assert load_graph(root).val_mask.tolist() == [0, 0, 1, 1, 0, 0]   # val clipped to allx


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > pwned.txt",))


def test_planetoid_refuses_malicious_pickle(tmp_path, monkeypatch):
    root, _ = make_planetoid(tmp_path / "p")
    with open(root / "ind.toy.graph", "wb") as f:
        pickle.dump({0: [Evil()]}, f, protocol=2)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GraphFormatError, match=r"ind\.toy\.graph: refusing to unpickle "
                                               r"(posix|os|nt)\.system"):
        load_planetoid(root, "toy", val_size=1)
    assert not (tmp_path / "pwned.txt").exists()


@pytest.mark.parametrize("payload", [
    pickle.dumps(__import__("builtins").eval, protocol=2),
    b"\x80\x02cbuiltins\ngetattr\nq\x00.",
    b"\x80\x02csubprocess\nPopen\nq\x00.",
])
def test_planetoid_refuses_other_callables(tmp_path, payload):
    root, _ = make_planetoid(tmp_path / "p")
    (root / "ind.toy.x").write_bytes(payload)
    with pytest.raises(GraphFormatError, match=r"ind\.toy\.x: refusing to unpickle"):
        load_planetoid(root, "toy", val_size=1)


def test_planetoid_truncated_and_wrong_type(tmp_path):
    root, _ = make_planetoid(tmp_path / "p")
    data = (root / "ind.toy.allx").read_bytes()
    (root / "ind.toy.allx").write_bytes(data[: len(data) // 2])
    with pytest.raises(GraphFormatError, match=r"ind\.toy\.allx: not a readable Planetoid"):
        load_planetoid(root, "toy", val_size=1)
    root, _ = make_planetoid(tmp_path / "q")
    with open(root / "ind.toy.tx", "wb") as f:
        pickle.dump([1, 2, 3], f, protocol=2)
    with pytest.raises(GraphFormatError, match=r"ind\.toy\.tx: expected a scipy sparse"):
        load_planetoid(root, "toy", val_size=1)
    root, _ = make_planetoid(tmp_path / "r")
    write(root / "ind.toy.test.index", "5\nfour\n")
    with raises_at("ind.toy.test.index", 2):
        load_planetoid(root, "toy", val_size=1)
    with pytest.raises(FileNotFoundError):
        load_planetoid(root, "nothere")


# --------------------------------------------------------------------------- #
# load_graph
# --------------------------------------------------------------------------- #

def test_load_graph_generators():
    g = load_graph("rmat:8:4:2")
    assert g.num_nodes == 256 and g.features is None and g.is_symmetric()
    s = load_graph("sbm:200:5:7")
    assert s.features.shape == (200, 32) and s.num_classes == 5
    assert s.train_mask.sum() + s.val_mask.sum() + s.test_mask.sum() == 200
    with pytest.raises(GraphFormatError, match="integers"):
        load_graph("rmat:x")
    with pytest.raises(GraphFormatError, match="sbm:N"):
        load_graph("sbm:1:2:3:4")


def test_load_graph_dispatch(tmp_path):
    cases = {
        "a.txt": ("0 1\n1 2\n", False), "a.edges.gz": ("0 1\n1 2\n", True),
        "a.csv": ("id_1,id_2\n0,1\n1,2\n", False), "a.jlg": ("3,2,u,graph\n1,2\n2,3\n", True),
        "a.mtx": ("2 1\n3 2\n", False),
        "mm.txt": ("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 2\n", False),
    }
    for fname, (text, gz) in cases.items():
        g = load_graph(write(tmp_path / fname, text, gz=gz))
        assert (g.num_nodes, g.num_edges) == (3, 2), fname
    save_npz(load_graph("rmat:5"), tmp_path / "r.npz")
    assert load_graph(str(tmp_path / "r.npz")).num_nodes == 32
    assert load_graph(make_musae(tmp_path / "mus")).num_nodes == 4
    root, _ = make_planetoid(tmp_path / "pl", "one")
    make_planetoid(root, "two")
    with pytest.raises(GraphFormatError, match="pass name="):
        load_graph(root)
    with pytest.raises(GraphFormatError, match=r"supported formats:(.|\n)*\.jlg"):
        load_graph(write(tmp_path / "a.weird", "0 1\n"))
    with pytest.raises(GraphFormatError, match="no Planetoid or MUSAE"):
        (tmp_path / "empty").mkdir()
        load_graph(tmp_path / "empty")
    with pytest.raises(FileNotFoundError):
        load_graph(tmp_path / "missing.txt")


def test_error_is_spgnn_and_value_error():
    assert issubclass(GraphFormatError, SpgnnError) and issubclass(GraphFormatError, ValueError)


def test_shared_data_path_skips_when_absent(tmp_path, monkeypatch):
    monkeypatch.setenv("SPGNN_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(pytest.skip.Exception, match="shared data folder not found"):
        shared_data_path("planetoid")
    monkeypatch.setenv("SPGNN_DATA_DIR", str(tmp_path))
    with pytest.raises(pytest.skip.Exception, match="not found"):
        shared_data_path("planetoid")
    (tmp_path / "planetoid").mkdir()
    assert shared_data_path("planetoid") == tmp_path / "planetoid"


# --------------------------------------------------------------------------- #
# The real data (counts from each folder's README.md)
# --------------------------------------------------------------------------- #

def test_cora():
    g = load_planetoid(shared_data_path("planetoid"), "cora")
    assert (g.num_nodes, g.num_edges, g.num_self_loops) == (2708, 5278, 0)
    assert (g.num_features, g.num_classes) == (1433, 7)
    assert (g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()) == (140, 500, 1000)
    assert np.bincount(g.labels[g.train_mask]).tolist() == [20] * 7
    assert g.test_mask[1708:].all() and (g.labels >= 0).all()
    assert set(np.unique(g.features)) == {0.0, 1.0}                  # raw, not normalised


def test_citeseer_padded_test_nodes():
    g = load_planetoid(shared_data_path("planetoid"), "citeseer")
    assert (g.num_nodes, g.num_features, g.num_classes) == (3327, 3703, 6)
    assert g.without_self_loops().num_edges == 4552 and g.num_self_loops == 124
    assert (g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()) == (120, 500, 1000)
    padded = np.flatnonzero(g.labels < 0)
    assert padded.size == 15 and (padded >= 2312).all() and not g.test_mask[padded].any()
    assert not g.features[padded].any()


def test_musae_facebook():
    g = load_graph(shared_data_path("musae_facebook"))
    assert (g.num_nodes, g.num_edges, g.num_self_loops) == (22470, 171002, 179)
    assert (g.num_features, g.num_classes) == (4714, 4)
    assert int(g.features.sum()) == 314583
    assert np.bincount(g.labels).tolist() == [6495, 6880, 5768, 3327]


def test_luxembourg_osm():
    g = load_matrix_market(shared_data_path("luxembourg_osm", "luxembourg_osm.mtx"))
    assert (g.num_nodes, g.num_edges, g.num_self_loops) == (114599, 119666, 0)


def test_hb_bcsstk25():
    g = load_matrix_market(shared_data_path("hb_bcsstk25", "bcsstk25.txt"))
    assert g.num_nodes == 15439 and g.num_self_loops == 15439
    assert g.without_self_loops().num_edges == 118401


@pytest.mark.slow
def test_snap_soc_slashdot0902():
    path = shared_data_path("snap_soc_slashdot0902", "soc-Slashdot0902.txt.gz")
    g = load_snap_edgelist(path, directed=True)
    assert (g.num_nodes, g.num_edges, g.num_self_loops) == (82168, 948464, 78303)
    u = load_graph(path)                                          # undirected by default
    assert u.num_edges == 582533


@pytest.mark.slow
def test_snap_ego_twitter():
    g = load_graph(shared_data_path("snap_ego_twitter", "ego-twitter-undirected.jlg"))
    assert (g.num_nodes, g.num_edges, g.num_self_loops) == (81306, 1342310, 14)
