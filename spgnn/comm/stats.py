"""The communication ledger: one :class:`CommEvent` per communicator call.

Byte model
==========
Every number is **logical payload**, exact and machine-independent: it is
computed from the buffer sizes at the API, never measured on the wire (the
bytes an MPI library's internal tree or ring moves depend on its algorithm).
Notation for a call on a communicator of size ``p`` by rank ``r``: ``w`` is
the itemsize, ``m`` the buffer's bytes.  A rank's traffic to itself is never
counted.  ``messages`` counts the messages this rank *sends*.

``block(n, p, r)``
    Elements of rank ``r`` in the even split of ``n`` elements: the first
    ``n % p`` ranks get ``n // p + 1``, the others ``n // p``.

allreduce (``op="allreduce"``)
    Ring model over the ``n``-element buffer: ``sent = recv = 2·(n − block(n, p, r))·w``
    (reduce-scatter then allgather, each moving every block but one's own);
    ``messages = 2·⌈log₂ p⌉``: the message count of recursive halving then
    doubling (Rabenseifner), the schedule MPICH runs for a sum, whose bytes
    equal the ring's for a power of two; the ring's ``2·(p − 1)`` would
    overstate the latency term ``α·messages`` 170-fold at 4096 ranks.
    0 when ``p == 1`` or ``n == 0``.  Summed over ranks: ``2·(p − 1)·m`` each way.

allgather / allgatherv (``op="allgather"`` / ``"allgatherv"``)
    Direct model: ``own`` = this rank's contribution in bytes, ``total`` = all
    contributions.  ``sent = own·(p − 1)`` (each block delivered to ``p − 1``
    receivers), ``recv = total − own``, ``messages = p − 1`` if ``own > 0``
    else 0.

reduce_scatter (``op="reduce_scatter"``)
    Direct model: each rank sends the partial block of every other rank to
    its owner.  With ``own`` = this rank's block in bytes:
    ``sent = m − own``, ``recv = (p − 1)·own``,
    ``messages = #{j ≠ r : block_j > 0}``.  Summed over ranks both are
    ``(p − 1)·m``.

alltoall / alltoallv (``op="alltoall"`` / ``"alltoallv"``)
    Exact: ``sent = Σ_{j≠r} sendcount_j·rowbytes``,
    ``recv = Σ_{j≠r} recvcount_j·rowbytes``,
    ``messages = #{j ≠ r : sendcount_j > 0}``.  When a message is split into
    chunks of at most ``Communicator.max_count`` elements the bytes are the
    same and ``messages`` counts the chunks.

bcast (``op="bcast"``)
    Root: ``sent = m·(p − 1)``, ``messages = p − 1``; every other rank:
    ``recv = m``.  (Zero messages when ``m == 0``.)

send / recv (``op="send"`` / ``"recv"``)
    Exact bytes; a send is 1 message.  Messages to oneself count nothing.

Metadata travels in events of its own so the payload totals stay honest:
``"alltoall:counts"`` (the counts exchange of an ``alltoallv`` without
``recvcounts``: two int64 per peer, the count and the large-message bound),
``"allgather:counts"`` (the row counts of ``allgatherv``: one int64 per rank),
``"allreduce:split"`` (the one-int64 large-message agreement of an
``alltoallv`` with ``recvcounts``), ``"allgather:obj"`` / ``"bcast:obj"``
(object collectives, sized by their pickles, with the models above).
``barrier`` events carry zero bytes; ``split`` is modelled as an allgather of
two int64 (color, key) per rank.

Device arrays (:mod:`spgnn.comm.device`) change none of the numbers above: a
call on CuPy buffers records the same payload as on numpy ones, plus the
mode in ``CommEvent.device`` and, when staged through host memory, the
device/host copies in ``CommEvent.staged_bytes`` (not payload).

Invariant: for every collective op, summing ``bytes_sent`` over all ranks of
a communicator equals summing ``bytes_recv`` (for point-to-point, the
``send`` events' bytes equal the matching ``recv`` events' bytes).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass, field
from typing import Iterator

from spgnn.layout import block_bounds

__all__ = ["CommEvent", "CommStats", "ReducedStats", "Ledger", "block_size", "blocked_seconds",
           "FIELDS", "model_allreduce", "allreduce_messages", "model_allgather", "model_alltoallv"]

#: Aggregated numeric fields, in table order.
FIELDS = ("calls", "bytes_sent", "bytes_recv", "messages", "seconds")


def block_size(n: int, parts: int, index: int) -> int:
    """Elements of part ``index`` in the even split of ``n`` into ``parts``.

    The first ``n % parts`` parts get one extra element: the rule of
    :func:`spgnn.layout.block_bounds`, which this delegates to.
    """
    start, stop = block_bounds(n, parts, index)
    return stop - start


@dataclass
class CommEvent:
    """One communicator call on one rank.

    Attributes
    ----------
    op : str
        Operation name (``"allreduce"``, ``"alltoall:counts"``, ...).
    label : str
        The call's label, or the open :meth:`Communicator.track` scope path,
        or ``""``.
    axis : tuple of str
        Grid axes the communicator spans.
    bytes_sent, bytes_recv, messages : int
        Payload under the module's byte model.
    seconds : float
        Wall time of the call (``time.perf_counter``); a non-blocking call's
        runs from its start to the end of its ``wait``.  A timed barrier
        before the call (``wait_seconds``) is not included.
    rank : int
        World rank of the process that recorded it.
    device : str
        ``""`` for host buffers; ``"staged"`` or ``"cuda-aware"`` when the
        call moved a device array (:mod:`spgnn.comm.device`).
    staged_bytes : int
        Bytes copied between device and host to stage the call (device to
        host plus host to device; 0 unless ``device == "staged"``).  Not
        payload: ``bytes_sent``/``bytes_recv`` are the same as a host run's.
    blocked_seconds : float or None
        Time this rank spent inside the communicator for the call: equal to
        ``seconds`` for a blocking call; for a non-blocking one the start
        plus the ``wait`` (the computation overlapped in between is not in
        it).  ``None`` in events made by hand: read it through
        :func:`blocked_seconds`.
    wait_seconds : float
        Time of the timed barrier run before the call while
        :attr:`Ledger.time_waits` is on (waiting for slower ranks); 0 otherwise.
    """

    op: str
    label: str
    axis: tuple[str, ...]
    bytes_sent: int
    bytes_recv: int
    messages: int
    seconds: float
    rank: int
    device: str = ""
    staged_bytes: int = 0
    blocked_seconds: float | None = None
    wait_seconds: float = 0.0


def blocked_seconds(ev: CommEvent) -> float:
    """Seconds ``ev``'s rank spent inside the call (``ev.seconds`` when not recorded apart)."""
    return ev.seconds if ev.blocked_seconds is None else ev.blocked_seconds


def model_allreduce(n: int, itemsize: int, p: int, r: int) -> tuple:
    """``(sent, recv, messages)`` of rank ``r`` for an ``n``-element allreduce.

    Bytes: the ring model; messages: ``2·⌈log₂ p⌉`` (module docs).
    """
    moved = 2 * (n - block_size(n, p, r)) * itemsize if p > 1 else 0
    return moved, moved, (allreduce_messages(p) if n > 0 else 0)


def allreduce_messages(p: int) -> int:
    """Messages one rank sends in an allreduce over ``p`` ranks: ``2·⌈log₂ p⌉`` (0 for p = 1)."""
    return 2 * (int(p) - 1).bit_length() if p > 1 else 0


def model_allgather(own: int, total: int, p: int) -> tuple:
    """``(sent, recv, messages)`` for an allgather(v) contributing ``own`` of ``total`` bytes."""
    return own * (p - 1), total - own, ((p - 1) if own > 0 and p > 1 else 0)


def model_alltoallv(send_bytes, recv_bytes, r: int) -> tuple:
    """``(sent, recv, messages)`` of rank ``r`` given bytes to / from every peer (unsplit)."""
    import numpy as np

    send = np.asarray(send_bytes, dtype=np.int64)
    recv = np.asarray(recv_bytes, dtype=np.int64)
    others = np.arange(send.size) != r
    return (int(send[others].sum()), int(recv[others].sum()),
            int(np.count_nonzero(send[others])))


def _label_matches(event_label: str, label: str) -> bool:
    return event_label == label or event_label.startswith(label + "/")


def _norm_axis(axis):
    if axis is None:
        return None
    return (axis,) if isinstance(axis, str) else tuple(axis)


def _empty_row() -> dict:
    return {"calls": 0, "bytes_sent": 0, "bytes_recv": 0, "messages": 0, "seconds": 0.0}


def _add(row: dict, ev: CommEvent) -> None:
    row["calls"] += 1
    row["bytes_sent"] += ev.bytes_sent
    row["bytes_recv"] += ev.bytes_recv
    row["messages"] += ev.messages
    row["seconds"] += ev.seconds


def _fmt_axis(axis) -> str:
    return ",".join(axis) if axis else "-"


def _render(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    numeric = [i >= 3 for i in range(len(header))]

    def line(cells):
        return " | ".join(c.rjust(w) if numeric[i] else c.ljust(w)
                          for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    sep = "-+-".join("-" * w for w in widths)
    return "\n".join([line(header), sep] + [line(r) for r in rows])


class CommStats:
    """An ordered list of :class:`CommEvent` with aggregation helpers.

    All methods are local except :meth:`reduce`.
    """

    def __init__(self, events=None):
        self.events: list[CommEvent] = list(events) if events is not None else []

    def append(self, event: CommEvent) -> None:
        self.events.append(event)

    def clear(self) -> None:
        """Forget every event."""
        self.events.clear()

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[CommEvent]:
        return iter(self.events)

    def __repr__(self) -> str:
        return (f"CommStats({len(self.events)} events, sent={self.total('bytes_sent')} B, "
                f"recv={self.total('bytes_recv')} B, messages={self.messages})")

    def select(self, op=None, label=None, axis=None) -> "CommStats":
        """Events matching every given filter.

        ``op`` matches exactly (``"alltoall"`` excludes ``"alltoall:counts"``);
        ``label`` matches the label and its sub-scopes (``"layer1"`` matches
        ``"layer1/spmm"``); ``axis`` matches the tuple exactly (a str means a
        one-axis tuple).
        """
        axis = _norm_axis(axis)
        return CommStats(ev for ev in self.events
                         if (op is None or ev.op == op)
                         and (label is None or _label_matches(ev.label, label))
                         and (axis is None or tuple(ev.axis) == axis))

    def total(self, field: str = "bytes_sent", op=None, label=None, axis=None):
        """Sum of ``field`` (one of ``calls`` and the numeric event fields) over matching events."""
        if field not in FIELDS:
            raise ValueError(f"CommStats.total: field must be one of {FIELDS}, but got {field!r}")
        sel = self.select(op, label, axis).events
        if field == "calls":
            return len(sel)
        return sum(getattr(ev, field) for ev in sel)

    def staged_bytes(self, op=None, label=None, axis=None) -> int:
        """Device/host staging copies (``CommEvent.staged_bytes``) of the matching events."""
        return sum(ev.staged_bytes for ev in self.select(op, label, axis).events)

    def device_modes(self) -> set:
        """The ``device`` values of the events (``{""}`` for a host-only run)."""
        return {ev.device for ev in self.events}

    @property
    def messages(self) -> int:
        """Total messages sent."""
        return sum(ev.messages for ev in self.events)

    def _group(self, keyfn) -> dict:
        out: dict = {}
        for ev in self.events:
            k = keyfn(ev)
            row = out.get(k)
            if row is None:
                row = out[k] = _empty_row()
            _add(row, ev)
        return out

    def by_op(self) -> dict[str, dict]:
        """``{op: {calls, bytes_sent, bytes_recv, messages, seconds}}``."""
        return self._group(lambda ev: ev.op)

    def by_label(self) -> dict[str, dict]:
        """``{label: {calls, bytes_sent, bytes_recv, messages, seconds}}``."""
        return self._group(lambda ev: ev.label)

    def by_key(self) -> dict[tuple, dict]:
        """``{(op, label, axis): {...}}``, the grouping :meth:`reduce` uses."""
        return self._group(lambda ev: (ev.op, ev.label, tuple(ev.axis)))

    def reduce(self, comm) -> "ReducedStats":
        """Per-key sums and maxima over the ranks of ``comm``.

        Collective: yes, over ``comm`` (one ``allgather:obj`` of this rank's
        per-key totals, itself recorded under the label ``"stats.reduce"``).
        """
        mine = self.by_key()
        rows = comm.allgather_obj(mine, label="stats.reduce")
        return ReducedStats(rows)

    def table(self, per_rank: bool = False) -> str:
        """Human-readable table: op | label | axis | calls | bytes sent | bytes recv | messages | seconds.

        With ``per_rank=True`` a leading rank column splits the rows by the
        recording rank.
        """
        if per_rank:
            per: list = []
            for ev in self.events:
                while len(per) <= ev.rank:
                    per.append([])
                per[ev.rank].append(ev)
            return _per_rank_table([CommStats(evs).by_key() for evs in per])
        header = ["op", "label", "axis", "calls", "bytes sent", "bytes recv", "messages", "seconds"]
        rows = []
        for (op, label, axis), v in sorted(self.by_key().items()):
            rows.append([op, label or "-", _fmt_axis(axis), str(v["calls"]), str(v["bytes_sent"]),
                         str(v["bytes_recv"]), str(v["messages"]), f"{v['seconds']:.6f}"])
        return _render(header, rows)

    def to_dict(self) -> dict:
        """JSON-ready ``{"events": [...], "by_op": {...}, "by_label": {...}}``."""
        events = []
        for ev in self.events:
            d = asdict(ev)
            d["axis"] = list(ev.axis)
            events.append(d)
        return {"events": events, "by_op": self.by_op(), "by_label": self.by_label()}


def _render_ranked(header, rows):
    # Like _render but with the numeric columns shifted by the rank column.
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]

    def line(cells):
        return " | ".join(c.rjust(w) if i == 0 or i >= 4 else c.ljust(w)
                          for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    sep = "-+-".join("-" * w for w in widths)
    return "\n".join([line(header), sep] + [line(r) for r in rows])


@dataclass
class ReducedStats:
    """Per-(op, label, axis) totals gathered from every rank.

    Attributes
    ----------
    per_rank : list of dict
        ``per_rank[r][(op, label, axis)]`` is rank r's row
        ``{calls, bytes_sent, bytes_recv, messages, seconds}``.
    sum, max : dict
        The same rows summed / maximised over ranks (a rank without the key
        counts as zeros).
    """

    per_rank: list
    sum: dict = field(init=False)
    max: dict = field(init=False)

    def __post_init__(self):
        keys = sorted({k for rows in self.per_rank for k in rows})
        self.sum, self.max = {}, {}
        for k in keys:
            s, m = _empty_row(), _empty_row()
            for rows in self.per_rank:
                row = rows.get(k, _empty_row())
                for f in FIELDS:
                    s[f] += row[f]
                    m[f] = max(m[f], row[f])
            self.sum[k], self.max[k] = s, m

    @property
    def nranks(self) -> int:
        return len(self.per_rank)

    def total(self, field: str = "bytes_sent", op=None, label=None, axis=None,
              how: str = "sum"):
        """``how="sum"``: the field summed over ranks and matching keys;
        ``how="max"``: the largest per-rank total over matching keys."""
        if field not in FIELDS:
            raise ValueError(f"ReducedStats.total: field must be one of {FIELDS}, but got {field!r}")
        axis = _norm_axis(axis)

        def match(k):
            o, lab, ax = k
            return ((op is None or o == op) and (label is None or _label_matches(lab, label))
                    and (axis is None or tuple(ax) == axis))

        per = [sum(row[field] for k, row in rows.items() if match(k)) for rows in self.per_rank]
        if how == "sum":
            return sum(per)
        if how == "max":
            return max(per) if per else 0
        raise ValueError(f"ReducedStats.total: how must be 'sum' or 'max', but got {how!r}")

    def table(self, per_rank: bool = False) -> str:
        """Sums over ranks with the per-rank maximum of bytes sent and seconds;
        ``per_rank=True`` lists every rank's rows instead."""
        if per_rank:
            return _per_rank_table(self.per_rank)
        header = ["op", "label", "axis", "calls", "bytes sent", "bytes recv", "messages",
                  "max sent", "max recv", "max seconds"]
        rows = []
        for k in sorted(self.sum):
            s, m = self.sum[k], self.max[k]
            rows.append([k[0], k[1] or "-", _fmt_axis(k[2]), str(s["calls"]),
                         str(s["bytes_sent"]), str(s["bytes_recv"]), str(s["messages"]),
                         str(m["bytes_sent"]), str(m["bytes_recv"]), f"{m['seconds']:.6f}"])
        return _render(header, rows)

    def to_dict(self) -> dict:
        def enc(rows):
            return [{"op": k[0], "label": k[1], "axis": list(k[2]), **v} for k, v in sorted(rows.items())]
        return {"per_rank": [enc(r) for r in self.per_rank], "sum": enc(self.sum),
                "max": enc(self.max)}


def _per_rank_table(per_rank) -> str:
    header = ["rank", "op", "label", "axis", "calls", "bytes sent", "bytes recv", "messages",
              "seconds"]
    rows = []
    for r, rowsd in enumerate(per_rank):
        for k in sorted(rowsd):
            v = rowsd[k]
            rows.append([str(r), k[0], k[1] or "-", _fmt_axis(k[2]), str(v["calls"]),
                         str(v["bytes_sent"]), str(v["bytes_recv"]), str(v["messages"]),
                         f"{v['seconds']:.6f}"])
    return _render_ranked(header, rows)


class Ledger:
    """Per-process event sink shared by a world communicator and its splits.

    ``stats`` keeps every event recorded since creation (call
    ``ledger.stats.clear()`` to bound memory in long runs); each open
    :meth:`scope` also receives the events recorded while it is open.

    Clocks (the epoch phases of ``train``, docs/performance.md):
    ``time_waits`` (default False) makes every collective of the
    communicators sharing this ledger run a barrier first and record its
    time as the event's ``wait_seconds`` -- the time this rank waited for
    slower ranks to arrive -- so that the call's own ``seconds`` no longer
    include it; ``clocks`` holds running sums in seconds: ``"wait"`` (every
    event's ``wait_seconds``) and whatever :meth:`clock` times
    (``"quantize"``: the exchange codec, :mod:`spgnn.core.codec`).
    """

    def __init__(self, rank: int = 0):
        self.rank = rank
        self.stats = CommStats()
        self._scopes: list[tuple[str, CommStats]] = []
        self.time_waits = False
        self.clocks: dict[str, float] = {"wait": 0.0}

    @contextlib.contextmanager
    def clock(self, name: str):
        """Add the time spent inside the ``with`` block to ``clocks[name]``. Local."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.clocks[name] = self.clocks.get(name, 0.0) + (time.perf_counter() - t0)

    def current_label(self) -> str:
        """Path ``"outer/inner"`` of the open scopes, ``""`` when none is open."""
        return self._scopes[-1][0] if self._scopes else ""

    def record(self, event: CommEvent) -> None:
        if event.wait_seconds:
            self.clocks["wait"] += event.wait_seconds
        self.stats.append(event)
        for _, st in self._scopes:
            st.append(event)

    @contextlib.contextmanager
    def scope(self, label: str):
        """Open a nested collection scope; yields its :class:`CommStats`."""
        if not isinstance(label, str) or not label:
            raise ValueError(f"track: label must be a non-empty str, but got {label!r}")
        parent = self.current_label()
        entry = (f"{parent}/{label}" if parent else label, CommStats())
        self._scopes.append(entry)
        try:
            yield entry[1]
        finally:
            # Remove by identity: generators may close scopes out of order.
            for i in range(len(self._scopes) - 1, -1, -1):
                if self._scopes[i] is entry:
                    del self._scopes[i]
                    break
