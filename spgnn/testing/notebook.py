"""Execute a Jupyter notebook's code cells in order, in one namespace, without Jupyter.

The test suite uses it to prove the notebooks run; ``--write`` stores each
cell's printed output back into the notebook so readers see results on the
page.  Usage: ``python -m spgnn.testing.notebook notebooks/X.ipynb [--write]``.
"""

import contextlib
import io
import json
import sys

__all__ = ["execute_notebook"]


def execute_notebook(path, write=False):
    """Run every code cell; raise ``RuntimeError`` naming the cell on the first failure.

    Returns the list of captured stdout strings, one per code cell.
    """
    with open(path, encoding="utf-8") as fh:
        nb = json.load(fh)
    namespace = {"__name__": "__main__"}
    outputs = []
    count = 0
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        count += 1
        source = "".join(cell["source"])
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                exec(compile(source, f"{path}[cell {index}]", "exec"), namespace)
        except Exception as exc:
            raise RuntimeError(f"{path}: code cell {index} failed: {type(exc).__name__}: {exc}\n"
                               f"--- output so far ---\n{buf.getvalue()}") from exc
        text = buf.getvalue()
        outputs.append(text)
        cell["execution_count"] = count
        cell["outputs"] = ([{"name": "stdout", "output_type": "stream",
                             "text": text.splitlines(keepends=True)}] if text else [])
    if write:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(nb, fh, indent=1, ensure_ascii=False)
            fh.write("\n")
    return outputs


if __name__ == "__main__":
    execute_notebook(sys.argv[1], write="--write" in sys.argv[2:])
