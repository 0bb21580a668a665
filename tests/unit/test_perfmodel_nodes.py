"""Per-axis α–β with a rank-to-node mapping (issue 26): hand-computed cases, files, the epoch."""

import json

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.errors import CalibrationError
from spgnn.plan.model import FORMAT, FORMATS, Calibration, axis_groups, predict_epoch

INTRA, INTER = (1e-6, 1e-9), (1e-5, 1e-8)
CAL = Calibration(comm={"default": INTRA}, spmm=(1e-5, 2e-9, 3e-9, 4e-10, 1e-10),
                  gemm=(2e-6, 1e-11, 5e-10), comm_inter={"default": INTER}, ranks_per_node=4)


def test_axis_groups_follow_the_row_major_rank_order():
    names = ("x", "y", "z")
    assert axis_groups((2, 2, 2), names, ("x",)).tolist() == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert axis_groups((2, 2, 2), names, ("y",)).tolist() == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert axis_groups((2, 2, 2), names, ("z",)).tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert axis_groups((3, 2), ("row", "layer"), ("row",)).tolist() == [[0, 2, 4], [1, 3, 5]]
    assert axis_groups((4,), ("row",), ("row",)).tolist() == [[0, 1, 2, 3]]


def test_comm_seconds_by_hand():
    names = ("x", "y", "z")
    # 2x2x2, 4 ranks per node (ranks 0-3 on node 0): z and y stay inside a node
    for axis in ("z", "y"):
        t = CAL.comm_seconds("allreduce", 2, 1000, axis_groups((2, 2, 2), names, (axis,)))
        np.testing.assert_allclose(t, [2 * 1e-6 + 1000 * 1e-9] * 8)
    # x crosses; all 4 x-groups have a member on node 0: contention 4
    t = CAL.comm_seconds("allreduce", 2, 1000, axis_groups((2, 2, 2), names, ("x",)))
    np.testing.assert_allclose(t, [2 * 1e-5 + 4 * 1000 * 1e-8] * 8)
    # 2 ranks per node: y-groups {0,2}, {1,3} share nodes 0 and 1: contention 2
    two = CAL.with_nodes(2)
    t = two.comm_seconds("allreduce", 2, 1000, axis_groups((2, 2, 2), names, ("y",)))
    np.testing.assert_allclose(t, [2 * 1e-5 + 2 * 1000 * 1e-8] * 8)
    # mixed groups, per-rank bytes: {0,1} on node 0; {2,5} crosses nodes 1 and 2 alone
    t = two.comm_seconds("alltoallv", np.array([1, 1, 3, 0, 0, 3]),
                         np.array([10, 10, 500, 0, 0, 700]), [[0, 1], [2, 5]])
    np.testing.assert_allclose(t, [1e-6 + 1e-8, 1e-6 + 1e-8, 3e-5 + 500e-8, 0, 0,
                                   3e-5 + 700e-8])
    # no mapping: the intra-node value, as before
    plain = Calibration(CAL.comm, CAL.spmm, CAL.gemm)
    assert plain.comm_seconds("allreduce", 2, 1000) == pytest.approx(2e-6 + 1e-6)
    np.testing.assert_allclose(
        plain.comm_seconds("allreduce", 2, 1000, axis_groups((2, 2, 2), names, ("x",))), 3e-6)


def test_contention_is_plexus_min_gnode_stride():
    """4x4x4 on nodes of 4: β_a = β_inter / min(G_node, P_a) with P_a the axis's stride."""
    names = ("x", "y", "z")
    for axis, stride in (("x", 16), ("y", 4)):
        t = CAL.comm_seconds("allreduce", 0, 1, axis_groups((4, 4, 4), names, (axis,)))
        np.testing.assert_allclose(t, 1e-8 * min(4, stride))
    t = CAL.comm_seconds("allreduce", 0, 1, axis_groups((4, 4, 4), names, ("z",)))
    np.testing.assert_allclose(t, 1e-9)


def test_epoch_prediction_uses_the_nodes():
    rng = np.random.default_rng(0)
    a = sp.random_array((64, 64), density=0.1, random_state=rng, format="csr")
    a = sp.csr_array(a + a.T + sp.eye_array(64))
    one_node = Calibration(CAL.comm, CAL.spmm, CAL.gemm)
    for algo, kw in (("1d-aware", {}), ("15d", {"replication": 2}), ("3d", {"grid": (2, 2, 2)})):
        base = predict_epoch(a, algo, 8, [16, 8, 4], one_node, **kw).seconds
        # a node per rank with inter = intra: crossing groups have contention 1
        same = predict_epoch(a, algo, 8, [16, 8, 4], CAL.with_nodes(1, CAL.comm), **kw).seconds
        assert same == pytest.approx(base, rel=1e-12)
        # everything on one node: intra everywhere
        assert predict_epoch(a, algo, 8, [16, 8, 4], CAL.with_nodes(8), **kw).seconds == \
            pytest.approx(base, rel=1e-12)
        # two nodes with a slow network: dearer
        assert predict_epoch(a, algo, 8, [16, 8, 4], CAL, **kw).seconds > base


def test_calibration_files_old_and_new(tmp_path):
    path = tmp_path / "cal.json"
    CAL.save(path)
    d = json.loads(path.read_text())
    assert d["format"] == FORMAT and d["ranks_per_node"] == 4
    assert Calibration.load(path) == CAL
    # a version-1 file (no inter-node terms) still loads, as one node
    old = {k: v for k, v in d.items() if k not in ("comm_inter", "ranks_per_node")}
    old["format"] = FORMATS[0]
    (tmp_path / "old.json").write_text(json.dumps(old))
    got = Calibration.load(tmp_path / "old.json")
    assert got.ranks_per_node is None and got.comm == CAL.comm
    bad = {"v1 with inter": {**d, "format": FORMATS[0]},
           "no inter": {k: v for k, v in d.items() if k != "comm_inter"},
           "zero per node": {**d, "ranks_per_node": 0},
           "float per node": {**d, "ranks_per_node": 2.5},
           "inter kind": {**d, "comm_inter": {"default": [1, 1], "gossip": [1, 1]}},
           "inter no default": {**d, "comm_inter": {"allreduce": [1, 1]}},
           "inter negative": {**d, "comm_inter": {"default": [-1, 1]}},
           "v3": {**d, "format": "spgnn-calibration/3"}}
    for name, content in bad.items():
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(content))
        with pytest.raises(CalibrationError) as err:
            Calibration.load(p)
        assert str(p) in str(err.value), name


def _plan(*extra):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "spgnn", "plan", "--graph", "rmat:8", "--ranks",
                           "8", "--algos", "1d", "--alpha", "1e-6", "--beta", "1e-10", "--time",
                           "--dims", "32,16,4", "--json", *extra], capture_output=True,
                          text=True, timeout=120)


def test_plan_time_with_nodes(tmp_path):
    one = json.loads(_plan().stdout.strip().splitlines()[-1])
    assert one["time"]["ranks_per_node"] is None
    two = json.loads(_plan("--ranks-per-node", "4", "--inter", "1e-4,1e-8").stdout
                     .strip().splitlines()[-1])
    assert two["time"]["ranks_per_node"] == 4
    assert two["time"]["comm_inter"] == {"default": [1e-4, 1e-8]}
    best = {r["algorithm"] + str(r["grid"]): r["seconds"] for r in one["timed"][0]["ranking"]}
    slow = {r["algorithm"] + str(r["grid"]): r["seconds"] for r in two["timed"][0]["ranking"]}
    assert all(slow[k] >= best[k] for k in best)
    assert slow["3d8x1x1"] > best["3d8x1x1"]
    bad = _plan("--ranks-per-node", "4")
    assert bad.returncode != 0 and "--ranks-per-node needs the inter-node" in bad.stderr
