"""GPU benchmark: spgnn's CUDA kernels vs cuSPARSE / torch CUDA, and a GCN epoch vs PyG on the GPU.

Needs CuPy and a usable device; torch with CUDA and torch_geometric are
optional (their columns are left out, saying why).  Without a device it
exits 2 with the reason.  Writes JSON rows (and ``--out FILE``)::

    python -m spgnn bench gpu [--n 200000] [--deg 16] [--f 16 64 256]
        [--spgemm-n 100000 --spgemm-deg 8] [--gcn-n 100000 --gcn-deg 16 --gcn-f 128
        --hidden 16 --classes 16] [--only spmm,spgemm,gcn] [--out FILE]

Parts:

``spmm`` (run on an H100 on 2026-11-26, docs/gpu.md)
    SpMM (own GE-SpMM-style kernel, cuSPARSE through cupyx, torch CSR) and
    SDDMM on a uniform random graph, per feature width ``--f``.
``spgemm``
    ``A·A`` by the backend's SpGEMM (hash-per-row CUDA kernel) vs cuSPARSE
    (``cupyx`` CSR ``@``), with ``spgemm_path`` saying whether the backend ran
    a CUDA kernel or a host round trip (``CupyBackend.HOST_ROUND_TRIP``) and
    the nnz of both; transposition vs ``cupyx`` ``.T.tocsr()``.
``gcn``
    One training epoch (forward, loss, backward, Adam) of the 2-layer GCN of
    :mod:`spgnn._benchmarks.gcn_pyg` (dropout 0.5 on the input and hidden
    layer, Adam lr 0.01, weight decay 5e-4 on layer 1) on an SBM graph:
    spgnn with ``--backend cupy`` on one rank (node data on the device,
    parameters on the host) vs PyG's ``GCNConv`` on the same device
    (``edge_index`` and ``torch.sparse_csr`` adjacency).

Timing: CUDA events around each kernel (``--reps`` calls after ``--warmup``,
median); epochs by wall clock with the device synchronised after each.

``--dry-run`` runs every part on the CPU at the given (small) sizes with the
cupy backend emulated (:meth:`CupyBackend.host_emulated` on
:mod:`spgnn.testing.fake_device` arrays: the same orchestration, the host
build of the kernels), scipy in place of cuSPARSE, and torch/PyG on the CPU
when installed; its times mean nothing, it checks the harness
(``tests/cuda_host/test_bench_gpu.py``).
"""

import argparse
import json
import sys
import time

PARTS = ("spmm", "spgemm", "gcn")


class Device:
    """What a part needs: the backends, the array module, the sparse module and a timer."""

    def __init__(self, dry_run):
        from spgnn.backends.cupy_backend import CupyBackend

        self.dry_run = dry_run
        if dry_run:
            from spgnn.testing.fake_device import fake_cupy, fake_cupyx_sparse

            self.xp, self.sparse = fake_cupy, fake_cupyx_sparse
            self.ours = CupyBackend.host_emulated(xp=fake_cupy, sparse=fake_cupyx_sparse)
            self.cusparse = CupyBackend.host_emulated(xp=fake_cupy, sparse=fake_cupyx_sparse,
                                                      spmm_impl="cusparse")
            self.name = "dry run (CPU, host-emulated kernels: times mean nothing)"
            self.torch_device = "cpu"
        else:
            import cupy
            import cupyx.scipy.sparse

            self.xp, self.sparse = cupy, cupyx.scipy.sparse
            self.ours, self.cusparse = CupyBackend(), CupyBackend(spmm_impl="cusparse")
            self.name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
            self.torch_device = "cuda"

    def time(self, fn, reps, warmup):
        """Median seconds of ``fn()``: CUDA events on a device, ``perf_counter`` in a dry run."""
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(max(1, reps)):
            if self.dry_run:
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
                continue
            import cupy

            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
        times.sort()
        return times[len(times) // 2]

    def csr(self, a):
        """Host scipy CSR ``a`` as ``(LocalCSR of device arrays, the sparse module's matrix)``."""
        from spgnn.local.csr import LocalCSR

        xp = self.xp
        ip, ix, d = xp.asarray(a.indptr), xp.asarray(a.indices), xp.asarray(a.data)
        return LocalCSR(ip, ix, d, a.shape, check=None), self.sparse.csr_matrix((d, ix, ip),
                                                                                  shape=a.shape)


def _random_csr(n, deg, seed):
    import numpy as np
    import scipy.sparse as sp

    return sp.random(n, n, density=min(1.0, deg / max(n, 1)), format="csr", dtype=np.float32,
                     random_state=seed)


def _torch(device):
    """``(torch, None)`` when torch can use ``device``, else ``(None, reason)``."""
    try:
        import torch
    except ImportError:
        return None, "torch is not installed"
    if device == "cuda" and not torch.cuda.is_available():
        return None, "torch has no CUDA device (a CPU build?)"
    return torch, None


def bench_spmm(dev, args):
    import numpy as np

    a_host = _random_csr(args.n, args.deg, 0)
    a, _ = dev.csr(a_host)
    torch, why = _torch(dev.torch_device)
    t_a = None
    if torch is not None:
        t_a = torch.sparse_csr_tensor(torch.as_tensor(a_host.indptr), torch.as_tensor(a_host.indices),
                                      torch.as_tensor(a_host.data), a_host.shape).to(dev.torch_device)
    rows = []
    for f in args.f:
        x = dev.xp.asarray(np.random.default_rng(1).standard_normal((args.n, f), dtype=np.float32))
        r = {"part": "spmm", "n": args.n, "nnz": int(a_host.nnz), "f": f,
             "spmm_kernel_s": dev.time(lambda: dev.ours.spmm(a, x, "plus_times"), args.reps,
                                       args.warmup),
             "spmm_cusparse_s": dev.time(lambda: dev.cusparse.spmm(a, x, "plus_times"), args.reps,
                                         args.warmup),
             "sddmm_kernel_s": dev.time(lambda: dev.ours.sddmm(a, x, x, "plus_times"), args.reps,
                                        args.warmup)}
        if t_a is not None:
            tx = torch.as_tensor(np.asarray(dev.ours.to_host(x))).to(dev.torch_device)
            r["spmm_torch_s"] = dev.time(lambda: t_a @ tx, args.reps, args.warmup)
        else:
            r["spmm_torch"] = f"not run: {why}"
        r["spmm_kernel_vs_cusparse"] = r["spmm_cusparse_s"] / r["spmm_kernel_s"]
        rows.append(r)
    return rows


def bench_spgemm(dev, args):
    from spgnn.backends.cupy_backend import HOST_ROUND_TRIP

    a_host = _random_csr(args.spgemm_n, args.spgemm_deg, 2)
    a, a_sp = dev.csr(a_host)
    ours = dev.ours.spgemm(a, a, "plus_times")
    theirs = a_sp @ a_sp
    r = {"part": "spgemm", "n": args.spgemm_n, "nnz_a": int(a_host.nnz), "nnz_c": int(ours.nnz),
         "nnz_c_cusparse": int(theirs.nnz),
         "spgemm_path": ("host round trip (numba)" if "spgemm_numeric" in HOST_ROUND_TRIP
                         else "cuda kernel"),
         "spgemm_spgnn_s": dev.time(lambda: dev.ours.spgemm(a, a, "plus_times"), args.reps,
                                    args.warmup),
         "spgemm_cusparse_s": dev.time(lambda: a_sp @ a_sp, args.reps, args.warmup),
         "transpose_spgnn_s": dev.time(lambda: dev.ours.transpose(a), args.reps, args.warmup),
         "transpose_cusparse_s": dev.time(lambda: a_sp.T.tocsr(), args.reps, args.warmup)}
    r["spgemm_spgnn_vs_cusparse"] = r["spgemm_cusparse_s"] / r["spgemm_spgnn_s"]
    return [r]


def _gcn_graph(args):
    import numpy as np

    from spgnn.io import sbm

    adj, x, y = sbm(args.gcn_n, args.classes, avg_degree=args.gcn_deg, num_features=args.gcn_f,
                    seed=0)
    adj = adj.tocsr()
    adj.setdiag(0)                       # GCNConv and DistGraph both add I: the same Â
    adj.eliminate_zeros()
    mask = np.random.default_rng(0).random(args.gcn_n) < 0.6
    return adj, np.asarray(x, dtype=np.float32), np.asarray(y, dtype=np.int64), mask


def spgnn_gcn_epoch(dev, args, adj, x, y, mask):
    """Median seconds per epoch of spgnn's GCN on the cupy backend, one rank (no MPI)."""
    from .gcn_pyg import DROPOUT, LR, WEIGHT_DECAY
    from spgnn.comm.loopback import solo_communicator
    from spgnn.gnn import GCN, Adam, DistGraph, Trainer
    from spgnn.io import Graph

    import numpy as np

    graph = Graph(adj=adj, features=x, labels=y, train_mask=mask, name="bench-gpu")
    dg = DistGraph.from_graph(graph, solo_communicator(), "1d", backend=dev.ours,
                              dtype=np.float32, normalize_features=False)
    model = GCN(dg.num_features, args.hidden, args.classes, dropout=DROPOUT, seed=0, bias=True)
    first = model.parameters()[0]
    rest = [p for p in model.parameters() if p is not first]
    trainer = Trainer(model, dg, Adam([{"params": [first], "weight_decay": WEIGHT_DECAY},
                                       {"params": rest, "weight_decay": 0.0}], lr=LR))
    times = []
    for i in range(args.warmup + max(1, args.epochs)):
        t0 = time.perf_counter()
        trainer.train_epoch()
        dev.ours.synchronize()
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    times.sort()
    kind = type(dg.features.local)
    return times[len(times) // 2], f"{kind.__module__}.{kind.__name__}"


def pyg_gcn_epoch(dev, args, adj, x, y, mask, adjacency):
    """Median seconds per epoch of PyG's GCNConv model on ``dev.torch_device``, or a reason."""
    torch, why = _torch(dev.torch_device)
    if torch is None:
        return None, why
    try:
        import torch.nn.functional as F
        from torch_geometric.nn import GCNConv
    except ImportError as exc:
        return None, f"torch_geometric is not installed ({exc})"
    import numpy as np
    import scipy.sparse as sp

    from .gcn_pyg import DROPOUT, LR, WEIGHT_DECAY

    d = dev.torch_device
    torch.manual_seed(0)
    tx, ty = torch.as_tensor(x).to(d), torch.as_tensor(y).to(d)
    tm = torch.as_tensor(mask).to(d)
    csr = sp.csr_array(adj, dtype=np.float32)
    if adjacency == "edge_index":
        coo = csr.tocoo()
        a = torch.as_tensor(np.vstack([coo.row, coo.col]).astype(np.int64)).to(d)
    else:
        a = torch.sparse_csr_tensor(torch.as_tensor(csr.indptr.astype(np.int64)),
                                    torch.as_tensor(csr.indices.astype(np.int64)),
                                    torch.as_tensor(csr.data), csr.shape).to(d)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer1 = GCNConv(x.shape[1], args.hidden, cached=True, normalize=True)
            self.layer2 = GCNConv(args.hidden, args.classes, cached=True, normalize=True)

        def forward(self, h):
            h = F.dropout(h, p=DROPOUT, training=self.training)
            h = self.layer1(h, a).relu()
            h = F.dropout(h, p=DROPOUT, training=self.training)
            return self.layer2(h, a)

    model = Net().to(d)
    opt = torch.optim.Adam([{"params": model.layer1.parameters(), "weight_decay": WEIGHT_DECAY},
                            {"params": model.layer2.parameters(), "weight_decay": 0.0}], lr=LR)
    times = []
    for i in range(args.warmup + max(1, args.epochs)):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(tx)[tm], ty[tm])
        loss.backward()
        opt.step()
        if d == "cuda":
            torch.cuda.synchronize()
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2], None


def bench_gcn(dev, args):
    adj, x, y, mask = _gcn_graph(args)
    ours, where = spgnn_gcn_epoch(dev, args, adj, x, y, mask)
    r = {"part": "gcn", "n": args.gcn_n, "nnz": int(adj.nnz), "features": args.gcn_f,
         "hidden": args.hidden, "classes": args.classes, "epoch_spgnn_s": ours,
         "spgnn_node_data": where}
    for adjacency in ("edge_index", "sparse"):
        t, why = pyg_gcn_epoch(dev, args, adj, x, y, mask, adjacency)
        if t is None:
            r[f"epoch_pyg_{adjacency}"] = f"not run: {why}"
        else:
            r[f"epoch_pyg_{adjacency}_s"] = t
            r[f"spgnn_vs_pyg_{adjacency}"] = t / ours
    return [r]


BENCHES = {"spmm": bench_spmm, "spgemm": bench_spgemm, "gcn": bench_gcn}


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--deg", type=int, default=16)
    ap.add_argument("--f", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--spgemm-n", type=int, default=100_000)
    ap.add_argument("--spgemm-deg", type=int, default=8)
    ap.add_argument("--gcn-n", type=int, default=100_000)
    ap.add_argument("--gcn-deg", type=float, default=16.0)
    ap.add_argument("--gcn-f", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--classes", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=10, help="timed GCN epochs (median)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma-separated subset of {PARTS}")
    ap.add_argument("--dry-run", action="store_true",
                    help="run the harness on the CPU with the cupy backend emulated (tests)")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    args.only = [p for p in args.only.split(",") if p]
    bad = [p for p in args.only if p not in PARTS]
    if bad:
        ap.error(f"--only: unknown part(s) {bad}; expected some of {PARTS}")
    return args


def main(argv=None):
    args = parse(argv)
    from spgnn.backends.cupy_backend import CupyBackend

    if args.dry_run:
        from spgnn.backends._cuda_host import compiler_missing

        why = compiler_missing()
        if why:
            print(f"bench_gpu: --dry-run needs the host build of the kernels: {why}",
                  file=sys.stderr)
            return 2
    else:
        why = CupyBackend.unavailable_reason()
        if why:
            print(f"bench_gpu: no usable GPU: {why} (--dry-run checks the harness on CPU)",
                  file=sys.stderr)
            return 2
    dev = Device(args.dry_run)
    rows = []
    for part in args.only:
        for r in BENCHES[part](dev, args):
            print(json.dumps(r), flush=True)
            rows.append(r)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"command": " ".join(sys.argv), "device": dev.name, "dry_run": args.dry_run,
                       "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
