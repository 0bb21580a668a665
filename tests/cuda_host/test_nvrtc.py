"""Every CUDA source compiles to machine code with NVRTC for sm_80, sm_90 and sm_100, warning-free.

Uses the run-time options of the backend (``_cuda_source.NVRTC_OPTIONS``).
Needs no GPU or driver; skips with the reason when cuda-bindings/NVRTC are
not installed (``pip install -e '.[test]'`` brings them).
"""

import pytest

from spgnn.backends import _cuda_source as S
from spgnn.backends import _nvrtc_check as N

pytestmark = pytest.mark.skipif(N.nvrtc_missing() is not None, reason=str(N.nvrtc_missing()))


@pytest.mark.parametrize("arch", N.ARCHES)
@pytest.mark.parametrize("source", S.SOURCES)
def test_compiles_without_warnings(source, arch):
    cubin, log = N.compile_cubin(source, arch)
    assert cubin[:4] == b"\x7fELF"
    assert "warning" not in log.lower(), log


def test_a_syntax_error_fails_with_the_line():
    text = S.assemble("spmm.cu").replace("T acc = identity;", "T acc = identity", 1)
    with pytest.raises(RuntimeError, match=r"spmm\.cu\(\d+\): error"):
        N.compile_cubin("spmm.cu", "sm_90", text=text)


def test_warnings_are_visible_in_the_log():
    """The check's premise: NVRTC reports warnings in the log (it has no -Werror)."""
    text = S.assemble("gnn.cu") + '\nextern "C" __global__ void w(int* p) { int unused = 1; }\n'
    _, log = N.compile_cubin("gnn.cu", "sm_90", text=text)
    assert "warning" in log.lower()


def test_compiling_leaves_python_s_shared_bytes_alone():
    """NVRTC writes its log into the buffer it is given; a one-byte log once went into
    CPython's shared ``b" "`` and broke every later ``bytes.replace(b",", b" ")``."""
    N.compile_cubin("gnn.cu", "sm_90")          # an empty log: one NUL byte
    assert b" " == bytes([32]) and b"0,1".replace(b",", b" ") == b"0 1"
