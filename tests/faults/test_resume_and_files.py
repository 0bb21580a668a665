"""Fault classes 5 and 6 (issue 28): resume is really the same run; no files left behind;
one run per checkpoint directory.

* a resume matches the data, not the ``--graph`` string: ``./x`` and ``x`` are one
  file, another file with the same shapes is another run;
* a checkpoint holding more epochs than ``--epochs`` is an error, not a 0-epoch run
  reported as complete;
* a malformed newest training state is skipped and the previous checkpoint used;
* a failed ``--save-weights`` (a full disk) names the file and leaves no temporary;
* a second run on a checkpoint directory in use gets a clear error at once.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import time

import numpy as np
import pytest

from spgnn.checkpoint import load_checkpoint, save_checkpoint
from spgnn.io import load_graph, save_npz
from spgnn.testing.jobs import Job
from spgnn.testing.mpi import find_mpiexec

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(find_mpiexec() is None, reason="no mpiexec beside Python")]


def _train(tmp, *args, ranks=2, **job):
    with Job(["-m", "spgnn", "train", "--no-progress", *args], ranks, **job) as j:
        rc, out = j.wait(timeout=90)
    return rc, out


def _report(out):
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture()
def graph_file(tmp_path):
    g = load_graph("sbm:300:3:0")
    save_npz(g, tmp_path / "g.npz")
    return tmp_path


def test_resume_accepts_another_spelling_of_the_same_file(graph_file):
    ck = graph_file / "ck"
    rc, out = _train(graph_file, "--graph", str(graph_file / "g.npz"), "--epochs", "2",
                     "--checkpoint", str(ck), "--every", "2")
    assert rc == 0, out
    rc, out = _train(graph_file, "--graph", "./g.npz", "--epochs", "4", "--resume", str(ck),
                     "--json", cwd=graph_file)
    assert rc == 0 and _report(out)["resumed_from"] == 2, out


def test_resume_refuses_another_file_with_the_same_shapes(graph_file):
    ck = graph_file / "ck"
    rc, out = _train(graph_file, "--graph", str(graph_file / "g.npz"), "--epochs", "2",
                     "--checkpoint", str(ck), "--every", "2")
    assert rc == 0, out
    g = load_graph(str(graph_file / "g.npz"))
    x = np.array(g.features)
    x[0, 0] += 1.0                                   # one value changed, same shapes
    save_npz(dataclasses.replace(g, features=x), graph_file / "g.npz")
    rc, out = _train(graph_file, "--graph", str(graph_file / "g.npz"), "--epochs", "4",
                     "--resume", str(ck))
    assert rc == 2 and "another configuration" in out and "data" in out, out
    assert "Traceback" not in out


def test_fewer_epochs_than_the_checkpoint_is_an_error(graph_file):
    ck = graph_file / "ck"
    rc, out = _train(graph_file, "--graph", "sbm:300:3:0", "--epochs", "4",
                     "--checkpoint", str(ck), "--every", "4")
    assert rc == 0, out
    rc, out = _train(graph_file, "--graph", "sbm:300:3:0", "--epochs", "2", "--resume", str(ck))
    assert rc == 2 and "holds 4 epochs, more than --epochs 2" in out, out


def test_a_malformed_newest_state_falls_back_to_the_previous_checkpoint(graph_file):
    ck = graph_file / "ck"
    rc, out = _train(graph_file, "--graph", "sbm:300:3:0", "--epochs", "4",
                     "--checkpoint", str(ck), "--every", "2")
    assert rc == 0, out
    state, step = load_checkpoint(ck)
    assert step == 4
    state["trainer"] = ["cut", "short"]              # the record is not what train wrote
    save_checkpoint(ck, state, step=6)
    rc, out = _train(graph_file, "--graph", "sbm:300:3:0", "--epochs", "6", "--resume", str(ck),
                     "--json")
    assert rc == 0 and _report(out)["resumed_from"] == 4, out


@pytest.fixture()
def full_disk(tmp_path):
    """A 64 KiB tmpfs: a real full disk (writes fail with ENOSPC)."""
    where = tmp_path / "tiny"
    where.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {proc.stderr.strip()}")
    yield where
    subprocess.run(["umount", str(where)], capture_output=True)


def test_a_full_disk_names_the_file_and_leaves_no_temporary(full_disk):
    target = full_disk / "weights.npz"
    rc, out = _train(full_disk, "--graph", "sbm:300:3:0", "--epochs", "1", "--hidden", "2048",
                     "--save-weights", str(target))
    assert rc == 2, out
    assert f"could not write {target}" in out and "No space left" in out, out
    assert "Traceback" not in out, out
    assert sorted(os.listdir(full_disk)) == [], os.listdir(full_disk)


def test_a_second_run_on_a_directory_in_use_is_refused(tmp_path):
    ck = tmp_path / "ck"
    long_run = ["-m", "spgnn", "train", "--graph", "sbm:2000:4:0", "--epochs", "100000",
                "--no-progress", "--checkpoint", str(ck)]
    with Job(long_run, 2) as first:
        first.wait_for_mpi(2)
        while not (ck / ".lock").exists() or not (ck / ".lock").read_text().strip():
            assert first.proc.poll() is None, first.wait(5)
            time.sleep(0.1)
        deadline_rc, out = _train(tmp_path, "--graph", "sbm:300:3:0", "--epochs", "2",
                                  "--checkpoint", str(ck))
        assert first.proc.poll() is None, "the first run must go on"
    assert deadline_rc == 2 and "is in use by another run" in out, out
    # the lock dies with its holder: the directory is usable again
    rc, out = _train(tmp_path, "--graph", "sbm:300:3:0", "--epochs", "2", "--checkpoint",
                     str(ck))
    assert rc == 0, out
    shutil.rmtree(ck)
