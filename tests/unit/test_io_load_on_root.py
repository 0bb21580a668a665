"""spgnn.io.load_on_root: one rank reads, a failure raises on every rank with its own type."""

import pytest

from spgnn import run_loopback
from spgnn.errors import GraphFormatError
from spgnn.io import Graph, load_graph, load_on_root


def _outcome(comm, path, root):
    """What ``load_on_root`` gave this rank: ("graph", n), ("none",) or (type, message)."""
    try:
        g = load_on_root(comm, lambda: load_graph(path), root=root)
    except Exception as exc:   # noqa: BLE001 - the type is what is checked
        return type(exc), str(exc)
    return ("graph", g.num_nodes) if isinstance(g, Graph) else ("none",)


@pytest.mark.parametrize("nranks,root", [(2, 0), (3, 1)])
def test_graph_format_error_reaches_every_rank(tmp_path, nranks, root):
    bad = tmp_path / "bad.txt"
    bad.write_text("0 1\n1 x\n")
    res = run_loopback(nranks, _outcome, bad, root, timeout=30)
    for r, (kind, message) in enumerate(res):
        assert kind is GraphFormatError, (r, kind, message)
        assert "bad.txt:2:" in message
        if r != root:
            assert f"rank {root}: " in message


def test_missing_file_reaches_every_rank(tmp_path):
    res = run_loopback(2, _outcome, tmp_path / "absent.txt", 0, timeout=30)
    assert [kind for kind, _ in res] == [FileNotFoundError] * 2


def test_graph_on_root_only(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("0 1\n1 2\n")
    assert run_loopback(3, _outcome, good, 2, timeout=30) == [("none",), ("none",), ("graph", 3)]
