"""``--num-nodes`` / ``--relabel``: how a bare edge list's vertex ids become vertices.

Shared by ``train``, ``spmm`` and ``plan``.  A bare edge list (``.txt``,
``.edges``, ...) has no header saying how many vertices it holds: by default
``n = largest id + 1``, and a file whose largest id implies far more vertices
than its edges can touch is refused (:class:`~spgnn.errors.InputTooLarge`,
naming the file and the id).  ``--num-nodes N`` confirms the count (an id >= N
is an error naming the line); ``--relabel`` numbers the distinct ids 0..n-1.
"""

import argparse


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def add_graph_options(p):
    """Add the mutually exclusive ``--num-nodes N`` and ``--relabel`` to parser ``p``."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--num-nodes", type=_positive_int, default=None, metavar="N",
                   help="vertex count of a bare edge list whose ids are sparse (ids must be < N)")
    g.add_argument("--relabel", action="store_true",
                   help="number the distinct ids of a bare edge list 0..n-1")


def graph_options(args) -> dict:
    """The keyword arguments of :func:`spgnn.io.load_graph` these options ask for."""
    out = {}
    if getattr(args, "num_nodes", None) is not None:
        out["num_nodes"] = args.num_nodes
    if getattr(args, "relabel", False):
        out["relabel"] = True
    return out
