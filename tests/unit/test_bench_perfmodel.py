"""The validation benchmark's arithmetic (no timing): the ranking summary and the record file.

``python -m spgnn bench perfmodel validate-ranking`` reports Spearman's rho, the
model's and the measured best and the regret (the measured epoch of the
model's pick over the fastest measured); these are checked on hand-made rows.
"""

import json

import pytest

from spgnn._benchmarks.perfmodel import _append, _ranking_summary, spearman, table_markdown


def _row(config, measured, predicted, comm_m=1.0, comm_p=1.0):
    return {"config": config, "measured_s": measured, "predicted_s": predicted,
            "measured_comm_s": comm_m, "predicted_comm_s": comm_p, "predicted_compute_s": 0.0}


def test_ranking_summary_by_hand():
    rows = [_row("1d", 3.0, 1.0, 2.0, 1.0), _row("3d 2x1x1", 2.0, 2.0, 1.0, 1.5),
            _row("15d c=2", 4.0, 3.0, 1.0, 1.0)]
    s = _ranking_summary(rows)
    assert s["model_best"] == "1d" and s["measured_best"] == "3d 2x1x1"
    assert s["regret"] == pytest.approx(3.0 / 2.0)
    assert s["spearman_epoch"] == pytest.approx(spearman([3, 2, 4], [1, 2, 3])) == \
        pytest.approx(0.5)
    assert s["comm_median_error"] == pytest.approx(0.5)           # 0.5, 0.5, 0.0
    assert s["epoch_median_error"] == pytest.approx(0.25)         # 2/3, 0, 1/4
    perfect = _ranking_summary([_row("a", 1.0, 1.0), _row("b", 2.0, 2.0)])
    assert perfect["regret"] == 1.0 and perfect["spearman_epoch"] == pytest.approx(1.0)


def test_records_append_and_table_renders(tmp_path):
    path = tmp_path / "sub" / "perfmodel.jsonl"
    _append({"mode": "a", "x": 1.5}, str(path))
    _append({"mode": "b"}, str(path))
    assert [json.loads(line)["mode"] for line in path.read_text().splitlines()] == ["a", "b"]
    cell = {"label": "3d 4x4x4", "seconds": 0.0125}
    md = table_markdown([{"graph": "g", "ranks": 64, "top": [cell], "best_other": None,
                          "place_of_best_other": None, "best_3d_permute_double": cell}])
    assert "| g | 64 | 3d 4x4x4 12.50 ms |  |  | - | 3d 4x4x4 12.50 ms |" in md
