"""numba-cuda's External Memory Manager surface, which the simulator lacks (see the
section comment below), and strict mode's booking of numba's own allocations."""
from __future__ import annotations

import weakref
from collections import deque

from .state import CAPACITY, RAW, _count, _lock
from .memory import MemoryPool, _BLOCK_MEM, _all_pool_bytes, _data_owner, _note_held

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
