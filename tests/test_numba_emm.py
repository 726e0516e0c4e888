"""The pooled memory manager over numba-cuda's *real* EMM classes (issue #27, items 5
and 8), without a GPU.

The strict stand-in models numba's EMM surface; this test installs the project's plugin
over numba-cuda 0.30's own ``BaseCUDAMemoryManager`` / ``HostOnlyCUDAMemoryManager`` /
``NumbaCUDAMemoryManager`` hierarchy and ``MemoryPointer`` (the simulator off, in a
subprocess), with cupy replaced by a small mock of the pool calls the plugin makes and
numba's driver calls ``cuMemAlloc``/``cuMemFree`` stubbed.  It checks:

* ``memalloc`` inside one of our scopes returns a real ``numba.cuda.MemoryPointer`` over a
  block of that DeviceMemory's own pool, booked in its ledger (512-byte unit), and the
  ledger balances to zero when numba drops it;
* an allocation outside every scope (a host application's numba.cuda code, next to a
  proof) is numba's own (``cuMemAlloc``, numba's deferred ``cuMemFree``), booked nowhere;
* two provers with separate budgets (two DeviceMemory objects, one thread each) book
  their own allocations only: one's DeviceOOM does not touch the other;
* a shared allocation waits for a device-wide synchronisation before its block goes back;
* swapped into an existing context, the plugin takes over numba's own bookkeeping.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_MARK = "RESULT "


def _mock_cupy():
    """The cupy calls DeviceMemory('cuda') and the plugin make, nothing else."""
    import importlib.machinery
    import itertools
    import types

    addrs = itertools.count(0x7000_0000_0000, 0x1_0000)

    class Block:
        def __init__(self, pool, size, stream):
            self.pool, self.size, self.stream, self.ptr = pool, size, stream, next(addrs)

        def __del__(self):
            self.pool.used -= self.size
            self.pool.cached += self.size

    class MemoryPool:
        def __init__(self, allocator=None):
            self.used = self.cached = 0
            self.limit = None

        def malloc(self, size):
            size = max(512, -(-int(size) // 512) * 512)
            if self.limit is not None and self.used + self.cached + size > self.limit:
                self.cached = 0
                if self.used + size > self.limit:
                    raise OutOfMemoryError(f"Out of memory allocating {size:,} bytes")
            self.used += size
            return Block(self, size, get_current_stream().ptr)

        def set_limit(self, size=None, fraction=None):
            self.limit = size

        def total_bytes(self):
            return self.used + self.cached

        def free_all_blocks(self, stream=None):
            self.cached = 0

    class OutOfMemoryError(MemoryError):
        pass

    class Stream:
        def __init__(self, null=False, non_blocking=False):
            self.ptr = 0 if null else next(addrs)

        def use(self):
            return self

        def synchronize(self):
            pass
    Stream.null = Stream(null=True)

    def get_current_stream():
        return Stream.null

    class Device:
        syncs = 0

        def __init__(self, i=0):
            pass

        def synchronize(self):
            Device.syncs += 1

    class using_allocator:                              # noqa: N801
        def __init__(self, allocator=None):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    cuda = types.ModuleType("cupy.cuda")
    cuda.MemoryPool, cuda.Stream, cuda.Device = MemoryPool, Stream, Device
    cuda.get_current_stream, cuda.using_allocator = get_current_stream, using_allocator
    cuda.runtime = types.SimpleNamespace(memGetInfo=lambda: (80 << 30, 80 << 30))
    cuda.memory = types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError)
    cupy = types.ModuleType("cupy")
    cupy.cuda = cuda
    cupy.get_default_memory_pool = lambda: MemoryPool()
    for mod in (cupy, cuda):
        mod.__spec__ = importlib.machinery.ModuleSpec(mod.__name__, None, is_package=True)
        mod.__path__ = []
    sys.modules.update({"cupy": cupy, "cupy.cuda": cuda})
    return cupy


def _child() -> dict:
    import gc
    import threading
    import types
    import weakref

    cupy = _mock_cupy()
    from cuda.bindings import driver as binding
    from numba import cuda
    from numba.cuda.cudadrv import driver as drv

    calls = {"cuMemAlloc": 0, "cuMemFree": 0}
    addrs = iter(range(0x5000_0000, 0x6000_0000, 0x1000))

    class StubDriver:                      # numba's own allocator, without a GPU
        def cuMemAlloc(self, size):
            calls["cuMemAlloc"] += 1
            return binding.CUdeviceptr(next(addrs))

        def cuMemFree(self, ptr):
            calls["cuMemFree"] += 1
    drv.driver = StubDriver()
    if not hasattr(drv, "_logger"):           # set when numba's driver initialises
        import logging
        drv._logger = logging.getLogger("numba.cuda.cudadrv.driver")

    from steadfast.kernels import backend as kb
    out: dict = {}
    mem1 = kb.DeviceMemory("cuda", budget=8192)             # prover 1
    mem2 = kb.DeviceMemory("cuda", budget=2048)             # prover 2, its own budget
    cls = kb._EMM_CLASS[0]
    out["hierarchy"] = [c.__name__ for c in cls.__mro__ if c.__module__.startswith("numba")]
    out["is_emm"] = issubclass(cls, cuda.HostOnlyCUDAMemoryManager) and \
        issubclass(cls, cuda.BaseCUDAMemoryManager)

    class Ctx:                                              # a context stands for numba's
        pass
    ctx = Ctx()
    mm = cls(context=ctx)
    mm.initialize()
    out["interface_version"] = mm.interface_version
    out["separate_pools"] = mem1._pool is not mem2._pool

    # ours: inside a scope, from mem1's own pool, booked in mem1's ledger
    with mem1.scope():
        p = mm.memalloc(1000)
    out["pointer_type"] = f"{type(p).__module__}.{type(p).__qualname__}"
    out["real_memory_pointer"] = type(p) is cuda.MemoryPointer
    out["pointer_size"] = p.size
    out["booked"] = (mem1.ledger.in_use, mem1.external_live_bytes, mem1._pool.used)
    # a host application's allocation next to it (no scope): numba's own, unbooked
    host = []
    t = threading.Thread(target=lambda: host.append(mm.memalloc(10 << 20)))
    t.start()
    t.join()
    out["host_alloc_type"] = type(host[0]).__name__
    out["host_booked"] = (mem1.ledger.in_use, mem2.ledger.in_use, calls["cuMemAlloc"])
    del p
    gc.collect()
    out["balanced"] = (mem1.ledger.in_use, mem1.external_live_bytes, mem1.external_allocs)
    host.clear()
    gc.collect()
    mm.deallocations.clear()
    out["host_freed_by_numba"] = calls["cuMemFree"]

    # two provers, one thread each, separate budgets
    res = {}

    def prove(name, mem, sizes):
        got = []
        with mem.scope():
            for s in sizes:
                try:
                    got.append(mm.memalloc(s))
                    res.setdefault(name, []).append("ok")
                except kb.DeviceOOM:
                    res.setdefault(name, []).append("oom")
        res[name + "_ledger"] = mem.ledger.in_use
        got.clear()
        gc.collect()
    ts = [threading.Thread(target=prove, args=("p1", mem1, [3000, 3000])),
          threading.Thread(target=prove, args=("p2", mem2, [1500, 3000]))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out["two_provers"] = res
    out["two_provers_after"] = (mem1.ledger.in_use, mem2.ledger.in_use)

    # a shared table: back to the pool only after a device-wide synchronisation
    with mem1.scope(), kb.shared_allocations():
        s = mm.memalloc(600)
    del s
    gc.collect()
    out["shared_retired"] = (kb.retired_shared_count(), mem1.ledger.in_use)
    mem1.synchronize()
    out["shared_released"] = (kb.retired_shared_count(), mem1.ledger.in_use,
                              cupy.cuda.Device.syncs >= 1)

    # swapped into an existing context: numba's bookkeeping carries over
    ctx2 = Ctx()
    old = drv.NumbaCUDAMemoryManager(context=ctx2)
    old.deallocations.memory_capacity = 1 << 30
    ctx2.memory_manager = old
    q = old.memalloc(256)                                   # made before the swap
    orig_current = cuda.current_context
    cuda.current_context = lambda devnum=None: ctx2
    try:
        kb.install_pooled_memory_manager(cuda)
    finally:
        cuda.current_context = orig_current
    new = ctx2.memory_manager
    out["swapped"] = (isinstance(new, cls), new.allocations is old.allocations,
                      new.deallocations is old.deallocations)
    before = calls["cuMemFree"]
    del q
    gc.collect()
    new.deallocations.clear()
    out["old_alloc_freed_by_numba"] = calls["cuMemFree"] - before
    del weakref, types
    return out


@pytest.mark.timeout(300)
def test_plugin_over_numba_cudas_real_memory_manager_classes():
    env = {k: v for k, v in os.environ.items()
           if k != "NUMBA_ENABLE_CUDASIM" and not k.startswith("PROVER_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve())], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)]
    assert proc.returncode == 0 and lines, proc.stderr[-5000:] + proc.stdout[-2000:]
    r = json.loads(lines[-1][len(_MARK):])
    assert r["is_emm"] and r["interface_version"] == 1, r
    assert {"NumbaCUDAMemoryManager", "HostOnlyCUDAMemoryManager",
            "BaseCUDAMemoryManager"} <= set(r["hierarchy"]), r["hierarchy"]
    assert r["separate_pools"]
    assert r["real_memory_pointer"], r["pointer_type"]
    assert r["pointer_size"] == 1000
    assert r["booked"] == [1024, 1024, 1024], r["booked"]          # 512-byte unit
    # the host application's 10 MiB: numba's own allocator, in no ledger
    assert r["host_alloc_type"] == "OwnedPointer"
    assert r["host_booked"] == [1024, 0, 1], r["host_booked"]
    assert r["balanced"] == [0, 0, 1], r["balanced"]
    assert r["host_freed_by_numba"] == 1
    # prover 1 fits both (6,144 of 8,192 B); prover 2's second request is over its own
    # 2,048 B and is refused without touching prover 1
    assert r["two_provers"]["p1"] == ["ok", "ok"] and r["two_provers"]["p2"] == ["ok", "oom"]
    assert r["two_provers"]["p1_ledger"] == 6144 and r["two_provers"]["p2_ledger"] == 1536
    assert r["two_provers_after"] == [0, 0]
    assert r["shared_retired"] == [1, 1024] and r["shared_released"] == [0, 0, True]
    assert r["swapped"] == [True, True, True] and r["old_alloc_freed_by_numba"] == 1


if __name__ == "__main__":
    print(_MARK + json.dumps(_child()), flush=True)
