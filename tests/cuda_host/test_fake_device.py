"""The CPU stand-in of CuPy is as strict as CuPy about host/device mixing (issue 25).

:mod:`spgnn.testing.fake_device` must refuse what CuPy refuses (implicit
conversion to numpy, host arrays mixed into device operations and kernel
launches), allow what CuPy allows (explicit copies, host index arrays, value
reads), and the code paths it guards must pass it: here the samplers, run on
the emulated cupy backend, give the numba backend's blocks bit for bit.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.backends._cuda_host import HostModule
from spgnn.testing.fake_device import COPIES, FakeDeviceArray, fake_cupy, reset_copies

IMPLICIT = "Implicit conversion to a NumPy array is not allowed"


def test_implicit_conversion_raises_like_cupy():
    d = fake_cupy.arange(6, dtype=np.int64)
    h = np.arange(10)
    for conv in (np.asarray, np.array, np.ascontiguousarray, lambda x: np.float64(x[1:3]),
                 lambda x: h[x], lambda x: np.concatenate([h, x]), lambda x: h + x,
                 lambda x: np.repeat(h[:6], x), lambda x: range(x[2])):
        with pytest.raises(TypeError):
            conv(d)
    with pytest.raises(TypeError, match=IMPLICIT):
        np.asarray(d)
    with pytest.raises(TypeError, match="host numpy array"):
        d * np.ones(6)
    with pytest.raises(TypeError, match="host numpy array"):
        fake_cupy.maximum(d, np.ones(6))
    with pytest.raises(TypeError, match="host numpy array"):
        fake_cupy.concatenate([d, h])


def test_what_cupy_allows_and_counts():
    reset_copies()
    d = fake_cupy.asarray(np.arange(6, dtype=np.float64))          # h2d
    assert COPIES["h2d"] == 1 and not isinstance(d, np.ndarray)
    s = d.sum()
    assert type(s) is FakeDeviceArray and s.ndim == 0              # 0-d, not a numpy scalar
    assert type(d[2]) is FakeDeviceArray and float(d[2]) == 2.0 and int(s) == 15
    assert COPIES["sync"] == 2 and COPIES["d2h"] == 0
    assert type(np.repeat(d, fake_cupy.asarray([1, 0, 2, 0, 0, 1]))) is FakeDeviceArray  # NEP 18
    np.testing.assert_array_equal(d[np.array([5, 0])].get(), [5.0, 0.0])   # host index: uploaded
    d[np.array([1])] = np.array([7.0])                                     # host value: uploaded
    assert d.get()[1] == 7.0 and COPIES["d2h"] == 2
    assert type(np.exp(d)) is FakeDeviceArray and type(d + 1.0) is FakeDeviceArray
    assert d.flags.c_contiguous and not hasattr(d.flags, "writeable") and not hasattr(d, "ctypes")


def test_kernel_launch_refuses_a_host_array_among_device_arrays(emulated):
    k = HostModule("gnn.cu").get_function("relu_f64")
    x = fake_cupy.asarray(np.array([-1.0, 2.0]))
    out, mask = fake_cupy.empty(2), fake_cupy.empty(2, dtype=np.uint8)
    k((1,), (32,), (x, np.int64(2), out, mask))
    np.testing.assert_array_equal(out.get(), [0.0, 2.0])
    with pytest.raises(TypeError, match="parameter out is a host numpy array"):
        k((1,), (32,), (x, np.int64(2), np.empty(2), mask))


def _samplers():
    from spgnn.sampling import GraphSAGESampler, LADIESSampler

    return [GraphSAGESampler((4, 3), frontier="tree"),
            GraphSAGESampler((4, 3), frontier="tree", include_dst=True),
            GraphSAGESampler((3, 2), frontier="unique", method="es"),
            LADIESSampler((5, 4)), LADIESSampler((5, 4), include_batch=False, method="its")]


@pytest.mark.parametrize("which", range(5))
def test_samplers_on_the_device_equal_numba_bit_for_bit(emulated, which):
    """The sampler's kernels on the (emulated) device, its bookkeeping on the host."""
    from spgnn.sampling import LocalGraph
    from spgnn.testing.device_cases import emulated_device_backend

    sampler = _samplers()[which]
    a = sp.random(60, 60, density=0.1, random_state=which, format="csr")
    batches = np.arange(20).reshape(4, 5)
    ref = sampler.sample(LocalGraph(a, "numba"), batches, epoch=3)
    dev = LocalGraph(a)
    dev.backend = emulated_device_backend()
    reset_copies()
    got = sampler.sample(dev, batches, epoch=3)
    assert COPIES["h2d"] > 0 and COPIES["d2h"] > 0          # the kernels ran on the "device"
    for b0, b1 in zip(ref.blocks, got.blocks, strict=True):
        for f in ("dst_ids", "src_ids", "row_ptr", "col_ptr"):
            assert type(getattr(b1, f)) is np.ndarray
            np.testing.assert_array_equal(getattr(b1, f), getattr(b0, f), err_msg=f)
        for f in ("indptr", "indices", "data"):
            np.testing.assert_array_equal(getattr(b1.adj, f), getattr(b0.adj, f), err_msg=f)
