"""Issue 38, messages: a loader's error names the file, the key or line, and the problem.

Each case failed before with a message that named neither (``'shape' elements cannot
be negative``; ``could not convert string to float: np.str_('a')``; ``plan_gcn_3d: dims
needs two or more positive widths``; ``expected two integer vertex ids`` for a valid
id) or said "partly" for a dataset whose file fails its checksum.  In-process except
one ``train`` command that checks the one-line, no-traceback form.
"""

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.cli.datasets import cached_summary
from spgnn.errors import GraphFormatError, InputTooLarge
from spgnn.io import load_graph

pytestmark = pytest.mark.timeout(60)


def _npz(path, **extra):
    a = sp.csr_array(np.ones((4, 4)) - np.eye(4))
    np.savez(path, adj_data=a.data, adj_indices=a.indices, adj_indptr=a.indptr,
             adj_shape=np.array(a.shape), labels=np.arange(4) % 2, **extra)
    return path


@pytest.mark.parametrize("extra, words", [
    ({"features": np.zeros((4, 0), np.float32)}, ["'features'", "0 columns"]),
    ({"attr_data": np.zeros(0), "attr_indices": np.zeros(0, np.int64),
      "attr_indptr": np.zeros(5, np.int64), "attr_shape": np.array([4, 0])},
     ["'attr_shape'", "0 columns"]),
    ({"features": np.array([["a", "b"]] * 4)}, ["'features'", "strings", "must be numbers"]),
    ({"features": np.array([[b"a", b"b"]] * 4)}, ["'features'", "byte strings"]),
])
def test_npz_features_no_model_can_use(tmp_path, extra, words):
    path = _npz(tmp_path / "g.npz", **extra)
    with pytest.raises(GraphFormatError) as e:
        load_graph(path)
    assert str(e.value).startswith(f"{path}: ") and all(w in str(e.value) for w in words), e.value


@pytest.mark.parametrize("text, line", [
    ("%%MatrixMarket matrix coordinate pattern general\n-3 -3 0\n", 2),
    ("%%MatrixMarket matrix coordinate pattern general\n3 3 -1\n", 2),
    ("-3 -3 0\n", 1),
])
def test_mtx_negative_size_line(tmp_path, text, line):
    path = tmp_path / "neg.mtx"
    path.write_text(text)
    with pytest.raises(GraphFormatError, match=rf"neg.mtx:{line}: the size line 'rows cols nnz' "
                                               rf"must hold numbers >= 0"):
        load_graph(path)


def test_a_vertex_id_of_2_to_62_is_an_id(tmp_path):
    big = 2 ** 62
    path = tmp_path / "big.txt"
    path.write_text(f"0 1\n1 {big}\n{big} 2\n")
    with pytest.raises(InputTooLarge, match="--relabel"):       # not "expected two integers"
        load_graph(path)
    g = load_graph(path, relabel=True)
    assert g.num_nodes == 4 and sorted(np.asarray(g.node_ids).tolist()) == [0, 1, 2, big]
    mtx = tmp_path / "big.mtx"
    mtx.write_text(f"%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 {big}\n")
    with pytest.raises(GraphFormatError, match=rf"big.mtx:3: index outside 1..3: \(1, {big}\)"):
        load_graph(mtx)


@pytest.mark.parametrize("token", ["9223372036854775807", "9223372036854775808",
                                   "-9223372036854775808", "123456789012345678901234"])
def test_an_id_past_int64_names_the_line_and_the_range(tmp_path, token):
    path = tmp_path / "over.txt"
    path.write_text(f"0 1\n1 {token}\n")
    with pytest.raises(GraphFormatError, match=rf"over.txt:2: the integer {token} is out of "
                                               rf"range"):
        load_graph(path, relabel=True)


def test_datasets_cached_column_says_what_is_wrong():
    assert cached_summary({"a": "ok", "b": "ok"}) == "yes"
    assert cached_summary({"a": "missing", "b": "missing"}) == "no"
    assert cached_summary({"a": "ok", "b": "missing"}) == "1 of 2 files"
    assert cached_summary({"a": "ok", "b": "bad: b: sha256 differs"}) == "bad checksum: b"
    assert cached_summary({"a": "missing", "b": "partial"}) == "interrupted: b"


def test_train_on_a_string_feature_npz_is_one_line(tmp_path):
    path = _npz(tmp_path / "s.npz", features=np.array([["a", "b"]] * 4))
    proc = subprocess.run([sys.executable, "-m", "spgnn", "train", "--graph", str(path),
                           "--epochs", "1"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == [f"spgnn train: error: {path}: key 'features' holds strings (dtype <U1); "
                     f"features must be numbers"], proc.stderr


def test_demo_estimates_x_before_drawing_it_on_two_ranks():
    """Issue 38: ``demo --feat 1000000000`` was a MemoryError traceback and MPI_Abort on every
    rank; now one agreed line naming the option and the estimate, exit 2."""
    from spgnn.testing.mpi import run_mpi

    proc = run_mpi(["-m", "spgnn", "demo", "--feat", "1000000000"], 2, timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if "spgnn demo: error:" in ln]
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout
    assert "--feat 1,000,000,000 with --scale 12" in lines[0] and "needs about" in lines[0]
    assert "Traceback" not in proc.stdout and "Abort" not in proc.stdout, proc.stdout
