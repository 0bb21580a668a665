"""Local kernels, installed as ``spgnn._kernels``.

Pure functions over plain arrays: no MPI, no imports from spgnn.  See README.md
for each kernel's contract.
"""

# Imported as the top-level package ``kernels`` (a script run from the
# repository root), numba would write its on-disk cache next to the sources
# under module names ``kernels.numba.*``; the installed ``spgnn._kernels``
# then loads those entries and fails unpickling them ("No module named
# 'kernels'").  Refuse that import instead.
if __name__ != "spgnn._kernels":
    raise ImportError(f"import the kernels as spgnn._kernels, not as {__name__!r}: numba's cache "
                      "beside the sources is shared by every name they are imported under")
