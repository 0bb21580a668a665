"""``python -m spgnn bench``: the list of suites is the folder, and the command finds them.

Nothing is timed: the modules are read with :mod:`ast`, the command only lists
(no suite runs).
"""

import ast
import subprocess
import sys

from spgnn._benchmarks import SUITES
from spgnn.testing.data import REPO_ROOT

FOLDER = REPO_ROOT / "benchmarks"


def test_suites_are_the_modules_of_the_folder_each_with_main_argv():
    modules = sorted(p.stem for p in FOLDER.glob("*.py") if not p.stem.startswith("_"))
    assert sorted(SUITES) == modules
    for name in modules:
        tree = ast.parse((FOLDER / f"{name}.py").read_text())
        mains = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "main"]
        assert len(mains) == 1, name
        assert [a.arg for a in mains[0].args.args] == ["argv"], name


def test_bench_without_a_name_lists_every_suite_and_an_unknown_name_fails():
    listing = subprocess.run([sys.executable, "-m", "spgnn", "bench"], capture_output=True,
                             text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    names = {line.split()[0] for line in listing.stdout.splitlines() if line.startswith("  ")}
    assert names == set(SUITES)
    bad = subprocess.run([sys.executable, "-m", "spgnn", "bench", "no-such-suite"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "unknown suite 'no-such-suite'" in bad.stderr
