"""kernels/host_pool.py: the dynamic split (run_dynamic, under run_ranges and the NTT's
launches) covers every item exactly once in contiguous ranges whatever the workers'
speeds, raises a worker's exception after the others stop, and keeps the pool at the
thread count."""
from __future__ import annotations

import threading
import time

import numba
import pytest
from hypothesis import given, settings, strategies as st

from steadfast.kernels import host_pool


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 300), st.integers(1, 4), st.one_of(st.none(), st.integers(1, 50)))
def test_every_item_once_in_contiguous_ranges(n, workers, grain):
    seen, lock = [], threading.Lock()

    def fn(i0, i1):
        assert 0 <= i0 < i1 <= n
        with lock:
            seen.append((i0, i1))
    host_pool.run_dynamic(fn, n, workers, grain)
    items = sorted(i for a, b in seen for i in range(a, b))
    assert items == list(range(n))
    g = grain if grain is not None else max(1, -(-n // (workers * host_pool.SHARES)))
    if workers == 1 or n <= g:
        assert seen == ([(0, n)] if n else [])     # one worker or one range: one call
    else:
        assert all(b - a <= g for a, b in seen)


def test_a_slow_worker_takes_fewer_ranges():
    """One thread delayed on its first range: the other takes the rest meanwhile."""
    owners, lock = {}, threading.Lock()
    first = []

    def fn(i0, i1):
        me = threading.get_ident()
        with lock:
            slow = not first
            if slow:
                first.append(me)
        if slow:
            time.sleep(0.3)
        with lock:
            owners.setdefault(me, []).append(i0)
    host_pool.run_dynamic(fn, 32, 2, 1)
    assert sum(len(v) for v in owners.values()) == 32
    assert len(owners[first[0]]) < 16


def test_the_first_exception_is_raised_after_the_others_stop():
    done = []

    def fn(i0, i1):
        if i0 == 3:
            raise ValueError("range 3")
        time.sleep(0.001)
        done.append(i0)
    with pytest.raises(ValueError, match="range 3"):
        host_pool.run_dynamic(fn, 64, 2, 1)
    n = len(done)
    time.sleep(0.05)
    assert len(done) == n                       # nobody still running after the raise
    assert n < 63


def test_run_ranges_keeps_the_pool_at_the_thread_count(monkeypatch):
    """Many small ranges, one worker thread per thread beyond the caller's: the pool is
    not grown to the number of ranges (16 threads on 2 cores ran the leaf hashes 14 %
    slower)."""
    monkeypatch.setattr(host_pool, "_POOL", None)
    monkeypatch.setattr(host_pool, "_POOL_SIZE", 0)
    monkeypatch.setattr(host_pool, "threads", lambda: 2)
    calls = []
    host_pool.run_ranges(lambda a, b: calls.append((a, b)), 10_000, 1)
    assert len(calls) == 2 * host_pool.SHARES
    assert host_pool._POOL_SIZE == 1


def test_a_pool_job_may_split_again(monkeypatch):
    """run_dynamic called from inside a job of a one-thread pool: the caller's own loop
    takes every range and the helper it queued behind itself is cancelled, not waited for."""
    monkeypatch.setattr(host_pool, "_POOL", None)
    monkeypatch.setattr(host_pool, "_POOL_SIZE", 0)
    seen = []

    def job():
        host_pool.run_dynamic(lambda a, b: seen.extend(range(a, b)), 64, 2, 4)
    fut = host_pool.pool(1).submit(job)
    fut.result(timeout=20)
    assert sorted(seen) == list(range(64))
