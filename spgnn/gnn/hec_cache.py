"""One Historical Embedding Cache (paper 001 §2.2-2.4): a ring of ``cs`` rows keyed by vertex id.

:class:`HistoricalCache` is purely local (no MPI): its store / search /
load are the backend's ``hec_*`` operations (Numba kernels in
``kernels/numba/hec.py``; the numpy reference in ``spgnn/backends/base.py``).

* **Keys** are global vertex ids in ``[0, n)``; ``tag2slot`` is a dense
  array of length ``n`` (the paper's ``cachemap``).
* **Replacement** is oldest-first: a ring whose head advances by one per
  stored row; storing a resident key frees its old slot (superseded), and
  the overwritten slot's key is evicted.
* **Ages** count iterations: :meth:`tick` advances the cache clock once per
  iteration (before storing that iteration's receives), a line's age is
  ``clock - stamp`` (0 when just stored).  A line is valid iff
  ``min_life <= age <= ls``; level 0 (raw features never go stale) skips the
  check (``check_age=False``).
* :meth:`reset` empties the cache (per epoch, ``--hec-reset epoch``).
* **Use accounting** (issue 39): every line has a ``read`` flag, set by
  :meth:`load`.  ``first_reads`` counts lines read at least once;
  ``wasted`` counts lines that became unusable unread (overwritten or
  superseded by the ring, or, in :meth:`use_counts`, expired); so for the
  lines stored since :meth:`settle`, ``stored = first_reads + wasted + live``.
"""

import numpy as np

from ..backends import get_backend

__all__ = ["HistoricalCache", "INFINITE"]

#: "No limit" for ``ls`` (an age no run reaches).
INFINITE = np.iinfo(np.int64).max // 4


class HistoricalCache:
    """A ring-buffer embedding cache for one level on one rank. Local.

    Parameters
    ----------
    n : int, the key space (global vertex ids)
    cs : int >= 1, capacity in rows
    dim : int, row width
    ls : int >= 0, life span in iterations (:data:`INFINITE`: no limit)
    min_life : int >= 0
    check_age : bool, False at level 0
    dtype, backend
    """

    def __init__(self, n, cs, dim, ls, *, min_life=0, check_age=True, dtype=np.float32,
                 backend=None):
        if int(cs) < 1 or int(ls) < 0 or int(min_life) < 0 or int(dim) < 0:
            raise ValueError(f"HistoricalCache: need cs >= 1, ls >= 0, min_life >= 0, dim >= 0, "
                             f"but got cs={cs}, ls={ls}, min_life={min_life}, dim={dim}")
        self.n, self.cs, self.dim = int(n), int(cs), int(dim)
        self.ls, self.min_life, self.check_age = int(ls), int(min_life), bool(check_age)
        self.dtype = np.dtype(dtype)
        self.backend = get_backend(backend)
        self.tag2slot = np.full(self.n, -1, dtype=np.int64)
        self.slot2tag = np.full(self.cs, -1, dtype=np.int64)
        self.stamp = np.zeros(self.cs, dtype=np.int64)
        self.born = np.full(self.cs, -1, dtype=np.int64)
        self.buf = np.zeros((self.cs, self.dim), dtype=self.dtype)
        self.ptr = 0
        self.clock = 0
        self.read = np.zeros(self.cs, dtype=bool)
        self.stored = self.first_reads = self.wasted = 0

    @property
    def arrays(self):
        return (self.tag2slot, self.slot2tag, self.stamp, self.born, self.buf)

    def reset(self):
        """Empty the cache (the clock restarts). Local."""
        self.tag2slot.fill(-1)
        self.slot2tag.fill(-1)
        self.born.fill(-1)
        self.ptr = 0
        self.clock = 0
        self.settle()

    def settle(self):
        """Restart the use accounting: resident lines count as neither read nor wasted. Local."""
        self.read.fill(True)
        self.stored = self.first_reads = self.wasted = 0

    def _valid(self, slots):
        if not self.check_age:
            return np.ones(slots.size, dtype=bool)
        age = self.clock - self.stamp[slots]
        return (age >= self.min_life) & (age <= self.ls)

    def use_counts(self):
        """``(stored, first_reads, wasted, live)`` since :meth:`settle`; expired unread lines are
        wasted, unread valid ones live.  ``stored == first_reads + wasted + live``. Local."""
        s = np.flatnonzero((self.slot2tag >= 0) & ~self.read)
        ok = self._valid(s)
        live = int(ok.sum())
        return self.stored, self.first_reads, self.wasted + int(s.size - live), live

    def tick(self):
        """Every line ages by one iteration. Local, O(1)."""
        self.clock += 1

    def store(self, keys, vals, born):
        """Store rows ``vals`` under ``keys`` (in order, oldest-first ring). Local.

        ``born``: the iteration each value was computed in (scalar or per key).
        """
        keys = np.asarray(keys, dtype=np.int64)
        if keys.size == 0:
            return
        if keys.min() < 0 or keys.max() >= self.n:
            raise IndexError(f"HistoricalCache.store: keys must lie in [0, {self.n})")
        vals = np.asarray(vals).reshape(keys.size, self.dim)
        born = np.broadcast_to(np.asarray(born, dtype=np.int64), keys.shape)
        # use accounting: the lines this store makes unusable (the ring's next
        # slots, and the keys' old slots) that were never read
        ring = (self.ptr + np.arange(min(keys.size, self.cs))) % self.cs
        old = self.tag2slot[keys]
        victims = np.unique(np.concatenate([ring, old[old >= 0]]))
        victims = victims[(self.slot2tag[victims] >= 0) & ~self.read[victims]]
        self.wasted += int(victims.size)
        self.stored += int(keys.size)
        self.read[ring] = False
        self.ptr = self.backend.hec_store(self.arrays, self.ptr, self.clock, keys, vals, born)

    def search(self, keys):
        """``(positions, slots)``: the keys that are resident and valid, and their slots. Local."""
        keys = np.asarray(keys, dtype=np.int64)
        return self.backend.hec_search(self.arrays, self.clock, keys, self.min_life, self.ls,
                                       self.check_age)

    def load(self, slots, rows, out):
        """``out[rows] = cached rows of slots`` (in place); marks the lines read. Local."""
        slots = np.asarray(slots, dtype=np.int64)
        if slots.size:
            fresh = np.unique(slots[~self.read[slots]])
            self.first_reads += int(fresh.size)
            self.read[slots] = True
        self.backend.hec_load(self.arrays, slots, rows, out)

    def ages(self):
        """``(keys, ages)`` of the resident lines, in slot order. Local."""
        s = np.flatnonzero(self.slot2tag >= 0)
        return self.slot2tag[s], self.clock - self.stamp[s]

    def state(self):
        """Arrays for a checkpoint (:meth:`load_state`). Local."""
        return dict(tag2slot=self.tag2slot.copy(), slot2tag=self.slot2tag.copy(),
                    stamp=self.stamp.copy(), born=self.born.copy(), buf=self.buf.copy(),
                    ptr=self.ptr, clock=self.clock)

    def load_state(self, st):
        for k in ("tag2slot", "slot2tag", "stamp", "born", "buf"):
            getattr(self, k)[...] = st[k]
        self.ptr, self.clock = int(st["ptr"]), int(st["clock"])
