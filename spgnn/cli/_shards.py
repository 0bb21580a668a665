"""``--graph DIR`` for the commands that take a graph: the shards' manifest and each rank's rows.

A shard directory (``spgnn partition``, :mod:`spgnn.io.shards`) is read in
parallel: rank 0 reads the small manifest and broadcasts it, and each rank
reads only the part files holding the rows it owns
(:func:`spgnn.io.shards.read_rows`).  Its ``K`` parts become the command's
``B`` row blocks when one divides the other (``K = m·B``: ``m`` consecutive
parts per block; ``B = m·K``: each part cut into ``m`` even blocks), else one
:class:`~spgnn.errors.GridError` on every rank naming the fix.
"""

from __future__ import annotations

from ..errors import GridError, ShardError
from ..io import shards as shard_io
from ..gnn.data import part_blocks, read_manifest_on_root

__all__ = ["is_shard_dir", "read_manifest", "block_offsets_of", "read_rows"]

is_shard_dir = shard_io.is_shard_dir


def read_manifest(comm, directory) -> dict:
    """The manifest on every rank (rank 0 reads it). Collective; ShardError on every rank."""
    return read_manifest_on_root(directory, comm, "shards:meta")


def block_offsets_of(man, blocks: int, command: str) -> tuple:
    """``blocks + 1`` row boundaries from the shards' ``K`` parts. Pure; GridError when
    neither of ``K`` and ``blocks`` divides the other."""
    out = part_blocks(man["offsets"], blocks)
    if out is not None:
        return out
    k = len(man["offsets"]) - 1
    raise GridError(f"{command}: the shards have K={k} parts, but this run cuts the graph into "
                    f"{blocks} row blocks, and neither divides the other; re-partition with "
                    f"'spgnn partition --parts {blocks}' (or run on a rank count that divides or "
                    f"is a multiple of {k})")


def read_rows(comm, directory, man, lo, hi):
    """This rank's rows ``lo:hi`` (:class:`spgnn.io.shards.RowBlock`). Collective: a missing,
    truncated or damaged part file is one ShardError on every rank."""
    block, err = None, None
    try:
        block = shard_io.read_rows(directory, man, lo, hi)
    except ShardError as exc:
        err = exc
    comm.agree(err)
    return block
