"""Graph preparation shared by the ``spmm`` and ``plan`` commands and the benchmarks."""

import numpy as np
import scipy.sparse as sp


def load_adjacency(spec):
    """The graph of a path or generator spec, symmetrised, without self-loops, float32 CSR."""
    from spgnn.io import load_graph

    g = load_graph(spec).symmetrize().without_self_loops()
    return sp.csr_array(g.adj, dtype=np.float32), g.name
