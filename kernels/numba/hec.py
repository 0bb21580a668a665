"""Historical Embedding Cache (DistGNN-MB, paper 001 §2.4): store, search and load.

Pure numba over plain arrays (no spgnn imports, no MPI; installed as
``spgnn._kernels.numba.hec``), reached through
``spgnn.backends`` (``Backend.hec_store`` / ``hec_search`` / ``hec_load``).

A cache is five arrays: ``tag2slot[key]`` (slot of a resident key, -1 when
absent), ``slot2tag[slot]`` (its key, -1 when free), ``stamp[slot]`` (the
cache clock when the line was stored: its age is ``clock - stamp``; one
clock tick per iteration replaces incrementing every age), ``born[slot]``
(the iteration the pushed value was computed in, for the staleness bound)
and ``buf[slot, :]``.  ``ptr`` is the ring's head.

Semantics of :func:`store`, one pair at a time in order (oldest cache line
first, a ring buffer):

1. a resident key's old slot is freed (superseded);
2. the head slot's current key, if any, is evicted;
3. the pair is written at the head with ``stamp = clock``;
4. the head advances modulo ``cs``.

:func:`search` returns the positions of the queried keys that are resident
and, when ``check_age``, whose age lies in ``[min_life, ls]``, with their
slots.  :func:`load` scatters ``buf[slots]`` into rows of an output.
"""

import numba

__all__ = ["store", "search", "load"]


@numba.njit(cache=True, nogil=True)
def store(tag2slot, slot2tag, stamp, born, buf, ptr, clock, keys, vals, born_iter):
    """Store ``(keys[i], vals[i])`` in order; returns the new head. Sequential (order matters)."""
    cs = slot2tag.shape[0]
    d = buf.shape[1]
    for i in range(keys.shape[0]):
        key = keys[i]
        old = tag2slot[key]
        if old >= 0:
            slot2tag[old] = -1                 # superseded: the old copy is invalid
        ev = slot2tag[ptr]
        if ev >= 0:
            tag2slot[ev] = -1                  # the oldest line is overwritten
        slot2tag[ptr] = key
        tag2slot[key] = ptr
        stamp[ptr] = clock
        born[ptr] = born_iter[i]
        for j in range(d):
            buf[ptr, j] = vals[i, j]
        ptr += 1
        if ptr == cs:
            ptr = 0
    return ptr


@numba.njit(cache=True, nogil=True)
def search(tag2slot, stamp, clock, keys, min_life, ls, check_age, out_pos, out_slot):
    """Hits among ``keys``: fills ``out_pos`` / ``out_slot``, returns their number."""
    h = 0
    for i in range(keys.shape[0]):
        s = tag2slot[keys[i]]
        if s < 0:
            continue
        if check_age:
            age = clock - stamp[s]
            if age < min_life or age > ls:
                continue
        out_pos[h] = i
        out_slot[h] = s
        h += 1
    return h


@numba.njit(cache=True, nogil=True)
def load(buf, slots, rows, out):
    """``out[rows[i], :] = buf[slots[i], :]``."""
    d = buf.shape[1]
    for i in range(slots.shape[0]):
        r = rows[i]
        s = slots[i]
        for j in range(d):
            out[r, j] = buf[s, j]
