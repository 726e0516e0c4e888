"""numba's allocations on backend ``cuda``: the External Memory Manager plugin that takes
an allocation made inside a scope of one of our DeviceMemory objects from that memory's
cupy pool and books it in its ledger (every other one passes through to numba's own
allocator), the shared tables released only after a device-wide synchronisation, and the
one locked flush of numba's deferred frees."""
from __future__ import annotations

import threading
from collections import deque
from contextlib import contextmanager

from .device_budget import as_device_oom

#: numba's ``_PendingDeallocs.clear`` checks the queue and then pops without a lock: two
#: threads flushing at once can both see one item and one of them pops an empty deque.
#: Every flush the project makes goes through :func:`flush_numba_frees` under this lock.
_FLUSH_LOCK = threading.Lock()


def flush_numba_frees(cuda) -> None:
    """Flush numba's deferred deallocations (the context's pending-free queue) now, under
    one process-wide lock.  With the pooled memory manager installed (backend ``cuda``)
    our device frees never wait in that queue (they go straight back to the memory's
    stream-ordered pool); what remains there is host-side (pinned memory, modules) and
    the frees of allocations that were not ours (numba's own allocator)."""
    with _FLUSH_LOCK:
        try:
            ctx = cuda.current_context()
        except Exception:  # noqa: BLE001 - no context yet / the simulator: nothing to flush
            return
        for q in (getattr(getattr(ctx, "memory_manager", None), "deallocations", None),
                  getattr(ctx, "deallocations", None)):
            if q is not None:
                q.clear()


_release_numba_pending_frees = flush_numba_frees     # the name the drain used before

# --------------------------------------------------------------- numba's allocations
# Which numba allocations are ours.  The pooled memory manager (below) is installed for
# the whole process -- numba has one per context -- but books an allocation only when the
# calling thread is inside a scope of one of our DeviceMemory objects (a table phase's
# stream scope, an engine call's scratch scope, DeviceMemory.scope); it comes from that
# memory's own cupy pool and is booked in its ledger.  Anything else (a host
# application's own numba.cuda code, another prover's thread) passes through to numba's
# own allocator, unbooked, exactly as without the plugin.
_ROUTE = threading.local()          # .stack: [DeviceMemory, ...] of the calling thread
_EMM_LOCK = threading.Lock()
_EMM_CLASS: list = [None]


def _route():
    stack = getattr(_ROUTE, "stack", None)
    return stack[-1] if stack else None


@contextmanager
def _routed(mem):
    stack = _ROUTE.__dict__.setdefault("stack", [])
    stack.append(mem)
    try:
        yield
    finally:
        stack.pop()


# Shared device tables (kernels.ntt_device's twiddles and coset tables) are read by every
# worker's stream.  When numba drops one (growth, eviction), a worker that took it before
# may still have kernels queued on its own stream: cupy's stream-ordered pool would hand
# the block to the next allocation on the *allocating* stream at once.  So a shared
# allocation's block goes to _RETIRED when numba drops it and back to its pool only after
# a device-wide synchronisation that started after that (DeviceMemory.synchronize:
# end_epoch, a drain, a pool trim) -- its last reader was queued before numba dropped it.
_SHARED = threading.local()          # .depth > 0: the calling thread allocates shared tables
_RETIRED: deque = deque()            # (block, memory, booked bytes), appended by finalisers
_RETIRE_SYNC_AT = 64                 # retired blocks that make the next booking sync first


@contextmanager
def shared_allocations():
    """numba allocations of the calling thread inside are *shared between streams* (a
    cached table): released only after a device-wide synchronisation (see above)."""
    _SHARED.depth = getattr(_SHARED, "depth", 0) + 1
    try:
        yield
    finally:
        _SHARED.depth -= 1


def retired_shared_count() -> int:
    """Shared blocks dropped by numba and waiting for a device-wide synchronisation."""
    return len(_RETIRED)


def _release_retired(upto: int) -> None:
    """Give back the first ``upto`` retired blocks (those queued before a device-wide
    synchronisation the caller has just completed); never under a memory lock."""
    for _ in range(upto):
        try:
            block, mem, booked = _RETIRED.popleft()
        except IndexError:           # another thread released them
            return
        mem._unbook_external(booked)
        del block                    # back to its pool, on the stream that allocated it


def _default_manager_class(cuda):
    cls = getattr(cuda, "NumbaCUDAMemoryManager", None)
    if cls is None:
        from numba.cuda.cudadrv.driver import NumbaCUDAMemoryManager as cls
    return cls


def pooled_memory_manager_class(cuda):
    """numba External Memory Manager (EMM interface version 1, numba-cuda 0.30): numba's
    own manager, except that an allocation made inside a scope of one of our
    :class:`DeviceMemory` objects comes from that memory's cupy pool and is booked in its
    ledger.

    * booked: ``memalloc`` reserves the bytes in the ledger (first from the calling
      thread's :meth:`DeviceMemory.scratch` booking), so a request over the budget raises
      :class:`DeviceOOM` before any memory is touched; the finaliser releases them;
    * stream-ordered: the block is taken on the thread's current cupy stream (a table
      worker's stream inside :meth:`DeviceMemory.stream_scope`); when numba drops the
      array it goes straight back to the pool for *that* stream, whose later users are
      queued after every kernel that read it -- except a shared table's (allocated inside
      :func:`shared_allocations`), which waits for a device-wide synchronisation;
    * foreign: outside every scope (a host application's numba.cuda code, another
      thread) the allocation is numba's own (``cuMemAlloc``, numba's deferred frees),
      booked nowhere.
    """
    if _EMM_CLASS[0] is not None:
        return _EMM_CLASS[0]
    import ctypes
    import weakref

    class PooledNumbaMemoryManager(_default_manager_class(cuda)):
        def memalloc(self, size):
            mem = _route()
            if mem is None or getattr(mem, "_pool", None) is None:
                return super().memalloc(size)          # not ours: numba's own allocator
            size = int(size)
            booked = mem._book_external(size)
            try:
                block = mem._pool.malloc(size)
            except BaseException as exc:
                mem._unbook_external(booked)
                oom = as_device_oom(exc, size, mem.ledger)
                if oom is not None:
                    raise oom from exc
                raise
            shared = getattr(_SHARED, "depth", 0) > 0

            def finalizer(block=block, booked=booked, mem=mem, shared=shared):
                # runs whenever numba drops the array (a garbage collection, maybe inside
                # a lock): no memory lock is taken here, the ledger's is re-entrant
                if shared:
                    _RETIRED.append((block, mem, booked))
                else:
                    mem._unbook_external(booked)
                # dropping ``block`` returns it to the pool, on its allocating stream

            ctx = weakref.proxy(self.context) if self.context is not None else None
            return cuda.MemoryPointer(ctx, ctypes.c_void_p(int(block.ptr)), size,
                                      finalizer=finalizer)

        def get_memory_info(self):
            try:
                import cupy
                free, total = cupy.cuda.runtime.memGetInfo()
            except Exception:  # noqa: BLE001 - no cupy runtime: numba's own answer
                return super().get_memory_info()
            return cuda.MemoryInfo(free=free, total=total)

        @property
        def interface_version(self):
            return 1

    _EMM_CLASS[0] = PooledNumbaMemoryManager
    return PooledNumbaMemoryManager


def install_pooled_memory_manager(cuda) -> type:
    """Install the pooled memory manager (idempotent).  Before a context exists
    ``set_memory_manager`` suffices; a context created earlier gets it swapped in, taking
    over numba's own bookkeeping (its allocations and pending frees), so the allocations
    made before go on exactly as they were."""
    with _EMM_LOCK:
        cls = pooled_memory_manager_class(cuda)
        cuda.set_memory_manager(cls)
        try:
            ctx = cuda.current_context()    # a new context already takes the plugin
        except Exception:  # noqa: BLE001 - no usable driver: nothing to swap
            ctx = None
        old = getattr(ctx, "memory_manager", None) if ctx is not None else None
        if ctx is not None and not isinstance(old, cls):
            mm = cls(context=ctx)
            for name in ("allocations", "deallocations"):
                if hasattr(old, name):
                    setattr(mm, name, getattr(old, name))
            mm.initialize()
            ctx.memory_manager = mm
        return cls
