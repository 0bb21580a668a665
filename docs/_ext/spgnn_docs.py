"""Sphinx extension of spgnn's reference manual (docs/conf.py loads it).

* **Collective / Local.**  spgnn's docstrings say which calls every rank must
  make together ("Collective.") and which a rank makes alone ("Local.").  The
  reference states it first, as a line above the docstring, so a reader does
  not have to find the word in the text.
* **Constants.**  A constant re-exported by a package (``spgnn.gnn.ALGORITHMS``)
  has its ``#:`` comment in the module that defines it, which autodoc does not
  read; this finds it there, and shows the value when it is short.
* **Prose after a numpydoc section.**  Many docstrings end their
  ``Parameters`` (or ``Returns``, ``Raises``...) section with a paragraph of
  prose, which numpydoc would read as one more parameter named after its
  first words.  Such a paragraph (after a blank line, at the left margin,
  several words, continuing on the next line or ending with a full stop) is
  given a ``Notes`` heading before napoleon parses the docstring.
* **Topic pages link to the reference.**  An inline code span of a topic page
  or notebook that names a documented object (``spgnn.gnn.DistGraph``,
  ``DistSparseMatrix.from_global``, ``mxm(A, B)``, ``load_graph``) becomes a link
  to its page; bare lower-case words (``mean``, ``select``) stay text unless
  they carry an underscore, call parentheses, or are one of the main operations.
* **References under another public name resolve; references to nothing fail.**
  A docstring's ``:class:`spgnn.io.Graph``` names an object the reference
  documents as ``spgnn.Graph``: the reference is resolved to that page.  A
  reference to ``spgnn.something`` that names no object at all (a rename the
  docstring missed) is a warning, so the strict build fails; a reference to an
  existing object the reference does not document (a private module, a helper)
  stays plain text.
* **Missing docstrings fail.**  Every object the reference lists on its own page
  must have a docstring: an empty one is a warning, so the strict build
  (``-W``) and ``tests/test_docs.py`` fail on it.
"""

import os
import re
import sys

from docutils import nodes
from sphinx import addnodes

from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

logger = logging.getLogger(__name__)

_COLLECTIVE = re.compile(r"(?<![\w`])Collective\b")
_LOCAL = re.compile(r"(?<![\w`])Local(?=[.,:;]| \()")

COLLECTIVE_LINE = ("**Collective** -- every rank of the communicator (or grid) calls it, in the "
                   "same order; see :ref:`collective-calls`.")
LOCAL_LINE = "**Local** -- no communication: a rank calls it alone."


def _constant_doc(name, obj):
    """The ``#:`` comment of the module of spgnn that assigns ``obj`` to ``name``."""
    for modname, mod in list(sys.modules.items()):
        if not modname.startswith("spgnn") or getattr(mod, name, None) is not obj:
            continue
        try:
            docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
        except Exception:  # a module without source (built-in, namespace)
            continue
        lines = docs.get(("", name))
        if lines:
            return [line for line in lines if line is not None], modname
    return [], None


_SECTIONS = {"parameters", "other parameters", "returns", "yields", "receives", "raises",
             "warns", "attributes", "keyword arguments", "methods"}
_ITEM = re.compile(r"^\*{0,2}[\w.]+(, \*{0,2}[\w.]+)*( ?:.*)?$")


def _is_heading(lines, i):
    return (i + 1 < len(lines) and lines[i].strip() and set(lines[i + 1].strip()) == {"-"}
            and len(lines[i + 1].strip()) >= 3)


def _is_prose(lines, i):
    line = lines[i]
    if not line.strip() or line[0].isspace() or _ITEM.match(line) or " : " in line:
        return False
    if len(line.split()) < 3:
        return False
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    return (nxt.strip() != "" and not nxt[0].isspace()) or line.rstrip().endswith(".")


def prose_as_notes(app, what, name, obj, options, lines):
    """Give a ``Notes`` heading to prose that follows a numpydoc item section."""
    section, i = None, 0
    while i < len(lines):
        if _is_heading(lines, i):
            section = lines[i].strip().lower()
            i += 2
            continue
        if (section in _SECTIONS and i > 0 and not lines[i - 1].strip()
                and _is_prose(lines, i)):
            lines[i:i] = ["Notes", "-----", ""]
            section = "notes"
            i += 3
            continue
        i += 1


def process_docstring(app, what, name, obj, options, lines):
    if what == "data":
        inherited = getattr(obj, "__doc__", None) == getattr(type(obj), "__doc__", None)
        if not "".join(lines).strip() or inherited:
            doc, modname = _constant_doc(name.rsplit(".", 1)[-1], obj)
            lines[:] = list(doc)
            if modname:
                lines += ["", f"Defined in ``{modname}``."]
        text = repr(obj)
        if len(text) <= 300:
            lines += ["", "Value: ``" + text.replace("``", "` `") + "``"]
        if not "".join(lines).strip():
            logger.warning("public constant %s has no #: comment in its module", name)
        return
    text = "\n".join(lines)
    if not text.strip():
        if what in ("function", "class", "exception", "module"):
            logger.warning("public name %s has no docstring", name)
        return
    if what in ("module", "attribute", "property"):
        return
    if _COLLECTIVE.search(text):
        lines[:0] = [COLLECTIVE_LINE, ""]
    elif _LOCAL.search(text):
        lines[:0] = [LOCAL_LINE, ""]


_MAIN_OPERATIONS = {"mxm", "mxv", "vxm", "spmm", "sddmm", "matmul", "rmat", "sbm"}
_CODE_NAME = re.compile(r"^([A-Za-z_][\w.]*[\w])(\(.*\))?$")


def _reference_names(srcdir):
    """Every object the reference pages list: ``{short name: [full names]}`` and the set."""
    full, short = set(), {}
    refdir = os.path.join(srcdir, "reference")
    for fname in sorted(os.listdir(refdir)):
        if not fname.endswith(".rst"):
            continue
        module = None
        with open(os.path.join(refdir, fname), encoding="utf-8") as f:
            for line in f:
                m = re.match(r"\.\. currentmodule:: (\S+)", line)
                if m:
                    module = m.group(1)
                elif module and re.match(r"^   [A-Za-z_][\w.]*$", line.rstrip()):
                    name = f"{module}.{line.strip()}"
                    full.add(name)
                    short.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    return full, short


def _target(text, full, short):
    m = _CODE_NAME.match(text.strip())
    if not m:
        return None
    name, call = m.group(1), m.group(2)
    parts = name.split(".")
    if parts[0] == "spgnn":
        for k in range(len(parts), 1, -1):
            if ".".join(parts[:k]) in full:
                return name
        return None
    candidates = short.get(parts[0], [])
    if len(candidates) > 1:  # ``spmm``: the top-level name wins over a submodule's
        candidates = [c for c in candidates if c.count(".") == 1]
    if len(candidates) != 1:
        return None
    head = parts[0]
    if not (head[0].isupper() or call or len(parts) > 1 or "_" in head
            or head in _MAIN_OPERATIONS):
        return None
    return ".".join([candidates[0]] + parts[1:])


_FILE_SUFFIXES = {"py", "cu", "cuh", "txt", "md", "json", "npz", "ipynb", "gz", "csv", "mtx"}


def _existing(target, full):
    """``target`` if it names an object; else the documented class it is an attribute of
    (an instance attribute such as ``DistGraph.features``); else None."""
    if target.rsplit(".", 1)[-1] in _FILE_SUFFIXES:
        return None
    found, chain = _lookup(target)
    if found:
        return target
    if chain and chain[-1][0] in full and isinstance(chain[-1][1], type):
        return chain[-1][0]
    return None


def _lookup(target):
    """``(found, parts_objects)``: the objects along ``target``'s dotted path, if it names one."""
    import importlib

    parts = target.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        except Exception:  # noqa: BLE001 - a module that fails to import names nothing here
            return False, []
        chain = [(".".join(parts[:k]), obj)]
        for attr in parts[k:]:
            if not hasattr(obj, attr):
                return False, chain
            obj = getattr(obj, attr)
            chain.append((chain[-1][0] + "." + attr, obj))
        return True, chain
    return False, []


def _documented_by_id(env, srcdir):
    if not hasattr(env, "_spgnn_by_id"):
        import importlib

        full, _ = _reference_names(srcdir)
        by_id = {}
        for name in sorted(full):
            found, chain = _lookup(name)
            if found and not isinstance(chain[-1][1], (str, int, float, bool, tuple)):
                by_id.setdefault(id(chain[-1][1]), name)
        env._spgnn_by_id = by_id
    return env._spgnn_by_id


def resolve_other_name(app, env, node, contnode):
    """``missing-reference``: resolve ``spgnn.*`` under the name the reference documents."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if not target.startswith("spgnn.") and not target.startswith("spgnn"):
        return None
    found, chain = _lookup(target)
    if not found:
        if target != "spgnn" and not any(part.startswith("_") for part in target.split(".")):
            logger.warning("reference to %s, which names no object of spgnn", target,
                           location=node)
        return None
    by_id = _documented_by_id(env, app.srcdir)
    parts = target.split(".")
    for i in range(len(chain) - 1, -1, -1):
        name = by_id.get(id(chain[i][1]))
        if name is None:
            continue
        rest = parts[len(chain[i][0].split(".")):]
        new = ".".join([name] + rest)
        if new == target:
            return None
        py = env.get_domain("py")
        return py.resolve_xref(env, node.get("refdoc", ""), app.builder, node["reftype"], new,
                               node, contnode)
    return None


def link_code_to_reference(app, doctree):
    """Inline code naming a documented object becomes a ``py:obj`` cross-reference."""
    if app.env.docname.startswith("reference/"):
        return
    if not hasattr(app.env, "_spgnn_reference_names"):
        app.env._spgnn_reference_names = _reference_names(app.srcdir)
    full, short = app.env._spgnn_reference_names
    for node in list(doctree.findall(nodes.literal)):
        if isinstance(node.parent, (nodes.reference, addnodes.pending_xref, nodes.literal_block)):
            continue
        target = _target(node.astext(), full, short)
        target = target and _existing(target, full)
        if target is None:
            continue
        ref = addnodes.pending_xref("", refdomain="py", reftype="obj", reftarget=target,
                                    refexplicit=True, refwarn=False, refdoc=app.env.docname)
        node.replace_self(ref)
        ref += node


def setup(app):
    # architecture.md draws its parts as a mermaid diagram: shown as text
    from pygments.lexers.special import TextLexer
    app.add_lexer("mermaid", TextLexer)
    app.connect("doctree-read", link_code_to_reference)
    app.connect("missing-reference", resolve_other_name)
    app.connect("autodoc-process-docstring", prose_as_notes, priority=400)  # before napoleon
    app.connect("autodoc-process-docstring", process_docstring, priority=600)  # after it
    return {"parallel_read_safe": True, "parallel_write_safe": True}
