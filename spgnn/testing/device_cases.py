"""Distributed runs of the ``cupy`` backend on CPU: cases shared by the loopback and mpiexec tests.

Each case runs one distributed operation twice on the same communicator:
with the ``numba`` backend (host arrays) and with the ``cupy`` backend's own
code on :data:`~spgnn.testing.fake_device.fake_cupy` arrays and the host
build of the CUDA kernels (:meth:`CupyBackend.host_emulated`), in a given
``gpu_comm`` mode.  It returns what the tests assert collectively: the
results agree, the ledgers agree byte for byte (payload and messages per
``(op, label, axis)``), the device calls carry the mode, the staging bytes
match their formula, results stayed on the "device", and a CUDA-aware
steady-state call made no device-to-host copy at all.
"""

import numpy as np
import scipy.sparse as sp

from ..backends import get_backend
from ..comm.device import is_device
from ..core.dist_dense import DistDenseMatrix
from ..core.dist_sparse import DistSparseMatrix
from ..core.spmm import spmm
from ..grid import grid_1d, grid_15d
from ..layout import Layout
from .fake_device import COPIES, FakeDeviceArray, fake_cupy, fake_cupyx_sparse

__all__ = ["emulated_device_backend", "ledger_key_totals", "spmm_device_case", "gcn_device_case",
           "register_emulated_cupy", "SPMM_CASES"]

#: ``algorithm -> (grid factory given comm, A layout, X layout)`` of the cases.
SPMM_CASES = {
    "1d": (grid_1d, Layout("row"), Layout("row")),
    "1d-aware": (grid_1d, Layout("row"), Layout("row")),
    "15d": (lambda comm: grid_15d(2 if comm.size % 2 == 0 else 1, comm), Layout("row", "layer"),
            Layout("row")),
    "15d-aware": (lambda comm: grid_15d(2 if comm.size % 2 == 0 else 1, comm),
                  Layout("row", "layer"), Layout("row")),
}

_BACKEND = []


def emulated_device_backend():
    """One shared ``CupyBackend.host_emulated(xp=fake_cupy)`` (kernels built once per process)."""
    if not _BACKEND:
        from ..backends.cupy_backend import CupyBackend

        _BACKEND.append(CupyBackend.host_emulated(xp=fake_cupy, sparse=fake_cupyx_sparse))
    return _BACKEND[0]


def ledger_key_totals(events):
    """``{(op, label, axis): (calls, bytes_sent, bytes_recv, messages)}`` of ``events``."""
    out = {}
    for ev in events:
        k = (ev.op, ev.label, tuple(ev.axis))
        c, s, r, m = out.get(k, (0, 0, 0, 0))
        out[k] = (c + 1, s + ev.bytes_sent, r + ev.bytes_recv, m + ev.messages)
    return out


def _run(comm, backend, alg, a, x, calls):
    make_grid, la, lx = SPMM_CASES[alg]
    g = make_grid(comm)
    A = DistSparseMatrix.from_global(a, g, la, backend=backend, check_same=False)
    X = DistDenseMatrix.from_global(x, g, lx, backend=backend, check_same=False)
    comm.barrier()
    n0 = len(comm.ledger.stats)
    first = spmm(A, X, algorithm=alg)                 # builds and caches the plan
    comm.barrier()
    d2h0 = COPIES["d2h"]
    n1 = len(comm.ledger.stats)
    for _ in range(calls - 1):
        Y = spmm(A, X, algorithm=alg)
    comm.barrier()
    steady_d2h = COPIES["d2h"] - d2h0
    comm.barrier()                                    # loopback ranks share COPIES: read, then go on
    events = comm.ledger.stats.events[n0:]
    steady = comm.ledger.stats.events[n1:]
    return first, Y, events, steady, steady_d2h


def _device_backend(backend):
    return emulated_device_backend() if backend is None else get_backend(backend)


def spmm_device_case(comm, alg, mode, *, n=37, f=5, density=0.15, seed=0, dtype=np.float64,
                     backend=None):
    """Compare ``alg`` on the emulated device backend in ``mode`` with the numba backend. Collective.

    ``backend="cupy"`` runs the real cupy backend instead (tests/gpu).

    Returns a dict: ``err`` (max abs difference of the results), ``ledger_equal``,
    ``on_device`` (results are device arrays), ``modes`` (the ``device``
    values of the device run's payload events), ``staged`` / ``staged_expected``
    (this rank's staging bytes of the steady-state calls, and their formula
    for 1d / 1d-aware: the rows sent plus the rows received, each copied once),
    ``steady_d2h`` (device-to-host copies during the steady-state calls,
    process-wide; counted on the emulation only, ``None`` on a real device).
    """
    rng = np.random.default_rng(seed)
    a = sp.random(n, n, density=density, random_state=seed, format="csr", dtype=dtype)
    x = rng.standard_normal((n, f)).astype(dtype)
    old = comm.gpu_comm
    comm.gpu_comm = mode
    try:
        _, ref, ref_events, _, _ = _run(comm, get_backend("numba"), alg, a, x, 2)
        _, got, dev_events, steady, steady_d2h = _run(comm, _device_backend(backend), alg, a, x, 2)
    finally:
        comm.gpu_comm = old
    err = float(np.max(np.abs(got.to_global() - ref.to_global()), initial=0.0))
    staged = sum(ev.staged_bytes for ev in steady)
    w, width = np.dtype(dtype).itemsize, f
    expected = None
    if alg == "1d":
        mine = got.local_shape[0]
        expected = (mine + n) * width * w
    elif alg == "1d-aware":
        ev = [e for e in steady if e.op == "alltoallv"]
        expected = sum(e.bytes_sent + e.bytes_recv for e in ev)
    if mode == "cuda-aware" and expected is not None:
        expected = 0
    payload = [ev for ev in steady if ev.op != "barrier"]
    return {"err": err, "ledger_equal": ledger_key_totals(ref_events) == ledger_key_totals(dev_events),
            "on_device": is_device(got.local), "modes": {ev.device for ev in payload},
            "staged": staged, "staged_expected": expected,
            "steady_d2h": steady_d2h if backend is None else None}


def _gcn_run(comm, backend, alg, graph, epochs):
    from ..gnn.data import DistGraph
    from ..gnn.placement import placement_for
    from ..gnn.models import GCN
    from ..gnn.optim import Adam
    from ..gnn.train import Trainer

    kw = {"c": 2} if alg.startswith("15d") else {}
    dg = DistGraph.from_graph(graph, comm, placement_for(alg, **kw), backend=backend)
    model = GCN(dg.num_features, 8, dg.num_classes, dropout=0.5, seed=11)
    tr = Trainer(model, dg, Adam(model.param_groups(5e-4), lr=0.05))
    n0 = len(comm.ledger.stats)
    losses = [tr.train_epoch()["loss"] for _ in range(epochs)]
    events = comm.ledger.stats.events[n0:]
    return (losses, [p.value.copy() for p in model.parameters()], events,
            type(dg.features.local))


def gcn_device_case(comm, alg, mode, *, epochs=3, n=30, seed=4, backend=None):
    """GCN training epochs (dropout on) on the emulated device backend vs numba. Collective.

    Returns ``losses`` / ``ref_losses``, ``weights_err`` (max abs difference of
    the trained parameters), ``ledger_equal`` (epoch events per ``(op, label,
    axis)``), ``on_device`` (the features' block type), ``modes`` and
    ``staged`` (this rank's staging bytes over the epochs).  ``backend="cupy"``
    runs the real cupy backend instead (tests/gpu).
    """
    from ..io import Graph
    from ..io.generators import sbm

    adj, x, y = sbm(n, 3, avg_degree=3, num_features=6, seed=seed)
    graph = Graph(adj=adj, features=x, labels=y).random_split(0.6, 0.2, seed=seed)
    old = comm.gpu_comm
    comm.gpu_comm = mode
    try:
        ref = _gcn_run(comm, get_backend("numba"), alg, graph, epochs)
        got = _gcn_run(comm, _device_backend(backend), alg, graph, epochs)
    finally:
        comm.gpu_comm = old
    werr = max(float(np.max(np.abs(a - b), initial=0.0)) for a, b in zip(ref[1], got[1]))
    return {"losses": got[0], "ref_losses": ref[0], "weights_err": werr,
            "ledger_equal": ledger_key_totals(ref[2]) == ledger_key_totals(got[2]),
            "on_device": got[3] is FakeDeviceArray if backend is None else got[3] is not np.ndarray,
            "modes": {ev.device for ev in got[2]} - {""},
            "staged": sum(ev.staged_bytes for ev in got[2])}


def register_emulated_cupy():
    """Make ``get_backend("cupy")`` the host emulation in this process (CLI tests, no GPU).

    Registers a :class:`CupyBackend` subclass named ``cupy`` whose arrays are
    :data:`~spgnn.testing.fake_device.fake_cupy` arrays and whose kernels are
    the host build, available when g++ is; the commands then run their
    ``--backend cupy`` path unchanged.
    """
    from ..backends import register_backend
    from ..backends._cuda_host import HostModule, compiler_missing
    from ..backends.cupy_backend import CupyBackend

    @register_backend
    class EmulatedCupy(CupyBackend):
        name = "cupy"

        def __init__(self):
            super().__init__(xp=fake_cupy, sparse=fake_cupyx_sparse, module=HostModule, warps=1,
                             ew_block=32, ew_max_blocks=4)

        @classmethod
        def unavailable_reason(cls):
            return compiler_missing()

    return EmulatedCupy
