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

The package, one concept a module (this one re-exports their names, so ``import
fake_cupy`` gives the whole stand-in): ``state`` (counters, mode switches, strict mode's
stream queues), ``memory`` (streams, device, memory pools, CUDA errors), ``arrays``
(``cupy.ndarray`` and the allocating functions), ``numba_emm`` (numba-cuda's memory
manager surface), ``patches`` (:func:`install`: the ``cupy`` modules and the simulator
patches).
"""
from __future__ import annotations

from .state import (CALLS, CAPACITY, DEFER, DEFERRED, EXEC_LOCK, HOST_WAITS, HOST_WAIT_LOG,
                    PEAK_HELD, PEAK_USED, RAW, STREAM_USES, STRICT, SYNC_WAITS, pending)
from .memory import (CUDADriverError, CUDARuntimeError, Device, MemoryPool,
                     OutOfMemoryError, Stream, get_current_stream, get_default_memory_pool,
                     using_allocator)
from .arrays import MemoryPointer, asarray, empty, ndarray, set_allocation_limit, zeros
from .numba_emm import (GetIpcHandleMixin, HostOnlyCUDAMemoryManager, NumbaMemoryPointer,
                        _PendingDeallocs, set_memory_manager)
from .patches import install

__all__ = ["install", "set_allocation_limit", "CALLS", "HOST_WAITS", "HOST_WAIT_LOG",
           "STREAM_USES", "SYNC_WAITS", "STRICT",
           "DEFER", "DEFERRED", "EXEC_LOCK", "pending",
           "CAPACITY", "RAW", "PEAK_HELD", "PEAK_USED", "ndarray",
           "MemoryPointer", "Stream", "OutOfMemoryError", "CUDADriverError", "CUDARuntimeError"]
