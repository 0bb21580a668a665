"""The HEC ring buffer (spgnn.gnn.hec_cache, kernels/numba/hec.py) against a pure-Python model.

The model keeps the paper's semantics literally (research/001 §2.2, §2.4):
an ordered ring of ``cs`` slots, oldest-first replacement, a resident key
superseded (its old slot freed), the overwritten slot's key evicted, ages
ticking once per iteration, valid iff ``min_life <= age <= ls`` (no age
check at level 0).  Hypothesis drives random operation sequences through the
numpy reference and the Numba kernels; after every operation the resident
keys, ages, values and every search result equal the model's.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spgnn.gnn.hec_cache import HistoricalCache


class RingModel:
    def __init__(self, cs, ls, min_life, check_age):
        self.cs, self.ls, self.min_life, self.check_age = cs, ls, min_life, check_age
        self.slots = [None] * cs          # (key, age, value) or None
        self.ptr = 0

    def tick(self):
        self.slots = [None if s is None else (s[0], s[1] + 1, s[2]) for s in self.slots]

    def store(self, keys, vals):
        for k, v in zip(keys, vals):
            for i, s in enumerate(self.slots):
                if s is not None and s[0] == k:
                    self.slots[i] = None
            self.slots[self.ptr] = (int(k), 0, np.array(v))
            self.ptr = (self.ptr + 1) % self.cs

    def search(self, keys):
        where = {s[0]: (i, s) for i, s in enumerate(self.slots) if s is not None}
        pos, vals = [], []
        for j, k in enumerate(keys):
            if int(k) in where:
                _, s = where[int(k)]
                if not self.check_age or self.min_life <= s[1] <= self.ls:
                    pos.append(j)
                    vals.append(s[2])
        return pos, vals

    def resident(self):
        return sorted((s[0], s[1]) for s in self.slots if s is not None)


ops = st.lists(st.one_of(
    st.tuples(st.just("tick")),
    st.tuples(st.just("store"), st.lists(st.integers(0, 19), max_size=9, unique=True)),
    st.tuples(st.just("store-dup"), st.lists(st.integers(0, 19), max_size=6)),
    st.tuples(st.just("search"), st.lists(st.integers(0, 19), max_size=12)),
    st.tuples(st.just("reset"))), max_size=25)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@settings(max_examples=30, deadline=None)
@given(cs=st.integers(1, 8), ls=st.integers(0, 3), min_life=st.integers(0, 1),
       check_age=st.booleans(), seq=ops)
def test_ring_matches_model(backend, cs, ls, min_life, check_age, seq):
    c = HistoricalCache(20, cs, 2, ls, min_life=min_life, check_age=check_age, dtype=np.float64,
                        backend=backend)
    m = RingModel(cs, ls, min_life, check_age)
    counter = 0
    for op in seq:
        if op[0] == "tick":
            c.tick()
            m.tick()
        elif op[0] == "reset":
            c.reset()
            m = RingModel(cs, ls, min_life, check_age)
        elif op[0] in ("store", "store-dup"):
            keys = np.asarray(op[1], dtype=np.int64)
            vals = counter + np.arange(2 * keys.size, dtype=np.float64).reshape(-1, 2)
            counter += 2 * keys.size
            c.store(keys, vals, born=7)
            m.store(keys, vals)
        else:
            keys = np.asarray(op[1], dtype=np.int64)
            pos, slots = c.search(keys)
            mpos, mvals = m.search(keys)
            assert pos.tolist() == mpos
            out = np.full((keys.size, 2), -1.0)
            c.load(slots, pos, out)
            for p, v in zip(mpos, mvals):
                assert np.array_equal(out[p], v)
        k, a = c.ages()
        assert sorted(zip(k.tolist(), a.tolist())) == m.resident()
        # tag2slot and slot2tag are inverse maps on the resident lines
        res = np.flatnonzero(c.tag2slot >= 0)
        assert np.array_equal(c.slot2tag[c.tag2slot[res]], res)
        assert np.count_nonzero(c.slot2tag >= 0) == res.size


def test_age_window_and_level0():
    c = HistoricalCache(10, 4, 1, ls=2, min_life=1)
    c.store([3], [[1.0]], born=0)
    seen = []
    for _ in range(5):
        seen.append(c.search([3])[0].size)
        c.tick()
    assert seen == [0, 1, 1, 0, 0]        # valid for ages 1..2
    c0 = HistoricalCache(10, 4, 1, ls=0, check_age=False)
    c0.store([3], [[1.0]], born=0)
    for _ in range(9):
        c0.tick()
    assert c0.search([3])[0].size == 1    # level 0: no age check, lives until overwritten


def test_oldest_first_replacement_and_supersede():
    c = HistoricalCache(10, 3, 1, ls=9)
    c.store([1, 2, 3], [[1], [2], [3]], born=0)
    c.store([2], [[20]], born=1)          # supersedes 2, evicts 1 (the oldest slot)
    k, _ = c.ages()
    assert sorted(k.tolist()) == [2, 3]
    c.store([4], [[4]], born=1)           # the slot holding the old (freed) 2
    c.store([5], [[5]], born=1)           # evicts 3
    assert sorted(c.ages()[0].tolist()) == [2, 4, 5]
    pos, slots = c.search([2, 5])
    out = np.zeros((2, 1), np.float32)
    c.load(slots, pos, out)
    assert out.ravel().tolist() == [20, 5]


@pytest.mark.parametrize("bad", [dict(cs=0), dict(ls=-1), dict(min_life=-1)])
def test_bad_parameters(bad):
    kw = dict(cs=4, ls=2, min_life=0) | bad
    with pytest.raises(ValueError):
        HistoricalCache(10, kw["cs"], 2, kw["ls"], min_life=kw["min_life"])
