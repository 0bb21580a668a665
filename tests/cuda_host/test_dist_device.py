"""The cupy backend's distributed paths on CPU, on loopback ranks (issue 25, point 4).

The matrices hold device arrays (the CPU stand-in of CuPy arrays,
:mod:`spgnn.testing.fake_device`), the kernels are the host build of the
CUDA sources, and the communicator moves the device buffers staged or
CUDA-aware.  Every case is compared with the numba backend on the same
ranks: equal results, equal ledger bytes and messages, the mode recorded,
staging bytes by formula, results left on the device, and no
device-to-host copy in a CUDA-aware steady-state SpMM.
Under mpiexec: ``tests/cuda_host/test_dist_device_mpi.py``.
"""

import numpy as np
import pytest

from spgnn.comm import device as D
from spgnn.comm.loopback import run_loopback
from spgnn.testing.device_cases import SPMM_CASES, gcn_device_case, spmm_device_case
from spgnn.testing.fake_device import COPIES, FakeDeviceArray, fake_cupy, reset_copies


@pytest.fixture(scope="module", autouse=True)
def _kernels(emulated):
    """Skips without g++ (the host build), like every test here."""


@pytest.mark.parametrize("mode", D.MODES)
@pytest.mark.parametrize("alg,nranks", [("1d", 1), ("1d", 2), ("1d-aware", 1), ("1d-aware", 2),
                                        ("15d", 2), ("15d-aware", 2), ("15d-aware", 4)])
def test_spmm_on_device_equals_numba(alg, nranks, mode):
    assert alg in SPMM_CASES
    for res in run_loopback(nranks, spmm_device_case, alg, mode):
        assert res["err"] < 1e-12, res
        assert res["ledger_equal"], res
        assert res["on_device"], res
        assert res["modes"] == {mode}, res
        if res["staged_expected"] is not None:
            assert res["staged"] == res["staged_expected"], res
        if mode == "cuda-aware":
            assert res["staged"] == 0 and res["steady_d2h"] == 0, res


def _collectives(comm):
    """Every array collective on ``x`` (host or device): results, events, input bytes."""
    p, r = comm.size, comm.rank
    x = np.arange(12, dtype=np.float64).reshape(6, 2) + 10 * r
    if comm._use_device:
        x = fake_cupy.asarray(x)
    counts = np.full(p, 6 // p)
    counts[-1] = 6 - counts[:-1].sum()
    ins = [x, x, x[: r + 1], x, x[:p], x, x, x]
    n0 = len(comm.ledger.stats)
    out = [comm.allreduce(x, label="t"), comm.allgather(x, label="t"),
           comm.allgatherv(ins[2], label="t"), comm.reduce_scatter(x, label="t"),
           comm.alltoall(ins[4], label="t"), comm.alltoallv(x, counts, label="t"),
           comm.ialltoallv(x, counts, label="t").wait(), comm.bcast(x, root=0, label="t")]
    return out, comm.ledger.stats.events[n0:], [i.nbytes for i in ins]


@pytest.mark.parametrize("mode", D.MODES)
@pytest.mark.parametrize("nranks", [1, 3])
def test_every_collective_moves_device_arrays(nranks, mode):
    def body(comm, dev):
        comm.gpu_comm = mode
        comm._use_device = dev
        return _collectives(comm)

    host = run_loopback(nranks, body, False)
    dev = run_loopback(nranks, body, True)
    for (h_out, h_ev, _), (d_out, d_ev, in_bytes) in zip(host, dev):
        for h, d in zip(h_out, d_out):
            assert type(d) is FakeDeviceArray and type(h) is not FakeDeviceArray
            np.testing.assert_array_equal(d.get(), h)
        assert [(e.op, e.label, e.bytes_sent, e.bytes_recv, e.messages) for e in h_ev] == \
            [(e.op, e.label, e.bytes_sent, e.bytes_recv, e.messages) for e in d_ev]
        assert {e.device for e in h_ev} == {""} and {e.staged_bytes for e in h_ev} == {0}
        assert {e.device for e in d_ev} == {mode}
        payload = [e.staged_bytes for e in d_ev if ":" not in e.op]
        if mode == "cuda-aware":
            assert payload == [0] * 8
        else:       # each call: its input copied down once, its result copied up once
            assert payload == [i + o.nbytes for i, o in zip(in_bytes, h_out)]


def test_cuda_aware_makes_no_host_copy():
    def body(comm):
        comm.gpu_comm = "cuda-aware"
        x = fake_cupy.asarray(np.ones((4, 3)))
        comm.barrier()
        before = COPIES["d2h"]
        y = comm.allgatherv(x, label="t")
        comm.barrier()
        return type(y) is FakeDeviceArray, COPIES["d2h"] - before

    reset_copies()
    assert run_loopback(2, body) == [(True, 0), (True, 0)]


def test_mode_setting(monkeypatch):
    from spgnn.comm.loopback import solo_communicator

    assert solo_communicator().gpu_comm == "staged"
    monkeypatch.setenv(D.ENV, "cuda-aware")
    comm = solo_communicator()
    assert comm.gpu_comm == "cuda-aware"
    assert comm.split(0).gpu_comm == "cuda-aware"
    monkeypatch.setenv(D.ENV, "gpudirect")
    with pytest.raises(ValueError, match="SPGNN_GPU_COMM"):
        solo_communicator()
    with pytest.raises(ValueError, match="gpu_comm"):
        comm.gpu_comm = "zero-copy"


def test_fake_device_refuses_host_mixing():
    d = fake_cupy.asarray(np.ones(3))
    with pytest.raises(TypeError, match="host numpy array"):
        d + np.ones(3)
    assert type(d + 1.0) is FakeDeviceArray and type(d.get()) is np.ndarray
    assert D.is_device(d) and not D.is_device(np.ones(3))


@pytest.mark.parametrize("mode", D.MODES)
@pytest.mark.parametrize("alg,nranks", [("1d", 1), ("1d", 2), ("1d-aware", 2), ("15d-aware", 2),
                                        ("3d", 2)])
def test_gcn_training_on_device_equals_numba(alg, nranks, mode):
    """Full-graph GCN epochs (dropout on) with the node data on the device."""
    for res in run_loopback(nranks, gcn_device_case, alg, mode):
        np.testing.assert_allclose(res["losses"], res["ref_losses"], rtol=1e-6)
        assert res["weights_err"] < 1e-5, res
        assert res["ledger_equal"] and res["on_device"], res
        if nranks > 1:
            assert res["modes"] == {mode}, res
            assert (res["staged"] > 0) == (mode == "staged"), res
