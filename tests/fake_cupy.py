"""A stand-in for cupy on numba's CUDA simulator, for testing backend ``cuda`` without a GPU.

On backend ``cuda`` the prover keeps device buffers as cupy arrays (``DeviceArray.data``),
hands them to the numba.cuda kernels through ``__cuda_array_interface__``, and runs each
table worker on a cupy stream that numba launches on as an *external* stream.  None of
that can run in CI (no GPU, no cupy).  This module models just enough of cupy for those
paths to run under the simulator with cupy's *types and rules*, so that a call that only
works on a numba array (``copy_to_host``), that hands a numba array to a cupy method
(``.set``), that converts a device array to numpy implicitly, or that launches a kernel
on the wrong stream fails here as it would on a GPU.

What it models -- only the part of cupy's API the project uses:

* ``cupy.empty``, ``cupy.zeros``, ``cupy.asarray`` (numpy -> upload; a numba simulator
  array -> zero-copy view, as cupy does through the array interface);
* ``cupy.ndarray``: ``get``, ``set`` (numpy only, same dtype/shape, contiguous, like
  cupy), ``view``, ``fill``, ``reshape``, ``__getitem__``/``__setitem__`` (values: cupy
  arrays or scalars), ``shape``, ``dtype``, ``size``, ``nbytes``, ``ndim``, ``strides``,
  ``.data`` (a :class:`MemoryPointer`, *not* an array), ``__cuda_array_interface__``;
  implicit conversion to numpy (``np.asarray(x)``) raises TypeError like cupy;
  deliberately *no* ``copy_to_host``/``copy_to_device`` (those are numba's);
* ``cupy.cuda.Stream(non_blocking=...)`` with ``.ptr``, ``.use()``, ``.synchronize()``,
  ``Stream.null``; ``cupy.cuda.get_current_stream()`` (per thread, like cupy);
  ``cupy.cuda.Device().synchronize()``; ``cupy.get_default_memory_pool().free_all_blocks()``;
  ``cupy.cuda.memory.OutOfMemoryError`` (raised by ``empty``/``zeros`` above the limit
  set by :func:`set_allocation_limit`); dtype aliases ``uint8``/``uint32``/``uint64``.

Plain mode executes everything synchronously, so streams carry no ordering; they are
checked for *type* and *identity* only (see :data:`STREAM_USES`).  Strict mode
(:func:`install` ``strict=True``) also *defers* the work enqueued on a non-null stream
until a sync point, in order per stream (see :func:`_enqueue`, :data:`DEFERRED`), so a
missing synchronisation reads stale data and shows as a wrong result.

Patches to numba's simulator (:func:`install`), each making it behave like real
numba-cuda where it differs:

* ``cuda.external_stream(ptr)``: the simulator refuses external streams; here it wraps
  a live fake cupy stream's ``ptr`` (an unknown pointer is an error) in a simulator stream
  that remembers the pointer (``ext_ptr``);
* ``cuda.as_cuda_array`` / ``cuda.is_cuda_array`` (missing in the simulator): a zero-copy
  numba view of an object exposing ``__cuda_array_interface__``;
* kernel launches: a fake cupy array argument becomes a zero-copy numba view (numba-cuda
  accepts array-interface objects as arguments); the launch stream must be 0/None or a
  numba stream (numba-cuda raises TypeError for anything else, e.g. a cupy stream);
* transfers (``cuda.to_device``, ``cuda.device_array``, ``copy_to_host``,
  ``copy_to_device``) and ``cuda.event(...).record``: the stream must be 0/None or a
  numba stream, as numba-cuda's ``_stream_handle`` demands;
* ``cuda.event(timing=True)`` (the simulator's Event takes no arguments) with a fixed
  positive ``elapsed_time`` so stage timing code runs as on a GPU.

Every numba stream argument the patches see is logged in :data:`STREAM_USES` with the
calling thread and that thread's current fake cupy stream, so a test can check that a
worker launched on *its own* stream.  Use only in a subprocess: :func:`install` changes
``sys.modules`` and numba's simulator for the rest of the process.
"""
from __future__ import annotations

import importlib.machinery
import itertools
import sys
import threading
import types
import weakref
from collections import Counter, deque
from pathlib import Path

import numpy as np

#: how often each modelled cupy operation ran (proof that the cuda paths were taken)
CALLS: Counter = Counter()
#: every host wait, by kind: ``stream`` (cupy Stream.synchronize), ``numba stream``
#: (numba's stream.synchronize, external streams included), ``device`` (cupy
#: Device().synchronize or numba's cuda.synchronize), ``event``, ``get`` (a blocking cupy
#: download), ``copy_to_host`` (a numba download without a stream: synchronous), ``cai``
#: (an array-interface hand-off that synchronises)
HOST_WAITS: Counter = Counter()
#: strict mode: (thread name, kind, caller "file:line") of every host wait
HOST_WAIT_LOG: list = []
#: (site, thread name, ext_ptr of the numba stream or None/0, current fake cupy stream ptr,
#: caller "file:line" -- only where the stream is not the thread's current cupy stream)
STREAM_USES: list = []

_lock = threading.RLock()       # re-entrant: block finalisers may run inside it
_tls = threading.local()
_ptrs = itertools.count(0x7F00_0000_1000, 0x100)   # fake stream handles, never 0
_live_streams: dict = {}                           # ptr -> Stream


def _count(name: str) -> None:
    with _lock:
        CALLS[name] += 1


def _wait(kind: str) -> None:
    """A host wait of ``kind`` (see :data:`HOST_WAITS`)."""
    caller = _caller() if STRICT[0] else ""
    with _lock:
        HOST_WAITS[kind] += 1
        if STRICT[0]:
            HOST_WAIT_LOG.append((threading.current_thread().name, kind, caller))


# ------------------------------------------------------------------------ stream work
# Strict mode defers the work enqueued on a (non-null) stream -- kernel launches on a
# numba external stream, numba copies with that stream, cupy set/fill/setitem on the
# current cupy stream -- until a sync point: Stream.synchronize (cupy or numba), an
# event's synchronize/wait, a device-wide sync (cupy Device / numba cuda.synchronize), a
# blocking host read on that stream (cupy ``get``) or an array-interface hand-off that
# synchronises (``as_cuda_array(sync=True)``, cupy.asarray of a numba array made on a
# stream).  Each stream's queue runs in order.  Work on the null stream and host
# uploads' *source* are taken at once (a pageable async copy reads the host buffer
# before it returns), so a missing sync shows up as a stale read: a wrong result.

#: per stream handle: queued callables (strict mode)
_QUEUES: dict = {}
#: executing queued work takes this lock: the simulator runs one kernel at a time (the
#: child process sets it to the prover's simulator submission lock)
EXEC_LOCK: list = [threading.RLock()]
#: how much work was deferred / run at a sync point (strict mode)
DEFERRED: Counter = Counter()


def _defers(ptr) -> bool:
    return bool(STRICT[0] and DEFER[0] and ptr)


def _enqueue(ptr: int, what: str, fn) -> None:
    """Run ``fn`` now (null stream, plain mode) or queue it on stream ``ptr``."""
    if not _defers(ptr):
        fn()
        return
    with _lock:
        _QUEUES.setdefault(ptr, deque()).append((what, fn))
        DEFERRED["queued"] += 1
        DEFERRED["queued:" + what] += 1


def _drain(ptr) -> None:
    """A sync point for stream ``ptr`` (None: every stream): run its queued work in order."""
    if not STRICT[0]:
        return
    with EXEC_LOCK[0]:
        while True:
            with _lock:
                if ptr is None:
                    q = next((q for q in _QUEUES.values() if q), None)
                else:
                    q = _QUEUES.get(ptr)
                if not q:
                    return
                _, fn = q.popleft()
                DEFERRED["ran"] += 1
            fn()


def pending(ptr=None) -> int:
    """How many operations wait in stream ``ptr``'s queue (None: all streams)."""
    with _lock:
        if ptr is None:
            return sum(len(q) for q in _QUEUES.values())
        return len(_QUEUES.get(ptr, ()))


# ------------------------------------------------------------------------------ arrays

class MemoryPointer:
    """``cupy.cuda.MemoryPointer``: what ``cupy.ndarray.data`` is -- a device address."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = int(ptr)

    def __int__(self):
        return self.ptr

    def __repr__(self):
        return f"<MemoryPointer 0x{self.ptr:x}>"


class ndarray:                                     # noqa: N801 - cupy's name
    """``cupy.ndarray`` backed by a host numpy array standing for device memory.

    ``_fk`` (strict mode) is what keeps the array's pool block allocated: every view of
    the array holds it, as cupy's views hold their ``MemoryPointer``; a kernel launch
    does not (see :func:`install`), so a block can go back to the pool while a launch
    queued on a stream still reads its memory, as on a GPU."""

    __slots__ = ("_a", "_fk")

    def __init__(self, shape, dtype=float):
        self._a = np.empty(shape, dtype=dtype)
        self._fk = None

    @classmethod
    def _wrap(cls, a: np.ndarray, fk=None) -> "ndarray":
        obj = cls.__new__(cls)
        obj._a = a
        obj._fk = fk
        return obj

    # -- attributes
    shape = property(lambda self: tuple(self._a.shape))
    dtype = property(lambda self: self._a.dtype)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    ndim = property(lambda self: self._a.ndim)
    strides = property(lambda self: tuple(self._a.strides))

    @property
    def data(self) -> MemoryPointer:
        return MemoryPointer(self._a.ctypes.data)

    @property
    def __cuda_array_interface__(self) -> dict:
        cur = get_current_stream().ptr
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3,
                "data": (self._a.ctypes.data, False),
                "strides": None if self._a.flags.c_contiguous else self.strides,
                "descr": [("", self.dtype.str)],
                "stream": cur if cur else 1}       # 1: the legacy default stream

    # -- transfers
    def get(self, stream=None, order="C", out=None, blocking=True) -> np.ndarray:
        _count("get")
        _wait("get")
        # a blocking copy on the current (or given) stream: its queued work runs first
        _drain((stream if stream is not None else get_current_stream()).ptr)
        if out is not None:
            if not isinstance(out, np.ndarray):
                raise TypeError("Only numpy.ndarray can be obtained from cupy.ndarray")
            if out.dtype != self.dtype or out.shape != self.shape:
                raise ValueError("Shape or dtype mismatch between out and self")
            np.copyto(out, self._a)
            return out
        return np.array(self._a, order=order, copy=True)

    def set(self, arr, stream=None) -> None:
        _count("set")
        if not isinstance(arr, np.ndarray):
            raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
        if self.dtype != arr.dtype:
            raise TypeError(f"{arr.dtype} array cannot be set to {self.dtype} array")
        if self.shape != arr.shape:
            raise ValueError(f"Shape mismatch. Old shape: {self.shape}, new shape: {arr.shape}")
        if not self._a.flags.c_contiguous:
            raise RuntimeError("Cannot set to non-contiguous array")
        src, dst = np.array(arr, copy=True), self._a     # the host source is read now
        _enqueue(get_current_stream().ptr, "set", lambda: np.copyto(dst, src))

    # -- views and element access
    def view(self, dtype=None) -> "ndarray":
        return ndarray._wrap(self._a.view() if dtype is None else self._a.view(dtype), self._fk)

    def reshape(self, *shape, order="C") -> "ndarray":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        r = self._a.reshape(shape, order=order)                # a view when possible
        return ndarray._wrap(r, self._fk if np.shares_memory(r, self._a) else None)

    def fill(self, value) -> None:
        _count("fill")
        dst = self._a
        _enqueue(get_current_stream().ptr, "fill", lambda: dst.fill(value))

    def __getitem__(self, key) -> "ndarray":
        r = self._a[key]
        if not isinstance(r, np.ndarray):
            return ndarray._wrap(np.asarray(r))                                  # 0-d, like cupy
        return ndarray._wrap(r, self._fk if np.shares_memory(r, self._a) else None)

    def __setitem__(self, key, value) -> None:
        # stricter than cupy where cupy would upload: the project copies device to device
        _count("setitem")
        dst = self._a
        if isinstance(value, ndarray):
            src = value._a                    # device to device: read when it runs
        elif isinstance(value, (bool, int, float, np.generic)):
            src = value
        else:
            raise TypeError(f"Unsupported type {type(value)}")

        def run():
            dst[key] = src
        _enqueue(get_current_stream().ptr, "setitem", run)

    def __array__(self, *args, **kwargs):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def __len__(self):
        if self._a.ndim == 0:
            raise TypeError("len() of unsized object")
        return self._a.shape[0]

    def __repr__(self):
        return f"fake_cupy.ndarray(shape={self.shape}, dtype={self.dtype})"


#: requests above this many bytes raise OutOfMemoryError (None: no limit); see
#: :func:`set_allocation_limit`
_ALLOC_LIMIT: list = [None]


def set_allocation_limit(nbytes: int | None) -> None:
    """Make ``empty``/``zeros`` refuse any request above ``nbytes`` with cupy's
    ``OutOfMemoryError`` (a device that has only that much free), to drive the prover's
    handling of a real cupy out-of-memory error; ``None`` lifts the limit."""
    _ALLOC_LIMIT[0] = None if nbytes is None else int(nbytes)


def _allocate(shape, dtype, order, fill):
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    limit = _ALLOC_LIMIT[0]
    if limit is not None and nbytes > limit:
        _count("out_of_memory")
        raise OutOfMemoryError(f"Out of memory allocating {nbytes:,} bytes "
                               f"(allocated so far: 0 bytes, limit {limit:,} bytes).")
    make = np.zeros if fill else np.empty
    a = make(shape, dtype=dtype, order=order)
    if STRICT[0]:
        # the thread's allocator (a private pool under cupy.cuda.using_allocator, else the
        # default pool) books the block; it goes back when the last array or view that
        # holds it dies (cupy arrays, their views and numba views taken of them)
        block = _current_allocator()(nbytes)
        _own_block(block, a)
        return ndarray._wrap(a, block)
    return ndarray._wrap(a)


def _keep(*_):
    """weakref.finalize target: the arguments (a pool block) die with the array."""


#: strict mode: pool block address -> weakref to the memory (numpy array) of its last
#: owner, so that a block the pool hands out again poisons what its last owner's queued
#: readers would still read (see MemoryPool.malloc)
_BLOCK_MEM: dict = {}


def _own_block(block, mem: np.ndarray) -> None:
    with _lock:
        _BLOCK_MEM[int(block.ptr)] = weakref.ref(_data_owner(mem))


def empty(shape, dtype=float, order="C") -> ndarray:
    _count("empty")
    return _allocate(shape, dtype, order, fill=False)


def zeros(shape, dtype=float, order="C") -> ndarray:
    _count("zeros")
    return _allocate(shape, dtype, order, fill=True)


def asarray(a, dtype=None, order=None) -> ndarray:
    """A cupy array of ``a``: itself, a zero-copy view of a numba (simulator) device
    array, or an upload of a numpy array -- anything else is refused."""
    _count("asarray")
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    if isinstance(a, ndarray):
        out = a
    elif isinstance(a, FakeCUDAArray):            # cupy reads its array interface: no copy
        ptr = getattr(a, "_fake_stream_ptr", 0)
        if ptr:
            # numba exports the stream the array was made on; cupy synchronises it
            # (CUPY_CUDA_ARRAY_INTERFACE_SYNC=1): a host wait
            _host_wait("cupy.asarray of a numba array made on a stream")
            _drain(ptr)
        out = ndarray._wrap(a._ary, getattr(a, "_fk", None))    # cupy keeps the owner
    elif isinstance(a, np.ndarray):
        out = ndarray._wrap(np.array(a, order="C", copy=True))
    else:
        raise TypeError(f"fake cupy.asarray: unsupported type {type(a).__name__}")
    if dtype is not None and np.dtype(dtype) != out.dtype:
        out = ndarray._wrap(out._a.astype(dtype))
    return out


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


#: strict mode on (see :func:`install`); device capacity in bytes (None: unbounded);
#: bytes numba holds outside the pool (its own cuMemAlloc); peak of pool + those bytes
STRICT: list = [False]
#: strict mode defers stream work until a sync point (see _enqueue); on by default
DEFER: list = [True]
CAPACITY: list = [None]
RAW: list = [0]
PEAK_HELD: list = [0]


#: peak of the bytes in live blocks (pool blocks in use + numba's own), cached ones not
PEAK_USED: list = [0]


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


# ------------------------------------------------------------ numba's memory management
# numba-cuda's EMM surface (``numba.cuda.HostOnlyCUDAMemoryManager`` & co.), which the
# simulator lacks, modelled as numba-cuda 0.30.4 has it -- including the pending-free
# queue whose ``clear`` checks and then pops without a lock.

class _PendingDeallocs:
    """numba's ``_PendingDeallocs``: frees queued until more than 10 are pending; ``clear``
    is numba's unlocked check-then-pop (``race_window`` seconds between the two widens
    the window so that a test can show two concurrent flushes colliding)."""

    race_window = 0.0

    def __init__(self):
        self._cons = deque()
        self._disable = 0

    def add_item(self, dtor, handle, size=0):
        self._cons.append((dtor, handle, size))
        if len(self._cons) > 10:
            self.clear()

    def clear(self):
        if self._disable:
            return
        while self._cons:
            if self.race_window:
                import time
                time.sleep(self.race_window)
            dtor, handle, _ = self._cons.popleft()
            dtor(handle)

    def __len__(self):
        return len(self._cons)


class HostOnlyCUDAMemoryManager:
    def __init__(self, *args, **kwargs):
        if "context" not in kwargs:
            raise RuntimeError("Memory manager requires a context")
        self.context = kwargs.pop("context")
        self.deallocations = _PendingDeallocs()

    def reset(self):
        self.deallocations.clear()

    def defer_cleanup(self):
        import contextlib

        @contextlib.contextmanager
        def cm():
            self.deallocations._disable += 1
            try:
                yield
            finally:
                self.deallocations._disable -= 1
        return cm()


class GetIpcHandleMixin:
    def get_ipc_handle(self, memory):
        raise NotImplementedError("fake: no IPC")


class NumbaMemoryPointer:
    """``numba.cuda.MemoryPointer``: the finaliser runs when the pointer dies."""

    def __init__(self, context, pointer, size, owner=None, finalizer=None):
        self.context, self.size = context, size
        self.device_pointer_value = getattr(pointer, "value", pointer)
        if finalizer is not None:
            self._finalizer = weakref.finalize(self, finalizer)


class _NumbaDefaultManager(GetIpcHandleMixin, HostOnlyCUDAMemoryManager):
    """numba's own manager (``NumbaCUDAMemoryManager``): cuMemAlloc outside cupy's pool,
    counted against the device's capacity, frees deferred through the pending queue."""

    def initialize(self):
        pass

    @property
    def interface_version(self):
        return 1

    def get_memory_info(self):
        import collections
        total = CAPACITY[0] or (1 << 40)
        return collections.namedtuple("MemoryInfo", "free,total")(free=total, total=total)

    def memalloc(self, size):
        nbytes = int(size)
        for attempt in (0, 1):
            with _lock:
                fits = (CAPACITY[0] is None
                        or _all_pool_bytes() + RAW[0] + nbytes <= CAPACITY[0])
                if fits:
                    RAW[0] += nbytes
                    _note_held()
                    break
            if attempt == 0:
                self.deallocations.clear()
        else:
            _count("out_of_memory")
            raise RuntimeError("[CUDA_ERROR_OUT_OF_MEMORY] Call to cuMemAlloc results in "
                               "CUDA_ERROR_OUT_OF_MEMORY")
        _count("numba_alloc_raw")
        deallocs = self.deallocations
        ptr = NumbaMemoryPointer(self.context, next(MemoryPool._addresses), nbytes,
                                 finalizer=lambda: deallocs.add_item(_raw_free, nbytes, nbytes))
        ptr._fake_raw = True
        return ptr


class _Context:
    def __init__(self):
        self.memory_manager = _NumbaDefaultManager(context=self)

    @property
    def deallocations(self):
        return self.memory_manager.deallocations


_CTX = _Context()
_EMM: list = [None]


def set_memory_manager(cls):
    """numba's ``set_memory_manager``: checks the interface version and sets the class of
    the contexts made from now on (the existing context keeps its manager: the caller
    swaps it, as :func:`kernels.backend.install_pooled_memory_manager` does)."""
    _count("set_memory_manager")
    if cls(context=None).interface_version != 1:
        raise RuntimeError("EMM Plugin interface version mismatch")
    _EMM[0] = cls


def _raw_free(nbytes):
    with _lock:
        RAW[0] -= nbytes


def _data_owner(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _numba_alloc(arr):
    """Strict mode: book a numba (simulator) device array's bytes the way numba-cuda
    would -- through the context's memory manager: the installed EMM plugin (cupy's pool,
    or numba's own allocator for what the plugin passes through), or numba's own manager
    (outside the pool, counted against the device's capacity, freed through the pending
    queue).  The returned pointer is what keeps the allocation: the array and its views
    hold it (``_fk``), a kernel launch does not."""
    root = _data_owner(arr._ary)
    nbytes = int(root.nbytes)
    _count("numba_alloc")
    mp = _CTX.memory_manager.memalloc(nbytes)
    if not getattr(mp, "_fake_raw", False):
        _count("numba_alloc_pooled")
        with _lock:
            _BLOCK_MEM[int(getattr(mp, "device_pointer_value", 0) or 0)] = weakref.ref(root)
    arr._fk = mp
    return arr


# ---------------------------------------------------------------------------- installing

def _cupy_modules() -> tuple:
    """Module objects ``cupy``, ``cupy.cuda``, ``cupy.cuda.memory`` exposing only the
    modelled API (this module's helpers stay out of cupy's namespace)."""
    memory = types.ModuleType("cupy.cuda.memory")
    memory.OutOfMemoryError = OutOfMemoryError
    memory.MemoryPointer = MemoryPointer
    memory.MemoryPool = MemoryPool
    driver = types.ModuleType("cupy.cuda.driver")
    driver.CUDADriverError = CUDADriverError
    runtime = types.ModuleType("cupy.cuda.runtime")
    runtime.CUDARuntimeError = CUDARuntimeError
    cuda = types.ModuleType("cupy.cuda")
    cuda.driver, cuda.runtime = driver, runtime
    cuda.Stream = Stream
    cuda.Device = Device
    cuda.get_current_stream = get_current_stream
    cuda.memory = memory
    cuda.MemoryPointer = MemoryPointer
    cuda.MemoryPool = MemoryPool
    cuda.using_allocator = using_allocator
    cupy = types.ModuleType("cupy")
    cupy.__version__ = "0.0.0+fake"
    cupy.ndarray = ndarray
    cupy.empty, cupy.zeros, cupy.asarray = empty, zeros, asarray
    cupy.get_default_memory_pool = get_default_memory_pool
    cupy.uint8, cupy.uint32, cupy.uint64 = np.uint8, np.uint32, np.uint64
    cupy.cuda = cuda
    for mod, pkg in ((cupy, True), (cuda, True), (memory, False), (driver, False),
                     (runtime, False)):
        # importlib.util.find_spec reads sys.modules[name].__spec__ (kernels/backend.py)
        mod.__spec__ = importlib.machinery.ModuleSpec(mod.__name__, None, is_package=pkg)
        if pkg:
            mod.__path__ = []
    return cupy, cuda, memory


def _caller() -> str:
    """The first frame outside this module and numba: who passed the stream."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename == __file__
                             or "numba" in Path(f.f_code.co_filename).parts):
        f = f.f_back
    return "?" if f is None else f"{f.f_code.co_filename}:{f.f_lineno}"


#: (thread name, what) for every host wait on an exporting stream (strict mode)
SYNC_WAITS: list = []


def _host_wait(what: str) -> None:
    if not STRICT[0]:
        return
    _count("cai_sync")
    with _lock:
        SYNC_WAITS.append((threading.current_thread().name, what, _caller()))


def _is_numba_stream(cuda, s) -> bool:
    return s is None or (isinstance(s, int) and s == 0) or isinstance(s, cuda.stream)


def _stream_use(cuda, site: str, s) -> None:
    """Check a stream argument the way numba-cuda does and log it (see STREAM_USES)."""
    if not _is_numba_stream(cuda, s):
        raise TypeError(f"{site}: expected a Stream object or 0, got {type(s).__name__}")
    ext = getattr(s, "ext_ptr", None) if s else 0
    cur = get_current_stream().ptr
    entry = (site, threading.current_thread().name, ext, cur, "" if ext == cur else _caller())
    with _lock:
        STREAM_USES.append(entry)


def install(strict: bool = False, capacity: int | None = None):
    """Register the fake as ``cupy`` and patch numba's CUDA simulator (see the module
    docstring).  Needs ``NUMBA_ENABLE_CUDASIM=1``; idempotent; returns the cupy module.

    ``strict``: the pool-accurate mode -- cupy allocations come from the modelled pool,
    numba's (simulator) allocations go through the installed EMM plugin or else count as
    numba's own memory outside the pool, the device has ``capacity`` bytes in all, and
    ``as_cuda_array(sync=True)`` / a cupy array handed to a launch / ``cupy.asarray`` of a
    numba array made on a stream count a host wait on the exporting stream
    (``CALLS["cai_sync"]``, ``SYNC_WAITS``), and stream work is deferred to sync points
    (``DEFER[0] = False`` turns that part off)."""
    STRICT[0] = STRICT[0] or bool(strict)
    if capacity is not None:
        CAPACITY[0] = int(capacity)
    if isinstance(sys.modules.get("cupy"), types.ModuleType) and \
            getattr(sys.modules["cupy"], "ndarray", None) is ndarray:
        return sys.modules["cupy"]
    from numba import cuda
    from numba.cuda.core import config
    if not config.ENABLE_CUDASIM:
        raise RuntimeError("fake_cupy needs numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
    from numba.cuda.simulator import kernel as simkernel
    from numba.cuda.simulator.cudadrv import devicearray as simarray
    FakeCUDAArray = simarray.FakeCUDAArray

    cupy, cuda_mod, memory = _cupy_modules()
    sys.modules.update({"cupy": cupy, "cupy.cuda": cuda_mod, "cupy.cuda.memory": memory,
                        "cupy.cuda.driver": cuda_mod.driver, "cupy.cuda.runtime": cuda_mod.runtime})

    class ExternalStream(cuda.stream):
        """A numba stream wrapping a foreign (here: fake cupy) stream handle."""

        def __init__(self, ptr):
            self.ext_ptr = ptr

        def synchronize(self):
            _count("numba_stream_synchronize")
            _wait("numba stream")
            _drain(self.ext_ptr)

        def __repr__(self):
            return f"<numba external stream 0x{self.ext_ptr:x}>"

    def external_stream(ptr):
        _count("external_stream")
        if not isinstance(ptr, int):
            raise TypeError(f"ptr for an external stream must be an int, got {type(ptr).__name__}")
        if ptr and ptr not in _live_streams:
            raise ValueError(f"0x{ptr:x} is not a stream handle")
        return ExternalStream(ptr)

    def as_cuda_array(obj, sync=True):
        _count("as_cuda_array")
        if sync:
            _host_wait("as_cuda_array(sync=True)")
            _drain(get_current_stream().ptr)      # the exporting stream (cupy's current)
        if not isinstance(obj, ndarray):
            raise TypeError("*obj* doesn't implement the cuda array interface.")
        cai = obj.__cuda_array_interface__
        if cai["data"][0] != obj._a.ctypes.data or cai["shape"] != obj._a.shape:
            raise RuntimeError("fake cupy: inconsistent __cuda_array_interface__")
        view = FakeCUDAArray(obj._a)                 # zero-copy: shares the memory
        if obj._fk is not None:
            view._fk = obj._fk                       # numba's view keeps its owner alive
        return view

    class Event:
        def __init__(self, timing=True):
            self.timing = timing

        def record(self, stream=0):
            _stream_use(cuda, "event.record", stream)
            self.ptr = getattr(stream, "ext_ptr", 0) if stream else 0

        def wait(self, stream=0):
            # (conservative) the waiting stream's later work sees everything the
            # recording stream had queued: run it now
            _stream_use(cuda, "event.wait", stream)
            _drain(getattr(self, "ptr", 0))

        def synchronize(self):
            _wait("event")
            _drain(getattr(self, "ptr", 0))

        def elapsed_time(self, other):
            if not (self.timing and other.timing):
                raise RuntimeError("elapsed_time needs events created with timing=True")
            return 0.5

    orig_call = simkernel.FakeCUDAKernel.__call__
    orig_getitem = simkernel.FakeCUDAKernel.__getitem__

    def launch(self, *args):
        if self._device or simkernel._kernel_context:     # a device function call
            return orig_call(self, *args)
        conv = []
        for a in args:
            if isinstance(a, ndarray):
                _count("launch_with_cupy_arg")
                _host_wait("launch with a cupy argument (auto_device, sync)")
                a = FakeCUDAArray(a._a)
            elif isinstance(a, Stream):
                raise TypeError("a cupy stream passed as a kernel argument")
            conv.append(a)
        cfg = getattr(self, "_fake_config", None)
        ptr = getattr(cfg[2], "ext_ptr", 0) if cfg is not None and len(cfg) >= 3 and cfg[2] \
            else 0
        if not _defers(ptr) or any(isinstance(a, np.ndarray) for a in conv):
            # (host arrays as arguments: numba copies them synchronously around the launch)
            _drain(ptr)
            return orig_call(self, *conv)

        # a launch holds the memory it reads, never the allocations: fresh views without
        # the owner token (``_fk``), so a block whose last owner drops it goes back to the
        # pool while this launch is still queued, as on a GPU
        conv = tuple(FakeCUDAArray(a._ary, a.stream) if isinstance(a, FakeCUDAArray) else a
                     for a in conv)

        def run(kernel=self, cfg=cfg, conv=conv):
            orig_getitem(kernel, cfg)
            orig_call(kernel, *conv)
        _enqueue(ptr, "launch", run)

    def configure(self, config):                 # kernel[grid, block, stream, shared]
        _count("launch")
        _stream_use(cuda, "launch", config[2] if len(config) >= 3 else 0)
        self._fake_config = tuple(config)
        return orig_getitem(self, config)

    orig_to_device, orig_device_array = cuda.to_device, cuda.device_array
    orig_to_host = FakeCUDAArray.copy_to_host
    orig_from_host = FakeCUDAArray.copy_to_device

    def _ptr(stream):
        return getattr(stream, "ext_ptr", 0) if stream else 0

    def to_device(ary, stream=0, copy=True, to=None):
        _stream_use(cuda, "to_device", stream)
        ptr = _ptr(stream)
        if to is None and _defers(ptr) and isinstance(ary, np.ndarray):
            # a fresh buffer (not yet written: poison) and the copy queued on the stream
            host = np.array(ary, copy=True)
            poison = np.empty_like(host)
            poison.reshape(-1).view(np.uint8).fill(0xFF)     # all ones: not a field element
            out = orig_to_device(poison, stream=stream)
            _enqueue(ptr, "to_device", lambda: orig_from_host(out, host))
        else:
            _drain(ptr)
            out = orig_to_device(ary, stream=stream, copy=copy, to=to)
        if to is None:
            out._fake_stream_ptr = ptr
        return _numba_alloc(out) if STRICT[0] and to is None else out

    def device_array(*args, **kwargs):
        _stream_use(cuda, "device_array", kwargs.get("stream", 0))
        out = orig_device_array(*args, **kwargs)
        out._fake_stream_ptr = _ptr(kwargs.get("stream", 0))
        return _numba_alloc(out) if STRICT[0] else out

    def copy_to_host(self, ary=None, stream=0):
        _stream_use(cuda, "copy_to_host", stream)
        if ary is not None and not isinstance(ary, np.ndarray):
            raise TypeError(f"copy_to_host: destination must be a numpy array, got "
                            f"{type(ary).__name__}")
        ptr = _ptr(stream)
        if not stream:
            _wait("copy_to_host")                 # a synchronous copy: the host waits
        if not _defers(ptr):
            return orig_to_host(self, ary, stream=stream)
        # asynchronous: the destination holds the data only after the stream's sync
        dst = ary if ary is not None else np.empty(self.shape, self.dtype)
        _enqueue(ptr, "copy_to_host", lambda: orig_to_host(self, dst))
        return dst

    def copy_to_device(self, ary, stream=0):
        _stream_use(cuda, "copy_to_device", stream)
        if isinstance(ary, ndarray):     # numba-cuda would take it by its array interface
            ary = FakeCUDAArray(ary._a)
        ptr = _ptr(stream)
        if not _defers(ptr):
            return orig_from_host(self, ary, stream=stream)
        # a host source is read now (pageable memory); a device source when it runs
        src = np.array(ary, copy=True) if isinstance(ary, np.ndarray) else ary
        _enqueue(ptr, "copy_to_device", lambda: orig_from_host(self, src))

    cuda.HostOnlyCUDAMemoryManager = HostOnlyCUDAMemoryManager
    cuda.GetIpcHandleMixin = GetIpcHandleMixin
    cuda.MemoryPointer = NumbaMemoryPointer
    cuda.MemoryInfo = __import__("collections").namedtuple("MemoryInfo", "free,total")
    cuda.set_memory_manager = set_memory_manager
    cuda.current_context = lambda devnum=None: _CTX
    cuda.external_stream = external_stream
    cuda.as_cuda_array = as_cuda_array
    cuda.is_cuda_array = lambda obj: isinstance(obj, (ndarray, FakeCUDAArray))
    cuda.event = Event
    cuda.to_device = to_device
    def synchronize():
        _wait("device")
        _drain(None)
    cuda.synchronize = synchronize
    cuda.NumbaCUDAMemoryManager = _NumbaDefaultManager
    # numba's views keep their owner's allocation (``_fk``): every FakeCUDAArray method
    # that returns a view of the same memory passes the token on
    for meth in ("__getitem__", "reshape", "view", "ravel", "transpose", "bind", "split"):
        orig = getattr(FakeCUDAArray, meth)

        def keeping(self, *a, _orig=orig, **k):
            res = _orig(self, *a, **k)
            fk = getattr(self, "_fk", None)
            if fk is not None:
                for r in (res if isinstance(res, list) else (res,)):
                    if isinstance(r, FakeCUDAArray) and np.shares_memory(r._ary, self._ary):
                        r._fk = fk
            return res
        setattr(FakeCUDAArray, meth, keeping)
    FakeCUDAArray.T = property(lambda self: self.transpose())
    cuda.device_array = device_array
    simkernel.FakeCUDAKernel.__call__ = launch
    simkernel.FakeCUDAKernel.__getitem__ = configure
    FakeCUDAArray.copy_to_host = copy_to_host
    FakeCUDAArray.copy_to_device = copy_to_device
    return cupy


__all__ = ["install", "set_allocation_limit", "CALLS", "HOST_WAITS", "HOST_WAIT_LOG",
           "STREAM_USES", "SYNC_WAITS", "STRICT",
           "DEFER", "DEFERRED", "EXEC_LOCK", "pending",
           "CAPACITY", "RAW", "PEAK_HELD", "PEAK_USED", "ndarray",
           "MemoryPointer", "Stream", "OutOfMemoryError", "CUDADriverError", "CUDARuntimeError"]
