"""Backend selection and the device-memory seam.

One backend is chosen per prover (``PROVER_BACKEND``, SPEC §7):

* ``host`` -- numpy + numba on the CPU; the executable reference.
* ``cuda`` -- the numba.cuda kernels on a real GPU, memory from cupy's pool.
* ``sim``  -- the same numba.cuda kernels under numba's CUDA simulator (CI).
* ``emu``  -- the host kernels behind the device interface: a separate memory space
  with explicit transfers and the same byte budget (used by the residency work).
* ``auto`` -- ``cuda`` if a usable GPU is present *and* cupy (the ``gpu`` extra) is
  installed, else ``host``.

All device memory goes through :class:`DeviceMemory`, whose :class:`BudgetLedger` keeps
an atomic byte count against ``PROVER_VRAM_BUDGET`` and raises :class:`DeviceOOM` when a
request would exceed it.  Real out-of-memory errors from cupy and numba are mapped to the
same type by :func:`as_device_oom`, so callers handle exactly one exception.

Process-wide effects, and their limits: backend ``cuda`` installs a numba memory manager
for the whole process (numba has one per context), which books an allocation only inside
a scope of one of our DeviceMemory objects and passes every other one through to numba's
own allocator; each DeviceMemory has its own cupy pool.  Every backend requires a
thread-safe numba threading layer (:func:`require_threadsafe_layer`).

This module is the seam's one import point; each concept lives in its own module:

* :mod:`.backend_select` -- backend resolution and the threading-layer check;
* :mod:`.device_budget` -- byte sizes, the budget ledger, :class:`DeviceOOM`;
* :mod:`.numba_emm` -- the numba memory-manager plugin, shared-table retirement, the
  locked flush of numba's deferred frees;
* :mod:`.device_memory` -- :class:`DeviceMemory` (pool, epochs, streams) and
  :class:`DeviceArray`.

Monkeypatch a name in the module that defines it (e.g. ``backend_select._cupy_installed``);
the names here are re-exports.
"""
from __future__ import annotations

from .backend_select import (BACKEND_NAMES, THREADSAFE_LAYERS, _LAYER, _LAYER_FIX, _NO_CUPY,
                             BackendError, _cuda_driver_usable, _cupy_installed,
                             enable_simulator, require_threadsafe_layer, resolve_backend,
                             threading_layer)
from .device_budget import (_UNITS, STICKY_CUDA_ERRORS, BudgetLedger, DeviceLost, DeviceOOM,
                            as_device_lost, as_device_oom, budget_from_env, parse_bytes)
from .device_memory import _MEMORIES, POISON_WORD, DeviceArray, DeviceMemory, trim_pools
from .numba_emm import (_EMM_CLASS, _EMM_LOCK, _FLUSH_LOCK, _RETIRE_SYNC_AT, _RETIRED, _ROUTE,
                        _SHARED, _default_manager_class, _release_numba_pending_frees,
                        _release_retired, _route, _routed, flush_numba_frees,
                        install_pooled_memory_manager, pooled_memory_manager_class,
                        retired_shared_count, shared_allocations)

__all__ = ["BACKEND_NAMES", "THREADSAFE_LAYERS", "BackendError", "enable_simulator",
           "require_threadsafe_layer", "resolve_backend", "threading_layer", "BudgetLedger",
           "DeviceOOM", "as_device_oom", "DeviceLost", "as_device_lost", "STICKY_CUDA_ERRORS",
           "budget_from_env", "parse_bytes", "POISON_WORD",
           "DeviceArray", "DeviceMemory", "trim_pools", "flush_numba_frees",
           "install_pooled_memory_manager", "pooled_memory_manager_class",
           "retired_shared_count", "shared_allocations"]
