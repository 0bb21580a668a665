"""``train --model sage --hec on|off`` under mpiexec: the JSON contract, the errors, resume."""

import json

import pytest

from spgnn.testing.mpi import mpi_test_marks, run_mpi

pytestmark = mpi_test_marks()

BASE = ["-m", "spgnn", "train", "--graph", "sbm:300:3:0", "--model", "sage", "--no-progress",
        "--fanout", "4,3", "--batch-size", "16", "--hidden", "8", "--partition", "metis"]


def _run(nprocs, *extra, ok=True, timeout=180):
    proc = run_mpi([*BASE, *extra], nprocs, timeout=timeout)
    if ok:
        assert proc.returncode == 0, proc.stdout[-4000:]
    return proc


def _json(proc):
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_hec_on_and_off_json_fields():
    on = _json(_run(3, "--hec", "on", "--hec-push-cap", "20", "--hec-life", "2",
                    "--hec-delay", "1", "--miss-policy", "drop", "--epochs", "2", "--json"))
    off = _json(_run(3, "--hec", "off", "--epochs", "2", "--json"))
    for r in (on, off):
        assert 0 <= r["test_acc"] <= 1 and 0 <= r["val_acc"] <= 1
        assert r["seconds_per_epoch"] > 0
        assert any("grad" in k for k in r["bytes_per_epoch_by_label"])
    assert any(k.startswith("halo-fetch") for k in off["bytes_per_epoch_by_label"])
    assert not any(k.startswith("halo-fetch") for k in on["bytes_per_epoch_by_label"])
    push = [k for k in on["bytes_per_epoch_by_label"] if k.startswith("hec:push:")]
    assert {k.split(":")[2] for k in push} == {"L0", "L1"}
    rates = on["hit_rate_per_level"]
    assert set(rates) == {"L0", "L1"}
    for lv, v in rates.items():
        assert v == on["hec_hits"][lv] / on["hec_requests"][lv]


@pytest.mark.parametrize("extra,needle", [
    (["--hec", "on", "--partition", "none"], "--partition"),
    (["--hec", "on", "--hec-capacity", "10", "--hec-push-cap", "11"], "ceil(cs / (P - 1))"),
    (["--hec", "on", "--hec-life", "-1"], "ls must be >= 0"),
    (["--hec", "on", "--hec-push-cap", "0"], "nc must be >= 1"),
    # an explicit --bulk is refused, even at its default value (it used to be ignored)
    (["--hec", "on", "--bulk", "16"], "--bulk 16 does not apply to --hec"),
    (["--hec", "off", "--bulk", "4"], "--bulk 4 does not apply to --hec")])
def test_bad_hec_options_are_one_error_on_every_rank(extra, needle):
    proc = _run(2, *extra, ok=False, timeout=60)
    assert proc.returncode != 0
    errors = [line for line in proc.stdout.splitlines() if "spgnn train: error:" in line]
    assert errors and needle in errors[0], proc.stdout[-3000:]


def test_resume_with_hec_is_bit_identical(tmp_path):
    """A numeric cap: caches are emptied at each epoch start (--hec-reset epoch), nothing
    to save.  (The default auto cap, whose plan carries state across epochs, is resumed on
    loopback ranks in tests/unit/test_hec_resume.py.)  The last epoch's loss and cache
    counts must match too: the saved weights alone can hide a different last epoch."""
    args = ["--hec", "on", "--hec-push-cap", "20", "--json", "--save-weights"]
    full = _json(_run(2, *args, str(tmp_path / "a.npz"), "--epochs", "2"))
    ck = str(tmp_path / "ck")
    _run(2, *args, str(tmp_path / "b.npz"), "--epochs", "1", "--checkpoint", ck, "--every", "1")
    res = _json(_run(2, *args, str(tmp_path / "c.npz"), "--epochs", "2", "--resume", ck))
    assert res["resumed_from"] == 1
    import numpy as np
    a, c = np.load(tmp_path / "a.npz"), np.load(tmp_path / "c.npz")
    assert all(np.array_equal(a[k], c[k]) for k in a.files)
    assert res["test_acc"] == full["test_acc"]
    assert res["final_loss"] == full["final_loss"]
    assert (res["hec_pushed"], res["hec_hits"]) == (full["hec_pushed"], full["hec_hits"])
