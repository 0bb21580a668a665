"""The dataset registry's entries, and synthetic features and labels for bare graphs."""

import hashlib
import re

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.io import Graph, load_graph, rmat
from spgnn.io.datasets import DATASETS, check_counts, load_dataset
from spgnn.io.synthetic import (check_feature_spec, check_label_spec, synthetic_features,
                                synthetic_labels, with_synthetic)
from spgnn.testing.data import shared_data_path

REQUIRED = {"cora", "citeseer", "pubmed", "musae-facebook", "musae-github", "chameleon",
            "squirrel", "crocodile", "ego-twitter", "soc-slashdot0902", "email-enron",
            "ogbn-arxiv", "luxembourg-osm", "roadnet-ca"}


def test_registry_holds_the_datasets_the_issue_names():
    assert REQUIRED <= set(DATASETS)


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_entry_has_a_source_and_says_how_it_is_verified(name):
    d = DATASETS[name]
    assert d.homepage.startswith("https://") and d.license and d.description
    assert d.counts.get("nodes", 0) > 0
    for f in d.files:
        assert f.url.startswith("https://"), f.url
        assert f.note, f"{name}/{f.name}: say where the checksum comes from or why it is missing"
        if f.sha256 is not None:
            assert re.fullmatch(r"[0-9a-f]{64}", f.sha256) and f.size > 0
        elif f.git_blob is not None:
            assert re.fullmatch(r"[0-9a-f]{40}", f.git_blob)
            assert "SHA-256 not established" in f.note
        else:                                  # nothing to check the bytes against
            assert "verified by format" in f.note and not d.checksummed
            assert len(d.counts) >= 2


@pytest.mark.parametrize("name", sorted(n for n, d in DATASETS.items() if d.checksummed))
def test_local_copies_match_the_registry(name):
    """Every registry file the shared data folder holds has the registry's SHA-256 and size,
    and the graph it loads has the registry's counts."""
    d = DATASETS[name]
    folder = shared_data_path(d.folder)
    present = [f for f in d.files if (folder / f.name).is_file()]
    for f in present:
        data = (folder / f.name).read_bytes()
        if f.sha256:
            assert (len(data), hashlib.sha256(data).hexdigest()) == (f.size, f.sha256)
        else:
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            assert blob == f.git_blob
    if len(present) < len(d.files):
        pytest.skip(f"{name}: checked {len(present)} file(s); the shared data folder lacks "
                    f"{sorted({f.name for f in d.files} - {f.name for f in present})}")
    check_counts(d, d.loader(folder))


def test_shared_data_folder_works_as_an_offline_cache(monkeypatch):
    monkeypatch.setenv("SPGNN_DATA", str(shared_data_path()))
    monkeypatch.setenv("SPGNN_OFFLINE", "1")
    g = load_graph("citeseer")
    assert (g.name, g.num_nodes, g.num_edges) == ("citeseer", 3327, 4676)


def test_an_existing_path_wins_over_a_dataset_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cora").mkdir()
    with pytest.raises(Exception, match="no Planetoid or MUSAE files"):
        load_graph("cora")


def test_unknown_name_lists_the_ways_to_name_a_graph():
    with pytest.raises(FileNotFoundError, match="dataset name"):
        load_graph("no-such-dataset")


# ------------------------------------------------------------------ synthetic
def _graph():
    return Graph(adj=rmat(8, 4, seed=1), name="bare")


def test_random_features_are_seeded_uniform_and_non_negative():
    g = _graph()
    x = synthetic_features(g.adj, "random:7")
    assert x.shape == (256, 7) and x.dtype == np.float32
    assert x.min() >= 0 and x.max() < 1
    assert np.array_equal(x, synthetic_features(g.adj, "random:7:0"))
    assert not np.array_equal(x, synthetic_features(g.adj, "random:7:1"))


def test_degree_features_one_hot_the_log_binned_degree():
    # a star: the centre has degree 5, leaves 1, vertex 6 is isolated, 0 has a self-loop
    rows = [0, 0, 0, 0, 0, 0]
    cols = [0, 1, 2, 3, 4, 5]
    adj = sp.csr_array((np.ones(6), (rows, cols)), shape=(7, 7))
    x = synthetic_features(Graph(adj=adj).symmetrize().adj, "degree")
    assert sp.issparse(x) and x.shape == (7, 3)          # floor(log2(1 + 5)) = 2
    assert x.toarray().argmax(axis=1).tolist() == [2, 1, 1, 1, 1, 1, 0]
    assert x.sum(axis=1).tolist() == [1] * 7


def test_onehot_features_are_the_identity():
    x = synthetic_features(_graph().adj, "onehot")
    assert sp.issparse(x) and (x != sp.identity(256, format="csr")).nnz == 0


def test_random_labels_cover_the_classes_and_are_seeded():
    y = synthetic_labels(1000, "random:5:3")
    assert y.dtype == np.int64 and set(y.tolist()) == set(range(5))
    assert np.array_equal(y, synthetic_labels(1000, "random:5:3"))


@pytest.mark.parametrize("spec", ["random", "random:0", "random:x", "gauss:4", "degree:3", 7])
def test_bad_feature_specs_are_refused(spec):
    with pytest.raises(ValueError, match="random:F"):
        check_feature_spec(spec)


@pytest.mark.parametrize("spec", ["random", "random:0", "onehot", None])
def test_bad_label_specs_are_refused(spec):
    with pytest.raises(ValueError, match="random:C"):
        check_label_spec(spec)


def test_with_synthetic_replaces_only_what_is_asked():
    g = Graph(adj=rmat(6, 4), features=np.ones((64, 3)), labels=np.zeros(64, int),
              class_names=("a",))
    h = with_synthetic(g, labels="random:3")
    assert h.features is g.features and h.class_names is None and h.num_classes == 3
    assert with_synthetic(g) is g


def test_training_a_bare_graph_names_the_options():
    from spgnn import run_loopback
    from spgnn.gnn import DistGraph

    def body(comm):
        DistGraph.from_graph(_graph(), comm)

    with pytest.raises(ValueError, match="--features random:F .* --labels random:C"):
        run_loopback(1, body)
