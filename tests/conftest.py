"""Shared test configuration.

Hypothesis profiles (select with SPGNN_HYPOTHESIS_PROFILE):

* ``ci`` (default): derandomized, no example database, so every MPI rank and
  every CI run draws the same examples; 40 examples per test.
* ``dev``: random, 100 examples.
* ``nightly``: derandomized, 1000 examples.
"""

import os

from hypothesis import HealthCheck, settings

_common = dict(deadline=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", derandomize=True, database=None, max_examples=40, **_common)
settings.register_profile("dev", max_examples=100, **_common)
settings.register_profile("nightly", derandomize=True, database=None, max_examples=1000, **_common)
settings.load_profile(os.environ.get("SPGNN_HYPOTHESIS_PROFILE", "ci"))


#: The test files that take longest (cold caches, from the durations CI prints), heaviest
#: first.  Under pytest-xdist (CI runs ``-n 2 --dist loadfile``: a file's tests share one
#: worker, so module fixtures such as the Sphinx build run once) files are handed out in
#: collection order; starting with these keeps one long file from running alone at the end.
HEAVY_FILES = (
    "tests/cuda_host/test_cli_device.py", "tests/property/test_kernels_props.py",
    "tests/unit/test_graphblas_local.py", "tests/unit/test_masked_methods.py",
    "tests/test_train_cli.py", "tests/test_docs.py", "tests/unit/test_local_kernels.py",
    "tests/test_notebooks.py", "tests/test_cli_mpi.py", "tests/cuda_host/test_host_kernels.py",
    "tests/test_graph_cli.py", "tests/test_gnn_mpi.py", "tests/test_dist_mpi.py",
    "tests/cuda_host/test_sanitizers.py", "tests/test_plexus_mpi.py", "tests/test_hec_mpi.py",
)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the files of :data:`HEAVY_FILES` first (stable otherwise)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:     # set in each xdist worker, which collects
        return
    rank = {f: k for k, f in enumerate(HEAVY_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(HEAVY_FILES)))
