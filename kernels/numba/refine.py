"""Refinement of a k-way partition towards a lower maximum send volume (Graph-VB's objective).

Serial numba over plain arrays (no spgnn imports; installed as
``spgnn._kernels.numba.refine``).  The driver,
:func:`spgnn.partition.balanced_partition`, checks the arguments, makes the
METIS base partition and the balance caps, and explains the algorithm in its
docstring; ``docs/partitioning.md`` has the measured results.  The result
depends only on the inputs (serial, integer gains, stable sorts), so it is
the same on every machine.  No validation: the driver guarantees the
shapes, dtypes and ranges listed in :func:`refine_max_send`.

Vocabulary, for ``Y = A X`` with A and X split by rows along ``parts``
(row ``v`` of the pattern ``indptr``/``indices`` belongs to part
``parts[v]``, which needs the rows of X of its columns):

* ``readers[u, q]``: rows of part ``q`` with an entry in column ``u`` (the
  pins of the column net ``u`` in part ``q``), an ``(n, nparts)`` int32 table;
* ``remote[u]`` (``λ_u``): parts other than ``parts[u]`` with a reader of
  ``u``, i.e. how many times row ``u`` of X is sent;
* ``send[q] = Σ_{u in part q} remote[u]``: part ``q``'s send volume (rows
  of X); their sum is the total volume;
* the *excess* over a level ``L``: ``E = Σ_q max(0, send[q] − L)``;
* each part's vertices form a doubly linked list (``first[q]``, ``next_[v]``,
  ``prev[v]``, -1 for none), so that a pass visits only the heaviest part.

A move of ``v`` from ``source`` to ``target`` changes ``readers[u, ·]``
only for the columns ``u`` of row ``v``: :func:`_send_deltas` evaluates its
exact effect on every ``send[q]`` in ``O(deg v)``, :func:`_apply_move`
applies it in ``O(deg v + nparts)``.

Loops over every vertex or every entry are written out, not calls of a small
helper per iteration: with numba 0.68 such a call (arrays as arguments)
costs tens of nanoseconds, which made the refinement up to 1.9x slower
(``_touch`` in ``_send_deltas``, tried with and without ``inline="always"``)
and its setup 2x slower on luxembourg_osm (a helper per vertex).  Calls per
candidate move are fine.
"""

import numba
import numpy as np

__all__ = ["refine_max_send"]


@numba.njit(cache=True, nogil=True)
def _recount_remote(readers, parts, start, stop, remote):
    """``remote[u] = λ_u`` for ``u`` in ``[start, stop)``: the parts other than
    ``parts[u]`` with a reader of column ``u``."""
    for u in range(start, stop):
        count = 0
        for q in range(readers.shape[1]):
            if q != parts[u] and readers[u, q] > 0:
                count += 1
        remote[u] = count


@numba.njit(cache=True, nogil=True)
def _count_readers(indptr, indices, parts, readers, remote):
    """Fill ``readers`` (all zero on entry) and ``remote`` from the pattern and ``parts``."""
    n = parts.shape[0]
    for v in range(n):
        part = parts[v]
        for t in range(indptr[v], indptr[v + 1]):
            readers[indices[t], part] += 1
    _recount_remote(readers, parts, 0, n, remote)


@numba.njit(cache=True, nogil=True)
def _link_members(parts, first, next_, prev):
    """Link each part's vertices in increasing order (``first`` all -1 on entry)."""
    last = -np.ones(first.shape[0], np.int64)
    for v in range(parts.shape[0]):
        part = parts[v]
        prev[v] = last[part]
        next_[v] = -1
        if last[part] >= 0:
            next_[last[part]] = v
        else:
            first[part] = v
        last[part] = v


@numba.njit(cache=True, nogil=True)
def _push_front(v, part, first, next_, prev):
    """Put ``v`` at the front of ``part``'s member list (``v`` is in no list)."""
    prev[v] = -1
    next_[v] = first[part]
    if first[part] >= 0:
        prev[first[part]] = v
    first[part] = v


@numba.njit(cache=True, nogil=True)
def _unlink(v, part, first, next_, prev):
    """Take ``v`` out of ``part``'s member list (its own links are left stale)."""
    if prev[v] >= 0:
        next_[prev[v]] = next_[v]
    else:
        first[part] = next_[v]
    if next_[v] >= 0:
        prev[next_[v]] = prev[v]


@numba.njit(cache=True, nogil=True)
def _send_deltas(v, target, indptr, indices, parts, readers, remote, delta, touched, is_touched):
    """Exact change of every part's send volume if ``v`` moved to ``target``; O(deg v).

    Adds the changes to ``delta`` and lists the parts whose entry it touched
    in ``touched[:count]`` (``v``'s part and ``target`` first; ``target``
    is not ``v``'s part); returns ``count``.  ``delta`` and ``is_touched``
    must be all zero on entry: :func:`_score_deltas` clears them again.
    """
    source = parts[v]
    touched[0] = source
    touched[1] = target
    is_touched[source] = True
    is_touched[target] = True
    count = 2
    self_loops = 0
    for t in range(indptr[v], indptr[v + 1]):
        u = indices[t]
        if u == v:
            self_loops += 1
            continue
        owner = parts[u]
        d = 0
        if owner != source and readers[u, source] == 1:     # v was u's only reader in source
            d -= 1
        if owner != target and readers[u, target] == 0:     # v is u's first reader in target
            d += 1
        if d != 0:
            # written out: with a helper call here (inline="always" or not) the
            # whole refinement ran 1.9x slower (numba 0.68)
            if not is_touched[owner]:
                is_touched[owner] = True
                touched[count] = owner
                count += 1
            delta[owner] += d
    # v's own λ: target becomes local, source becomes remote if other rows of source read v
    d_own = ((1 if readers[v, source] - self_loops > 0 else 0)
             - (1 if readers[v, target] > 0 else 0))
    delta[source] -= remote[v]
    delta[target] += remote[v] + d_own
    return count


@numba.njit(cache=True, nogil=True)
def _score_deltas(count, source, level, ceiling, send, delta, touched, is_touched):
    """``(d_excess, d_total, feasible)`` of the move :func:`_send_deltas` just evaluated.

    ``d_excess`` is the change of ``E = Σ_q max(0, send[q] − level)`` and
    ``d_total`` that of the total volume; the move is feasible when it lowers
    ``send[source]`` and lifts no other part above ``ceiling``.  Clears
    ``delta`` and ``is_touched`` for the next evaluation.
    """
    d_excess = 0
    d_total = 0
    feasible = delta[source] < 0
    for t in range(count):
        q = touched[t]
        d = delta[q]
        d_total += d
        new = send[q] + d
        if q != source and new > ceiling:
            feasible = False
        d_excess += max(0, new - level) - max(0, send[q] - level)
        delta[q] = 0
        is_touched[q] = False
    return d_excess, d_total, feasible


@numba.njit(cache=True, nogil=True)
def _apply_move(v, target, indptr, indices, parts, readers, remote, send):
    """Move ``v`` to ``target``, updating ``parts``, ``readers``, ``remote`` and ``send``."""
    source = parts[v]
    send[source] -= remote[v]
    parts[v] = target
    for t in range(indptr[v], indptr[v + 1]):
        u = indices[t]
        owner = parts[u]
        readers[u, source] -= 1
        if readers[u, source] == 0 and owner != source:
            remote[u] -= 1
            send[owner] -= 1
        readers[u, target] += 1
        if readers[u, target] == 1 and owner != target:
            remote[u] += 1
            send[owner] += 1
    _recount_remote(readers, parts, v, v + 1, remote)     # parts[v] is target now
    send[target] += remote[v]


@numba.njit(cache=True, nogil=True)
def _has_room(part, v, part_vertices, part_weight, row_weights, max_vertices, max_weight):
    """Whether ``part`` stays within both balance caps after taking ``v``."""
    return (part_vertices[part] + 1 <= max_vertices
            and part_weight[part] + row_weights[v] <= max_weight)


@numba.njit(cache=True, nogil=True)
def _heaviest_above(send, level, stuck):
    """The part with the largest send volume above ``level`` that is not stuck, or -1."""
    heavy = -1
    for q in range(send.shape[0]):
        if send[q] > level and not stuck[q] and (heavy < 0 or send[q] > send[heavy]):
            heavy = q
    return heavy


@numba.njit(cache=True, nogil=True)
def _lightest_with_room(send, skip, part_vertices, part_weight, max_vertices, max_weight, limit,
                        out_parts):
    """Up to ``limit`` parts other than ``skip`` below both caps, lightest sender first.

    Written to ``out_parts[:count]``; returns ``count``.
    """
    order = np.argsort(send, kind="mergesort")
    count = 0
    for r in range(send.shape[0]):
        q = order[r]
        if count == limit:
            break
        if q != skip and part_vertices[q] < max_vertices and part_weight[q] < max_weight:
            out_parts[count] = q
            count += 1
    return count


@numba.njit(cache=True, nogil=True)
def _top_readers(counts, skip, limit, out_top):
    """The ``limit`` parts with the most readers in ``counts`` (a row of ``readers``).

    Parts without a reader and ``skip`` are left out.  Kept sorted by
    insertion in ``out_top[:count]``, most readers first, the lower part id
    first among equals; returns ``count``.
    """
    if limit <= 0:
        return 0
    count = 0
    for q in range(counts.shape[0]):
        c = counts[q]
        if q == skip or c == 0:
            continue
        if count < limit:
            j = count                              # append ...
            count += 1
        elif c > counts[out_top[count - 1]]:
            j = count - 1                          # ... or replace the last
        else:
            continue
        while j > 0 and counts[out_top[j - 1]] < c:
            out_top[j] = out_top[j - 1]
            j -= 1
        out_top[j] = q
    return count


@numba.njit(cache=True, nogil=True)
def _target_parts(top, ntop, light, nlight, out_targets):
    """``top[:ntop]``, then the parts of ``light[:nlight]`` not listed yet; returns the count."""
    count = 0
    for j in range(ntop):
        out_targets[count] = top[j]
        count += 1
    for j in range(nlight):
        listed = False
        for z in range(count):
            if out_targets[z] == light[j]:
                listed = True
        if not listed:
            out_targets[count] = light[j]
            count += 1
    return count


@numba.njit(cache=True, nogil=True)
def _step_below(ceiling, margin):
    """How far below ``ceiling`` the level lies: ``⌊margin · ceiling⌋``, at least 1."""
    return max(1, int(margin * ceiling))


@numba.njit(cache=True, nogil=True)
def refine_max_send(indptr, indices, row_weights, base_parts, nparts, max_vertices, max_weight,
                    max_total_volume, candidates, light_targets, volume_weight, margin, max_passes,
                    patience, out_parts):
    """Lower the maximum send volume of ``base_parts`` by moving vertices off the heaviest senders.

    Level loop: with ``M`` the maximum send volume when a level starts and
    ``L = M − max(1, ⌊margin·M⌋)``, lower the excess over ``L``.  A pass
    takes the heaviest part above ``L`` that is not stuck, finds for each of
    its vertices with remote readers the best target among the
    ``candidates`` parts that read it most and the ``light_targets``
    lightest senders with room (score ``−ΔE − volume_weight·Δtotal``), then
    applies those moves by decreasing score, each re-evaluated exactly, while
    the part is above ``L``.  A move must lower E and the part's send volume,
    keep every part at most ``M``, both balance caps and the total-volume
    bound.  A pass that moves nothing marks the part stuck; when every part
    is at most ``L`` a new level starts; when only stuck parts are above it
    the margin is halved, and the search ends when even ``L = M − 1`` is
    stuck, after ``max_passes`` passes, or after more than ``patience``
    passes without a new lowest maximum.

    Parameters
    ----------
    indptr, indices : int64 CSR pattern of the square ``A`` (n rows), without
        duplicates; entries are in range.
    row_weights : int64 (n,), the weight of each row in the second balance
        cap (the driver passes the row's stored entries).
    base_parts : int64 (n,), the starting part of each vertex, in ``[0, nparts)``.
    nparts : int >= 2.
    max_vertices, max_weight : int, no move may take a part's vertex count or
        row weight above these (the driver makes them at least the base's).
    max_total_volume : int, no move may take the total volume above it.
    candidates : int >= 0, the parts that read a vertex most tried as targets.
    light_targets : int >= 0, the lightest senders with room tried as targets.
    volume_weight : float, weight of the total-volume change in a move's score.
    margin : float, the first level's step below the maximum (a fraction).
    max_passes, patience : int, the stopping rules above.
    out_parts : int64 (n,), overwritten with the refined parts (passing
        ``base_parts`` itself refines it in place).

    Returns
    -------
    (passes, moves) : the passes made and the vertex moves applied.

    Memory ``O(n · nparts)`` (the int32 ``readers`` table); a pass costs
    ``O(Σ_{v in part} (nparts + (candidates + light_targets) · deg v))``.
    """
    n = base_parts.shape[0]
    for v in range(n):
        out_parts[v] = base_parts[v]
    parts = out_parts

    # --- state: readers, λ, send volumes, part sizes and member lists
    readers = np.zeros((n, nparts), np.int32)
    remote = np.zeros(n, np.int64)
    _count_readers(indptr, indices, parts, readers, remote)
    send = np.zeros(nparts, np.int64)
    part_vertices = np.zeros(nparts, np.int64)
    part_weight = np.zeros(nparts, np.int64)
    for v in range(n):
        send[parts[v]] += remote[v]
        part_vertices[parts[v]] += 1
        part_weight[parts[v]] += row_weights[v]
    first = -np.ones(nparts, np.int64)
    next_ = -np.ones(n, np.int64)
    prev = -np.ones(n, np.int64)
    _link_members(parts, first, next_, prev)
    total = 0
    for v in range(n):
        total += remote[v]

    # --- scratch
    delta = np.zeros(nparts, np.int64)
    is_touched = np.zeros(nparts, np.bool_)
    touched = np.zeros(nparts, np.int64)
    stuck = np.zeros(nparts, np.bool_)
    targets = np.zeros(candidates + light_targets, np.int64)
    top = np.zeros(max(candidates, 1), np.int64)
    light = np.zeros(max(light_targets, 1), np.int64)
    move_vertex = np.zeros(n, np.int64)
    move_target = np.zeros(n, np.int64)
    move_score = np.zeros(n, np.float64)

    passes = 0
    moves = 0
    new_level = True
    level = 0
    ceiling = 0
    step = 1
    best_max = send.max()
    last_gain = 0
    while passes < max_passes and passes - last_gain <= patience:
        if new_level:
            ceiling = send.max()             # no part may exceed the max at level start
            step = _step_below(ceiling, margin)
            level = ceiling - step
            stuck[:] = False
            new_level = False
        heavy = _heaviest_above(send, level, stuck)
        if heavy < 0:
            if send.max() <= level:
                new_level = True             # level reached: aim lower
                continue
            if step <= 1:
                break                        # stuck one row below the max: local optimum
            margin *= 0.5                    # stuck: aim less far below the max
            step = _step_below(ceiling, margin)
            level = ceiling - step
            stuck[:] = False
            continue
        passes += 1
        nlight = _lightest_with_room(send, heavy, part_vertices, part_weight, max_vertices,
                                     max_weight, light_targets, light)

        # --- gather: the best target of every vertex of `heavy` that is sent somewhere
        nmoves = 0
        v = first[heavy]
        while v >= 0:
            if remote[v] > 0:
                ntop = _top_readers(readers[v], heavy, candidates, top)
                ntargets = _target_parts(top, ntop, light, nlight, targets)
                best_score = -1e300
                best_target = -1
                for z in range(ntargets):
                    target = targets[z]
                    if not _has_room(target, v, part_vertices, part_weight, row_weights,
                                     max_vertices, max_weight):
                        continue
                    count = _send_deltas(v, target, indptr, indices, parts, readers, remote,
                                         delta, touched, is_touched)
                    d_excess, d_total, feasible = _score_deltas(count, heavy, level, ceiling, send,
                                                                delta, touched, is_touched)
                    if feasible and d_excess < 0 and total + d_total <= max_total_volume:
                        score = -d_excess - volume_weight * d_total
                        if score > best_score:
                            best_score = score
                            best_target = target
                if best_target >= 0:
                    move_vertex[nmoves] = v
                    move_target[nmoves] = best_target
                    move_score[nmoves] = best_score
                    nmoves += 1
            v = next_[v]

        # --- apply in order of score, re-evaluated exactly (earlier moves change gains)
        applied = 0
        order = np.argsort(-move_score[:nmoves], kind="mergesort")
        for r in range(nmoves):
            if send[heavy] <= level:
                break
            v = move_vertex[order[r]]
            target = move_target[order[r]]
            if not _has_room(target, v, part_vertices, part_weight, row_weights, max_vertices,
                             max_weight):
                continue
            count = _send_deltas(v, target, indptr, indices, parts, readers, remote, delta,
                                 touched, is_touched)
            d_excess, d_total, feasible = _score_deltas(count, heavy, level, ceiling, send, delta,
                                                        touched, is_touched)
            if not feasible or d_excess >= 0 or total + d_total > max_total_volume:
                continue
            part_vertices[heavy] -= 1
            part_vertices[target] += 1
            part_weight[heavy] -= row_weights[v]
            part_weight[target] += row_weights[v]
            _unlink(v, heavy, first, next_, prev)
            _push_front(v, target, first, next_, prev)
            _apply_move(v, target, indptr, indices, parts, readers, remote, send)
            total += d_total
            applied += 1
        moves += applied
        if send.max() < best_max:
            best_max = send.max()
            last_gain = passes
        if applied == 0:
            stuck[heavy] = True
        else:
            stuck[:] = False                 # other parts' options changed
    return passes, moves
