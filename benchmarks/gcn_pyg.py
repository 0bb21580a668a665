"""One GCN training epoch: PyTorch Geometric (and plain PyTorch) baselines for spgnn.

    python -m spgnn bench gcn_pyg --threads 2
    python -m spgnn bench gcn_pyg --threads 1 --graphs cora,rmat --hidden 16 --json

Times one full training epoch (``zero_grad`` + forward + cross-entropy on the
train mask + backward + Adam step) of the standard 2-layer GCN of PyG's
``examples/gcn.py``, single process, float32, on CPU, for every graph x hidden
size x implementation, and prints the median of ``--repeat`` epochs after
``--warmup`` untimed ones.  The numbers published from it live in
``docs/performance.md``.

The model (every implementation must build exactly this one)::

    x = dropout(x, 0.5)                       # on the input features too, as in PyG's example
    h = relu(Â · (x W1) + b1)                 # GCNConv(in, hidden), cached normalisation
    h = dropout(h, 0.5)
    out = Â · (h W2) + b2                     # GCNConv(hidden, classes)
    loss = cross_entropy(out[train], y[train])
    Adam(lr=0.01), weight decay 5e-4 on layer 1 only

with ``Â = D^-1/2 (A + I) D^-1/2`` computed once (not timed per epoch).

Implementations (keys of :data:`IMPLEMENTATIONS`):

* ``pyg-edge_index`` — ``GCNConv`` fed a ``[2, nnz]`` ``edge_index`` (gather
  + scatter message passing);
* ``pyg-sparse`` — the same ``GCNConv`` fed the adjacency as a
  ``torch.sparse_csr`` tensor, which PyG routes to ``torch.sparse.mm``;
* ``torch-sparse`` — plain PyTorch: ``nn.Linear`` + ``torch.sparse.mm`` with a
  precomputed ``Â`` in CSR;
* ``torch-sparse-sym`` — as ``torch-sparse`` with a custom autograd function
  whose backward reuses ``Â`` (``Â`` is symmetric), sparing autograd the
  transpose of the CSR matrix in every backward pass.

"PyG best" in the table is the faster of the two PyG modes on each case.

Graphs: Cora (Planetoid split), musae_facebook (stratified 60/20/20 split,
seed 0) and an R-MAT graph (``--rmat 17:8``: 131,072 vertices, about 0.97M
undirected edges, 128 random features, 16 random classes, 60/20/20 split).
Self-loops are removed first so that every implementation's ``A + I`` is the
same matrix.  The real graphs come from ``../shared/data`` (or
``SPGNN_DATA_DIR``); a missing one is skipped with a message.

Requires ``torch`` and ``torch_geometric`` (not dependencies of spgnn); pin
torch to a CPU build, e.g. ``pip install torch==2.13.0 torch_geometric`` here.
Timings on a shared or oversubscribed machine are indicative only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy
import scipy.sparse as sp

import spgnn
from spgnn.bench import machine
from spgnn.io import Graph, is_shard_dir, read_manifest
from spgnn.io.shards import read_rows
from spgnn.io.synthetic import with_synthetic

from spgnn.io import load_graph

from ._common import write_record

#: The default graphs; any dataset name, file or generator spec works too.
GRAPHS = ("cora", "facebook", "rmat")
#: Short names of the defaults.
ALIASES = {"facebook": "musae-facebook"}
HIDDEN = (16, 256)
DROPOUT = 0.5
LR = 0.01
WEIGHT_DECAY = 5e-4
RMAT_FEATURES = 128
RMAT_CLASSES = 16


# ------------------------------------------------------------------ data
@dataclass
class Case:
    """One benchmark graph, in the form every implementation receives it."""

    name: str
    adj: sp.csr_array            # symmetric, no self-loops, unit weights, float32
    features: np.ndarray         # float32 (n, d), C-contiguous
    labels: np.ndarray           # int64 (n,), every node labelled
    train_mask: np.ndarray       # bool (n,)

    def describe(self) -> dict:
        return {"graph": self.name, "n": int(self.adj.shape[0]), "nnz": int(self.adj.nnz),
                "features": int(self.features.shape[1]),
                "classes": int(self.labels.max()) + 1, "train": int(self.train_mask.sum())}


def _case(g: Graph, name: str) -> Case:
    g = g.without_self_loops()
    if not g.is_symmetric():
        g = g.symmetrize()
    if g.train_mask is None:
        g = g.random_split(train=0.6, val=0.2, seed=0)
    if (g.labels < 0).any():
        raise ValueError(f"bench_gcn_pyg: {name} has unlabelled nodes; the benchmark needs "
                         f"every label (the loss only reads the train mask, but cross-entropy "
                         f"must not see -1)")
    # Unit weights: GCN normalises the 0/1 adjacency, whatever the file stored.
    adj = sp.csr_array((np.ones(g.adj.nnz, np.float32), g.adj.indices, g.adj.indptr),
                       shape=g.adj.shape)
    x = g.features.toarray() if sp.issparse(g.features) else g.features
    return Case(name, adj, np.ascontiguousarray(x, dtype=np.float32), g.labels, g.train_mask)


def load_case(name: str, rmat_spec: str = "17:8", *, features=None, labels=None) -> Case:
    """The graph ``name`` ready for the benchmark: ``rmat`` (``rmat_spec``, 128 Gaussian
    features, 16 random classes), or any dataset name (``facebook`` = ``musae-facebook``),
    file or generator spec, given synthetic ``features`` / ``labels`` specs
    (:mod:`spgnn.io.synthetic`) when asked or when it has none (``random:128``,
    ``random:16``).

    Raises
    ------
    OSError
        A dataset that is neither in the shared data folder nor in the cache,
        and cannot be downloaded (``DownloadError``), or a missing file.
    """
    if is_shard_dir(name):
        return _shard_case(name)
    if name == "rmat":
        scale, ef = (int(v) for v in rmat_spec.split(":"))
        adj = spgnn.rmat(scale, ef, seed=0)
        n = adj.shape[0]
        rng = np.random.default_rng(0)
        features = rng.standard_normal((n, RMAT_FEATURES), dtype=np.float32)
        labels = rng.integers(0, RMAT_CLASSES, n)
        g = Graph(adj, features=features, labels=labels, name=f"rmat-{scale}-{ef}")
        return _case(g.random_split(train=0.6, val=0.2, seed=0, stratify=False), g.name)
    g = load_graph(ALIASES.get(name, name))
    g = with_synthetic(g, features or (f"random:{RMAT_FEATURES}" if g.features is None else None),
                       labels or (f"random:{RMAT_CLASSES}" if g.labels is None else None))
    return _case(g, name)


def _shard_case(directory: str) -> Case:
    """A shard directory (``spgnn partition``) read whole, in its parts' vertex order: ``A'``
    is stored symmetric, unweighted and without self-loops, so it is used as it is."""
    man = read_manifest(directory)
    rows = read_rows(directory, man, 0, man["n"])
    a = rows.adj
    adj = sp.csr_array((np.ones(a.nnz, np.float32), a.indices, a.indptr), shape=a.shape)
    del a, rows.adj
    x = rows.x.toarray() if sp.issparse(rows.x) else rows.x
    return Case(man["name"], adj, np.ascontiguousarray(x, dtype=np.float32),
                np.asarray(rows.label, dtype=np.int64), np.asarray(rows.train, dtype=bool))


def gcn_normalize(adj: sp.csr_array) -> sp.csr_array:
    """``D^-1/2 (A + I) D^-1/2`` in float32 CSR (what ``gcn_norm`` computes)."""
    n = adj.shape[0]
    a = (adj + sp.eye_array(n, dtype=np.float32, format="csr")).tocsr()
    a.sum_duplicates()
    deg = np.asarray(a.sum(axis=1)).ravel()
    dinv = np.where(deg > 0, 1.0 / np.sqrt(deg), 0.0).astype(np.float32)
    a = sp.csr_array(sp.diags_array(dinv) @ a @ sp.diags_array(dinv), dtype=np.float32)
    a.sort_indices()
    return a


# --------------------------------------------------------------- timing
def _time_epochs(epoch: Callable[[], None], repeat: int, warmup: int) -> dict:
    """Median and min seconds of ``repeat`` epochs after ``warmup`` ones (the first is timed apart)."""
    t0 = time.perf_counter()
    epoch()      # fills the caches (PyG computes and caches gcn_norm here)
    first = time.perf_counter() - t0
    for _ in range(max(0, warmup - 1)):
        epoch()
    times = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        epoch()
        times.append(time.perf_counter() - t0)
    return {"median": statistics.median(times), "min": min(times), "first_epoch": first,
            "times": times}


def _check_inputs(adj_csr, features, labels, train_mask, hidden, threads, repeat, warmup):
    n = adj_csr.shape[0]
    if adj_csr.shape != (n, n) or features.shape[0] != n or labels.shape != (n,) \
            or train_mask.shape != (n,):
        raise ValueError(f"bench_gcn_pyg: shapes must agree, but got adj {adj_csr.shape}, "
                         f"features {features.shape}, labels {labels.shape}, "
                         f"train_mask {train_mask.shape}")
    for label, v, low in (("hidden", hidden, 1), ("threads", threads, 1), ("repeat", repeat, 1),
                          ("warmup", warmup, 1)):
        if not isinstance(v, int) or v < low:
            raise ValueError(f"bench_gcn_pyg: {label} must be an int >= {low}, but got {v!r}")


def _torch_csr(a: sp.csr_array):
    """``a`` as a ``torch.sparse_csr`` tensor (int64 indices, checked once here)."""
    import warnings

    import torch

    with warnings.catch_warnings():
        # "Sparse CSR tensor support is in beta": known, and not actionable here.
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(torch.from_numpy(a.indptr.astype(np.int64)),
                                       torch.from_numpy(a.indices.astype(np.int64)),
                                       torch.from_numpy(a.data), size=a.shape,
                                       check_invariants=True)


class _Threads:
    """Run with ``torch.set_num_threads(threads)``, restoring the previous count after."""

    def __init__(self, threads):
        import torch

        self.torch, self.threads = torch, threads

    def __enter__(self):
        self.before = self.torch.get_num_threads()
        self.torch.set_num_threads(self.threads)

    def __exit__(self, *exc):
        self.torch.set_num_threads(self.before)


def _train_epoch_fn(model, optimizer, x, adj, y, mask):
    import torch.nn.functional as F

    model.train()

    def epoch():
        optimizer.zero_grad()
        out = model(x, adj)
        loss = F.cross_entropy(out[mask], y[mask])
        loss.backward()
        optimizer.step()

    return epoch


def _adam(model):
    import torch

    # PyG's examples/gcn.py: weight decay on the first layer only.
    return torch.optim.Adam([dict(params=model.layer1.parameters(), weight_decay=WEIGHT_DECAY),
                             dict(params=model.layer2.parameters(), weight_decay=0.0)], lr=LR)


# ------------------------------------------------------------------- PyG
def pyg_epoch_seconds(adj_csr, features, labels, train_mask, hidden, threads, repeat, warmup,
                      *, adjacency="edge_index", input_dropout=True) -> dict:
    """Seconds per training epoch of PyG's 2-layer ``GCNConv`` model.

    Parameters
    ----------
    adj_csr : scipy.sparse.csr_array, shape (n, n)
        Symmetric adjacency without self-loops (``GCNConv`` adds them).
    features : ndarray, float32, shape (n, d)
    labels : ndarray, int64, shape (n,)
    train_mask : ndarray, bool, shape (n,)
    hidden : int
        Width of the hidden layer.
    threads : int
        ``torch.set_num_threads`` for the measurement (restored after).
    repeat, warmup : int
        Timed epochs (the median is reported) and untimed epochs before them.
    adjacency : {"edge_index", "sparse"}
        How the graph is handed to ``GCNConv``: a ``[2, nnz]`` int64
        ``edge_index`` (message passing by gather/scatter), or a
        ``torch.sparse_csr`` adjacency (PyG then calls ``torch.sparse.mm``).
        Both use ``cached=True``: ``gcn_norm`` runs once, in the first
        epoch.
    input_dropout : bool
        Dropout on the input features, as PyG's example and Kipf & Welling
        do.  On CPU it costs about as much as the rest of the epoch on the
        wide-feature graphs (torch draws one random number per feature
        entry), so the benchmark also reports runs without it.

    Returns
    -------
    dict
        ``median``, ``min`` (seconds per epoch), ``compile_or_setup_seconds``
        (tensor conversion and model construction), ``first_epoch`` (the
        first epoch, which also computes the cached normalisation), ``times``
        and ``final_loss`` (a sanity value).
    """
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv

    _check_inputs(adj_csr, features, labels, train_mask, hidden, threads, repeat, warmup)
    if adjacency not in ("edge_index", "sparse"):
        raise ValueError(f"pyg_epoch_seconds: adjacency must be 'edge_index' or 'sparse', "
                         f"but got {adjacency!r}")
    with _Threads(threads):
        t0 = time.perf_counter()
        x, y, mask = _tensors(features, labels, train_mask)
        csr = sp.csr_array(adj_csr, dtype=np.float32)
        if adjacency == "edge_index":
            coo = csr.tocoo()
            # PyG's edge_index[0] is the source, [1] the target; A is symmetric,
            # so the orientation does not matter here.
            adj = torch.from_numpy(np.vstack([coo.row, coo.col]).astype(np.int64))
        else:
            # PyG expects the transposed adjacency (row = target); A is symmetric.
            adj = _torch_csr(csr)

        class GCN(torch.nn.Module):
            def __init__(self, d, h, c):
                super().__init__()
                self.layer1 = GCNConv(d, h, cached=True, normalize=True)
                self.layer2 = GCNConv(h, c, cached=True, normalize=True)

            def forward(self, x, a):
                if input_dropout:
                    x = F.dropout(x, p=DROPOUT, training=self.training)
                x = self.layer1(x, a).relu()
                x = F.dropout(x, p=DROPOUT, training=self.training)
                return self.layer2(x, a)

        model = GCN(x.shape[1], hidden, int(labels.max()) + 1)
        return _time_model(model, x, adj, y, mask, repeat, warmup, t0)


def _tensors(features, labels, train_mask):
    """Seed torch (initialisation, dropout) and convert the inputs: ``(x, y, mask)``."""
    import torch

    torch.manual_seed(0)
    return (torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32)),
            torch.from_numpy(np.asarray(labels, dtype=np.int64)),
            torch.from_numpy(np.asarray(train_mask, dtype=bool)))


def _time_model(model, x, adj, y, mask, repeat, warmup, t0) -> dict:
    """Adam + one epoch function, timed by the shared rule; setup counted from ``t0``."""
    optimizer = _adam(model)
    epoch = _train_epoch_fn(model, optimizer, x, adj, y, mask)
    setup = time.perf_counter() - t0
    result = _time_epochs(epoch, repeat, warmup)
    result["final_loss"] = _loss(model, x, adj, y, mask)
    result["compile_or_setup_seconds"] = setup
    return result


def _loss(model, x, adj, y, mask) -> float:
    """Training loss in eval mode, to check that the implementations agree roughly."""
    import torch
    import torch.nn.functional as F

    model.eval()
    with torch.no_grad():
        return float(F.cross_entropy(model(x, adj)[mask], y[mask]))


# ----------------------------------------------------------- plain torch
def torch_epoch_seconds(adj_csr, features, labels, train_mask, hidden, threads, repeat, warmup,
                        *, symmetric_backward=False, input_dropout=True) -> dict:
    """Seconds per training epoch of the same GCN in plain PyTorch with ``torch.sparse.mm``.

    Same parameters and result as :func:`pyg_epoch_seconds`; ``Â`` is
    computed with scipy in the setup and held as a ``torch.sparse_csr``
    tensor.  With ``symmetric_backward`` the product goes through a custom
    autograd function whose backward is ``Â · grad`` (valid because ``Â`` is
    symmetric), instead of autograd's ``Âᵀ · grad``, which transposes the CSR
    matrix in every backward pass.
    """
    import torch
    import torch.nn.functional as F

    _check_inputs(adj_csr, features, labels, train_mask, hidden, threads, repeat, warmup)
    with _Threads(threads):
        t0 = time.perf_counter()
        x, y, mask = _tensors(features, labels, train_mask)
        a = gcn_normalize(sp.csr_array(adj_csr, dtype=np.float32))
        adj = _torch_csr(a)

        class SymSpMM(torch.autograd.Function):
            @staticmethod
            def forward(ctx, h):
                return torch.sparse.mm(adj, h)

            @staticmethod
            def backward(ctx, grad):
                return torch.sparse.mm(adj, grad)

        propagate = SymSpMM.apply if symmetric_backward else (lambda h: torch.sparse.mm(adj, h))

        class Layer(torch.nn.Module):
            # GCNConv's order: the dense product first (hidden < features), no
            # bias in the linear map, bias after the aggregation.
            def __init__(self, d, h):
                super().__init__()
                self.lin = torch.nn.Linear(d, h, bias=False)
                torch.nn.init.xavier_uniform_(self.lin.weight)   # GCNConv's glorot init
                self.bias = torch.nn.Parameter(torch.zeros(h))

            def forward(self, h):
                return propagate(self.lin(h)) + self.bias

        class GCN(torch.nn.Module):
            def __init__(self, d, h, c):
                super().__init__()
                self.layer1, self.layer2 = Layer(d, h), Layer(h, c)

            def forward(self, x, _adj):
                if input_dropout:
                    x = F.dropout(x, p=DROPOUT, training=self.training)
                x = self.layer1(x).relu()
                x = F.dropout(x, p=DROPOUT, training=self.training)
                return self.layer2(x)

        model = GCN(x.shape[1], hidden, int(labels.max()) + 1)
        return _time_model(model, x, adj, y, mask, repeat, warmup, t0)


# ---------------------------------------------------------------- spgnn
# The spgnn side goes here, with the same signature and result keys:
#
#     def spgnn_epoch_seconds(adj_csr, features, labels, train_mask, hidden, threads, repeat,
#                             warmup, *, input_dropout=True) -> dict:
#         ...   # the model above over spgnn.gnn, single process
#
# then add  "spgnn": spgnn_epoch_seconds  to IMPLEMENTATIONS below.  The table
# shows "pending" in the spgnn column until then; there is deliberately no
# number for it yet.


#: name -> function(adj_csr, features, labels, train_mask, hidden, threads, repeat, warmup,
#: *, input_dropout) returning at least median, min and compile_or_setup_seconds.
IMPLEMENTATIONS: dict[str, Callable[..., dict]] = {
    "pyg-edge_index": lambda *a, **kw: pyg_epoch_seconds(*a, adjacency="edge_index", **kw),
    "pyg-sparse": lambda *a, **kw: pyg_epoch_seconds(*a, adjacency="sparse", **kw),
    "torch-sparse": lambda *a, **kw: torch_epoch_seconds(*a, symmetric_backward=False, **kw),
    "torch-sparse-sym": lambda *a, **kw: torch_epoch_seconds(*a, symmetric_backward=True, **kw),
    # "spgnn": spgnn_epoch_seconds,   # pending: see the placeholder above
}
PYG = ("pyg-edge_index", "pyg-sparse")


def _versions() -> dict:
    import torch
    import torch_geometric

    return {"torch": torch.__version__, "torch_geometric": torch_geometric.__version__,
            "numpy": np.__version__, "scipy": scipy.__version__,
            "spgnn": spgnn.__version__}


def _fmt(seconds, missing="-") -> str:
    return missing if seconds is None else f"{seconds * 1e3:.1f}"


def print_table(rows: list[dict], threads: int, input_dropout: bool = True) -> None:
    """Milliseconds per epoch, one row per graph x hidden size."""
    names = [k for k in IMPLEMENTATIONS]
    head = (f"{'graph':<12}{'n':>8}{'nnz':>10}{'hidden':>7}"
            + "".join(f"{k:>18}" for k in names)
            + f"{'PyG best':>10}{'spgnn':>9}{'speed-up':>9}")
    print(f"ms per epoch (median), threads={threads}, input dropout "
          f"{'on' if input_dropout else 'off'}")
    print(head)
    for r in rows:
        med = {k: r["results"][k]["median"] for k in names if k in r["results"]}
        best = min(med[k] for k in PYG if k in med)
        spg = med.get("spgnn")
        line = (f"{r['graph']:<12}{r['n']:>8}{r['nnz']:>10}{r['hidden']:>7}"
                + "".join(f"{_fmt(med.get(k)):>18}" for k in names)
                + f"{_fmt(best):>10}{_fmt(spg, 'pending'):>9}"
                + f"{('%.2fx' % (best / spg)) if spg else 'pending':>9}")
        print(line)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", default=",".join(GRAPHS),
                    help=f"comma-separated graphs: {','.join(GRAPHS)} or any dataset name, "
                         f"file or generator spec")
    ap.add_argument("--hidden", default=",".join(map(str, HIDDEN)))
    ap.add_argument("--impls", default=",".join(IMPLEMENTATIONS),
                    help=f"comma-separated subset of {','.join(IMPLEMENTATIONS)}")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rmat", default="17:8", help="R-MAT SCALE:EDGE_FACTOR")
    ap.add_argument("--no-input-dropout", dest="input_dropout", action="store_false",
                    help="drop only the hidden layer (the model keeps PyG's input dropout by "
                         "default)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    ap.add_argument("--out", default=None, help="also write the JSON object to this file")
    args = ap.parse_args(argv)
    import warnings

    # Raised from inside torch_geometric's own sparse helpers on every call
    # with a torch.sparse adjacency; it is about torch's defaults, not this run.
    warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")
    impls = args.impls.split(",")
    unknown = [k for k in impls if k not in IMPLEMENTATIONS]
    if unknown:
        ap.error(f"unknown implementation(s) {unknown}; choose from {list(IMPLEMENTATIONS)}")
    if not any(k in PYG for k in impls):
        ap.error(f"--impls must include a PyG mode ({', '.join(PYG)}) for the 'PyG best' column")

    rows = []
    for name in args.graphs.split(","):
        try:
            case = load_case(name, args.rmat)
        except OSError as e:
            print(f"skipping {name}: {e}", file=sys.stderr)
            continue
        for hidden in (int(h) for h in args.hidden.split(",")):
            row = dict(case.describe(), hidden=hidden, threads=args.threads,
                       input_dropout=args.input_dropout, results={})
            for impl in impls:
                r = IMPLEMENTATIONS[impl](case.adj, case.features, case.labels, case.train_mask,
                                          hidden, args.threads, args.repeat, args.warmup,
                                          input_dropout=args.input_dropout)
                row["results"][impl] = r
                print(f"  {case.name} hidden={hidden} {impl}: {r['median'] * 1e3:.1f} ms "
                      f"(min {r['min'] * 1e3:.1f}, first {r['first_epoch'] * 1e3:.1f}, "
                      f"setup {r['compile_or_setup_seconds'] * 1e3:.1f}, "
                      f"loss {r['final_loss']:.3f})", file=sys.stderr, flush=True)
            rows.append(row)
    record = {"machine": machine(), "versions": _versions(), "threads": args.threads,
              "input_dropout": args.input_dropout, "repeat": args.repeat,
              "warmup": args.warmup, "rows": rows}
    write_record(record, args.out, args.json,
                 lambda: print_table(rows, args.threads, args.input_dropout))


if __name__ == "__main__":
    main()
