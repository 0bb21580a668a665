"""numpy / scipy arrays <-> torch tensors, sharing memory through DLPack where layouts allow.

What is shared (no copy) and what is copied:

==========================================  ===============================================
conversion                                   memory
==========================================  ===============================================
:func:`to_torch` / :func:`to_numpy` (dense)  shared (DLPack), any strides, CPU
:func:`to_torch_sparse` ``layout="csr"``      indptr, indices and values shared
:func:`from_torch_sparse` (CSR tensor)        crow/col indices and values shared
:func:`to_torch_sparse` ``layout="coo"``      values shared; the ``[2, nnz]`` indices are built
:func:`from_torch_sparse` (COO tensor)        converted to CSR (a copy)
==========================================  ===============================================

``copy=None`` (default) shares when possible and copies otherwise (a
read-only numpy array, a CUDA tensor, a dtype change); ``copy=True`` always
copies; ``copy=False`` refuses to copy and raises ``ValueError`` instead.
Tensors that require gradients are detached first (sharing their storage).

torch is imported on first use; without it these functions raise
:class:`~spgnn.errors.MissingDependency` naming ``pip install "spgnn[torch]"``.
Local, pure (except for the shared memory, which is the point).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._optional import require

__all__ = ["to_torch", "to_numpy", "to_torch_sparse", "from_torch_sparse", "is_torch_tensor"]


def _torch():
    return require("torch")


def is_torch_tensor(obj) -> bool:
    """Whether ``obj`` is a ``torch.Tensor`` (without importing torch when it is not loaded)."""
    import sys

    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _no_copy(what):
    raise ValueError(f"{what}: a copy is needed, but copy=False")


def to_torch(array, *, copy=None):
    """A dense CPU tensor holding ``array``'s memory (DLPack), or a copy when it cannot.

    Parameters
    ----------
    array : array_like
        Any numpy-convertible array (dtype and strides are kept).
    copy : bool or None
        None: share when possible; True: always copy; False: share or raise.
    """
    torch = _torch()
    a = np.asarray(array)
    if copy:
        a = np.array(a, copy=True)
    elif not a.flags.writeable or not a.dtype.isnative:
        # torch would write through a read-only view; a foreign byte order has no DLPack type
        if copy is False:
            _no_copy("to_torch (read-only or non-native byte order)")
        a = np.array(a, copy=True, dtype=a.dtype.newbyteorder("="))
    return torch.from_dlpack(a)


def to_numpy(tensor, *, copy=None) -> np.ndarray:
    """A numpy array holding a dense tensor's memory (DLPack), or a copy when it cannot.

    CUDA tensors are copied to the host (``copy=False`` refuses); sparse
    tensors are refused (use :func:`from_torch_sparse`).
    """
    torch = _torch()
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"to_numpy: expected a torch.Tensor, but got {type(tensor).__name__}")
    if tensor.layout != torch.strided:
        raise TypeError(f"to_numpy: {tensor.layout} tensor; use from_torch_sparse for sparse "
                        f"layouts")
    t = tensor.detach()
    if t.device.type != "cpu" or t.is_conj() or t.is_neg():
        if copy is False:
            _no_copy(f"to_numpy ({t.device} tensor)")
        t = t.resolve_conj().resolve_neg().cpu()
    out = np.from_dlpack(t)
    return out.copy() if copy else out


def to_torch_sparse(adj, *, layout="csr", copy=None):
    """A ``torch.sparse_csr`` (default) or ``torch.sparse_coo`` tensor of a scipy sparse matrix.

    CSR shares ``indptr``, ``indices`` and ``data`` with ``adj`` when ``adj`` is
    a CSR array or matrix whose two index arrays have one dtype (torch needs
    that); otherwise (and with ``copy=True``) the arrays are copied.  COO
    shares the values of a CSR input and builds its ``[2, nnz]`` int64
    indices; it is marked coalesced when ``adj`` has canonical format (sorted,
    no duplicates).
    """
    torch = _torch()
    if not sp.issparse(adj):
        raise TypeError(f"to_torch_sparse: expected a scipy sparse matrix, but got "
                        f"{type(adj).__name__}")
    if layout not in ("csr", "coo"):
        raise ValueError(f"to_torch_sparse: layout must be 'csr' or 'coo', but got {layout!r}")
    if adj.format != "csr":
        if copy is False:
            _no_copy(f"to_torch_sparse ({adj.format} input)")
        adj = sp.csr_array(adj)
    indptr, indices = adj.indptr, adj.indices
    if indptr.dtype != indices.dtype:
        if copy is False:
            _no_copy("to_torch_sparse (indptr and indices of different dtypes)")
        indptr, indices = indptr.astype(np.int64), indices.astype(np.int64)
    values = to_torch(adj.data, copy=copy)
    if layout == "csr":
        return torch.sparse_csr_tensor(to_torch(indptr, copy=copy), to_torch(indices, copy=copy),
                                       values, size=adj.shape, check_invariants=False)
    rows = np.repeat(np.arange(adj.shape[0], dtype=np.int64), np.diff(indptr))
    index = torch.from_numpy(np.vstack([rows, indices.astype(np.int64, copy=False)]))
    return torch.sparse_coo_tensor(index, values, size=adj.shape, check_invariants=False,
                                   is_coalesced=bool(adj.has_canonical_format))


def from_torch_sparse(tensor, *, copy=None) -> sp.csr_array:
    """A scipy ``csr_array`` of a 2-D sparse CSR or COO tensor (or a dense one).

    A CPU CSR tensor's arrays are shared (DLPack); a COO tensor is summed
    into CSR (duplicates added, as ``coalesce`` does); a dense 2-D tensor
    becomes the CSR of its non-zeros.  Hybrid or batched tensors are refused.
    """
    torch = _torch()
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"from_torch_sparse: expected a torch.Tensor, but got "
                        f"{type(tensor).__name__}")
    if tensor.dim() != 2:
        raise ValueError(f"from_torch_sparse: expected a 2-D tensor, but got shape "
                         f"{tuple(tensor.shape)}")
    shape = tuple(int(s) for s in tensor.shape)
    if tensor.layout == torch.sparse_csr:
        if tensor.values().dim() != 1:
            raise ValueError("from_torch_sparse: hybrid CSR tensors (dense values per entry) "
                             "are not supported")
        return sp.csr_array((to_numpy(tensor.values(), copy=copy),
                             to_numpy(tensor.col_indices(), copy=copy),
                             to_numpy(tensor.crow_indices(), copy=copy)), shape=shape)
    if copy is False:
        _no_copy(f"from_torch_sparse ({tensor.layout} tensor)")
    if tensor.layout == torch.sparse_coo:
        if tensor.sparse_dim() != 2 or tensor.dense_dim() != 0:
            raise ValueError("from_torch_sparse: hybrid COO tensors are not supported")
        index = to_numpy(tensor._indices())
        values = to_numpy(tensor._values())
        out = sp.csr_array(sp.coo_array((values, (index[0], index[1])), shape=shape))
        out.sum_duplicates()
        return out
    if tensor.layout == torch.strided:
        return sp.csr_array(to_numpy(tensor))
    raise TypeError(f"from_torch_sparse: unsupported layout {tensor.layout}")
