"""cupy's streams, device and memory pools (``cupy.cuda.Stream``, ``Device``,
``MemoryPool``, ``using_allocator``) and its CUDA errors."""
from __future__ import annotations

import itertools
import weakref

import numpy as np

from .state import (CAPACITY, DEFERRED, PEAK_HELD, PEAK_USED, RAW, STRICT, _count, _drain,
                    _enqueue, _live_streams, _lock, _ptrs, _tls, _wait)

# ------------------------------------------------------------------- streams, device, pool

class Stream:
    """``cupy.cuda.Stream``: ``ptr`` is the handle numba wraps with ``external_stream``;
    ``use()`` makes it the calling thread's current stream."""

    null: "Stream"

    def __init__(self, null=False, non_blocking=False, ptds=False):
        self.non_blocking = bool(non_blocking)
        if not null:
            _count("stream_non_blocking" if non_blocking else "stream_blocking")
        self.ptr = 0 if null else next(_ptrs)
        if self.ptr:
            with _lock:
                _live_streams[self.ptr] = self

    def use(self) -> "Stream":
        _tls.current = self
        return self

    def synchronize(self) -> None:
        _count("stream_synchronize")
        _wait("stream")
        _drain(self.ptr)

    def __repr__(self):
        return f"<fake_cupy Stream 0x{self.ptr:x}>"


Stream.null = Stream(null=True)


def get_current_stream() -> Stream:
    return getattr(_tls, "current", Stream.null)


def _current_allocator():
    """The calling thread's allocator (``cupy.cuda.using_allocator``), else the default
    pool's ``malloc``."""
    return getattr(_tls, "allocator", None) or _POOL.malloc


class using_allocator:                               # noqa: N801 - cupy's name
    """``cupy.cuda.using_allocator(allocator)``: a thread-local allocator inside."""

    def __init__(self, allocator=None):
        self.allocator = allocator

    def __enter__(self):
        self.prev = getattr(_tls, "allocator", None)
        _tls.allocator = self.allocator
        return self

    def __exit__(self, *exc):
        _tls.allocator = self.prev
        return False


class Device:
    def __init__(self, device=0):
        if device not in (0, None):
            raise ValueError("fake cupy: one device only")

    def synchronize(self) -> None:
        _count("device_synchronize")
        _wait("device")
        _drain(None)

    def use(self) -> None:
        pass


class _Block:
    """One pool block (``cupy.cuda.MemoryPointer`` from ``MemoryPool.malloc``): goes back
    to the free list of the stream it was allocated on when the last reference dies."""

    __slots__ = ("ptr", "size", "stream", "pool", "__weakref__")

    def __init__(self, ptr, size, stream, pool):
        self.ptr, self.size, self.stream, self.pool = ptr, size, stream, pool

    def __del__(self):
        self.pool._release(self)


class MemoryPool:
    """``cupy.cuda.MemoryPool``.  Plain mode: bookkeeping calls only.  Strict mode
    (:func:`install` ``strict=True``): a pool with cupy's rules -- sizes rounded up to 512
    bytes, freed blocks cached per (stream, size) and reused only on that stream,
    ``set_limit`` capping cached + used bytes (on a miss over the limit the cache is
    freed once, then ``OutOfMemoryError``), and the device's capacity shared with numba's
    own (non-pooled) allocations: over it, ``OutOfMemoryError`` cumulatively.

    A block handed out again (from its stream's free list) first *poisons* the memory of
    its previous owner, in stream order on that stream: a kernel of another stream that
    still reads the old memory reads 0xFFFFFFFF words (not field elements), as it would
    read whatever the new owner writes on a GPU.  Several pools may exist (cupy's
    default pool and private ``MemoryPool()`` instances); the device capacity and the
    peaks count all of them."""

    _addresses = itertools.count(0x10_0000_0000, 0x1_0000)     # unique over all pools

    def __init__(self, allocator=None):
        self.limit = None
        self.used = 0
        self.cached = 0
        self._free: dict = {}
        with _lock:
            _POOLS.add(self)

    def malloc(self, size: int) -> _Block:
        size = max(512, -(-int(size) // 512) * 512)
        stream = get_current_stream().ptr
        ptr = None
        with _lock:
            lst = self._free.get((stream, size))
            if lst:
                self.cached -= size
                self.used += size
                _note_held()
                ptr = lst.pop()
                ref = _BLOCK_MEM.pop(ptr, None)
                old = ref() if ref is not None else None
        if ptr is not None:
            if old is not None and STRICT[0]:
                with _lock:
                    DEFERRED["reuse_poison"] += 1

                def poison(old=old):
                    old.reshape(-1).view(np.uint8).fill(0xFF)
                _enqueue(stream, "reuse-poison", poison)
            return _Block(ptr, size, stream, self)
        for attempt in (0, 1):
            with _lock:
                total = self.used + self.cached
                over_limit = self.limit is not None and total + size > self.limit
                over_device = (CAPACITY[0] is not None
                               and _all_pool_bytes() + size + RAW[0] > CAPACITY[0])
                if not (over_limit or over_device):
                    self.used += size
                    _note_held()
                    return _Block(next(MemoryPool._addresses), size, stream, self)
            if attempt == 0:
                self.free_all_blocks()
        _count("out_of_memory")
        raise OutOfMemoryError(f"Out of memory allocating {size:,} bytes "
                               f"(allocated so far: {self.used:,} bytes).")

    def _release(self, block: _Block) -> None:
        with _lock:
            self.used -= block.size
            self.cached += block.size
            self._free.setdefault((block.stream, block.size), []).append(block.ptr)

    def free_all_blocks(self, stream=None) -> None:
        _count("free_all_blocks")
        with _lock:
            self._free.clear()
            self.cached = 0

    def set_limit(self, size=None, fraction=None) -> None:
        _count("set_limit")
        self.limit = None if not size else int(size)

    def get_limit(self) -> int:
        return self.limit or 0

    def used_bytes(self) -> int:
        return self.used

    def total_bytes(self) -> int:
        return self.used + self.cached

#: every pool made (the default pool and private ones)
_POOLS: "weakref.WeakSet" = weakref.WeakSet()


def _all_pool_bytes() -> int:
    # caller holds _lock
    return sum(p.used + p.cached for p in _POOLS)


def _note_held() -> None:
    # caller holds _lock
    PEAK_HELD[0] = max(PEAK_HELD[0], _all_pool_bytes() + RAW[0])
    PEAK_USED[0] = max(PEAK_USED[0], sum(p.used for p in _POOLS) + RAW[0])


_POOL = MemoryPool()


def get_default_memory_pool() -> MemoryPool:
    return _POOL


class OutOfMemoryError(MemoryError):
    """``cupy.cuda.memory.OutOfMemoryError`` (the prover maps it to DeviceOOM by name)."""


#: the names cupy's error messages start with, for the sticky codes a test raises
_CUDA_ERROR_NAMES = {214: ("CUDA_ERROR_ECC_UNCORRECTABLE", "cudaErrorECCUncorrectable"),
                     700: ("CUDA_ERROR_ILLEGAL_ADDRESS", "cudaErrorIllegalAddress"),
                     709: ("CUDA_ERROR_CONTEXT_IS_DESTROYED", "cudaErrorContextIsDestroyed"),
                     719: ("CUDA_ERROR_LAUNCH_FAILED", "cudaErrorLaunchFailure")}


class CUDADriverError(RuntimeError):
    """``cupy.cuda.driver.CUDADriverError`` (``cupy_backends.cuda.api.driver``): built
    from a ``CUresult`` status, kept as ``.status``; the message is ``NAME: text``."""

    def __init__(self, status: int):
        self.status = int(status)
        name = _CUDA_ERROR_NAMES.get(self.status, (f"CUDA_ERROR_{self.status}",))[0]
        super().__init__(f"{name}: (fake) device error")


class CUDARuntimeError(RuntimeError):
    """``cupy.cuda.runtime.CUDARuntimeError`` (``cupy_backends.cuda.api.runtime``): a
    ``cudaError_t`` status as ``.status``."""

    def __init__(self, status: int):
        self.status = int(status)
        name = _CUDA_ERROR_NAMES.get(self.status, ("", f"cudaError{self.status}"))[1]
        super().__init__(f"{name}: (fake) device error")

#: strict mode: pool block address -> weakref to the memory (numpy array) of its last
#: owner, so that a block the pool hands out again poisons what its last owner's queued
#: readers would still read (see MemoryPool.malloc)
_BLOCK_MEM: dict = {}

def _data_owner(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a
