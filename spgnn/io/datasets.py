"""Named datasets: a registry of public graphs with their sources and checksums.

``load_graph("cora")`` and every ``--graph cora`` go through here: the name
is looked up in :data:`DATASETS`, its files are made present and verified in
the cache (:mod:`spgnn.io.download`: ``SPGNN_DATA`` or the user cache
directory), and the dataset's loader reads them.

Each :class:`Dataset` names its files (:class:`~spgnn.io.download.RemoteFile`:
canonical URL, size, SHA-256), the cache folder they live in (the same
folder names as the project's shared data folder), the loader, the upstream
page and licence, and the counts a correct copy has.  Files whose SHA-256 is
in the registry were hashed from the exact bytes at the pinned URL; where no
SHA-256 could be established the entry says so (``RemoteFile.note``): then
the git blob id of the pinned repository verifies the bytes, or, for files
published without any checksum (ogbn-arxiv, roadNet-CA), the loaded graph
must have the published counts (:attr:`Dataset.counts`) -- verification by
format, clearly weaker, and listed as such by ``python -m spgnn datasets``.

Collective use: :func:`fetch_dataset` with a communicator downloads on rank
0 only while the other ranks wait, and raises the same error on every rank.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import GraphFormatError, UnknownDataset
from .download import RemoteFile, cache_dir, ensure_files, file_status
from .graph import Graph
from .jlg import load_jlg
from .mtx import load_matrix_market
from .musae import load_musae
from .ogb import load_ogb_node
from .planetoid import load_planetoid
from .snap import load_snap_edgelist

__all__ = ["Dataset", "DATASETS", "dataset_names", "get_dataset", "fetch_dataset",
           "load_dataset", "dataset_status", "register_dataset", "check_counts"]


@dataclass(frozen=True)
class Dataset:
    """One named graph of the registry.

    ``counts`` holds what the loaded graph must show (``nodes``, ``edges`` as
    :attr:`Graph.num_edges` counts them, ``features``, ``classes``, ``train``
    / ``val`` / ``test``); they are checked after loading whenever a file has
    no checksum, and by the test suite for every dataset it can read.
    """

    name: str
    folder: str
    files: tuple
    loader: Callable[[Path], Graph]
    description: str
    homepage: str
    license: str
    counts: dict = field(default_factory=dict)

    @property
    def checksummed(self) -> bool:
        """Whether every file is verified by a checksum (SHA-256 or git blob id)."""
        return all(f.verified_by in ("sha256", "git-blob-sha1") for f in self.files)

    @property
    def verified_by(self) -> str:
        """The weakest verification among the files."""
        order = ("sha256", "git-blob-sha1", "size", "format")
        return max((f.verified_by for f in self.files), key=order.index)

    @property
    def size(self) -> int | None:
        """Bytes to download, when every size is published."""
        sizes = [f.size for f in self.files]
        return None if None in sizes else sum(sizes)


def _gh(repo, commit, path):
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


# ------------------------------------------------------------------ the registry
_PLANETOID = ("kimiyoung/planetoid", "af6abf468a772cc055bec88c52e4d6f51b7c37e3")
_PLANETOID_NOTE = ("SHA-256 of the blob at kimiyoung/planetoid@af6abf4 (the files PyG's "
                   "Planetoid downloads; byte-identical to tkipf/gcn's copies)")
_PLANETOID_FILES = {
    "cora": {
        "x": (22119, "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab"),
        "y": (4054, "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1"),
        "tx": (148025, "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a"),
        "ty": (28135, "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad"),
        "allx": (257305, "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543"),
        "ally": (47959, "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71"),
        "graph": (59847, "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d"),
        "test.index": (5000, "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875"),
    },
    "citeseer": {
        "x": (31087, "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6"),
        "y": (3014, "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924"),
        "tx": (260321, "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21"),
        "ty": (24135, "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce"),
        "allx": (595021, "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668"),
        "ally": (55623, "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95"),
        "graph": (61987, "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7"),
        "test.index": (5000, "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4"),
    },
    "pubmed": {
        "x": (23172, "fbe9cb5c47200d1b7769a26e579be3b7130b556831f9d850e77c4c74f2599b33"),
        "y": (854, "e6c807633307a07ed659249006536a147c7999c797f11a2560752990181b41b3"),
        "tx": (405505, "4eb5f5d0f30f26497eb0ac6ac9719d09c67e284f1ed0385c93f3ef27a671da3d"),
        "ty": (12135, "ee2e0d4819d9fbcc403689c3bf2e49face401b605932f093bc58ab6461130fdd"),
        # the one blob no copy reachable from here holds: verified by its git id
        "allx": (None, None, "3b86bccf08111c37c632a9dd8ab63db25ea76361"),
        "ally": (224739, "0c37bbe3b5014ec365e9d393cf4791925e5ed94fb194305d74f064a8d7b50f0e"),
        "graph": (471808, "5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9"),
        "test.index": (6000, "b101d421688bbaecbd82e8a18f1e282378d6830f3a37666f28ebc47f844341b5"),
    },
}


def _planetoid_files(name):
    out = []
    for part, spec in _PLANETOID_FILES[name].items():
        fname = f"ind.{name}.{part}"
        url = _gh(*_PLANETOID, f"data/{fname}")
        if len(spec) == 3:
            out.append(RemoteFile(fname, url, size=None, git_blob=spec[2],
                                  note="SHA-256 not established: the blob is absent from every "
                                       "copy reachable when the registry was written; verified "
                                       "by its git blob id in kimiyoung/planetoid@af6abf4"))
        else:
            out.append(RemoteFile(fname, url, size=spec[0], sha256=spec[1], note=_PLANETOID_NOTE))
    return tuple(out)


_MUSAE = ("benedekrozemberczki/datasets", "dd4394c41c929dfd93688458be1a4f113e4f9e39")
_MUSAE_NOTE = "SHA-256 of the blob at benedekrozemberczki/datasets@dd4394c"
_MUSAE_BLOB_NOTE = ("SHA-256 not established (the blob is absent from every copy reachable when "
                    "the registry was written); verified by its git blob id in "
                    "benedekrozemberczki/datasets@dd4394c")


def _musae(path, size, sha256=None, git_blob=None):
    return RemoteFile(path.rsplit("/", 1)[1], _gh(*_MUSAE, path), size=size, sha256=sha256,
                      git_blob=git_blob, note=_MUSAE_NOTE if sha256 else _MUSAE_BLOB_NOTE)


_JULIA = ("JuliaGraphs/SNAPDatasets.jl", "dadd14a69b908d3dfc824d7c9f8c04f6fda72e59")
_DOWNEY = ("AllenDowney/ProbablyOverthinkingIt", "3059bb1925250ef2d53a71da22785f5f022678fb")
_ENRON = ("jongwook/graphdb-benchmarks", "68f79fe30d1bffb32998a19864a1b2ff66c0d117")
_GRAPHDATA = ("fahaizhong/graphdata", "1800816d861ea15a37281e19a28b2d1cf7a7c633")


def _pinned(repo_commit, path, size, sha256):
    repo = repo_commit[0]
    return RemoteFile(path.rsplit("/", 1)[-1], _gh(*repo_commit, path), size=size, sha256=sha256,
                      note=f"SHA-256 of the blob at {repo}@{repo_commit[1][:7]}")


_SNAP = "https://snap.stanford.edu/data/"
_SNAP_LICENSE = "SNAP: research use; cite the SNAP collection and the original paper"
_CITE_MUSAE = "MIT (benedekrozemberczki/datasets); cite Rozemberczki et al., MUSAE (2021)"


def _planetoid_dataset(name, title, counts):
    return Dataset(
        name=name, folder="planetoid", files=_planetoid_files(name),
        loader=lambda folder, n=name: load_planetoid(folder, n),
        description=f"{title} citation graph, Planetoid split (Yang et al. 2016; Kipf & Welling)",
        homepage="https://github.com/kimiyoung/planetoid",
        license="MIT (kimiyoung/planetoid); LINQS data, cite Sen et al. 2008",
        counts=counts)


def _musae_dataset(name, folder, prefix, files, description, counts):
    return Dataset(name=name, folder=folder, files=tuple(files),
                   loader=lambda f, p=prefix: load_musae(f, name=p),
                   description=description,
                   homepage="https://snap.stanford.edu/data/" + {
                       "facebook": "facebook-large-page-page-network.html",
                       "git": "github-social.html"}.get(prefix, "wikipedia-article-networks.html"),
                   license=_CITE_MUSAE, counts=counts)


def _snap_dataset(name, folder, remote, loader, description, page, counts):
    return Dataset(name=name, folder=folder, files=(remote,), loader=loader,
                   description=description, homepage=_SNAP + page, license=_SNAP_LICENSE,
                   counts=counts)


def _builtin():
    ds = [
        _planetoid_dataset("cora", "Cora", {"nodes": 2708, "edges": 5278, "features": 1433,
                                            "classes": 7, "train": 140, "val": 500,
                                            "test": 1000}),
        _planetoid_dataset("citeseer", "CiteSeer", {"nodes": 3327, "edges": 4676,
                                                    "features": 3703, "classes": 6, "train": 120,
                                                    "val": 500, "test": 1000}),
        _planetoid_dataset("pubmed", "PubMed", {"nodes": 19717, "features": 500, "classes": 3,
                                                "train": 60, "val": 500, "test": 1000}),
        _musae_dataset("musae-facebook", "musae_facebook", "facebook", [
            _musae("facebook_large/facebook_edges.csv", 1882610,
                   "7c50d8f02a75cc0829577814a1fc14535164daa38d79c3612340c9e9cdbd4022"),
            _musae("facebook_large/facebook_features.json", 2088766,
                   "ea870537646a93642a0008d38aa9bfeff02018070ba97b1f3f469d9622626436"),
            _musae("facebook_large/facebook_target.csv", 1177912,
                   "7bd96eafea3c2ca40f44bfa9e73642194696c21e38c7b29ed409c32ad14075cd")],
            "Facebook page-page network (MUSAE): 4 page types, sparse binary features",
            {"nodes": 22470, "edges": 171002, "features": 4714, "classes": 4}),
        _musae_dataset("musae-github", "musae_github", "git", [
            _musae("git_web_ml/git_edges.csv", 3306139,
                   "34c57382246949d1b3b7fa641a8532672001ecae8e9558f0b3c113cc035bd781"),
            _musae("git_web_ml/git_features.json", None,
                   git_blob="33a611fd401ef2e17bdbaabd0c63bce3bc4f9817"),
            _musae("git_web_ml/git_target.csv", 676528,
                   "3a8582f0c55d6f605df5f45bde28a90561be9517b40226c5e6bbce253679906a")],
            "GitHub developer network (MUSAE): web vs machine-learning developers",
            {"nodes": 37700, "edges": 289003, "classes": 2}),
    ]
    wiki = {
        "chameleon": ((332440, "b90d671846530ea7c0f6f6d0e3be98eb512ecd8e9741811940fe4029d991b266"),
                      (298249, "a958c2158cb81bb05cc01f5605ffb3449a7b20b389c8f1e94a0da61dbed6bdbe"),
                      (21263, "5816b4731cbd156738095550d1f6e37caf6f4dabe1d660c035156408ae6bae43"),
                      {"nodes": 2277, "edges": 31421, "features": 3132}),
        "squirrel": ((2115909, "574b9d083635377c368e9431a29121773500f57edb8b4602f69544e6b5fe0da8"),
                     (827671, "34512ff7981f36811d830d6bf5c7116a671f40e3210f26a276d9792001acffc0"),
                     (52916, "0933f58cf0469eda904e27442eabeda04f0f27e8e1863b76dad144d4404fdd3f"),
                     {"nodes": 5201, "edges": 198493, "features": 3148}),
        "crocodile": ((1873093, "92f4fe840f5ef79f85364e3678bbc909d0c151e0ff8d8328854b602d998f2d22"),
                      (None, None, "0c68f0cfb24216ab860818c492c22d325a07194b"),
                      (111218, "f83d79b3c6979639475d90fb5e2c969d2c21b64b068abc19e57f93c8fedfef1d"),
                      {"nodes": 11631, "edges": 170918}),
    }
    for w, (edges, feats, target, counts) in wiki.items():
        base = f"wikipedia/{w}/{w}"
        ds.append(_musae_dataset(w, "wikipedia_musae", w, [
            _musae(f"{base}_edges.csv", *edges),
            _musae(f"{base}_features.json", *feats) if len(feats) == 2 else
            _musae(f"{base}_features.json", None, git_blob=feats[2]),
            _musae(f"{base}_target.csv", *target)],
            f"Wikipedia {w} article network (MUSAE): monthly traffic target (bin it to classify)",
            counts))
    ds += [
        _snap_dataset("ego-twitter", "snap_ego_twitter",
                      _pinned(_JULIA, "data/ego-twitter/ego-twitter-undirected.jlg", 3366507,
                              "7f81dda501ad839152246ff328db8108d84b9646534a7236726e8f7e62ef6d11"),
                      lambda f: load_jlg(f / "ego-twitter-undirected.jlg", name="ego-twitter"),
                      "SNAP ego-Twitter, undirected (JuliaGraphs LG copy)", "ego-Twitter.html",
                      {"nodes": 81306, "edges": 1342310}),
        _snap_dataset("soc-slashdot0902", "snap_soc_slashdot0902",
                      _pinned(_DOWNEY, "soc-Slashdot0902.txt.gz", 3246522,
                              "65072f0a2d98a444967bf3b8379a87e03292f2f9f8924f4fe470ddd047c95553"),
                      lambda f: load_snap_edgelist(f / "soc-Slashdot0902.txt.gz", directed=True,
                                                   name="soc-slashdot0902"),
                      "SNAP soc-Slashdot0902, directed (the SNAP file)", "soc-Slashdot0902.html",
                      {"nodes": 82168, "edges": 948464}),
        _snap_dataset("email-enron", "snap_email_enron",
                      _pinned(_ENRON, "data/email-Enron.txt.gz", 1054970,
                              "e4611471ed181699b36e2aafc313e077fb25d16ed67ec5a81591eb8d8b40a5bc"),
                      lambda f: load_snap_edgelist(f / "email-Enron.txt.gz", name="email-enron"),
                      "SNAP email-Enron (the SNAP file)", "email-Enron.html",
                      {"nodes": 36692, "edges": 183831}),
        _snap_dataset("ego-facebook", "snap_facebook_combined",
                      _pinned(_DOWNEY, "facebook_combined.txt.gz", 218575,
                              "7cc432d08910b3a940ce90f7da94c13aaf048b04724eafcdf3050b28acc49daf"),
                      lambda f: load_snap_edgelist(f / "facebook_combined.txt.gz",
                                                   name="ego-facebook"),
                      "SNAP ego-Facebook, facebook_combined (the SNAP file)", "ego-Facebook.html",
                      {"nodes": 4039, "edges": 88234}),
        _snap_dataset("ca-astroph", "snap_ca_astroph",
                      _pinned(_JULIA, "data/ca-astroph/astro-ph-cc1.jlg", 561920,
                              "f29be53e9f5e66a87fbb0e202515987f449d7b3e26559004bf9be06487a21278"),
                      lambda f: load_jlg(f / "astro-ph-cc1.jlg", name="ca-astroph"),
                      "SNAP ca-AstroPh, largest connected component (JuliaGraphs LG copy)",
                      "ca-AstroPh.html", {"nodes": 17903, "edges": 197031}),
        _snap_dataset("cit-hepth", "snap_cit_hep",
                      _pinned(_JULIA, "data/arxiv_cit/arxiv-cit-hep-th.jlg", 1041968,
                              "3d44ba807d7759d98503cac7a6807da056adc44f5fda1a298177b5fbcfde0469"),
                      lambda f: load_jlg(f / "arxiv-cit-hep-th.jlg", name="cit-hepth"),
                      "SNAP cit-HepTh, directed citations (JuliaGraphs LG copy)",
                      "cit-HepTh.html", {"nodes": 27770, "edges": 352807}),
        _snap_dataset("cit-hepph", "snap_cit_hep",
                      _pinned(_JULIA, "data/arxiv_cit/arxiv-cit-hep-ph.jlg", 1245675,
                              "817dfd8b3c98ee4eee1e1ff5e98986e49fe9727ec233436915ec7f254a2e9684"),
                      lambda f: load_jlg(f / "arxiv-cit-hep-ph.jlg", name="cit-hepph"),
                      "SNAP cit-HepPh, directed citations (JuliaGraphs LG copy)",
                      "cit-HepPh.html", {"nodes": 34546, "edges": 421578}),
        Dataset("luxembourg-osm", "luxembourg_osm",
                (_pinned(_GRAPHDATA, "luxembourg_osm.mtx", 1440952,
                         "eb75caea9ccf73b6af18e0f72a885e37eb036c3c450c4575734b3243ae28e9b4"),),
                lambda f: load_matrix_market(f / "luxembourg_osm.mtx", name="luxembourg-osm"),
                "Luxembourg road network (OpenStreetMap; DIMACS10 / SuiteSparse, banner "
                "stripped)", "https://sparse.tamu.edu/DIMACS10/luxembourg_osm",
                "ODbL (OpenStreetMap) / CC-BY 4.0 (SuiteSparse)",
                {"nodes": 114599, "edges": 119666}),
        _snap_dataset("roadnet-ca", "snap_roadnet_ca",
                      RemoteFile("roadNet-CA.txt.gz", _SNAP + "roadNet-CA.txt.gz",
                                 note="SNAP publishes neither a checksum nor the byte size: "
                                      "verified by format (the loaded graph must have SNAP's "
                                      "published 1,965,206 nodes and 2,766,607 edges)"),
                      lambda f: load_snap_edgelist(f / "roadNet-CA.txt.gz", name="roadnet-ca"),
                      "SNAP roadNet-CA, California road network", "roadNet-CA.html",
                      {"nodes": 1965206, "edges": 2766607}),
        Dataset("ogbn-arxiv", "ogbn_arxiv",
                (RemoteFile("arxiv.zip", "https://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip",
                            extract="arxiv",
                            note="OGB publishes no checksum and no exact size (about 81 MB): "
                                 "verified by format (the edge and node counts inside the "
                                 "archive, and OGB's published counts: 169,343 nodes, 128 "
                                 "features, 40 classes, split 90,941 / 29,799 / 48,603)"),),
                lambda f: load_ogb_node(f / "arxiv", name="ogbn-arxiv"),
                "OGB ogbn-arxiv: arXiv CS citations, 128-d text features, 40 subject areas, "
                "time split", "https://ogb.stanford.edu/docs/nodeprop/#ogbn-arxiv",
                "ODC-BY (OGB); MAG data",
                {"nodes": 169343, "features": 128, "classes": 40, "train": 90941,
                 "val": 29799, "test": 48603}),
    ]
    return {d.name: d for d in ds}


#: Every named dataset, by name.
DATASETS: dict = _builtin()


def register_dataset(dataset: Dataset) -> Dataset:
    """Add (or replace) a registry entry; returns it.  Local."""
    DATASETS[dataset.name] = dataset
    return dataset


def dataset_names() -> tuple:
    """The registry's names, sorted."""
    return tuple(sorted(DATASETS))


def get_dataset(name) -> Dataset:
    """The registry entry ``name``; otherwise :class:`~spgnn.errors.UnknownDataset` (a
    ``KeyError``) naming the closest known name and listing them all."""
    try:
        return DATASETS[name]
    except (KeyError, TypeError):
        close = difflib.get_close_matches(str(name).lower(), dataset_names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownDataset(f"unknown dataset {name!r}{hint}; the registry has "
                             f"{', '.join(dataset_names())}") from None


def dataset_status(name, *, cache=None) -> dict:
    """``{file name: "ok" | "missing" | "partial" | "bad: ..."}`` in the cache. Local."""
    d = get_dataset(name)
    folder = cache_dir(cache) / d.folder
    return {f.name: file_status(folder, f) for f in d.files}


def fetch_dataset(name, *, comm=None, root=0, cache=None, mirror=None, offline=None,
                  progress=None, retries=3, timeout=60.0) -> Path:
    """Make the dataset's files present and verified in the cache; returns its folder.

    Without ``comm``: local, in the calling process (concurrent processes take
    turns through a file lock).  With ``comm`` (a
    :class:`~spgnn.comm.Communicator`): **collective** -- rank ``root``
    downloads (its progress bar alone is shown) while the others wait; an
    error there is raised on every rank (``comm.agree``), and every rank
    returns the folder (one small broadcast, label ``datasets:fetch``).  The
    files then exist on ``root``'s file system.

    Raises
    ------
    KeyError
        Unknown name.
    DownloadError
        Missing files with downloads off or failing (the message says which
        file to place where).
    ChecksumError
        A file with the wrong size or checksum.
    """
    d = get_dataset(name)

    def local():
        return ensure_files(d.name, d.folder, d.files, cache=cache, mirror=mirror,
                            offline=offline, progress=progress, retries=retries, timeout=timeout)

    if comm is None:
        return local()
    folder, err = None, None
    if comm.rank == root:
        try:
            folder = local()
        except (OSError, ValueError) as exc:
            err = exc
    comm.agree(err)
    return Path(comm.bcast_obj(None if folder is None else str(folder), root=root,
                               label="datasets:fetch"))


def check_counts(dataset: Dataset, graph: Graph, folder=None) -> None:
    """Raise :class:`GraphFormatError` when ``graph`` lacks the dataset's published counts."""
    got = {"nodes": graph.num_nodes, "features": graph.num_features,
           "classes": graph.num_classes}
    if "edges" in dataset.counts:
        got["edges"] = graph.num_edges
    for key, mask in (("train", graph.train_mask), ("val", graph.val_mask),
                      ("test", graph.test_mask)):
        got[key] = None if mask is None else int(mask.sum())
    wrong = {k: (v, got[k]) for k, v in dataset.counts.items() if got.get(k) != v}
    if wrong:
        what = ", ".join(f"{k} {g} (published: {v:,})" for k, (v, g) in sorted(wrong.items()))
        where = folder if folder is not None else cache_dir() / dataset.folder
        raise GraphFormatError(f"{dataset.name}: the files in {where} "
                               f"load to a graph with {what}; delete them to download again")


def load_dataset(name, *, cache=None, mirror=None, offline=None, progress=None) -> Graph:
    """The named graph, downloaded into the cache if needed.  Local (see :func:`fetch_dataset`).

    A dataset with a file that has no published checksum is checked against
    its published counts after loading (:attr:`Dataset.counts`).
    """
    d = get_dataset(name)
    folder = fetch_dataset(name, cache=cache, mirror=mirror, offline=offline, progress=progress)
    graph = d.loader(folder)
    graph.name = d.name
    if not d.checksummed:
        check_counts(d, graph, folder)
    return graph
