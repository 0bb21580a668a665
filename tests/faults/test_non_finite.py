"""Fault class 2 (issue 28): non-finite values never train silently.

ReLU maps NaN to 0, so a NaN input once trained to a finite-looking loss
(exactly ln C) at chance accuracy.  Now: inputs and hyperparameters are
validated (a typed error naming the file, row or option), training stops the
first epoch a loss or gradient is not finite (on every rank, before the
optimizer step), a checkpoint with non-finite weights is refused, and
``--json`` never prints a bare NaN.
"""

import dataclasses
import json

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn import run_loopback
from spgnn.checkpoint import load_checkpoint, save_checkpoint
from spgnn.errors import NonFiniteError
from spgnn.gnn import (GCN, Adam, DistGraph, GraphSAGE, MinibatchGraph, Sampled, Trainer,
                       placement_for)
from spgnn.io import load_graph, save_npz
from spgnn.sampling import GraphSAGESampler
from spgnn.testing.jobs import Job
from spgnn.testing.mpi import find_mpiexec

needs_mpi = pytest.mark.skipif(find_mpiexec() is None, reason="no mpiexec beside Python")
GRAPH = load_graph("sbm:300:3:0")


def _strict_json(out):
    line = out.strip().splitlines()[-1]

    def refuse(token):
        raise AssertionError(f"bare {token} in --json output: {line}")
    return json.loads(line, parse_constant=refuse)


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    x = np.array(GRAPH.features, dtype=np.float32)
    x[17, 3] = np.nan
    save_npz(dataclasses.replace(GRAPH, features=x, name="nanfeatures"), d / "nanfeatures.npz")
    x = np.array(GRAPH.features, dtype=np.float32)
    x[4, 0] = -np.inf
    save_npz(dataclasses.replace(GRAPH, features=x, name="inffeatures"), d / "inffeatures.npz")
    a = sp.csr_array(GRAPH.adj, dtype=np.float64, copy=True)
    a.data[5] = np.nan
    save_npz(dataclasses.replace(GRAPH, adj=a, name="nanedge"), d / "nanedge.npz")
    return d


CASES = {
    "nan-feature": (["--graph", "{d}/nanfeatures.npz"], "nanfeatures: feature row 17, column 3"),
    "inf-feature": (["--graph", "{d}/inffeatures.npz"], "inffeatures: feature row 4, column 0"),
    "nan-edge-weight": (["--graph", "{d}/nanedge.npz"], "nanedge: the edge"),
    "nan-feature-sage": (["--graph", "{d}/nanfeatures.npz", "--model", "sage"], "feature row 17"),
    "lr-inf": (["--graph", "sbm:300:3:0", "--lr", "inf"], "--lr must be finite"),
    "lr-nan": (["--graph", "sbm:300:3:0", "--lr", "nan"], "--lr must be > 0"),
    "weight-decay-inf": (["--graph", "sbm:300:3:0", "--weight-decay", "inf"],
                         "--weight-decay must be finite"),
    "weight-decay-nan": (["--graph", "sbm:300:3:0", "--weight-decay", "nan"],
                         "--weight-decay >= 0"),
    "dropout-nan": (["--graph", "sbm:300:3:0", "--dropout", "nan"], "--dropout must lie in [0, 1)"),
}


@needs_mpi
@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_one_typed_line(name, bad_files):
    args, message = CASES[name]
    args = [a.format(d=bad_files) for a in args]
    with Job(["-m", "spgnn", "train", *args, "--epochs", "3", "--no-progress"], 2) as job:
        rc, out = job.wait(timeout=60)
    assert rc == 2, out
    errors = [line for line in out.splitlines() if "spgnn train: error:" in line]
    assert len(errors) == 1 and message in errors[0], out
    assert "Traceback" not in out and "Abort" not in out, out
    assert job.leftovers() == []


def _poison(model, name):
    dict(model.named_parameters())[name].value[0, 0] = np.nan


@pytest.mark.parametrize("algorithm", ["1d-aware", "15d-aware", "3d"])
def test_training_stops_at_the_first_non_finite_gradient(algorithm):
    """A NaN that ReLU hides from the loss still stops training, on every rank, before the step."""
    def body(comm):
        kw = {"c": 2} if algorithm == "15d-aware" else {}
        dg = DistGraph.from_graph(GRAPH if comm.rank == 0 else None, comm,
                                  placement_for(algorithm, **kw))
        model = GCN(dg.num_features, 8, dg.num_classes, seed=0)
        tr = Trainer(model, dg, Adam(model.param_groups(5e-4), lr=0.01))
        tr.train_epoch()
        before = {n: p.value.copy() for n, p in model.named_parameters()}
        for p in model.parameters():             # every rank's block: first layer's weight
            if p is model.convs[0].weight and p.value.size:
                p.value[...] = np.nan
        try:
            tr.train_epoch()
        except NonFiniteError as exc:
            after = {n: p.value for n, p in model.named_parameters()}
            untouched = all(np.array_equal(before[n], after[n]) for n in before
                            if n != "1.weight")
            return str(exc), tr.epoch, untouched
        return None, tr.epoch, None

    for msg, epoch, untouched in run_loopback(4, body, timeout=120):
        assert msg is not None and "epoch 1" in msg and "not finite" in msg, msg
        assert epoch == 1 and untouched


def test_minibatch_training_stops_at_the_first_non_finite_gradient():
    def body(comm):
        mg = MinibatchGraph.from_graph(GRAPH if comm.rank == 0 else None, comm)
        model = GraphSAGE(mg.num_features, 8, mg.num_classes, layers=2, seed=0)
        tr = Trainer(model, Sampled(mg, GraphSAGESampler((3, 3), frontier="unique", seed=0),
                                    batch_size=64, bulk=2), Adam(model.param_groups(), lr=0.01))
        _poison(model, "0.w_neigh")
        try:
            tr.train_epoch()
        except NonFiniteError as exc:
            return str(exc)
        return None

    for msg in run_loopback(3, body, timeout=120):
        assert msg is not None and "not finite" in msg, msg


@needs_mpi
@pytest.mark.mpi
def test_a_checkpoint_with_nan_weights_is_refused(tmp_path):
    common = ["-m", "spgnn", "train", "--graph", "sbm:300:3:0", "--no-progress",
              "--checkpoint", str(tmp_path), "--every", "2"]
    with Job([*common, "--epochs", "2"], 2) as job:
        rc, out = job.wait(timeout=60)
    assert rc == 0, out
    state, step = load_checkpoint(tmp_path)
    model = state["trainer"]["global"]["model"]          # global matrices (any rank count)
    model[sorted(model)[0]][0, 0] = np.nan
    save_checkpoint(tmp_path, state, step=step + 2)
    with Job([*common, "--epochs", "6", "--resume", str(tmp_path)], 2) as job:
        rc, out = job.wait(timeout=60)
    assert rc == 2 and "holds non-finite values" in out and "Traceback" not in out, out


@needs_mpi
@pytest.mark.mpi
def test_json_never_prints_nan():
    """An empty validation set has no accuracy: null, not NaN and not 0.0."""
    with Job(["-m", "spgnn", "train", "--graph", "sbm:300:3:0", "--split", "0.8:0",
              "--epochs", "2", "--no-progress", "--json"], 2) as job:
        rc, out = job.wait(timeout=60)
    assert rc == 0, out
    rep = _strict_json(out)
    assert rep["val_acc"] is None and rep["val_loss"] is None and rep["test_acc"] is not None
