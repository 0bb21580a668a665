"""Every notebook in notebooks/ runs top to bottom (in one process, loopback ranks)."""

import glob
import os

import pytest

from spgnn.testing.notebook import execute_notebook

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


@pytest.fixture(autouse=True)
def _figures_to_tmp(tmp_path, monkeypatch):
    """Notebooks save figures under SPGNN_FIGURE_DIR: keep the committed ones untouched."""
    monkeypatch.setenv("SPGNN_FIGURE_DIR", str(tmp_path))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path):
    outputs = execute_notebook(path)
    assert any(outputs), f"{path} printed nothing"


def test_grids_notebook_checks_against_scipy():
    path = os.path.join(ROOT, "notebooks", "01_grids_and_spmm.ipynb")
    text = "".join(execute_notebook(path))
    for algo in ("1d", "1d-aware"):
        line = next(l for l in text.splitlines() if l.startswith(f"{algo}: max |Y - scipy|"))
        assert float(line.split("=")[1]) < 1e-3, line


def test_graphblas_notebook_checks_against_scipy():
    path = os.path.join(ROOT, "notebooks", "06_graphblas.ipynb")
    text = "".join(execute_notebook(path))
    line = next(l for l in text.splitlines() if l.startswith("triangles: spgnn="))
    ours, ref = (int(part.split("=")[1]) for part in line.split()[1:3])
    assert ours == ref > 0, line
    assert "bfs levels equal scipy: True" in text
    err = next(l for l in text.splitlines() if l.startswith("max_absdiff SUMMA max error:"))
    assert float(err.split(":")[1]) < 1e-12, err
    assert "masked entries inside A's pattern: 0" in text
    assert "assign equals numpy: True" in text
    assert "spmm max_absdiff equals brute force: True" in text
