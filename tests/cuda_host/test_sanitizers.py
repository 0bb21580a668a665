"""The host-built CUDA kernels under ThreadSanitizer and AddressSanitizer, each in its own process.

Clean runs must exit 0 (correct results, no report); each sanitizer must
catch a bug planted in the source (a removed ``__syncwarp``, an off-by-one
read), which proves the check can fail.  Libraries are cached by content
hash, so only the first run after a kernel change pays for the g++ builds.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from spgnn.backends._cuda_host import compiler_missing, sanitizer_env

DRIVER = Path(__file__).with_name("sanitized_run.py")


def _run(variant, plant=None, part=None):
    why = compiler_missing()
    if why:
        pytest.skip(why)
    try:
        env = sanitizer_env(variant)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"no {variant} runtime for g++: {exc}")
    if not Path(env["LD_PRELOAD"]).is_file():
        pytest.skip(f"g++ has no {variant} runtime library ({env['LD_PRELOAD']})")
    cmd = [sys.executable, str(DRIVER), variant, plant or "-"] + ([part] if part else [])
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("part", ["original", "ported"])
@pytest.mark.parametrize("variant", ["tsan", "asan"])
def test_clean_under_sanitizer(variant, part):
    res = _run(variant, part=part)
    assert res.returncode == 0, res.stderr[-4000:]


def test_tsan_catches_missing_syncwarp():
    res = _run("tsan", "no_syncwarp")
    assert res.returncode == 66, res.stderr[-4000:]
    assert "ThreadSanitizer: data race" in res.stderr and "spmm_rows" in res.stderr


def test_asan_catches_off_by_one_read():
    res = _run("asan", "off_by_one")
    assert res.returncode == 67, res.stderr[-4000:]
    assert "heap-buffer-overflow" in res.stderr and "sddmm_rows" in res.stderr


def test_tsan_catches_missing_syncwarp_in_spgemm():
    res = _run("tsan", "spgemm_no_syncwarp")
    assert res.returncode == 66, res.stderr[-4000:]
    assert "ThreadSanitizer: data race" in res.stderr and "spgemm_fill_rows" in res.stderr


def test_asan_catches_codec_write_past_its_group():
    res = _run("asan", "quant_off_by_one")
    assert res.returncode == 67, res.stderr[-4000:]
    assert "heap-buffer-overflow" in res.stderr and "quant_unpack" in res.stderr
