"""Kernel signatures parsed from the sources; arguments checked before every launch."""

import re

import numpy as np
import pytest

from spgnn.backends import _cuda_source as S
from spgnn.errors import DTypeError


def test_semiring_codes_agree_with_numba_and_cuda():
    from spgnn._kernels.numba import _ops

    assert S.ADD_CODES == _ops.ADD_CODES and S.MUL_CODES == _ops.MUL_CODES
    ops = (S.source_dir() / "ops.cuh").read_text()
    for kind, codes in (("ADD", S.ADD_CODES), ("MUL", S.MUL_CODES)):
        for name, code in codes.items():
            assert re.search(rf"#define SPGNN_{kind}_{name.upper()} {code}\b", ops), (kind, name)


def test_every_source_has_all_type_combinations():
    sigs = {}
    for src in S.SOURCES:
        sigs.update(S.signatures(S.assemble(src)))
    for op in ("spmm", "sddmm", "dropout_csr"):
        for i in ("i32", "i64"):
            for f in ("f32", "f64"):
                assert f"{op}_{i}_{f}" in sigs
    for op in ("relu", "relu_backward", "dropout", "quant_params", "quant_pack", "quant_unpack"):
        assert {f"{op}_f32", f"{op}_f64"} <= set(sigs)
    assert [p[1:] for p in sigs["spmm_i64_f32"]] == [
        ("long long", True), ("long long", True), ("float", True), ("float", True),
        ("long long", False), ("long long", False), ("int", False), ("int", False),
        ("float", False), ("float", True)]


def _spmm_args(**change):
    args = dict(indptr=np.zeros(2, np.int32), indices=np.zeros(0, np.int32),
                data=np.zeros(0, np.float32), x=np.zeros((1, 1), np.float32), m=np.int64(1),
                n=np.int64(1), add=np.int32(0), mul=np.int32(0), identity=np.float32(0),
                y=np.zeros((1, 1), np.float32))
    args.update(change)
    return tuple(args.values())


@pytest.mark.parametrize("change, match", [
    (dict(m=np.int32(1)), "parameter m \\(long long\\) needs a numpy int64 scalar, got int32"),
    (dict(m=1), "needs a numpy int64 scalar, got int"),
    (dict(identity=np.float64(0)), "identity \\(float\\) needs a numpy float32"),
    (dict(indices=np.zeros(0, np.int64)), "indices \\(int\\*\\) needs int32"),
    (dict(x=np.zeros((2, 2), np.float32)[:, :1]), "C-contiguous"),
    (dict(y=np.float32(0)), "needs an array"),
])
def test_wrong_arguments_raise(change, match):
    sigs = S.signatures(S.assemble("spmm.cu"))
    S.check_args("spmm_i32_f32", sigs["spmm_i32_f32"], _spmm_args())      # the good call passes
    with pytest.raises(DTypeError, match=match):
        S.check_args("spmm_i32_f32", sigs["spmm_i32_f32"], _spmm_args(**change))
    with pytest.raises(DTypeError, match="arguments for 10 parameters"):
        S.check_args("spmm_i32_f32", sigs["spmm_i32_f32"], _spmm_args()[:-1])


def test_launch_checks_before_running(emulated):
    y = np.full((1, 1), 7, np.float32)
    with pytest.raises(DTypeError):
        emulated.launch("spmm.cu", "spmm_i32_f32", (1,), (32,), _spmm_args(m=np.int32(1), y=y))
    assert y[0, 0] == 7                                   # nothing ran
    emulated.launch("spmm.cu", "spmm_i32_f32", (1,), (32,), _spmm_args(y=y))
    assert y[0, 0] == 0                                   # empty row: the identity


def test_unparseable_parameter_is_refused():
    with pytest.raises(ValueError, match="built-in types only"):
        S.signatures('extern "C" __global__ void k(const int64_t* p) {}')
