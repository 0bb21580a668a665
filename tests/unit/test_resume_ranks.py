"""Resume on another rank count (issue 37): a checkpoint written on P ranks resumes on Q.

Checkpoints hold parameters and optimizer state as global matrices
(:meth:`Trainer.gather_state`).  A run written at P = 2 resumes at Q = 1 and
Q = 3 and must equal a run at Q whose trainer is given the same weights and
optimizer state by hand (each parameter's block cut from the global matrices
with its layout): the same losses, the same final weights.  Full graph (1d,
and 3d whose weights are sharded over the grid) and minibatch training with
the embedding cache.  Virtual ranks (``run_loopback``), through the command's
``train`` function; small graphs.
"""

import argparse

import numpy as np
import pytest

from spgnn.checkpoint import load_checkpoint, save_checkpoint
from spgnn.cli import train as cli_train
from spgnn.comm import run_loopback
from spgnn.io import load_on_root

BASE = ["--graph", "sbm:120:3:0", "--feature-dim", "16", "--hidden", "8", "--no-progress",
        "--seed", "5"]
CASES = {
    "gcn-1d": ["--algo", "1d-aware", "--layers", "2"],
    "gcn-3d-sharded": ["--algo", "3d", "--layers", "2"],
    "sage-hec": ["--model", "sage", "--hec", "on", "--partition", "metis", "--batch-size", "16",
                 "--fanout", "4,4", "--model-selection", "last"],
}
#: Only at P: --grid 2x1x1 shards every 3d weight over two ranks.
AT_P = {"gcn-3d-sharded": ["--grid", "2x1x1"]}


def _config(*argv):
    parser = argparse.ArgumentParser()
    cli_train.add_parser(parser.add_subparsers())
    return cli_train.config_from_args(parser.parse_args(["train", *BASE, *argv]))


def _run(ranks, *argv):
    return run_loopback(ranks, lambda comm: cli_train.train(comm, _config(*argv)))[0]


def _from_weights(ranks, argv, state, epochs):
    """A run at ``ranks`` whose trainer gets ``state``'s global weights and optimizer state by
    hand; ``(losses, final weights)``."""
    def body(comm):
        cfg = _config(*argv)
        built = cfg.build(comm, load_on_root(comm, cfg.load_graph))
        tr = built.trainer
        g = state["trainer"]["global"]

        def block(p, value):
            (r0, r1), (c0, c1) = p.layout.bounds(p.grid, p.shape)
            return np.array(value[r0:r1, c0:c1], dtype=p.value.dtype)

        for name, p in tr.model.named_parameters():
            p.value[...] = block(p, g["model"][name])
        tr.optimizer.steps = int(g["optimizer"]["steps"])
        tr.optimizer.state = [{k: block(p, v) for k, v in st.items()}
                              for p, st in zip(tr.optimizer.params, g["optimizer"]["state"])]
        tr.epoch = int(g["epoch"])
        replay = getattr(tr.source, "replay_hec_plans", None)
        if replay is not None:      # as the resume does: auto HEC's state of epochs < tr.epoch
            replay(tr.epoch, tr.seed)
        recs = tr.fit(epochs - tr.epoch, evaluate=False, hooks=built.hooks)
        return [r["loss"] for r in recs], {n: p.to_global() for n, p in tr.model.named_parameters()}

    return run_loopback(ranks, body)[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_resume_on_another_rank_count_equals_a_run_from_the_same_weights(case, tmp_path):
    argv = CASES[case]
    ckpt, weights = tmp_path / "ckpt", tmp_path / "w2.npz"
    _run(2, *argv, *AT_P.get(case, []), "--epochs", "2", "--checkpoint", str(ckpt),
         "--every", "2", "--save-weights", str(weights))
    state, step = load_checkpoint(ckpt)
    assert step == 2 and state["config"]["ranks"] == 2
    with np.load(weights) as saved:          # the global form is the run's own weights
        for name, value in state["trainer"]["global"]["model"].items():
            assert np.array_equal(value, saved[name]), name
    for q in (1, 3):
        out = tmp_path / f"w{q}.npz"
        resumed = _run(q, *argv, "--epochs", "4", "--resume", str(ckpt), "--checkpoint",
                       str(tmp_path / f"ckpt{q}"), "--save-weights", str(out))
        assert (resumed["resumed_from"], resumed["resumed_ranks"], resumed["ranks"]) == (2, 2, q)
        assert "partition" in resumed["rebuilt"]
        assert ("hec caches" in resumed["rebuilt"]) == (case == "sage-hec")
        losses, final = _from_weights(q, argv, state, 4)
        np.testing.assert_allclose(resumed["loss_history"], losses, rtol=1e-6, atol=0)
        with np.load(out) as got:
            for name, value in final.items():
                np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-7, err_msg=name)


def test_resume_on_the_same_ranks_rebuilds_nothing(tmp_path):
    _run(2, *CASES["gcn-1d"], "--epochs", "2", "--checkpoint", str(tmp_path), "--every", "2")
    r = _run(2, *CASES["gcn-1d"], "--epochs", "3", "--resume", str(tmp_path))
    assert (r["resumed_from"], r["resumed_ranks"], r["rebuilt"]) == (2, 2, [])
    fresh = _run(2, *CASES["gcn-1d"], "--epochs", "3")
    assert (fresh["resumed_from"], fresh["resumed_ranks"], fresh["rebuilt"]) == (None, None, None)


def test_another_width_at_another_rank_count_is_still_refused(tmp_path):
    _run(2, *CASES["gcn-1d"], "--epochs", "2", "--checkpoint", str(tmp_path), "--every", "2")
    with pytest.raises(ValueError, match="another configuration: hidden: saved 8, now 4"):
        _run(1, *CASES["gcn-1d"], "--hidden", "4", "--epochs", "3", "--resume", str(tmp_path))


def test_a_per_rank_checkpoint_of_an_earlier_spgnn_names_its_rank_count(tmp_path):
    """Earlier full-graph checkpoints held each rank's blocks: they resume on that count only."""
    _run(2, *CASES["gcn-1d"], "--epochs", "2", "--checkpoint", str(tmp_path), "--every", "2")
    state, step = load_checkpoint(tmp_path)
    g = state["trainer"]["global"]
    state["trainer"] = {"ranks": [g, g]}
    save_checkpoint(tmp_path, state, step=step)
    with pytest.raises(ValueError, match="per-rank blocks of 2 ranks .* resume it on 2 ranks, "
                                         "not 1"):
        _run(1, *CASES["gcn-1d"], "--epochs", "3", "--resume", str(tmp_path))
