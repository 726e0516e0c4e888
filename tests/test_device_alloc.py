"""One allocator under the budget (issue 16, items 3 and 5), in-process and fast.

The pipeline-level checks run in tests/test_cuda_paths.py on the strict stand-in
(``fake_cupy.install(strict=True)``); here: the pending-free flush under its lock, and the
scratch credit that lets numba's booked allocations draw on a call's scratch booking.
"""
from __future__ import annotations

import threading
import types

import pytest

from steadfast.kernels import backend as kb

import fake_cupy


class _Ctx:
    def __init__(self, n):
        self.memory_manager = types.SimpleNamespace(deallocations=fake_cupy._PendingDeallocs())
        self.deallocations = self.memory_manager.deallocations
        self.freed = []
        for i in range(n):
            self.deallocations._cons.append((self.freed.append, i, 0))


def _flush_concurrently(flush, window: float) -> tuple[list, list]:
    ctx = _Ctx(1)
    ctx.deallocations.race_window = window
    cuda = types.SimpleNamespace(current_context=lambda: ctx)
    errors: list = []

    def run():
        try:
            flush(cuda)
        except Exception as exc:  # noqa: BLE001 - the race shows as IndexError
            errors.append(type(exc).__name__)
    ts = [threading.Thread(target=run) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return errors, ctx.freed


def test_the_modelled_numba_queue_races_when_flushed_unlocked():
    # the model is faithful enough to fail: two bare clears collide (check, then pop)
    def bare(cuda):
        cuda.current_context().deallocations.clear()
    errors, _ = _flush_concurrently(bare, 0.05)
    assert errors == ["IndexError"]


def test_flush_numba_frees_serialises_concurrent_flushes():
    errors, freed = _flush_concurrently(kb.flush_numba_frees, 0.05)
    assert errors == [] and freed == [0]


def test_numba_allocations_draw_on_the_scratch_booking_then_book_fresh_bytes():
    mem = kb.DeviceMemory("emu", budget=4096)
    with mem.scratch(1200, "call"):
        assert mem.ledger.in_use == 1200
        a = mem._book_external(200)                 # 512 (the pool's unit), from the credit
        assert mem.ledger.in_use == 1200
        b = mem._book_external(1000)                # 1024: 688 left, 336 booked fresh
        assert mem.ledger.in_use == 1536
        with pytest.raises(kb.DeviceOOM):
            mem._book_external(3000)                # over the budget: refused, unbooked
        assert mem.ledger.in_use == 1536
    assert mem.ledger.in_use == 1536                # the two allocations outlive the call
    mem._unbook_external(a)
    mem._unbook_external(b)
    assert mem.ledger.in_use == 0 and mem.external_live_bytes == 0
    assert mem.external_allocs == 2 and mem.external_peak_bytes == 1536


def test_post_mortem_checksum_survives_a_device_without_room():
    """XCHECK's integrity check (a post-mortem) reduces a resident buffer's tag on the
    device; with no room for the reduction's partials it must take the tag from a
    downloaded copy (the same pair) instead of failing the post-mortem with DeviceOOM."""
    import numpy as np

    from steadfast.kernels.hostlib import checksum_words
    from steadfast.prover.device.stages import DeviceStages
    from steadfast.prover.device.engines import EmuEngine

    mem = kb.DeviceMemory("emu", budget=1 << 20)
    stages = DeviceStages(mem, EmuEngine(), xcheck=True)
    data = np.arange(64, dtype=np.uint32).reshape(4, 16) * 7
    h = stages._put("t", "quotient", data)
    want = checksum_words(data)
    assert stages._checksum_anyway(h) == want

    def no_room(dev):
        raise kb.DeviceOOM(16, 0, None, "scratch checksum")
    stages.engine.checksum = no_room
    assert stages._checksum_anyway(h) == want
    assert stages.integrity("t") == []                 # untouched: nothing reported
    data_dev = h.device().data
    data_dev[0, 0] += 1                                # corrupted while resident
    assert stages.integrity("t") == [h]

    def broken(dev):
        raise ValueError("not an out-of-memory")
    stages.engine.checksum = broken
    with pytest.raises(ValueError):
        stages._checksum_anyway(h)
