"""spgnn.interop: round trips with PyG, torch (sparse and dense), networkx and scipy.

Every converter is checked on a graph with weights, self-loops and isolated
vertices, on an empty graph (no vertices) and on a graph without edges; the
zero-copy paths are proved by writing through one side and reading the other.
torch / torch_geometric / networkx tests skip, with the reason, where the
library is not installed (the ``test`` extra installs all three).
"""

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn import interop
from spgnn.errors import MissingDependency
from spgnn.io import Graph


def _graph(n=7, features=True, weighted=False, directed=False):
    """Self-loop on 0, isolated vertices 5 and 6, an edge 1-2 both ways or one way."""
    rows = [0, 1, 2, 3, 3] if not directed else [0, 1, 3, 3]
    cols = [0, 2, 1, 4, 0] if not directed else [0, 2, 4, 0]
    vals = np.arange(1, len(rows) + 1, dtype=np.float32) if weighted else np.ones(len(rows))
    adj = sp.csr_array((vals, (rows, cols)), shape=(n, n))
    if not directed:
        adj = sp.csr_array(adj.maximum(adj.T))
    rng = np.random.default_rng(0)
    kw = {}
    if features:
        kw = dict(features=rng.random((n, 3), dtype=np.float32),
                  labels=np.array([0, 1, 2, 1, 0, -1, 2][:n]),
                  train_mask=np.arange(n) < 3, val_mask=np.arange(n) == 3,
                  test_mask=np.arange(n) >= 4)
    return Graph(adj=adj, name="g", **kw)


GRAPHS = {
    "undirected": _graph(),
    "weighted-directed": _graph(weighted=True, directed=True),
    "no-vertices": Graph(adj=sp.csr_array((0, 0), dtype=np.float32),
                         features=np.zeros((0, 3), np.float32), labels=np.zeros(0, int)),
    "no-edges": Graph(adj=sp.csr_array((4, 4), dtype=np.float32),
                      features=np.ones((4, 2), np.float32), labels=np.arange(4)),
}


def _same(a: Graph, b: Graph, *, data=True):
    assert a.adj.shape == b.adj.shape and a.adj.dtype == b.adj.dtype == np.float32
    assert (a.adj != b.adj).nnz == 0
    if not data:
        return
    for field in ("features", "labels", "train_mask", "val_mask", "test_mask"):
        x, y = getattr(a, field), getattr(b, field)
        assert (x is None) == (y is None), field
        if x is not None:
            x = x.toarray() if sp.issparse(x) else x
            y = y.toarray() if sp.issparse(y) else y
            assert x.dtype == y.dtype and np.array_equal(x, y), field


# ------------------------------------------------------------------ scipy, the one entry point
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_scipy_round_trip(name):
    g = GRAPHS[name]
    adj = interop.to_scipy(g)
    assert adj is g.adj
    _same(interop.as_graph(adj), Graph(adj=g.adj), data=False)
    assert (interop.to_scipy(g.adj.toarray()) != g.adj).nnz == 0
    assert interop.as_graph(g) is g


def test_to_scipy_refuses_what_it_cannot_convert():
    with pytest.raises(TypeError, match="cannot convert"):
        interop.to_scipy("edges.txt")


# ------------------------------------------------------------------ networkx
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_networkx_round_trip(name):
    pytest.importorskip("networkx", reason="networkx not installed (pip install spgnn[networkx])")
    g = GRAPHS[name]
    G = interop.to_networkx(g, node_attrs=("x", "y"))
    assert G.number_of_nodes() == g.num_nodes
    assert G.is_directed() == (not g.is_symmetric())
    back = interop.from_networkx(G, features="x" if g.num_nodes else None,
                                 labels="y" if g.num_nodes else None)
    assert back.node_ids is None
    _same(back, Graph(adj=g.adj, features=g.features if g.num_nodes else None,
                      labels=g.labels if g.num_nodes else None), data=True)


def test_networkx_self_loops_isolated_vertices_and_node_names():
    nx = pytest.importorskip("networkx", reason="networkx not installed")
    G = nx.Graph()
    G.add_nodes_from(["a", "b", "c", "lonely"])
    G.add_edge("a", "a", weight=2.5)
    G.add_edge("a", "b")
    G.add_edge("b", "c", weight=3.0)
    g = interop.from_networkx(G)
    assert g.num_nodes == 4 and g.num_self_loops == 1 and g.num_edges == 3
    assert g.node_ids.tolist() == ["a", "b", "c", "lonely"]
    assert g.adj[0, 0] == 2.5 and g.adj[1, 2] == g.adj[2, 1] == 3.0
    H = interop.to_networkx(g)
    assert sorted(H.nodes) == sorted(G.nodes) and H["a"]["a"]["weight"] == 2.5
    assert nx.utils.graphs_equal(nx.Graph(H), G) or sorted(H.edges) == sorted(G.edges)


def test_networkx_directed_stays_directed_and_missing_attribute_is_named():
    nx = pytest.importorskip("networkx", reason="networkx not installed")
    D = nx.DiGraph([(0, 1), (1, 2)])
    g = interop.from_networkx(D)
    assert not g.is_symmetric() and g.adj[0, 1] == 1 and g.adj[1, 0] == 0
    with pytest.raises(ValueError, match="no label attribute 'y'"):
        interop.from_networkx(D, labels="y")
    U = interop.to_networkx(g, directed=False)
    assert not U.is_directed() and U.number_of_edges() == 2


# ------------------------------------------------------------------ torch
@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="torch not installed (pip install spgnn[torch])")


def test_dense_tensors_share_memory_both_ways(torch):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = interop.to_torch(a)
    assert t.data_ptr() == a.ctypes.data and t.dtype == torch.float32
    a[1, 2] = -7
    assert t[1, 2].item() == -7                     # the same memory, no copy
    back = interop.to_numpy(t)
    assert np.shares_memory(back, a)
    t[0, 0] = 42
    assert a[0, 0] == 42 and back[0, 0] == 42
    strided = a[:, ::2]                             # a view with strides: still shared
    assert interop.to_torch(strided).data_ptr() == strided.ctypes.data


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_dense_dtypes_round_trip(torch, dtype):
    a = (np.arange(6) % 3).astype(dtype)
    back = interop.to_numpy(interop.to_torch(a))
    assert back.dtype == a.dtype and np.array_equal(back, a)


def test_copy_modes(torch):
    a = np.ones(3, np.float32)
    assert not np.shares_memory(interop.to_numpy(interop.to_torch(a, copy=True)), a)
    ro = np.ones(3, np.float32)
    ro.flags.writeable = False
    assert interop.to_torch(ro).data_ptr() != ro.ctypes.data        # copied, never aliased
    with pytest.raises(ValueError, match="copy=False"):
        interop.to_torch(ro, copy=False)
    w = torch.ones(2, requires_grad=True)
    assert np.from_dlpack(w.detach()).ctypes.data == interop.to_numpy(w).ctypes.data


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("layout", ["csr", "coo"])
def test_torch_sparse_round_trip(torch, name, layout):
    adj = GRAPHS[name].adj
    t = interop.to_torch_sparse(adj, layout=layout)
    assert t.layout == (torch.sparse_csr if layout == "csr" else torch.sparse_coo)
    assert tuple(t.shape) == adj.shape and t.dtype == torch.float32
    assert np.array_equal(t.to_dense().numpy(), adj.toarray())
    back = interop.from_torch_sparse(t)
    assert back.dtype == np.float32 and (back != adj).nnz == 0
    if layout == "coo":
        assert t.is_coalesced()


def test_torch_csr_shares_all_three_arrays(torch):
    adj = GRAPHS["undirected"].adj
    t = interop.to_torch_sparse(adj)
    assert t.crow_indices().data_ptr() == adj.indptr.ctypes.data
    assert t.col_indices().data_ptr() == adj.indices.ctypes.data
    assert t.values().data_ptr() == adj.data.ctypes.data
    back = interop.from_torch_sparse(t)
    for mine, theirs in ((back.indptr, adj.indptr), (back.indices, adj.indices),
                         (back.data, adj.data)):
        assert np.shares_memory(mine, theirs)
    with pytest.raises(ValueError, match="copy=False"):
        interop.to_torch_sparse(adj.tocoo(), copy=False)


def test_torch_coo_sums_duplicates_and_dense_adjacency_converts(torch):
    t = torch.sparse_coo_tensor(torch.tensor([[0, 0, 1], [1, 1, 0]]), torch.tensor([1., 2., 3.]),
                                size=(3, 3))
    a = interop.from_torch_sparse(t)
    assert a[0, 1] == 3 and a[1, 0] == 3 and a.nnz == 2
    dense = torch.zeros(3, 3)
    dense[2, 0] = 5
    assert interop.to_scipy(dense)[2, 0] == 5 and interop.as_graph(dense).num_nodes == 3
    with pytest.raises(ValueError, match="2-D"):
        interop.from_torch_sparse(torch.zeros(3))


# ------------------------------------------------------------------ PyG
@pytest.fixture
def pyg(torch):
    return pytest.importorskip("torch_geometric",
                               reason="torch_geometric not installed (pip install spgnn[pyg])")


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_pyg_round_trip(pyg, name):
    g = GRAPHS[name]
    data = interop.to_pyg(g)
    assert data.num_nodes == g.num_nodes
    assert data.edge_index.dtype.is_floating_point is False and data.edge_index.shape[0] == 2
    assert data.edge_index.shape[1] == g.adj.nnz
    assert ("edge_weight" in data) == bool(g.adj.nnz and np.any(g.adj.data != 1))
    back = interop.from_pyg(data, name=g.name)
    _same(back, g)
    assert back.labels.dtype == np.int64 and back.features.dtype == np.float32


def test_pyg_edges_follow_source_to_target(pyg):
    from torch_geometric.data import Data
    import torch

    data = Data(edge_index=torch.tensor([[0, 1, 1], [1, 2, 2]]), num_nodes=4)
    g = interop.from_pyg(data)
    assert g.adj[0, 1] == 1 and g.adj[1, 0] == 0       # edge 0 -> 1 is adj[0, 1]
    assert g.adj[1, 2] == 1 and g.adj.nnz == 2         # duplicates collapse, as coalesce does
    assert g.num_nodes == 4                            # vertex 3 is isolated, not dropped
    w = Data(edge_index=torch.tensor([[0, 0], [1, 1]]), edge_weight=torch.tensor([2., 3.]),
             num_nodes=2)
    assert interop.from_pyg(w).adj[0, 1] == 5          # weighted duplicates add up


def test_pyg_shares_features_labels_and_masks(pyg):
    g = GRAPHS["undirected"]
    data = interop.to_pyg(g)
    assert data.x.data_ptr() == g.features.ctypes.data
    assert data.y.data_ptr() == g.labels.ctypes.data
    assert data.train_mask.data_ptr() == g.train_mask.ctypes.data
    back = interop.from_pyg(data)
    assert np.shares_memory(back.features, g.features)
    assert np.shares_memory(back.labels, g.labels)
    assert np.shares_memory(back.test_mask, g.test_mask)
    copied = interop.to_pyg(g, copy=True)
    assert copied.x.data_ptr() != g.features.ctypes.data


def test_pyg_masks_as_indices_multi_split_and_sparse_x(pyg):
    from torch_geometric.data import Data
    import torch

    ei = torch.tensor([[0, 1], [1, 0]])
    data = Data(edge_index=ei, num_nodes=3, train_mask=torch.tensor([0, 2]),
                val_mask=torch.tensor([[True, False], [False, True], [False, False]]),
                x=interop.to_torch_sparse(sp.identity(3, format="csr", dtype=np.float32)))
    with pytest.raises(ValueError, match="split=k"):
        interop.from_pyg(data)
    g = interop.from_pyg(data, split=1)
    assert g.train_mask.tolist() == [True, False, True]
    assert g.val_mask.tolist() == [False, True, False]
    assert sp.issparse(g.features) and (g.features != sp.identity(3)).nnz == 0
    sparse_back = interop.to_pyg(g)
    assert sparse_back.x.layout == torch.sparse_csr
    bad = Data(edge_index=torch.tensor([[0], [5]]), num_nodes=3)
    with pytest.raises(ValueError, match="outside 0..2"):
        interop.from_pyg(bad)
    assert interop.as_graph(data, split=0).val_mask.tolist() == [True, False, False]


# ------------------------------------------------------------------ optional imports
def test_import_spgnn_loads_no_optional_library():
    code = ("import sys, spgnn, spgnn.interop, spgnn.datasets; "
            "print([m for m in ('torch', 'torch_geometric', 'networkx') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("module, extra, call", [
    ("torch", "torch", lambda: interop.to_torch(np.ones(2))),
    ("networkx", "networkx", lambda: interop.to_networkx(GRAPHS["undirected"])),
    ("torch_geometric.data", "pyg", lambda: interop.to_pyg(GRAPHS["undirected"])),
])
def test_a_missing_library_names_its_extra(monkeypatch, module, extra, call):
    # None in sys.modules makes ``import module`` fail as if it were not installed
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingDependency, match=rf'pip install "spgnn\[{extra}\]"') as info:
        call()
    assert isinstance(info.value, ImportError)
