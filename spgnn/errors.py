"""Exception and warning classes.

Every error subclasses both :class:`SpgnnError` and the built-in exception a
scipy or numpy user would expect (``ValueError``, ``TypeError``,
``ImportError``), so ``except ValueError`` keeps working.

Every class listed in ``__all__`` is one that
:meth:`spgnn.comm.Communicator.agree` rebuilds on the ranks that did not fail
(any other class reaches them as :class:`RemoteError`), so an error that a
library function may raise on one rank of a collective belongs here.

Message style: the operation, then what it requires, then what it got, naming
both values, e.g. ``spmm: inner dimensions must agree, but got A.shape=(5, 4)
and X.shape=(3, 2)``.
"""

__all__ = [
    "SpgnnError",
    "DimensionMismatch",
    "LayoutMismatch",
    "GridError",
    "GridMismatch",
    "InvalidSparseStructure",
    "DTypeError",
    "BackendUnavailable",
    "BackendMismatch",
    "GraphFormatError",
    "ShardError",
    "InputTooLarge",
    "RankMismatch",
    "DownloadError",
    "ChecksumError",
    "MissingDependency",
    "RemoteError",
    "CommunicatorBroken",
    "CheckpointError",
    "CalibrationError",
    "NonFiniteError",
    "InvalidWeight",
    "UnknownDataset",
    "LoopbackAborted",
    "SpgnnDataWarning",
    "SpgnnEfficiencyWarning",
    "SpgnnTrainingWarning",
]


class SpgnnError(Exception):
    """Base class of every spgnn error."""


class DimensionMismatch(SpgnnError, ValueError):
    """Shapes of the operands do not fit the operation."""


class LayoutMismatch(SpgnnError, ValueError):
    """A layout the operation or the grid cannot handle."""


class GridError(SpgnnError, ValueError):
    """A process-grid shape that does not fit the communicator, or a bad axis."""


class GridMismatch(GridError):
    """Operands live on different process grids."""


class InvalidSparseStructure(SpgnnError, ValueError):
    """Malformed CSR arrays: non-monotone indptr, out-of-range indices, bad lengths."""


class DTypeError(SpgnnError, TypeError):
    """An array has a dtype the operation does not accept."""


class BackendUnavailable(SpgnnError, ImportError):
    """The requested backend cannot run here; the message says why."""


class BackendMismatch(SpgnnError, TypeError):
    """Operands belong to different backends."""


class GraphFormatError(SpgnnError, ValueError):
    """A graph file is malformed, corrupted, truncated or of an unknown format.

    The message starts with the file, then the 1-based line number for text
    formats (``edges.txt:17: ...``) or the member / key for binary ones.
    """


class ShardError(GraphFormatError):
    """A shard directory (:mod:`spgnn.io.shards`) is missing, truncated, corrupt, of another
    format version, or unusable as asked; the message names the directory or the file."""


class InputTooLarge(SpgnnError, MemoryError, ValueError):
    """An input would need more memory than spgnn allows it: a vertex count or
    size declared by a small file, a compressed file that expands past its limit,
    a generator spec, a class id in the billions.

    Raised before the allocation, naming the file (or option) and the number; a
    ``ValueError`` too, so command lines report it in one line.  The limits are
    documented in ``docs/reliability.md`` (``SPGNN_MAX_INPUT_BYTES``).
    """


class RankMismatch(SpgnnError, ValueError):
    """Ranks passed different values where every rank must pass the same (a global
    shape, a layout, the matrix of ``from_global(root=None)``): checked before the
    difference can give different answers per rank or a hang."""


class DownloadError(SpgnnError, OSError):
    """A dataset file is not in the cache and could not be downloaded (offline, refused,
    unreachable).  The message names every missing file, its URL and where to place it."""


class ChecksumError(DownloadError):
    """A downloaded or cached file does not have the registry's size or checksum.

    The message names the file, the expected and the measured values and the URL.
    """


class MissingDependency(SpgnnError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it
    (``pip install "spgnn[torch]"``)."""


class RemoteError(SpgnnError, RuntimeError):
    """Raised on every rank when another rank failed a collective check.

    The failing rank raises the specific error; its peers raise this one,
    carrying the failing rank's message, so that no rank is left waiting.
    """


class CommunicatorBroken(SpgnnError, RuntimeError):
    """A collective refused on a rank that left a collective section alone, with an error.

    Its peers may still be inside that section, waiting in a collective this
    rank will never join; entering another one would hang the job (see
    :meth:`spgnn.comm.Communicator.section`).
    """


class CheckpointError(SpgnnError, ValueError):
    """A checkpoint is missing, truncated, corrupt or of an unknown format.

    The message names the file (or the directory) concerned.
    """


class CalibrationError(SpgnnError, ValueError):
    """A performance-model calibration file or fit is unusable (unreadable, wrong format,
    negative or non-finite coefficients, too few samples); the message names the file."""


class NonFiniteError(SpgnnError, FloatingPointError):
    """A NaN or infinity where training needs finite numbers: an input, a
    hyperparameter, a checkpoint, or a loss or gradient during training
    (raised on every rank, the first epoch it happens)."""


class LoopbackAborted(SpgnnError, RuntimeError):
    """Raised in a virtual rank whose group was aborted (a peer failed or called abort)."""


class InvalidWeight(SpgnnError, ValueError):
    """An edge weight an algorithm's precondition excludes (``sssp``: a negative or NaN
    weight, on which Bellman-Ford never settles)."""


class UnknownDataset(SpgnnError, KeyError, ValueError):
    """A dataset name the registry does not hold; the message lists the known names (and the
    closest one).  A ``KeyError`` (a registry lookup) and a ``ValueError`` (bad input to a
    command, reported in one line)."""

    def __str__(self):              # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class SpgnnDataWarning(UserWarning):
    """An input was read with a change its reader should know about: entries of weight 0
    dropped (they are no edges), integer weights rounded to the float32 adjacency."""


class SpgnnTrainingWarning(UserWarning):
    """A training run looks wrong without being invalid (its loss has not moved for many epochs)."""


class SpgnnEfficiencyWarning(UserWarning):
    """A slow path was taken (host staging, a dense fallback)."""
