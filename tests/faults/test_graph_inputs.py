"""Issue 38: the graph command's algorithms and its inputs say what they did, or refuse.

* PageRank follows the edge weights (networkx's weighted walk) and refuses a negative one;
  it refuses an ``alpha`` outside (0, 1) and a ``tol`` that is not a finite
  number > 0 (a NaN tolerance ran to ``max_iter`` and printed a normal result,
  ``alpha=1.5`` printed ranks of 1e17), and reports ``converged`` and the final
  ``residual``;
* SSSP refuses negative weights (Bellman-Ford looped forever on a negative cycle) and
  stops after n rounds whatever happens;
* a MatrixMarket entry of weight 0 is no edge (dropped, with a warning, and never
  counted as one), and a weight the float32 adjacency cannot hold exactly warns;
* reading a small file does not allocate the input limit up front (every text graph
  failed with MemoryError under ``ulimit -v``);
* a checkpoint whose history is nested past the recursion limit, or null, is skipped
  like a corrupt one (the previous checkpoint is used);
* an unknown dataset name is one error naming the closest known one.

In-process (a one-rank loopback communicator) except one command run; tiny inputs.
"""

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn import DistSparseMatrix, Layout, grid_1d, run_loopback
from spgnn import algorithms as G
from spgnn.checkpoint import load_checkpoint, load_training_state, save_checkpoint
from spgnn.errors import (CheckpointError, InvalidWeight, SpgnnDataWarning, SpgnnError,
                          UnknownDataset)
from spgnn.io import load_graph

pytestmark = pytest.mark.timeout(60)   # the old SSSP looped forever: a hang fails fast


def _on_one_rank(adj, fn):
    def body(comm):
        A = DistSparseMatrix.from_global(sp.csr_array(adj, dtype=np.float64), grid_1d(comm),
                                         Layout("row"), backend="numpy", check_same=False)
        return fn(A)
    return run_loopback(1, body, timeout=30)[0]


def _path(n):
    """The undirected path 0 - 1 - ... - n-1 with unit weights."""
    a = sp.diags_array([np.ones(n - 1), np.ones(n - 1)], offsets=[-1, 1], shape=(n, n))
    return sp.csr_array(a)


# -- PageRank -------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, name", [
    ({"alpha": 1.5}, "alpha"), ({"alpha": 0.0}, "alpha"), ({"alpha": float("nan")}, "alpha"),
    ({"tol": float("nan")}, "tol"), ({"tol": 0.0}, "tol"), ({"tol": float("inf")}, "tol"),
    ({"tol": -1e-9}, "tol"), ({"max_iter": 0}, "max_iter"), ({"max_iter": 2.5}, "max_iter"),
])
def test_pagerank_refuses_options_no_run_can_use(kwargs, name):
    # checked before the matrix is even looked at: every rank raises it before a collective
    with pytest.raises(ValueError, match=rf"pagerank: {name}\b"):
        G.pagerank(None, **kwargs)


def test_pagerank_reports_convergence_and_residual():
    def run(**kw):
        return lambda A: (lambda r: (r, r.rank.to_global()))(G.pagerank(A, **kw))
    adj = _path(5)
    done, rank = _on_one_rank(adj, run(tol=1e-10))
    cut, _ = _on_one_rank(adj, run(tol=1e-10, max_iter=2))
    assert done.converged and done.residual < 1e-10 and done.iterations < 200
    assert not cut.converged and cut.iterations == 2 and cut.residual > 1e-10
    assert abs(float(np.sum(rank)) - 1.0) < 1e-9


def test_pagerank_follows_the_weights_and_refuses_negative_ones():
    """It divided the weighted sum by the unweighted out-degree (weights -1 diverged to ranks of
    1e70 with rc 0); now the weighted walk of networkx, and a negative weight is refused."""
    import networkx as nx

    a = sp.random(40, 40, density=0.15, random_state=3, format="csr", dtype=np.float64)
    a.data = np.round(a.data * 4) + 1                  # weights 1..5
    res = _on_one_rank(a, lambda A: (lambda r: r.rank.to_global())(G.pagerank(A, tol=1e-13)))
    ref = nx.pagerank(nx.from_scipy_sparse_array(a, create_using=nx.DiGraph), tol=1e-14,
                      max_iter=1000)
    np.testing.assert_allclose(np.ravel(res), [ref[v] for v in range(40)], rtol=1e-7)
    a.data[5] = -1.0
    with pytest.raises(InvalidWeight, match=r"pagerank: weights must be non-negative.*-1"):
        _on_one_rank(a, lambda A: G.pagerank(A))


def test_graph_command_reports_convergence(tmp_path):
    f = tmp_path / "path.txt"
    f.write_text("0 1\n1 2\n2 3\n")
    proc = subprocess.run([sys.executable, "-m", "spgnn", "graph", "pagerank", "--graph", str(f),
                           "--max-iter", "3", "--json", "--backend", "numpy"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["iterations"] == 3 and out["converged"] is False and out["residual"] > 1e-9


# -- SSSP -----------------------------------------------------------------------------------
_NEGATIVE = ("%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n2 1 1\n3 2 -1\n3 1 5\n")


def test_sssp_refuses_a_negative_weight(tmp_path):
    f = tmp_path / "neg.mtx"
    f.write_text(_NEGATIVE)
    from spgnn.io import load_adjacency
    adj, _ = load_adjacency(str(f))
    with pytest.raises(InvalidWeight, match=r"sssp: weights must be non-negative.*-1"):
        _on_one_rank(adj, lambda A: G.sssp(A, 0))


def test_sssp_stops_after_n_rounds(monkeypatch):
    # past the precondition (as if the check were fooled), the negative cycle 1 - 2 is
    # cut off after n rounds instead of relaxing forever
    monkeypatch.setattr(G, "reduce_scalar", lambda A, monoid="plus": 0.0)
    adj = sp.csr_array(np.array([[0, 1, 5], [1, 0, -1], [5, -1, 0]], dtype=np.float64))
    with pytest.raises(InvalidWeight, match="after 3 rounds"):
        _on_one_rank(adj, lambda A: G.sssp(A, 0))


def test_sssp_with_zero_and_positive_weights_still_works():
    adj = sp.csr_array(np.array([[0, 2, 0], [2, 0, 3], [0, 3, 0]], dtype=np.float64))
    d = _on_one_rank(adj, lambda A: G.sssp(A, 0).to_global().toarray()[:, 0])
    assert d.tolist() == [0.0, 2.0, 5.0]


# -- MatrixMarket values --------------------------------------------------------------------
def test_explicit_zeros_are_no_edges(tmp_path):
    f = tmp_path / "z.mtx"
    f.write_text("%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 2 0\n2 3 0\n3 1 4\n")
    with pytest.warns(SpgnnDataWarning, match=r"z.mtx: 4 stored entries of weight 0 "
                                              r"\(first on line 3\) dropped"):
        g = load_graph(str(f))
    assert g.num_edges == 1 and g.adj.nnz == 2
    assert "1 undirected edges (2 stored entries" in g.summary()


def test_summary_does_not_count_stored_zeros_as_edges():
    from spgnn.io import Graph
    a = sp.csr_array((np.array([0.0, 0.0, 1.0, 1.0]), (np.array([0, 1, 1, 2]),
                                                       np.array([1, 0, 2, 1]))), shape=(3, 3))
    g = Graph(a)
    assert g.num_edges == 1
    assert "1 undirected edges (4 stored entries, 0 self-loops, 2 stored zeros" in g.summary()


def test_integer_weights_the_adjacency_cannot_hold_warn(tmp_path):
    f = tmp_path / "big.mtx"
    f.write_text("%%MatrixMarket matrix coordinate integer general\n3 3 3\n1 2 7\n"
                 "2 3 9007199254740993\n3 1 16777217\n")
    with pytest.warns(SpgnnDataWarning, match=r"big.mtx:4: 2 weights not held exactly"):
        load_graph(str(f))
    small = tmp_path / "small.mtx"
    small.write_text("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 2 16777216\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_graph(str(small)).adj.data.tolist() == [16777216.0]


# -- reading files --------------------------------------------------------------------------
def test_a_small_file_is_read_without_allocating_the_limit(tmp_path, monkeypatch):
    # a limit far past any address space stands for any ``ulimit -v`` below the limit:
    # reading ``limit + 1`` bytes up front failed with MemoryError even for 2 lines
    monkeypatch.setenv("SPGNN_MAX_INPUT_BYTES", str(1 << 50))
    f = tmp_path / "two.txt"
    f.write_text("0 1\n1 2\n")
    assert load_graph(str(f)).num_edges == 2
    monkeypatch.setenv("SPGNN_MAX_INPUT_BYTES", "4")       # the limit still holds
    with pytest.raises(SpgnnError, match="more than the 4 bytes allowed"):
        load_graph(str(f))


# -- checkpoints ----------------------------------------------------------------------------
def _state(history):
    return {"format": "fmt", "config": {"k": 1}, "epoch": 2, "trainer": {"w": np.ones(2)},
            "history": history}


def _rewrite_history(path, text):
    """Replace the newest checkpoint's history record by ``text`` (JSON), as an editor would."""
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    record = json.loads(arrays["__structure__"].tobytes().decode())
    record["state"]["history"] = "@HISTORY@"
    raw = json.dumps(record).replace('"@HISTORY@"', text).encode()
    arrays["__structure__"] = np.frombuffer(raw, dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


@pytest.mark.parametrize("history", ["[" * 100000 + "]" * 100000, "null"])
def test_a_malformed_history_falls_back_to_the_previous_checkpoint(tmp_path, history):
    save_checkpoint(tmp_path, _state([[1.0, 0.5, 10]]), step=1)
    newest = save_checkpoint(tmp_path, _state([[1.0, 0.5, 10], [0.9, 0.6, 10]]), step=2)
    _rewrite_history(newest, history)
    state = run_loopback(1, lambda comm: load_training_state(comm, tmp_path, "fmt", {"k": 1}),
                         timeout=30)[0]
    assert state["history"] == [[1.0, 0.5, 10]]          # the previous checkpoint
    with pytest.raises(CheckpointError, match=newest.name):   # alone: an error naming it
        run_loopback(1, lambda comm: load_training_state(comm, newest, "fmt", {"k": 1}),
                     timeout=30)


# -- datasets -------------------------------------------------------------------------------
def test_an_unknown_dataset_names_the_closest():
    from spgnn.io.datasets import get_dataset
    with pytest.raises(UnknownDataset, match=r"unknown dataset 'coraa' \(did you mean 'cora'\?\)"
                                             r"; the registry has .*citeseer") as info:
        get_dataset("coraa")
    assert isinstance(info.value, KeyError) and isinstance(info.value, ValueError)
