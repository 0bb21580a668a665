"""Issue 38: size options are estimated before anything is allocated.  ``--hidden 100000000``,
``--heads 100000000`` and ``spmm --feat 100000000`` ended in a MemoryError traceback and
MPI_Abort; now one typed error (:class:`~spgnn.errors.InputTooLarge`) names the option and the
estimate.  The train cases run on one loopback rank through the command's ``train``."""

import argparse
import subprocess
import sys

import pytest

from spgnn.cli import train as cli_train
from spgnn.comm import run_loopback
from spgnn.errors import InputTooLarge


def _train(*argv):
    parser = argparse.ArgumentParser()
    cli_train.add_parser(parser.add_subparsers())
    config = cli_train.config_from_args(parser.parse_args(
        ["train", "--graph", "sbm:120:3:0", "--epochs", "1", "--no-progress", *argv]))
    return run_loopback(1, lambda comm: cli_train.train(comm, config), timeout=120)[0]


@pytest.mark.parametrize("argv, needle", [
    (["--hidden", "100000000"], "--hidden 100000000 (--model gcn: 3,500,000,000 weights"),
    (["--model", "gat", "--heads", "100000000"], "--hidden 8 --heads 100000000 (--model gat"),
    (["--model", "sage", "--hidden", "100000000"], "--hidden 100000000 (--model sage"),
])
def test_a_model_too_large_is_refused_before_it_is_allocated(argv, needle):
    with pytest.raises(InputTooLarge, match="needs about") as info:
        _train(*argv)
    assert needle in str(info.value), str(info.value)


def test_a_model_that_fits_trains():
    assert 0 <= _train("--hidden", "4")["test_acc"] <= 1


def test_spmm_feat_is_estimated_on_rank_0():
    proc = subprocess.run([sys.executable, "-m", "spgnn", "spmm", "--graph", "rmat:8", "--feat",
                           "100000000"], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    lines = [ln for ln in proc.stderr.splitlines() if "spgnn spmm: error:" in ln]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "--feat 100000000 (256 x 100,000,000 operand on rank 0) needs about" in lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.mpi
@pytest.mark.parametrize("argv, env, needle", [
    (["--algo", "1d-aware", "--memory-limit", "1MB"], None, "--algo 1d-aware: does not fit in"),
    (["--algo", "auto"], {"SPGNN_HOST_MEMORY": "2000000"}, "that limit is the default"),
])
def test_over_the_memory_limit_is_one_line_on_every_rank(argv, env, needle):
    # the memory check's error is agreed, then reworded: the rewording must stay agreed, or
    # every rank prints its own line and the job ends in MPI_Abort (stop 45, products shards)
    from spgnn.testing.mpi import run_mpi

    proc = run_mpi(["-m", "spgnn", "train", "--graph", "rmat:8:4", "--features", "random:4",
                    "--labels", "random:2", "--epochs", "1", "--no-progress", *argv], 2,
                   env=env, timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if "error:" in ln]
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout[-3000:]
    assert needle in lines[0] and "Abort" not in proc.stdout, proc.stdout[-3000:]
