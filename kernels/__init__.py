"""Local kernels, installed as ``spgnn._kernels``.

Pure functions over plain arrays: no MPI, no imports from spgnn.  See README.md
for each kernel's contract.
"""
