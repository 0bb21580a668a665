"""The local floor: one rank's data types, beneath ``core``, ``backends`` and ``comm``.

* :mod:`spgnn.local.csr`: :class:`LocalCSR` (one rank's sparse block) and
  the index/value dtypes every kernel accepts;
* :mod:`spgnn.local.semiring`: monoids, semirings and their names;
* :mod:`spgnn.local.alloc`: the allocator of kernel outputs and received
  arrays (huge pages, a cache of freed buffers).

Nothing here communicates or imports a kernel; it depends only on
:mod:`spgnn.errors`, numpy and (lazily) scipy.
"""

from .alloc import empty, empty_arrays
from .csr import INDEX_DTYPES, VALUE_DTYPES, LocalCSR
from .semiring import SEMIRINGS, Monoid, Semiring, get_semiring

__all__ = ["LocalCSR", "INDEX_DTYPES", "VALUE_DTYPES", "Monoid", "Semiring", "SEMIRINGS",
           "get_semiring", "empty", "empty_arrays"]
