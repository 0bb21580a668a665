"""spgnn.checkpoint: bit-identical round trips, crash safety, corruption, MPI-style loopback."""

import json
import logging
import os

import numpy as np
import pytest

import spgnn
from spgnn import SpgnnError
from spgnn.checkpoint import (POINTER, CheckpointError, list_checkpoints, load_checkpoint,
                              load_checkpoint_collective, save_checkpoint,
                              save_checkpoint_collective)


def assert_identical(a, b, where="state"):
    """Recursive equality that also checks types, dtypes, shapes and raw bytes."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        # Fortran-ordered arrays stay Fortran-ordered; anything else comes back C-ordered.
        fortran = a.flags.f_contiguous and not a.flags.c_contiguous
        assert fortran == (b.flags.f_contiguous and not b.flags.c_contiguous), where
        assert a.tobytes(order="A") == b.tobytes(order="A"), where
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_identical(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, where
        if isinstance(a, float):
            assert np.copysign(1.0, a) == np.copysign(1.0, b), where


def rich_state():
    rng = np.random.default_rng(7)
    return {
        "model": {
            "w1": rng.standard_normal((5, 3)).astype(np.float32),
            "b1": rng.standard_normal(3),                               # float64
            "w_fortran": np.asfortranarray(rng.standard_normal((4, 2)).astype(np.float32)),
            "strided": np.arange(20, dtype=np.int64)[::3],              # non-contiguous view
        },
        "optimizer": {
            "step": 12,
            "lr": 0.01,
            "betas": (0.9, 0.999),
            "m": [np.zeros((5, 3), np.float32), np.full(3, -0.0)],
            "ints": np.array([-(2**62), 0, 2**62], dtype=np.int64),
            "mask": np.array([True, False, True]),
            "empty": np.empty((0, 4), dtype=np.float32),
            "zero_d": np.array(3.25, dtype=np.float64),
            "uint8": np.arange(256, dtype=np.uint8),
            "big_endian": np.arange(3, dtype=">f8"),
            "complex": np.array([1 + 2j], dtype=np.complex128),
        },
        "scalars": {"f32": np.float32(1.5), "i64": np.int64(-3), "b": np.bool_(True)},
        "python": {"none": None, "t": True, "f": False, "int": 2**100, "neg": -7,
                   "float": 0.1, "negzero": -0.0, "nan": float("nan"), "inf": float("-inf"),
                   "str": "héllo \"world\" \n", "empty_list": [], "empty_dict": {},
                   "nested": [[1, [2.5, "x"]], {"k": (None,)}]},
        "int_keys": {0: "a", 1: np.ones(2, np.int32)},
        "tag_like": {"$t": "ndarray", "key": "a0"},   # must not be mistaken for an array node
        "rng": {
            "pcg64": np.random.default_rng(1).bit_generator.state,
            "mt19937": np.random.Generator(np.random.MT19937(2)).bit_generator.state,
            "philox": np.random.Generator(np.random.Philox(3)).bit_generator.state,
            "sfc64": np.random.Generator(np.random.SFC64(4)).bit_generator.state,
            "legacy": np.random.RandomState(5).get_state(),
        },
        "name": "gcn",
    }


def test_round_trip_is_bit_identical(tmp_path):
    state = rich_state()
    path = save_checkpoint(tmp_path, state, step=42)
    assert path.name.startswith("ckpt-") and path.exists()
    loaded, step = load_checkpoint(tmp_path)
    assert step == 42
    assert_identical(state, loaded)
    # Arrays come back as fresh writable copies, not views of the file.
    loaded["model"]["w1"][0, 0] = 99
    assert state["model"]["w1"][0, 0] != 99


def test_loading_a_file_directly(tmp_path):
    path = save_checkpoint(tmp_path, {"x": np.arange(3)}, step=1)
    state, step = load_checkpoint(path)
    assert step == 1 and state["x"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("make", [np.random.PCG64, np.random.MT19937, np.random.Philox,
                                  np.random.SFC64, np.random.PCG64DXSM])
def test_generator_continues_identically_after_restore(tmp_path, make):
    rng = np.random.Generator(make(123))
    rng.standard_normal(17)            # advance to a non-initial state
    rng.random()                       # leaves a buffered uint32 on some generators
    save_checkpoint(tmp_path, {"rng": rng.bit_generator.state}, step=0)
    expected = (rng.standard_normal(50), rng.integers(0, 2**63, 20), rng.random(3, np.float32))

    restored = np.random.Generator(make(0))
    restored.bit_generator.state = load_checkpoint(tmp_path)[0]["rng"]
    got = (restored.standard_normal(50), restored.integers(0, 2**63, 20),
           restored.random(3, np.float32))
    for e, g in zip(expected, got):
        assert e.tobytes() == g.tobytes()


def test_legacy_random_state_continues_identically(tmp_path):
    rs = np.random.RandomState(9)
    rs.standard_normal(3)              # the legacy state caches a Gaussian
    save_checkpoint(tmp_path, {"rs": rs.get_state()}, step=0)
    expected = rs.standard_normal(10)
    fresh = np.random.RandomState(0)
    fresh.set_state(load_checkpoint(tmp_path)[0]["rs"])
    assert fresh.standard_normal(10).tobytes() == expected.tobytes()


def test_keeps_latest_and_previous_only(tmp_path):
    for step in (10, 20, 30, 40):
        save_checkpoint(tmp_path, {"step": step}, step=step)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [40, 30]
    pointer = json.loads((tmp_path / POINTER).read_text())
    assert pointer["step"] == 40 and pointer["previous"].endswith("30.npz")
    assert load_checkpoint(tmp_path) == ({"step": 40}, 40)


def test_resaving_the_same_step_keeps_a_real_previous(tmp_path):
    save_checkpoint(tmp_path, {"v": 1}, step=1)
    save_checkpoint(tmp_path, {"v": 2}, step=2)
    save_checkpoint(tmp_path, {"v": 3}, step=2)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [2, 1]
    assert load_checkpoint(tmp_path) == ({"v": 3}, 2)


def test_pointer_not_step_number_decides_latest(tmp_path):
    # A fresh run writing into a folder left by an older, longer run.
    save_checkpoint(tmp_path, {"run": "old"}, step=100)
    save_checkpoint(tmp_path, {"run": "new"}, step=5)
    assert load_checkpoint(tmp_path) == ({"run": "new"}, 5)


def test_missing_pointer_falls_back_to_highest_step(tmp_path):
    save_checkpoint(tmp_path, {"v": 1}, step=1)
    save_checkpoint(tmp_path, {"v": 2}, step=2)
    (tmp_path / POINTER).unlink()
    assert load_checkpoint(tmp_path) == ({"v": 2}, 2)
    (tmp_path / POINTER).write_text("{not json")
    assert load_checkpoint(tmp_path) == ({"v": 2}, 2)


def test_crash_before_rename_leaves_previous_intact(tmp_path, monkeypatch):
    save_checkpoint(tmp_path, {"w": np.arange(4.0)}, step=1)
    real_replace = os.replace

    def crash(src, dst):
        raise OSError("simulated crash during rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        save_checkpoint(tmp_path, {"w": np.zeros(4)}, step=2)
    monkeypatch.setattr(os, "replace", real_replace)
    state, step = load_checkpoint(tmp_path)
    assert step == 1 and state["w"].tolist() == [0, 1, 2, 3]
    # The failed writer cleaned up its temporary file.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000000000001.npz", POINTER]


def test_crash_between_checkpoint_and_pointer_keeps_old_latest(tmp_path, monkeypatch):
    save_checkpoint(tmp_path, {"v": 1}, step=1)
    real_replace = os.replace

    def crash_on_pointer(src, dst):
        if os.path.basename(dst) == POINTER:
            raise OSError("simulated crash before the pointer update")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_pointer)
    with pytest.raises(OSError):
        save_checkpoint(tmp_path, {"v": 2}, step=2)
    monkeypatch.setattr(os, "replace", real_replace)
    # The new file is complete but was never published: the old latest wins.
    assert load_checkpoint(tmp_path) == ({"v": 1}, 1)
    # The next save proceeds normally and still keeps the old latest as previous.
    save_checkpoint(tmp_path, {"v": 3}, step=3)
    assert load_checkpoint(tmp_path) == ({"v": 3}, 3)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [3, 1]


def test_killed_writer_temp_file_is_ignored_and_cleaned(tmp_path):
    save_checkpoint(tmp_path, {"v": 1}, step=1)
    # What a writer killed mid-write leaves behind: a half-written temporary file.
    good = (tmp_path / "ckpt-000000000001.npz").read_bytes()
    stray = tmp_path / ".tmp-ckpt-000000000002.npz.abc123"
    stray.write_bytes(good[: len(good) // 2])
    assert load_checkpoint(tmp_path) == ({"v": 1}, 1)
    save_checkpoint(tmp_path, {"v": 2}, step=2)
    assert not stray.exists()


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_corrupt_newest_falls_back_to_previous(tmp_path, caplog, damage):
    save_checkpoint(tmp_path, {"w": np.arange(1000.0)}, step=1)
    newest = save_checkpoint(tmp_path, {"w": np.arange(1000.0) * 2}, step=2)
    data = bytearray(newest.read_bytes())
    if damage == "truncate":
        data = data[: len(data) * 2 // 3]
    elif damage == "flip":
        data[len(data) // 3] ^= 0xFF         # inside the array bytes: only the CRC sees it
    else:
        data = b""
    newest.write_bytes(bytes(data))

    with caplog.at_level(logging.WARNING, logger="spgnn.checkpoint"):
        state, step = load_checkpoint(tmp_path)
    assert step == 1 and state["w"][-1] == 999.0
    assert newest.name in caplog.text and "ckpt-000000000001.npz" in caplog.text

    with pytest.raises(CheckpointError, match=newest.name) as info:
        load_checkpoint(newest)
    assert isinstance(info.value, SpgnnError) and isinstance(info.value, ValueError)


def test_all_corrupt_names_every_file(tmp_path):
    a = save_checkpoint(tmp_path, {"v": 1}, step=1)
    b = save_checkpoint(tmp_path, {"v": 2}, step=2)
    a.write_bytes(b"garbage")
    b.write_bytes(a.read_bytes()[:3])
    with pytest.raises(CheckpointError, match="no intact checkpoint") as info:
        load_checkpoint(tmp_path)
    assert a.name in str(info.value) and b.name in str(info.value)


def test_foreign_npz_and_npy_are_rejected(tmp_path):
    np.savez(tmp_path / "ckpt-000000000001.npz", x=np.arange(3))
    with pytest.raises(CheckpointError, match="not an spgnn checkpoint"):
        load_checkpoint(tmp_path)
    npy = tmp_path / "ckpt-000000000002.npz"
    with open(npy, "wb") as f:
        np.save(f, np.arange(3))
    with pytest.raises(CheckpointError, match="single .npy array"):
        load_checkpoint(npy)


def test_missing_directory_or_no_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="no checkpoint in"):
        load_checkpoint(tmp_path)
    assert list_checkpoints(tmp_path / "nope") == []


@pytest.mark.parametrize("bad, match", [
    ({"x": {1, 2}}, r"state\['x'\] has unsupported type set"),
    ({"x": [np.array([object()])]}, r"state\['x'\]\[0\] is an array of dtype object"),
    ({"x": {(1, 2): 3}}, "keys of"),
    ({"x": b"bytes"}, "unsupported type bytes"),
])
def test_unsupported_values_write_nothing(tmp_path, bad, match):
    with pytest.raises(TypeError, match=match):
        save_checkpoint(tmp_path, bad, step=0)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("step", [-1, 1.0, True, "3", None])
def test_bad_step(tmp_path, step):
    with pytest.raises(ValueError, match="step must be a non-negative int"):
        save_checkpoint(tmp_path, {}, step=step)


def test_state_must_be_a_dict(tmp_path):
    with pytest.raises(TypeError, match="state must be a dict"):
        save_checkpoint(tmp_path, [1, 2], step=0)


# ------------------------------------------------------------ collective
def test_collective_save_and_load(tmp_path):
    state = rich_state()

    def fn(comm):
        # Only rank 0's state is written; the others pass None.
        path = save_checkpoint_collective(comm, tmp_path, state if comm.rank == 0 else None, 3)
        # Every rank returns after the write: the file is already there.
        on_disk = [s for s, _ in list_checkpoints(tmp_path)]
        loaded, step = load_checkpoint_collective(comm, tmp_path)
        return comm.rank, path, on_disk, loaded, step

    results = spgnn.run_loopback(3, fn)
    for rank, path, on_disk, loaded, step in results:
        assert (path is not None) == (rank == 0)
        assert on_disk == [3] and step == 3
        assert_identical(state, loaded)
    # Each rank has its own copy.
    assert results[1][3]["model"]["w1"] is not results[2][3]["model"]["w1"]


def test_collective_load_error_is_raised_on_every_rank(tmp_path):
    def fn(comm):
        try:
            load_checkpoint_collective(comm, tmp_path / "missing")
        except CheckpointError as e:
            return str(e)
        return None

    messages = spgnn.run_loopback(3, fn)
    assert all(m is not None and "does not exist" in m for m in messages)
    assert messages[1].startswith("load_checkpoint_collective: rank 0 failed")


def test_collective_save_error_is_raised_on_every_rank(tmp_path):
    def fn(comm):
        try:
            save_checkpoint_collective(comm, tmp_path, {"bad": {1}}, 0)
        except (TypeError, CheckpointError) as e:
            return type(e).__name__
        return None

    assert spgnn.run_loopback(3, fn) == ["TypeError", "CheckpointError", "CheckpointError"]


# ------------------------------------------------- kill and resume contract
def _train(directory, steps, *, every, resume, stop_after=None):
    """A toy training loop with momentum and a noisy RNG, checkpointing every ``every`` steps."""
    if resume and list_checkpoints(directory):
        state, start = load_checkpoint(directory)
        w, m = state["model"]["w"], state["opt"]["m"]
        rng = np.random.default_rng()
        rng.bit_generator.state = state["rng"]
    else:
        start, rng = 0, np.random.default_rng(0)
        w, m = rng.standard_normal(8).astype(np.float32), np.zeros(8, np.float32)
    for step in range(start, steps):
        if stop_after is not None and step == stop_after:
            return None                          # "killed": nothing after the last checkpoint
        grad = w - rng.standard_normal(8).astype(np.float32)
        m = np.float32(0.9) * m + grad
        w = w - np.float32(0.05) * m
        if (step + 1) % every == 0:
            save_checkpoint(directory, {"model": {"w": w}, "opt": {"m": m},
                                        "rng": rng.bit_generator.state}, step=step + 1)
    return w


def test_killed_and_resumed_run_matches_uninterrupted(tmp_path):
    reference = _train(tmp_path / "ref", 20, every=3, resume=False)
    assert _train(tmp_path / "run", 20, every=3, resume=False, stop_after=11) is None
    resumed = _train(tmp_path / "run", 20, every=3, resume=True)
    assert resumed.tobytes() == reference.tobytes()
