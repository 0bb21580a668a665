"""Named graph datasets, downloaded into a verified cache: ``spgnn.datasets.load("cora")``.

The public face of :mod:`spgnn.io.datasets` (the registry and its loaders)
and :mod:`spgnn.io.download` (the cache and the downloader); see those
modules and docs/data.md, "Named datasets".  ``python -m spgnn datasets``
lists the registry and what the cache holds.
"""

from .io.datasets import (DATASETS, Dataset, check_counts, dataset_names, dataset_status,
                          fetch_dataset, get_dataset, load_dataset, register_dataset)
from .io.download import RemoteFile, cache_dir, verify_file

#: Short names: ``spgnn.datasets.load("cora")``, ``spgnn.datasets.fetch("cora", comm=comm)``.
load = load_dataset
fetch = fetch_dataset
names = dataset_names

__all__ = ["DATASETS", "Dataset", "RemoteFile", "load", "fetch", "names", "load_dataset",
           "fetch_dataset", "dataset_names", "get_dataset", "dataset_status",
           "register_dataset", "check_counts", "cache_dir", "verify_file"]
