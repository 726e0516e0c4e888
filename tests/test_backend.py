"""Backend selection, byte budgets and the DeviceOOM seam."""
import threading

import numpy as np
import pytest

from steadfast.kernels import backend as B
from steadfast.kernels import backend_select as S   # where the patched lookups live


@pytest.mark.parametrize("text,expect", [
    ("4096", 4096), ("6GiB", 6 << 30), ("512MiB", 512 << 20), ("1.5GB", 1_500_000_000),
    ("2 kib", 2048), (123, 123)])
def test_parse_bytes(text, expect):
    assert B.parse_bytes(text) == expect


@pytest.mark.parametrize("bad", ["", "lots", "5 parsecs", "-3", "1e9"])
def test_parse_bytes_rejects(bad):
    with pytest.raises(ValueError, match="byte size"):
        B.parse_bytes(bad)


def test_resolve_backend(monkeypatch):
    monkeypatch.setenv("PROVER_BACKEND", "host")
    assert B.resolve_backend() == "host"
    assert B.resolve_backend("emu") == "emu"
    assert B.resolve_backend("sim") == "sim"       # the test session runs the simulator
    with pytest.raises(B.BackendError, match="unknown backend 'gpu'"):
        B.resolve_backend("gpu")
    with pytest.raises(B.BackendError, match="no usable CUDA"):
        B.resolve_backend("cuda")
    monkeypatch.setenv("PROVER_BACKEND", "auto")
    assert B.resolve_backend() == "host"           # no GPU in CI


def test_auto_without_cupy_does_not_probe_the_driver(monkeypatch):
    """Without cupy, auto is the host before numba.cuda is imported for the driver probe
    (~0.3 s of every CPU-only prove)."""
    def probe():
        raise AssertionError("the driver was probed although cupy is missing")
    monkeypatch.setattr(S, "_cuda_driver_usable", probe)
    monkeypatch.setattr(S, "_cupy_installed", lambda: False)
    assert B.resolve_backend("auto") == "host"


def test_auto_needs_cupy_as_well_as_a_gpu(monkeypatch):
    # a GPU machine with only `pip install -e .`: auto must fall back to the host
    monkeypatch.setattr(S, "_cuda_driver_usable", lambda: True)
    monkeypatch.setattr(S.importlib.util, "find_spec",
                        lambda name, *a: None if name == "cupy" else object())
    assert S._cupy_installed() is False
    assert B.resolve_backend("auto") == "host"
    monkeypatch.setenv("PROVER_BACKEND", "auto")
    assert B.resolve_backend() == "host"
    # ... and with cupy importable, auto picks the GPU
    monkeypatch.setattr(S.importlib.util, "find_spec", lambda name, *a: object())
    assert B.resolve_backend("auto") == "cuda"
    assert B.resolve_backend("cuda") == "cuda"


def test_explicit_cuda_without_cupy_says_how_to_install(monkeypatch):
    monkeypatch.setattr(S, "_cuda_driver_usable", lambda: True)
    monkeypatch.setattr(S, "_cupy_installed", lambda: False)
    with pytest.raises(B.BackendError, match=r"cupy.*pip install -e '\.\[gpu\]'.*\[gpu12\]"):
        B.resolve_backend("cuda")
    monkeypatch.setenv("PROVER_BACKEND", "CUDA")
    with pytest.raises(B.BackendError, match="not installed"):
        B.resolve_backend()
    # the allocator says the same instead of a bare ModuleNotFoundError
    with pytest.raises(B.BackendError, match=r"\.\[gpu\]"):
        B.DeviceMemory("cuda")


@pytest.mark.parametrize("kind", ["emu", "sim"])
def test_budget_and_transfers(kind):
    mem = B.DeviceMemory(kind, budget=1000)
    a = mem.to_device(np.arange(100, dtype=np.uint32), tag="t")
    assert mem.ledger.in_use == 400
    assert np.array_equal(mem.to_host(a), np.arange(100, dtype=np.uint32))
    with pytest.raises(B.DeviceOOM) as err:
        mem.empty((200,), np.uint32, tag="big")
    assert err.value.requested == 800 and err.value.in_use == 400 and err.value.budget == 1000
    assert "big" in str(err.value)
    mem.free(a)
    mem.free(a)                      # idempotent on the same handle
    assert mem.ledger.in_use == 0 and mem.ledger.peak == 400
    b = mem.empty((250,), np.uint32)
    assert mem.ledger.in_use == 1000
    mem.free(b)
    with pytest.raises(RuntimeError, match="freed"):
        mem.to_host(b)


def test_emu_is_a_separate_memory_space():
    mem = B.DeviceMemory("emu", budget=None)
    host = np.arange(8, dtype=np.uint32)
    dev = mem.to_device(host)
    host[:] = 0
    assert mem.to_host(dev).tolist() == list(range(8))


def test_ledger_is_atomic_under_contention():
    ledger = B.BudgetLedger(budget=100 * 8)
    passed = []

    def worker():
        for _ in range(200):
            try:
                ledger.reserve(8)
                passed.append(1)
            except B.DeviceOOM:
                pass
    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(passed) == 100 and ledger.in_use == 800


def test_real_cuda_oom_errors_map_to_device_oom():
    class OutOfMemoryError(Exception):   # the shape of cupy.cuda.memory.OutOfMemoryError
        pass

    class CudaAPIError(Exception):
        pass
    assert isinstance(B.as_device_oom(OutOfMemoryError("out of memory allocating 1 bytes")), B.DeviceOOM)
    e = B.as_device_oom(CudaAPIError("[2] Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY"), 64)
    assert isinstance(e, B.DeviceOOM) and e.requested == 64
    assert B.as_device_oom(ValueError("nope")) is None


@pytest.mark.parametrize("kind", ["emu", "sim"])
def test_stale_free_after_epoch_end_is_dropped(kind):
    mem = B.DeviceMemory(kind, budget=1 << 20, poison=False)
    mem.begin_epoch()
    old = mem.to_device(np.arange(16, dtype=np.uint32), tag="proof1.main")
    assert mem.end_epoch() == 1 and mem.ledger.in_use == 0
    mem.begin_epoch()
    new = mem.to_device(np.full(16, 7, dtype=np.uint32), tag="proof2.main")   # reuses old's block
    assert mem.free(old) is False                 # the late finaliser of proof 1
    assert mem.stale_frees_dropped == 1
    third = mem.to_device(np.full(16, 9, dtype=np.uint32), tag="proof2.other")
    # had the stale free gone through, `third` would share new's block and clobber it
    assert mem.to_host(new).tolist() == [7] * 16
    assert mem.to_host(third).tolist() == [9] * 16
    assert mem.ledger.in_use == 128


@pytest.mark.parametrize("kind", ["emu", "sim"])
def test_poison_makes_stale_reads_visible(kind):
    mem = B.DeviceMemory(kind, budget=None, poison=True)
    mem.begin_epoch()
    buf = mem.to_device(np.arange(8, dtype=np.uint32))
    raw = buf.data                                 # a kernel's view that outlives the proof
    mem.end_epoch()
    stale = raw.copy() if kind == "emu" else raw.copy_to_host()
    assert np.all(stale == B.POISON_WORD) and np.all(stale >= 2013265921)   # not field elements
    assert buf.freed and buf.data is None


def test_poison_env_switch(monkeypatch):
    monkeypatch.setenv("PROVER_ARENA_POISON", "1")
    assert B.DeviceMemory("emu").poison
    monkeypatch.setenv("PROVER_ARENA_POISON", "0")
    assert not B.DeviceMemory("emu").poison


def test_scratch_books_against_the_budget_and_releases():
    from steadfast.kernels.backend import DeviceMemory, DeviceOOM
    mem = DeviceMemory("emu", budget=1000)
    a = mem.empty((100,), np.uint32)                 # 400 bytes
    with mem.scratch(600, "ok"):
        assert mem.ledger.in_use == 1000
        with pytest.raises(DeviceOOM):
            mem.empty((1,), np.uint32)
    assert mem.ledger.in_use == 400
    with pytest.raises(DeviceOOM, match="scratch big"):
        with mem.scratch(601, "big"):
            pass
    assert mem.ledger.in_use == 400 and mem.ledger.peak == 1000
    mem.free(a)


def test_streams_are_pooled_per_worker_and_synchronised_before_frees(monkeypatch):
    """DeviceMemory.stream_scope: a worker holds one stream per table phase; frees inside
    a scope wait for that stream first (its queued work may still read the buffer), the
    scope's end waits for it, and streams are reused rather than created per table."""
    import threading
    from steadfast.kernels.backend import DeviceMemory
    log = []

    class FakeStream:
        def __init__(self, k):
            self.k = k

        def synchronize(self):
            log.append(("sync", self.k))

    mem = DeviceMemory("sim")
    assert mem.streams_on
    made = []

    def new_stream():
        made.append(FakeStream(len(made)))
        return made[-1], None
    monkeypatch.setattr(mem, "_new_stream", new_stream)
    assert mem.stream() == 0                      # outside a scope: the default stream
    with mem.stream_scope() as s1:
        assert mem.stream() is s1
        with mem.stream_scope() as inner:         # nested: the same stream
            assert inner is s1
        a = mem.empty((4,), tag="t")
        log.clear()
        mem.free(a)
        assert log == [("sync", s1.k)]            # waited for the stream before freeing
    assert mem.stream() == 0
    seen = []

    def worker():
        with mem.stream_scope() as s:
            seen.append(s)
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [s1]                           # pooled: reused by the next worker
    with mem.stream_scope() as s_a:
        got = []
        t = threading.Thread(target=lambda: got.append(mem.stream_scope().__enter__()))
        t.start()
        t.join()
        assert got[0] is not s_a                  # concurrent phases: distinct streams
    assert len(made) == 2


def test_streams_can_be_turned_off(monkeypatch):
    from steadfast.kernels.backend import DeviceMemory
    monkeypatch.setenv("PROVER_GPU_STREAMS", "0")
    mem = DeviceMemory("sim")
    with mem.stream_scope() as s:
        assert s == 0 and mem.stream() == 0
    assert not DeviceMemory("emu").streams_on
