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
