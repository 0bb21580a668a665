"""The exchange options (``--aggregation``, ``--quantize``, ``--rounding``, ``--label-prop``)
and the model are part of a training checkpoint's configuration: a resume under other values
is refused naming them, a resume under the same values continues bit for bit (stochastic
rounding and the label-propagation sets are keyed by (seed, epoch)).  One loopback rank,
through the command's ``train`` function."""

import argparse

import pytest

from spgnn.checkpoint import load_checkpoint_collective, save_checkpoint_collective
from spgnn.cli import train as cli_train
from spgnn.comm import run_loopback

BASE = ["--graph", "sbm:120:3:0", "--feature-dim", "16", "--hidden", "8", "--layers", "2",
        "--no-progress", "--algo", "1d-aware"]
QUANT = ["--aggregation", "hybrid", "--quantize", "int2", "--label-prop", "0.5"]


def _args(*argv):
    parser = argparse.ArgumentParser()
    cli_train.add_parser(parser.add_subparsers())
    return cli_train.config_from_args(parser.parse_args(["train", *BASE, *argv]))


def _run(*argv):
    return run_loopback(1, lambda comm: cli_train.train(comm, _args(*argv)))[0]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    _run("--model", "sage-full", *QUANT, "--epochs", "2", "--checkpoint", str(d), "--every", "2")
    return d


@pytest.mark.parametrize("change,named", [
    (["--aggregation", "pre"], "aggregation: saved 'hybrid', now 'pre'"),
    (["--quantize", "int4"], "quantize: saved 'int2', now 'int4'"),
    (["--rounding", "nearest"], "rounding: saved 'stochastic', now 'nearest'"),
    (["--label-prop", "0.3"], "label_prop: saved 0.5, now 0.3"),
])
def test_resume_with_other_exchange_options_is_refused(ckpt, change, named):
    flags = dict(zip(QUANT[::2], QUANT[1::2]))
    flags.update(dict(zip(change[::2], change[1::2])))
    argv = [x for kv in flags.items() for x in kv]
    with pytest.raises(ValueError, match="another configuration") as err:
        _run("--model", "sage-full", *argv, "--epochs", "3", "--resume", str(ckpt))
    assert named in str(err.value)


def test_resume_with_another_model_is_refused(ckpt):
    with pytest.raises(ValueError, match="holds no --model gcn training checkpoint"):
        _run("--model", "gcn", *QUANT, "--epochs", "3", "--resume", str(ckpt))


def test_resume_with_the_same_options_continues_exactly(ckpt, tmp_path):
    whole = _run("--model", "sage-full", *QUANT, "--epochs", "3")
    resumed = _run("--model", "sage-full", *QUANT, "--epochs", "3", "--resume", str(ckpt),
                   "--checkpoint", str(tmp_path))
    assert resumed["resumed_from"] == 2 and resumed["epochs"] == 3
    assert resumed["final_loss"] == whole["final_loss"]
    assert resumed["test_acc"] == whole["test_acc"]
    assert (resumed["aggregation"], resumed["quantize"], resumed["label_prop"]) == \
        ("hybrid", "int2", 0.5)


def test_checkpoint_without_the_options_resumes_as_their_defaults(tmp_path):
    """Checkpoints written before the options were recorded: post, none, no label propagation."""
    _run("--epochs", "2", "--checkpoint", str(tmp_path), "--every", "2")

    def strip(comm):
        state, step = load_checkpoint_collective(comm, tmp_path)
        for key in ("aggregation", "quantize", "rounding", "label_prop"):
            del state["config"][key]
        save_checkpoint_collective(comm, tmp_path, state, step + 1)
        return step

    run_loopback(1, strip)
    assert _run("--epochs", "3", "--resume", str(tmp_path))["resumed_from"] == 2
    with pytest.raises(ValueError, match="quantize: saved 'none', now 'int2'"):
        _run("--epochs", "4", "--quantize", "int2", "--resume", str(tmp_path))
