"""Named datasets: the real download path (urllib) against a local HTTP server.

The server (:class:`spgnn.testing.http_server.FileServer`, 127.0.0.1 only)
serves the shared data folder, whose layout the cache mirrors, so every
registry entry we hold locally is downloaded exactly as from its URL
(``mirror=``); it can corrupt, truncate and slow down files.  Nothing here
needs the internet.
"""

import hashlib
import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from spgnn import run_loopback
from spgnn.errors import ChecksumError, DownloadError, GraphFormatError
from spgnn.io import load_graph
from spgnn.io.datasets import (DATASETS, Dataset, dataset_status, fetch_dataset, get_dataset,
                               load_dataset, register_dataset)
from spgnn.io.download import RemoteFile, cache_dir, ensure_files, verify_file
from spgnn.io.ogb import load_ogb_node
from spgnn.testing.data import shared_data_path
from spgnn.testing.http_server import FileServer

CORA = [f.name for f in DATASETS["cora"].files]


@pytest.fixture
def shared():
    return shared_data_path()


@pytest.fixture
def server(shared):
    with FileServer(shared) as s:
        yield s


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".part"))


def test_download_verifies_and_places_every_file(tmp_path, server, shared):
    folder = fetch_dataset("cora", cache=tmp_path, mirror=server.url, offline=False,
                           progress=False)
    assert folder == tmp_path / "planetoid"
    for name in CORA:
        assert _sha(folder / name) == _sha(shared / "planetoid" / name)
    assert sorted(r[0] for r in server.gets()) == sorted(f"planetoid/{n}" for n in CORA)
    assert _leftovers(folder) == []
    g = load_dataset("cora", cache=tmp_path, offline=True)
    ref = load_graph(shared / "planetoid", name="cora")
    assert g.name == "cora" and (g.adj != ref.adj).nnz == 0
    assert np.array_equal(g.features, ref.features) and np.array_equal(g.labels, ref.labels)
    # a second fetch finds everything verified and asks the server nothing
    fetch_dataset("cora", cache=tmp_path, mirror=server.url, offline=False, progress=False)
    assert len(server.gets()) == len(CORA)
    assert set(dataset_status("cora", cache=tmp_path).values()) == {"ok"}


def test_load_graph_and_cache_dir_from_the_environment(tmp_path, server, monkeypatch):
    monkeypatch.setenv("SPGNN_DATA", str(tmp_path))
    monkeypatch.setenv("SPGNN_DATA_MIRROR", server.url)
    monkeypatch.setenv("SPGNN_OFFLINE", "0")
    assert cache_dir() == tmp_path
    g = load_graph("ego-facebook")
    assert (g.num_nodes, g.num_edges) == (4039, 88234)
    assert server.gets() == [("snap_facebook_combined/facebook_combined.txt.gz", None)]


def test_corrupted_file_raises_checksum_error_and_leaves_nothing(tmp_path, shared):
    bad = "planetoid/ind.cora.x"
    with FileServer(shared, corrupt={bad}) as s:
        with pytest.raises(ChecksumError) as info:
            fetch_dataset("cora", cache=tmp_path, mirror=s.url, offline=False, progress=False)
    msg = str(info.value)
    expected = get_dataset("cora").files[0].sha256
    assert "ind.cora.x" in msg and expected in msg and s.url in msg
    folder = tmp_path / "planetoid"
    assert not (folder / "ind.cora.x").exists() and _leftovers(folder) == []


def test_truncated_transfer_resumes_with_a_range_request(tmp_path, shared):
    rel = "planetoid/ind.cora.allx"
    with FileServer(shared, truncate={rel: (100_000, 1)}) as s:
        folder = fetch_dataset("cora", cache=tmp_path, mirror=s.url, offline=False,
                               progress=False)
    assert _sha(folder / "ind.cora.allx") == _sha(shared / rel)
    assert s.gets(rel) == [(rel, None), (rel, "bytes=100000-")]


def test_truncated_transfer_restarts_when_the_server_ignores_ranges(tmp_path, shared):
    rel = "planetoid/ind.cora.allx"
    with FileServer(shared, truncate={rel: (100_000, 1)}, ranges=False) as s:
        folder = fetch_dataset("cora", cache=tmp_path, mirror=s.url, offline=False,
                               progress=False)
    assert _sha(folder / "ind.cora.allx") == _sha(shared / rel)
    assert len(s.gets(rel)) == 2           # the second answer was a whole 200 response


def test_interrupted_run_keeps_the_part_and_the_next_run_resumes(tmp_path, shared):
    rel = "planetoid/ind.cora.allx"
    folder = tmp_path / "planetoid"
    with FileServer(shared, truncate={rel: (50_000, 1)}) as s:
        with pytest.raises(DownloadError, match="next run resumes") as info:
            fetch_dataset("cora", cache=tmp_path, mirror=s.url, offline=False, progress=False,
                          retries=0)
        assert "ind.cora.allx" in str(info.value)
        assert (folder / "ind.cora.allx.part").stat().st_size == 50_000
        assert not (folder / "ind.cora.allx").exists()      # never a half file under its name
        assert dataset_status("cora", cache=tmp_path)["ind.cora.allx"] == "partial"
        fetch_dataset("cora", cache=tmp_path, mirror=s.url, offline=False, progress=False)
    assert s.gets(rel)[-1] == (rel, "bytes=50000-")
    assert _sha(folder / "ind.cora.allx") == _sha(shared / rel)


def test_a_stale_part_that_fails_the_checksum_is_downloaded_again_from_scratch(tmp_path, shared):
    rel = "planetoid/ind.cora.graph"
    folder = tmp_path / "planetoid"
    folder.mkdir()
    (folder / "ind.cora.graph.part").write_bytes(b"not the start of the pickle")
    with FileServer(shared) as s:
        fetch_dataset("cora", cache=tmp_path, mirror=s.url, offline=False, progress=False)
    assert s.gets(rel) == [(rel, "bytes=27-"), (rel, None)]
    assert _sha(folder / "ind.cora.graph") == _sha(shared / rel)


def test_offline_error_says_which_file_to_place_where(tmp_path):
    with pytest.raises(DownloadError) as info:
        fetch_dataset("cora", cache=tmp_path, offline=True)
    msg = str(info.value)
    assert "8 file(s) missing" in msg and "SPGNN_OFFLINE" in msg
    for f in DATASETS["cora"].files:
        assert f.url in msg and str(tmp_path / "planetoid" / f.name) in msg and f.sha256 in msg


def test_unreachable_server_is_a_download_error_naming_the_files(tmp_path):
    with FileServer(tmp_path) as s:
        url = s.url
    with pytest.raises(DownloadError) as info:      # the port is closed now
        fetch_dataset("ego-facebook", cache=tmp_path / "c", mirror=url, offline=False,
                      progress=False, retries=0, timeout=5)
    assert "facebook_combined.txt.gz" in str(info.value) and "place them" in str(info.value)


def test_a_cached_file_that_changed_fails_its_checksum(tmp_path, server):
    folder = fetch_dataset("ego-facebook", cache=tmp_path, mirror=server.url, offline=False,
                           progress=False)
    path = folder / "facebook_combined.txt.gz"
    data = bytearray(path.read_bytes())
    data[-5] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match="sha256"):
        load_dataset("ego-facebook", cache=tmp_path, offline=True)


_RACE = """
import json, sys
from spgnn.io.datasets import fetch_dataset
folder = fetch_dataset("cora", cache=sys.argv[1], mirror=sys.argv[2], offline=False,
                       progress=False)
print(json.dumps(str(folder)))
"""


def test_two_processes_racing_download_once(tmp_path, shared):
    with FileServer(shared, delay=0.01) as s:
        procs = [subprocess.Popen([sys.executable, "-c", _RACE, str(tmp_path), s.url],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert json.loads(out) == str(tmp_path / "planetoid")
    # one GET per file in all: the second process waited on the lock, then verified
    assert sorted(r[0] for r in s.gets()) == sorted(f"planetoid/{n}" for n in CORA)
    for name in CORA:
        assert _sha(tmp_path / "planetoid" / name) == _sha(shared / "planetoid" / name)


def test_collective_fetch_downloads_on_rank_zero_only(tmp_path, server):
    def body(comm):
        return fetch_dataset("ego-facebook", comm=comm, cache=tmp_path, mirror=server.url,
                             offline=False, progress=False)

    folders = run_loopback(3, body)
    assert folders == [tmp_path / "snap_facebook_combined"] * 3
    assert len(server.gets()) == 1


def test_collective_fetch_raises_on_every_rank(tmp_path):
    def body(comm):
        try:
            fetch_dataset("ego-facebook", comm=comm, cache=tmp_path, offline=True)
        except DownloadError as exc:
            return type(exc).__name__, "facebook_combined.txt.gz" in str(exc)
        return None

    assert run_loopback(3, body) == [("DownloadError", True)] * 3


# ------------------------------------------------------------------ archives, no checksum
def _tiny_ogb_zip(path, edges=((0, 1), (1, 2), (2, 0), (3, 1))):
    import gzip

    def gz(text):
        return gzip.compress(text.encode())

    files = {
        "tiny/raw/edge.csv.gz": gz("".join(f"{u},{v}\n" for u, v in edges)),
        "tiny/raw/node-feat.csv.gz": gz("".join(f"{i}.5,{-i}\n" for i in range(4))),
        "tiny/raw/node-label.csv.gz": gz("0\n1\n0\n1\n"),
        "tiny/raw/num-node-list.csv.gz": gz("4\n"),
        "tiny/raw/num-edge-list.csv.gz": gz(f"{len(edges)}\n"),
        "tiny/split/time/train.csv.gz": gz("0\n1\n"),
        "tiny/split/time/valid.csv.gz": gz("2\n"),
        "tiny/split/time/test.csv.gz": gz("3\n"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)


@pytest.fixture
def tiny_dataset(monkeypatch):
    monkeypatch.setattr("spgnn.io.datasets.DATASETS", dict(DATASETS))
    return register_dataset(Dataset(
        "tiny-ogb", "tiny_ogb",
        (RemoteFile("tiny.zip", "https://example.invalid/tiny.zip", extract="tiny",
                    note="no checksum: verified by format"),),
        lambda f: load_ogb_node(f / "tiny"), "test", "https://example.invalid", "test",
        {"nodes": 4, "features": 2, "classes": 2, "train": 2, "val": 1, "test": 1}))


def test_unchecksummed_archive_is_extracted_and_checked_by_its_counts(tmp_path, tiny_dataset):
    _tiny_ogb_zip(tmp_path / "www" / "tiny_ogb" / "tiny.zip")
    assert tiny_dataset.verified_by == "format" and not tiny_dataset.checksummed
    with FileServer(tmp_path / "www") as s:
        g = load_dataset("tiny-ogb", cache=tmp_path / "cache", mirror=s.url, offline=False,
                         progress=False)
    assert g.num_nodes == 4 and g.adj.nnz == 4 and not g.is_symmetric()
    assert g.features[:, 0].tolist() == [0.5, 1.5, 2.5, 3.5]
    assert g.labels.tolist() == [0, 1, 0, 1] and g.train_mask.tolist() == [1, 1, 0, 0]
    assert (tmp_path / "cache" / "tiny_ogb" / "tiny" / "raw").is_dir()


def test_unchecksummed_archive_with_other_counts_is_refused(tmp_path, tiny_dataset):
    _tiny_ogb_zip(tmp_path / "www" / "tiny_ogb" / "tiny.zip")
    register_dataset(Dataset(**{**tiny_dataset.__dict__, "counts": {"nodes": 5}}))
    with FileServer(tmp_path / "www") as s:
        with pytest.raises(GraphFormatError, match=r"nodes 4 \(published: 5\)"):
            load_dataset("tiny-ogb", cache=tmp_path / "cache", mirror=s.url, offline=False,
                         progress=False)


def test_ogb_loader_catches_a_truncated_edge_file(tmp_path):
    _tiny_ogb_zip(tmp_path / "t.zip")
    with zipfile.ZipFile(tmp_path / "t.zip") as z:
        z.extractall(tmp_path)
    import gzip
    (tmp_path / "tiny" / "raw" / "edge.csv.gz").write_bytes(gzip.compress(b"0,1\n1,2\n"))
    with pytest.raises(GraphFormatError, match="num-edge-list says 4"):
        load_ogb_node(tmp_path / "tiny")


def test_archive_members_outside_the_folder_are_refused(tmp_path):
    zpath = tmp_path / "www" / "evil" / "evil.zip"
    zpath.parent.mkdir(parents=True)
    with zipfile.ZipFile(zpath, "w") as z:
        z.writestr("../escape.txt", "x")
    remote = RemoteFile("evil.zip", "https://example.invalid/evil.zip", extract="evil")
    with FileServer(tmp_path / "www") as s:
        with pytest.raises(ChecksumError, match="refusing the archive member"):
            ensure_files("evil", "evil", [remote], cache=tmp_path / "cache", mirror=s.url,
                         offline=False, progress=False)
    assert not (tmp_path / "cache" / "escape.txt").exists()


def test_git_blob_ids_verify_files_without_a_sha256(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"hello\n")
    ok = RemoteFile("f.bin", "u", git_blob="ce013625030ba8dba906f756967f9e9ca394464a")
    verify_file(path, ok)                      # `git hash-object` of "hello\n"
    with pytest.raises(ChecksumError, match="git blob id"):
        verify_file(path, RemoteFile("f.bin", "u", git_blob="0" * 40))
    with pytest.raises(ChecksumError, match="6 bytes"):
        verify_file(path, RemoteFile("f.bin", "u", size=7))


def test_progress_bar_is_drawn_on_stderr(tmp_path, server, capsys):
    fetch_dataset("ego-facebook", cache=tmp_path, mirror=server.url, offline=False,
                  progress=True)
    assert "facebook_combined.txt.gz" in capsys.readouterr().err
