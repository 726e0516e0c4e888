"""The host stages' lent LDE buffers (prover/core/scratch.py): the pool's rules, and proofs
byte-identical with every LDE in a reused (dirty) buffer and with none."""
import threading

import numpy as np
import pytest

from steadfast.air import examples as ex
from steadfast.prover import HostStages, Params, prove
from steadfast.prover.core import stages as stages_mod
from steadfast.prover.core.scratch import Scratch

FAST = Params(log_blowup=2, num_queries=6, pow_bits=1)


def test_lends_a_given_back_buffer_again():
    s = Scratch(min_bytes=0)
    a = s.take((3, 1000))
    assert a.shape == (3, 1000) and a.dtype == np.uint32 and a.flags.c_contiguous
    a[:] = 7
    s.give(a)
    b = s.take((2, 1000))                       # fits in a's buffer: the same memory
    assert np.shares_memory(a, b) and s.loans == 1 and s.allocations == 1
    c = s.take((2, 1000))                       # b is still lent: a new one
    assert not np.shares_memory(b, c) and s.allocations == 2


def test_small_requests_and_strangers_are_not_pooled():
    s = Scratch(min_bytes=1 << 20)
    small = s.take((10, 10))
    s.give(small)
    s.give(np.empty(1 << 20, np.uint32))        # not lent by s: ignored
    s.give(None)
    assert s.free_bytes == 0 and s.loans == 0 and s.allocations == 0


def test_keeps_the_largest_and_drops_smaller_on_a_miss():
    s = Scratch(max_free=2, min_bytes=0)
    bufs = [s.take((n,)) for n in (100, 200, 300)]
    for b in bufs:
        s.give(b)
    assert s.free_bytes == 4 * (200 + 300)      # the smallest went
    big = s.take((400,))                        # none fits: the free ones go
    assert s.free_bytes == 0
    s.give(big)
    assert s.free_bytes == 4 * 400
    s.clear()
    assert s.free_bytes == 0


def test_one_buffer_one_borrower_across_threads():
    s = Scratch(max_free=4, min_bytes=0)
    seen, errors = [], []

    def work(k):
        for _ in range(200):
            a = s.take((64,))
            a[:] = k
            if not (a == k).all():
                errors.append(k)
            s.give(a)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and s.loans + s.allocations == 800


def test_a_reserved_size_per_concurrent_loan():
    s = Scratch(min_bytes=0)
    s.reserve([1000, 300])
    a = s.take((10, 10))                        # nothing lent: a miss allocates 1000
    b = s.take((5, 10))                         # one lent: 300
    assert s.allocations == 2 and a.base.size == 1000 and b.base.size == 300
    c = s.take((2000,))                         # two lent, nothing reserved: its own size
    assert c.base.size == 2000
    for x in (a, b, c):
        s.give(x)
    d = s.take((20, 40))                        # 800 <= 1000: lent again, not allocated
    assert s.allocations == 3 and np.shares_memory(d, a)
    s.give(d)
    s.clear()                                   # the reservation goes with the buffers
    e = s.take((7,))
    assert e.base.size == 7


def test_planned_pools_allocate_once_for_growing_tables():
    """Tables that grow one after another: without a plan every larger one misses and
    allocates; with the plan (the rounds call it) the first miss allocates the largest
    size and the later LDEs borrow it.  The same bytes."""
    airs = [ex.fibonacci_air(), ex.fibonacci_air(), ex.fibonacci_air()]
    tables, pvs = zip(*(ex.fibonacci_trace(k, 3, 4) for k in (5, 6, 7)))

    def stages(plan):
        st = HostStages(table_roots=False)
        st.scratch, st.work = Scratch(min_bytes=0), Scratch(min_bytes=0)
        if not plan:
            st.plan_buffers = lambda shapes: None
        return st
    planned, unplanned = stages(True), stages(False)
    got = prove(list(tables), airs, list(pvs), FAST, stages=planned)
    assert prove(list(tables), airs, list(pvs), FAST, stages=unplanned) == got
    # unplanned: each of the three main LDEs is larger than the last, then the largest
    # table's parts (4 columns) are wider than its main (2)
    assert planned.scratch.allocations == 1 and unplanned.scratch.allocations == 4
    assert planned.work.allocations == 1 and unplanned.work.allocations > 1
    assert planned.scratch._reserve == () and planned.work._reserve == ()  # cleared after R2


@pytest.fixture
def every_lde_lent(monkeypatch):
    """Every LDE of every size through the pools, each buffer filled with garbage when
    lent (an LDE that read before writing would change the proof)."""
    take = Scratch.take

    def dirty(self, shape):
        a = take(self, shape)
        a.fill(0xDEADBEEF)
        return a
    monkeypatch.setattr(Scratch, "take", dirty)
    made = []
    init = stages_mod.HostStages.__init__

    def small(self, *a, **k):
        init(self, *a, **k)
        self.scratch = Scratch(min_bytes=0)
        self.work = Scratch(min_bytes=0)
        made.append(self)
    monkeypatch.setattr(stages_mod.HostStages, "__init__", small)
    return made


def _block():
    airs, traces, pvs = ex.lookup_block(5, 6)
    return airs + [ex.cubic_air()], traces + [ex.cubic_trace(5)[0]], pvs + [[]]


def test_proof_bytes_with_every_lde_lent(every_lde_lent):
    airs, traces, pvs = _block()
    stages = HostStages(table_roots=False)
    lent = prove(traces, airs, pvs, FAST, stages=stages)
    assert stages.scratch.loans > 0 and stages.work.loans > 0       # reused, not only new
    assert stages.scratch.free_bytes == 0 and stages.work.free_bytes == 0   # cleared after R2
    plain = HostStages(table_roots=False)
    plain.scratch = Scratch(min_bytes=1 << 62)
    plain.work = Scratch(min_bytes=1 << 62)
    assert prove(traces, airs, pvs, FAST, stages=plain) == lent
    assert plain.scratch.loans == plain.scratch.allocations == 0
