"""spgnn: distributed sparse linear algebra for graph neural networks."""

from setuptools import find_packages, setup

setup(
    name="spgnn",
    version="0.1.0",
    description="Distributed sparse linear algebra (SpMM, SpGEMM, SDDMM) for GNN training over MPI",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    # spgnn's own packages are found; kernels/ is mapped to spgnn._kernels and the benchmark
    # suites of benchmarks/ to spgnn._benchmarks (python -m spgnn bench NAME)
    packages=find_packages(include=["spgnn", "spgnn.*"]) + ["spgnn._kernels", "spgnn._kernels.numba",
                                                             "spgnn._benchmarks"],
    package_dir={"spgnn._kernels": "kernels", "spgnn._benchmarks": "benchmarks"},
    package_data={"spgnn._kernels": ["README.md", "cuda/*.cu", "cuda/*.cuh", "cuda/*.h"]},
    install_requires=[
        "numpy>=1.24,<2.6",  # numba 0.68 supports numpy < 2.6
        "scipy>=1.10",
        # >= 0.62: llvmlite 0.45 / LLVM 20, whose opaque pointers the kernels'
        # intrinsics assume (``llvm.prefetch.p0``, ``llvm.masked.load...p0``)
        "numba>=0.62",
        "mpi4py>=4.0",
        "tqdm",  # progress bars of the training command
    ],
    extras_require={
        # pip-installed MPI runtime (mpiexec next to the interpreter); leave it
        # out on clusters that provide their own MPI.
        "mpich": ["mpich"],
        # pymetis: the tests exercise METIS partitioning on every run; torch, PyG and
        # networkx: the spgnn.interop tests (zero-copy DLPack proofs) run in CI too
        # cuda-bindings + NVRTC (~190 MB, no GPU needed): tests/cuda_host compiles every
        # CUDA source to machine code in CI
        # pytest-xdist: CI runs the suite on both cores (-n 2), see docs/testing.md
        "test": ["pytest>=7", "hypothesis>=6.80", "pytest-timeout", "pytest-xdist", "pymetis",
                 "matplotlib",
                 "torch==2.13.0", "torch_geometric", "networkx", "cuda-bindings==13.*",
                 "nvidia-cuda-nvrtc==13.*"],
        "partition": ["pymetis"],
        # CuPy with the CUDA toolkit libraries it needs (NVRTC, cuSPARSE) from pip
        "gpu": ["cupy-cuda13x[ctk]>=14"],
        "gpu-cu12": ["cupy-cuda12x[ctk]>=14"],
        # spgnn.interop's optional libraries; pin torch (unpinned pulls CUDA wheels)
        "torch": ["torch==2.13.0"],
        "pyg": ["torch==2.13.0", "torch_geometric"],
        "networkx": ["networkx"],
        # the manual (docs/reference/index.md): Sphinx, MyST-NB for the Markdown pages and the
        # notebooks (shown with their committed outputs: no kernel, no pandoc); tests/test_docs.py
        "docs": ["sphinx>=7.2", "myst-nb>=1.1"],
        # python -m spgnn bench kernels: the competitors; pin torch (unpinned pulls CUDA wheels)
        "bench": ["python-graphblas[suitesparse]", "torch==2.13.0"],
    },
    entry_points={"console_scripts": ["spgnn=spgnn.__main__:main"]},
)
