"""Sphinx configuration of spgnn's manual: topic pages, notebooks, API reference.

Build it (from the repository root, with ``pip install -e ".[docs]"``)::

    python -m sphinx -b html docs docs/_build/html -W

Why Sphinx: the docstrings are numpydoc already (napoleon reads them without
a new dependency), autosummary writes one page per public object, the
``doctest`` builder runs the docstrings' examples from the same parsed
sources, and MyST / myst-nb read the Markdown topic pages and the committed
notebooks unchanged (no pandoc, no kernel).  ``tests/test_docs.py`` builds
the site once, with warnings as errors, and runs the doctests.
"""

import os
import sys
import warnings

# The committed notebooks predate nbformat 4.5's cell ids; myst-nb reads them as they are.
warnings.filterwarnings("ignore", message="Cell is missing an id field")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ext"))

project = "spgnn"
author = "the spgnn authors"
copyright = "2026, the spgnn authors"
release = version = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "myst_nb",
    "spgnn_docs",
]

root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "results/**", "README.md", "**/.ipynb_checkpoints"]

# Markdown topic pages and committed notebooks, never executed.
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]
nb_execution_mode = "off"
nb_merge_streams = True

# One page per public object (docs/reference/*.rst list them).
autosummary_generate = True
autosummary_imported_members = False
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"
autoclass_content = "class"
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_preprocess_types = False
napoleon_use_ivar = True  # "Attributes" as fields: autodoc documents the attributes themselves

# Doctests: every example runs in one process (a solo communicator, or loopback ranks).
doctest_global_setup = "import numpy as np\nimport scipy.sparse as sp\nimport spgnn"
doctest_test_doctest_blocks = "default"

html_theme = "alabaster"
html_title = "spgnn"
html_static_path = []
html_copy_source = False  # no _sources/ copies: the pages are in the repository
html_theme_options = {"description": "Distributed sparse linear algebra for GNNs, over MPI",
                      "fixed_sidebar": True, "page_width": "1100px"}
html_sidebars = {"**": ["about.html", "navigation.html", "searchbox.html"]}
