"""The import rules of docs/architecture.md, checked on the source (spgnn/ and kernels/).

Every ``import`` is read with :mod:`ast`, at module level and inside functions
(:mod:`spgnn.testing.architecture`).  The tests fail on: a cycle between
modules; ``kernels/`` importing spgnn; mpi4py imported outside ``spgnn.comm``;
any arrow the rule table does not allow (which covers gnn/core -> cli,
core -> gnn, and core/sampling/gnn -> kernels); a rule-table diagram in
docs/architecture.md that differs from the generated one.
"""

import shutil
from pathlib import Path

import pytest

from spgnn.testing import architecture as arch

REPO = Path(__file__).resolve().parents[2]

#: Arrows that break the rules today (none since issue 21).
#: The list may only shrink: a test fails when an entry no longer occurs.
KNOWN_VIOLATIONS = set()
#: Module cycles known today (each a sorted tuple); may only shrink, like the above.
KNOWN_CYCLES = set()


@pytest.fixture(scope="module")
def graph():
    return arch.import_graph(REPO)


def test_every_module_belongs_to_a_part(graph):
    modules, _, _ = graph
    assert "spgnn.core.spmm" in modules and "spgnn._kernels.numba.spmm" in modules
    assert [m for m in modules if arch.part_of(m) is None] == []


def test_no_cycle_between_modules(graph):
    modules, edges, _ = graph
    found = set(arch.cycles(modules, edges))
    assert found - KNOWN_CYCLES == set(), "import cycles (module-level and function-level " \
        f"imports counted): {sorted(found - KNOWN_CYCLES)}"
    assert KNOWN_CYCLES - found == set(), f"fixed, remove from KNOWN_CYCLES: {KNOWN_CYCLES - found}"


def test_kernels_import_nothing_from_spgnn(graph):
    _, edges, _ = graph
    assert [str(e) for e in edges if arch.part_of(e.source) == "kernels"
            and arch.part_of(e.target) != "kernels"] == []


def test_only_comm_imports_mpi4py(graph):
    _, _, external = graph
    assert [f"{e} (line {e.line})" for e in arch.mpi_importers(external)] == []


def test_every_arrow_is_allowed_by_the_rule_table(graph):
    _, edges, _ = graph
    bad = {str(e) for e in arch.forbidden_edges(edges)}
    new = sorted(f"{e} (line {e.line}{', in a function' if e.lazy else ''}; "
                 f"{arch.part_of(e.source)} -> {arch.part_of(e.target)})"
                 for e in arch.forbidden_edges(edges) if str(e) not in KNOWN_VIOLATIONS)
    assert new == [], "imports the rule table (spgnn/testing/architecture.py) forbids"
    assert KNOWN_VIOLATIONS - bad == set(), \
        f"fixed, remove from KNOWN_VIOLATIONS: {sorted(KNOWN_VIOLATIONS - bad)}"


def test_the_checks_catch_planted_violations(tmp_path):
    """A copy of the tree with one violation of each kind planted."""
    for folder in ("spgnn", "kernels"):
        shutil.copytree(REPO / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))

    def plant(rel, code):
        path = tmp_path / rel
        path.write_text(path.read_text() + "\n\n" + code + "\n")

    plant("spgnn/core/spmm.py", "import spgnn.cli")                         # core -> face
    plant("spgnn/core/dense_ops.py", "def f():\n    from ..gnn import context")  # core -> gnn, lazily
    plant("spgnn/sampling/rng.py", "from spgnn._kernels.numba import sample")  # sampling -> kernels
    plant("kernels/numba/sddmm.py", "from spgnn.errors import GridError")    # kernels -> spgnn
    plant("spgnn/grid.py", "def g():\n    from mpi4py import MPI")           # mpi4py outside comm
    plant("spgnn/local/csr.py", "def h():\n    from .semiring import SEMIRINGS")
    plant("spgnn/local/semiring.py", "def k():\n    from .csr import LocalCSR")  # a lazy cycle
    modules, edges, external = arch.import_graph(tmp_path)
    bad = {str(e) for e in arch.forbidden_edges(edges)}
    assert {"spgnn.core.spmm -> spgnn.cli", "spgnn.core.dense_ops -> spgnn.gnn.context",
            "spgnn.sampling.rng -> spgnn._kernels.numba.sample",
            "spgnn._kernels.numba.sddmm -> spgnn.errors"} <= bad
    assert [str(e) for e in arch.mpi_importers(external)] == ["spgnn.grid -> mpi4py"]
    assert ("spgnn.local.csr", "spgnn.local.semiring") in arch.cycles(modules, edges)


def test_rule_table_is_a_layering():
    parts = [p for p, _, _ in arch.PARTS]
    assert sorted(arch.ALLOWED) == sorted(parts)
    for part, allowed in arch.ALLOWED.items():
        assert set(allowed) <= set(parts) and part not in allowed
        if part not in ("face", "testing", "benchmarks"):      # the top parts
            assert not {"face", "testing"} & set(allowed)
    # the library's arrows form no cycle between parts
    order = []
    remaining = {p: set(a) for p, a in arch.ALLOWED.items() if p not in ("face", "testing")}
    while remaining:
        ready = [p for p, a in remaining.items() if not a & set(remaining)]
        assert ready, f"the rule table has a cycle among {sorted(remaining)}"
        order += ready
        for p in ready:
            del remaining[p]


def test_docs_diagram_is_generated_from_the_table():
    text = (REPO / "docs" / "architecture.md").read_text()
    block = arch.docs_block(text)
    assert block is not None, "docs/architecture.md lost its generated-block markers"
    assert block == arch.render_rules(), \
        "docs/architecture.md's diagram is out of date: python -m spgnn.testing.architecture --write"
