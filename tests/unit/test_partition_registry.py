"""spgnn.partition's one list of names (PARTITIONERS), partition_graph and the order helpers."""

import argparse
import importlib.util

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn.cli import plan, spmm, train
from spgnn.gnn import data
from spgnn.layout import block_offsets
from spgnn.partition import (PARTITIONERS, PartitionOrder, block_partition, order_from_parts,
                             partition_graph, permute, read_partition_file,
                             write_partition_file)

HAVE_METIS = importlib.util.find_spec("pymetis") is not None


def graph(n=60, seed=0):
    rng = np.random.default_rng(seed)
    A = sp.random_array((n, n), density=0.08, rng=rng, format="csr")
    return sp.csr_array(A + A.T)


def test_one_list_of_names():
    assert tuple(PARTITIONERS) == ("none", "random", "metis", "balanced", "ldg")
    assert data.PARTITIONS == tuple(PARTITIONERS)
    for module, default in ((spmm, "none"), (plan, "metis"), (train, "none")):
        sub = argparse.ArgumentParser().add_subparsers()
        action = next(a for a in module.add_parser(sub)._actions if a.dest == "partition")
        assert tuple(action.choices) == tuple(PARTITIONERS) and action.default == default


def test_none_keeps_the_order():
    A = graph(61)
    perm, offsets, stats = partition_graph(A, "none", 4, seed=3)
    assert perm is None and stats is None
    assert offsets.dtype == np.int64
    assert offsets.tolist() == list(block_offsets(61, 4))
    # the registry's "none" is the same order as a Partition
    p = PARTITIONERS["none"](A, 4, seed=3)
    assert np.array_equal(p.perm, np.arange(61)) and np.array_equal(p.offsets, offsets)


@pytest.mark.parametrize("method", [m for m in PARTITIONERS if m != "none"])
def test_dispatch_equals_the_partitioner(method):
    if method in ("metis", "balanced") and not HAVE_METIS:
        pytest.skip("pymetis not installed")
    A = graph()
    got = partition_graph(A, method, 3, seed=5)
    assert isinstance(got, PartitionOrder)
    want = PARTITIONERS[method](A, 3, seed=5)
    assert np.array_equal(got.perm, want.perm) and np.array_equal(got.offsets, want.offsets)
    assert got.stats.total_volume == want.stats.total_volume
    assert got.offsets.dtype == np.int64


def test_unknown_name():
    with pytest.raises(ValueError, match="unknown partitioner 'spectral'"):
        partition_graph(graph(), "spectral", 2)


def test_block_partition_accepts_a_seed():
    A = graph()
    assert np.array_equal(block_partition(A, 5, seed=9).parts, block_partition(A, 5).parts)


def test_order_helpers_round_trip(tmp_path):
    parts = np.array([2, 0, 1, 0, 2, 2])
    perm, offsets = order_from_parts(parts, 3)
    assert perm.tolist() == [1, 3, 2, 0, 4, 5] and offsets.tolist() == [0, 2, 3, 6]
    with pytest.raises(ValueError, match=r"must lie in \[0, 2\)"):
        order_from_parts(parts, 2)
    write_partition_file(tmp_path / "p.txt", parts)
    assert read_partition_file(tmp_path / "p.txt", 6).tolist() == parts.tolist()
    with pytest.raises(ValueError, match="expected 5 part ids"):
        read_partition_file(tmp_path / "p.txt", 5)
    A = graph(6)
    assert permute(A, None) is A
    assert np.array_equal(permute(A, perm).toarray(), A.toarray()[perm][:, perm])
