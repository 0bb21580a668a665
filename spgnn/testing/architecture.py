"""The parts of spgnn, which part may import which, and a checker over the import graph.

:data:`PARTS` and :data:`ALLOWED` are the rule table.  The module graph is
read from the source with :mod:`ast` (every ``import`` statement, at module
level and inside functions), never by importing anything, so it sees the
lazy imports that defer mpi4py or numba as well.  The benchmark suites
(``benchmarks/``, installed as ``spgnn._benchmarks``) are read too: they may
import anything, and nothing may import them.  ``tests/unit/test_architecture.py``
fails on a cycle between modules, an arrow the table does not allow, and
mpi4py imported outside ``spgnn.comm``; docs/architecture.md shows the table
as a diagram that this module generates::

    python -m spgnn.testing.architecture            # check docs/architecture.md is current
    python -m spgnn.testing.architecture --write    # regenerate its diagram

Local, pure: no MPI, no numba.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PARTS", "ALLOWED", "EVERY_PART_MAY_IMPORT", "MPI_PART", "Edge", "module_files",
           "import_graph", "part_of", "forbidden_edges", "cycles", "mpi_importers",
           "render_rules", "docs_block", "BEGIN_MARK", "END_MARK", "main"]

#: The parts, bottom up: ``(name, modules, what it is)``.  A module name ending in
#: ``.*`` stands for a package and everything in it; any other name is one
#: module.  A module belongs to the part of its longest match.
PARTS = (
    ("base", ("spgnn.errors", "spgnn.counter_rng", "spgnn.atomic"),
     "typed errors, SplitMix64, atomic file writes"),
    ("timing", ("spgnn.bench",), "timing helpers: medians, slowest rank, the machine"),
    ("kernels", ("spgnn._kernels.*",), "Numba kernels, installed as spgnn._kernels"),
    ("layout", ("spgnn.layout",), "Layout, block_bounds"),
    ("local", ("spgnn.local.*",), "LocalCSR, semirings, output allocator"),
    ("backends", ("spgnn.backends.*",), "numpy / numba / cupy local kernels"),
    ("comm", ("spgnn.comm.*",), "Communicator, transports, ledger"),
    ("grid", ("spgnn.grid",), "ProcessGrid, grid shapes"),
    ("core", ("spgnn.core.*",), "distributed matrices, SpMM, matmul"),
    ("io", ("spgnn.io.*",), "Graph, loaders, datasets, generators, preprocessing"),
    ("interop", ("spgnn.interop.*",), "PyG, torch, networkx, scipy converters"),
    ("partition", ("spgnn.partition.*",), "partitioners"),
    ("plan", ("spgnn.plan.*",), "communication plans, performance model, calibration, --algo auto"),
    ("sampling", ("spgnn.sampling.*",), "GraphSAGE / LADIES sampling"),
    ("algorithms", ("spgnn.algorithms",), "BFS, SSSP, PageRank, triangles on the operations"),
    ("checkpoint", ("spgnn.checkpoint",), "atomic training checkpoints"),
    ("gnn", ("spgnn.gnn.*",), "layers, models, training"),
    ("face", ("spgnn", "spgnn.__main__", "spgnn.cli.*", "spgnn.datasets"),
     "public API, commands"),
    ("testing", ("spgnn.testing.*",), "test-only helpers"),
    ("benchmarks", ("spgnn._benchmarks.*",),
     "benchmark suites, installed as spgnn._benchmarks, run by name"),
)

#: Every part may import these (they import nothing from spgnn themselves).
EVERY_PART_MAY_IMPORT = ("base",)

_LIBRARY = ("base", "timing", "kernels", "layout", "local", "backends", "comm", "grid", "core",
            "io", "interop", "partition", "plan", "sampling", "algorithms", "checkpoint", "gnn")

#: Which parts a part may import, besides itself and :data:`EVERY_PART_MAY_IMPORT`.
ALLOWED = {
    "base": (),
    "timing": (),
    "kernels": (),                       # and not even base: kernels import nothing from spgnn
    "layout": (),
    "local": (),
    "backends": ("local", "kernels"),
    "comm": ("local", "layout"),
    "grid": ("comm",),
    "core": ("grid", "layout", "local", "backends"),
    "io": (),
    "interop": ("io",),
    "partition": ("io", "layout", "kernels"),
    # events and model: grid, layout, comm (the ledger's byte model); choose: partition (the
    # run's partition is priced); calibrate: io, backends, local, timing (it times the kernels)
    "plan": ("grid", "layout", "comm", "partition", "io", "backends", "local", "timing"),
    "sampling": ("core", "backends", "layout", "local"),
    "algorithms": ("core", "layout", "local"),
    "checkpoint": (),
    # plan: TrainConfig's --algo auto asks the time model; comm: the ledger's CommStats (the
    # one loop's per-step scopes) and the contexts' collectives; checkpoint: the Checkpoint hook
    "gnn": ("core", "sampling", "io", "partition", "plan", "grid", "layout", "local", "backends",
            "comm", "checkpoint"),
    "face": _LIBRARY,                    # anything but testing
    "testing": _LIBRARY,                 # anything but face
    # the suites may import everything; nothing imports them (spgnn.cli.bench: by name)
    "benchmarks": _LIBRARY + ("face", "testing"),
}

#: The only part that may import mpi4py.
MPI_PART = "comm"

BEGIN_MARK = ("<!-- BEGIN generated: parts and arrows (python -m spgnn.testing.architecture "
              "--write) -->")
END_MARK = "<!-- END generated: parts and arrows -->"


def _allowed(part, other):
    if other == part:
        return True
    if part == "kernels":
        return False
    return other in EVERY_PART_MAY_IMPORT or other in ALLOWED[part]


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``line`` (inside a function when ``lazy``)."""

    source: str
    target: str
    line: int
    lazy: bool

    def __str__(self):
        return f"{self.source} -> {self.target}"


def _repo_root():
    return Path(__file__).resolve().parents[2]


def module_files(root=None):
    """``{module name: (path, is_package)}`` for spgnn, the kernels (``spgnn._kernels``) and the
    benchmark suites (``spgnn._benchmarks``)."""
    root = Path(root) if root is not None else _repo_root()
    out = {}
    for folder, package in ((root / "spgnn", "spgnn"), (root / "kernels", "spgnn._kernels"),
                            (root / "benchmarks", "spgnn._benchmarks")):
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            out[".".join([package] + parts)] = (path, is_package)
    return out


def _imports(tree):
    """``(node, lazy)`` for every import statement of a module."""
    found = []

    def visit(node, lazy):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, lazy))
            visit(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                     ast.Lambda)))

    visit(tree, False)
    return found


def import_graph(root=None):
    """``(modules, edges, external)``: every project module, every import between two of
    them, and every import of a module outside the project as ``Edge`` with the
    top-level name as ``target`` (``"mpi4py"``, ``"numba"``, ...)."""
    modules = module_files(root)
    edges, external = [], []
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        for node, lazy in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - node.level + 1]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module
                # ``from package import submodule`` imports the submodule
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            for target in dict.fromkeys(targets):
                if target == "spgnn" or target.startswith("spgnn."):
                    while target not in modules:
                        target = target.rpartition(".")[0]
                    if target != name:
                        edges.append(Edge(name, target, node.lineno, lazy))
                else:
                    external.append(Edge(name, target.partition(".")[0], node.lineno, lazy))
    return modules, edges, external


def part_of(module):
    """The part a module belongs to (``None`` when no entry of :data:`PARTS` matches)."""
    best, length = None, -1
    for part, patterns, _ in PARTS:
        for pattern in patterns:
            if pattern.endswith(".*"):
                prefix = pattern[:-2]
                hit = module == prefix or module.startswith(prefix + ".")
            else:
                hit = module == pattern
            if hit and len(pattern) > length:
                best, length = part, len(pattern)
    return best


def forbidden_edges(edges):
    """The imports the table does not allow."""
    return [e for e in edges if not _allowed(part_of(e.source), part_of(e.target))]


def cycles(modules, edges):
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    succ = {m: sorted({e.target for e in edges if e.source == m}) for m in modules}
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        # iterative Tarjan: the module graph is deep enough for Python's recursion limit
        work = [(v, iter(succ[v]))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(succ[w])))
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        group.append(w)
                        if w == node:
                            break
                    if len(group) > 1:
                        out.append(tuple(sorted(group)))

    for v in modules:
        if v not in index:
            strong(v)
    return sorted(out)


def mpi_importers(external):
    """Imports of mpi4py outside :data:`MPI_PART`."""
    return [e for e in external if e.target == "mpi4py" and part_of(e.source) != MPI_PART]


def _source_name(pattern):
    """``spgnn.core.*`` -> ``core/``, ``spgnn._kernels.*`` -> ``kernels/``, ``spgnn`` -> ``__init__``."""
    if pattern == "spgnn":
        return "__init__"
    name = (pattern.replace("spgnn._kernels", "kernels").replace("spgnn._benchmarks", "benchmarks")
            .replace("spgnn.", ""))
    return name[:-2] + "/" if name.endswith(".*") else name


def _label(part):
    patterns, what = next((p, w) for name, p, w in PARTS if name == part)
    names = ", ".join(_source_name(p) for p in patterns)
    return f'{part}["<b>{part}</b><br/>{names}<br/><i>{what}</i>"]'


def render_rules():
    """The rule table as Markdown: a Mermaid ``flowchart`` and the same rules as a table."""
    lines = ["```mermaid", "flowchart TB"]
    lines += [f"    {_label(p)}" for p in ("benchmarks", "face", "testing")]
    lines.append('    subgraph library ["library (face and testing may import all of it)"]')
    lines += [f"        {_label(p)}" for p in reversed(_LIBRARY)]
    lines.append("    end")
    lines += ["    benchmarks --> face", "    benchmarks --> testing", "    benchmarks --> library",
              "    face --> library", "    testing --> library"]
    for part in reversed(_LIBRARY):
        lines += [f"    {part} --> {other}" for other in ALLOWED[part]]
    lines += ["```", "",
              "Every part may also import " + ", ".join(f"`{p}`" for p in EVERY_PART_MAY_IMPORT)
              + " (not drawn), except `kernels`, which imports nothing from spgnn. "
              f"Only `{MPI_PART}` may import `mpi4py`. A module belongs to the part of its "
              "longest match (`name.*`: a package and everything in it).", "",
              "| part | modules | may import |", "| --- | --- | --- |"]
    for part, patterns, _ in PARTS:
        if part == "kernels":
            may = "nothing from spgnn"
        elif part == "benchmarks":
            may = "everything (library, face, testing); nothing imports it"
        elif part in ("face", "testing"):
            may = "every library part (not " + ("testing" if part == "face" else "face") + ")"
        else:
            may = ", ".join(ALLOWED[part] + tuple(p for p in EVERY_PART_MAY_IMPORT
                                                  if p != part)) or "–"
        mods = ", ".join(f"`{p}`" for p in patterns)
        lines.append(f"| {part} | {mods} | {may} |")
    return "\n".join(lines) + "\n"


def docs_block(text):
    """What stands between the markers of a Markdown text (``None`` without markers)."""
    if BEGIN_MARK not in text or END_MARK not in text:
        return None
    return text.split(BEGIN_MARK, 1)[1].split(END_MARK, 1)[0].strip("\n") + "\n"


def main(argv=None):
    """Check (default) or ``--write`` the generated block of docs/architecture.md."""
    parser = argparse.ArgumentParser(prog="python -m spgnn.testing.architecture",
                                     description=main.__doc__)
    parser.add_argument("--docs", default=str(_repo_root() / "docs" / "architecture.md"))
    parser.add_argument("--write", action="store_true", help="rewrite the block in place")
    args = parser.parse_args(argv)
    path = Path(args.docs)
    text = path.read_text()
    if docs_block(text) is None:
        print(f"{path}: no markers {BEGIN_MARK!r} ... {END_MARK!r}", file=sys.stderr)
        return 1
    want = render_rules()
    if args.write:
        head, rest = text.split(BEGIN_MARK, 1)
        tail = rest.split(END_MARK, 1)[1]
        path.write_text(f"{head}{BEGIN_MARK}\n{want}{END_MARK}{tail}")
        print(f"{path}: diagram written")
        return 0
    if docs_block(text) != want:
        print(f"{path}: the diagram is out of date; run python -m spgnn.testing.architecture "
              f"--write", file=sys.stderr)
        return 1
    print(f"{path}: diagram up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
