"""The manual (docs/, Sphinx): it builds with warnings as errors, its doctests pass, and
every public name has a docstring and a page.

The site is built once per test run (a module fixture, into a temporary folder, from a
copy of docs/ and notebooks/ so that autosummary's generated pages never land in the
checkout); the doctest builder then reuses the parsed sources.  The build tests are
skipped, saying so, when Sphinx or MyST-NB is not installed (the ``docs`` extra);
the docstring check needs neither.
"""

import importlib
import inspect
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: The public modules: every name of their ``__all__`` is documented on a page.
PUBLIC_MODULES = ("spgnn", "spgnn.errors", "spgnn.layout", "spgnn.grid", "spgnn.local",
                  "spgnn.comm", "spgnn.backends", "spgnn.algorithms", "spgnn.io",
                  "spgnn.datasets", "spgnn.partition", "spgnn.plan", "spgnn.sampling",
                  "spgnn.gnn", "spgnn.interop", "spgnn.checkpoint", "spgnn.bench")

#: Topic pages that must link to the reference entries they use (all but testing.md,
#: which is about the test suite, not the API).
TOPIC_PAGES = ("getting_started", "architecture", "spmm_algorithms", "graphblas", "communication",
               "gnn", "sage_training", "sampling", "gat", "hec", "partitioning", "data",
               "performance", "performance_model", "gpu", "reliability")


def public_objects():
    """``[(module, name, object)]`` of every public module's ``__all__``."""
    out = []
    for modname in PUBLIC_MODULES:
        mod = importlib.import_module(modname)
        for name in mod.__all__:
            out.append((modname, name, getattr(mod, name)))
    return out


def _own_doc(obj):
    doc = obj.__doc__ if (inspect.isclass(obj) or inspect.isroutine(obj)
                          or inspect.ismodule(obj)) else None
    return (doc or "").strip()


def test_every_public_class_function_and_module_has_a_docstring():
    missing = [f"{m}.{n}" for m, n, o in public_objects()
               if (inspect.isclass(o) or inspect.isroutine(o) or inspect.ismodule(o))
               and not _own_doc(o)]
    assert not missing, f"public names without a docstring: {missing}"


def _sphinx(*args, timeout=600):
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning")
    return subprocess.run([sys.executable, "-m", "sphinx", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """``(html_dir, doctest_output, warnings)`` of one strict build of the manual."""
    pytest.importorskip("sphinx", reason="Sphinx is not installed: pip install -e '.[docs]'")
    pytest.importorskip("myst_nb", reason="MyST-NB is not installed: pip install -e '.[docs]'")
    tmp = tmp_path_factory.mktemp("manual")
    shutil.copytree(ROOT / "docs", tmp / "docs", symlinks=True,
                    ignore=shutil.ignore_patterns("_build", "generated", "__pycache__"))
    shutil.copytree(ROOT / "notebooks", tmp / "notebooks",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    doctrees, html = tmp / "doctrees", tmp / "html"
    built = _sphinx("-b", "html", "-W", "--keep-going", "-q", "-j", "2", "-d", str(doctrees),
                    str(tmp / "docs"), str(html))
    assert built.returncode == 0, f"the strict build failed:\n{built.stderr[-6000:]}"
    tested = _sphinx("-b", "doctest", "-W", "-q", "-d", str(doctrees), str(tmp / "docs"),
                     str(tmp / "doctest"))
    output = (tmp / "doctest" / "output.txt").read_text() if (
        tmp / "doctest" / "output.txt").exists() else ""
    assert tested.returncode == 0, f"doctests failed:\n{output[-6000:]}\n{tested.stderr[-3000:]}"
    return html, output


def test_the_manual_builds_without_warnings_and_its_doctests_pass(site):
    html, output = site
    assert (html / "index.html").exists()
    ran = int(re.search(r"^\s*(\d+) tests?$", output, re.M).group(1))
    assert ran >= 30, f"only {ran} doctest examples ran:\n{output}"
    assert re.search(r"^\s*0 failures in tests$", output, re.M), output


def _documented(html):
    from sphinx.util.inventory import InventoryFile

    with open(html / "objects.inv", "rb") as f:
        inventory = InventoryFile.load(f, "", os.path.join)
    names = set()
    for kind, entries in inventory.items():
        if kind.startswith("py:"):
            names.update(entries)
    return names


def test_every_public_name_has_a_page(site):
    html, _ = site
    names = _documented(html)
    documented = set()
    for full in names:
        modname, _, attr = full.rpartition(".")
        try:
            documented.add(id(getattr(importlib.import_module(modname), attr)))
        except (ImportError, AttributeError, ValueError):
            pass
        if full in sys.modules:
            documented.add(id(sys.modules[full]))
    missing = [f"{m}.{n}" for m, n, o in public_objects()
               if id(o) not in documented and f"{m}.{n}" not in names]
    assert not missing, f"public names on no page of docs/reference: {missing}"
    # one page per object
    pages = {p.stem for p in (html / "reference" / "generated").glob("*.html")}
    assert {"spgnn.mxm", "spgnn.DistSparseMatrix", "spgnn.Communicator",
            "spgnn.gnn.DistGraph"} <= pages


def test_pages_say_what_is_collective(site):
    html, _ = site
    page = (html / "reference" / "generated" / "spgnn.mxm.html").read_text()
    assert "Collective" in page and "collective-calls" in page
    page = (html / "reference" / "generated" / "spgnn.interop.to_pyg.html").read_text()
    assert "<strong>Local</strong>" in page


@pytest.mark.parametrize("page", TOPIC_PAGES)
def test_topic_pages_link_to_the_reference(site, page):
    html, _ = site
    text = (html / f"{page}.html").read_text()
    assert re.search(r'href="reference/generated/spgnn\.', text), \
        f"docs/{page}.md links to no reference entry"


# The extension's rules (docs/_ext/spgnn_docs.py), checked without a build.

@pytest.fixture(scope="module")
def ext():
    pytest.importorskip("sphinx", reason="Sphinx is not installed: pip install -e '.[docs]'")
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        return importlib.import_module("spgnn_docs")
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))


def test_prose_after_parameters_becomes_notes(ext):
    lines = ["Summary.", "", "Parameters", "----------", "x : int", "    The x.",
             "", "Every rank calls it with the same x; the result", "is replicated.", "",
             "Returns", "-------", "int"]
    ext.prose_as_notes(None, "function", "f", None, {}, lines)
    assert lines[7:10] == ["Notes", "-----", ""] and lines[10].startswith("Every rank")
    items = ["Parameters", "----------", "x : int", "", "y, z : float", "    Both.", "",
             "ValueError"]
    before = list(items)
    ext.prose_as_notes(None, "function", "f", None, {}, items)
    assert items == before


def test_collective_and_local_are_stated_first(ext):
    lines = ["Place a matrix.", "", "Collective.  Every rank passes ``a``."]
    ext.process_docstring(None, "function", "f", None, {}, lines)
    assert lines[0] == ext.COLLECTIVE_LINE
    lines = ["A view. Local."]
    ext.process_docstring(None, "method", "f", None, {}, lines)
    assert lines[0] == ext.LOCAL_LINE
    lines = ["Pure arithmetic on shapes."]
    ext.process_docstring(None, "function", "f", None, {}, lines)
    assert lines == ["Pure arithmetic on shapes."]


def test_names_resolve_only_to_objects_that_exist(ext):
    full, short = ext._reference_names(str(ROOT / "docs"))
    assert "spgnn.mxm" in full and "spgnn.gnn.DistGraph" in full
    assert ext._target("mxm(A, B)", full, short) == "spgnn.mxm"
    assert ext._target("DistSparseMatrix.from_global", full, short) == \
        "spgnn.DistSparseMatrix.from_global"
    assert ext._target("mean", full, short) is None            # a bare word stays text
    assert ext._existing("spgnn.cli.graph.py", full) is None    # a file name
    assert ext._lookup("spgnn.io.Graph")[0] and not ext._lookup("spgnn.io.no_such_loader")[0]
