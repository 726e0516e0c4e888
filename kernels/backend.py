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
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from steadfast.errors import SteadfastError

BACKEND_NAMES = ("host", "cuda", "sim", "emu")


class BackendError(SteadfastError, RuntimeError):
    """A backend was requested that cannot be used here (message says why)."""


class DeviceOOM(MemoryError):
    """A device allocation did not fit: over the byte budget or out of real VRAM."""

    def __init__(self, requested: int, in_use: int, budget: int | None, detail: str = ""):
        self.requested = int(requested)
        self.in_use = int(in_use)
        self.budget = budget
        self.detail = detail
        b = "unbounded" if budget is None else f"{budget} B"
        msg = f"device out of memory: requested {requested} B with {in_use} B in use, budget {b}"
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)


_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3,
          "gb": 1000**3, "t": 1000**4, "tb": 1000**4, "kib": 1 << 10, "mib": 1 << 20,
          "gib": 1 << 30, "tib": 1 << 40}


def parse_bytes(text: str | int) -> int:
    """Parse a byte size such as ``6GiB``, ``512MiB``, ``1.5GB`` or ``4096``."""
    if isinstance(text, (int, np.integer)):
        if text < 0:
            raise ValueError(f"byte size must be non-negative, got {text}")
        return int(text)
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"not a byte size: {text!r} (expected e.g. 6GiB, 512MiB, 4096)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _cuda_driver_usable() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        from numba import cuda
        return bool(cuda.is_available())
    except Exception:  # pragma: no cover - depends on the machine
        return False


def _cupy_installed() -> bool:
    """True if cupy (the ``gpu``/``gpu12`` extra, needed for backend ``cuda``) can be imported."""
    try:
        return importlib.util.find_spec("cupy") is not None
    except (ImportError, ValueError):  # pragma: no cover - a broken install
        return False


_NO_CUPY = ("backend 'cuda' needs cupy for device memory and streams, which is not installed; "
            "install the gpu extra: pip install -e '.[gpu]' (CUDA 13) or "
            "pip install -e '.[gpu12]' (CUDA 12)")


def enable_simulator() -> None:
    """Switch numba.cuda to its simulator; must happen before numba.cuda is imported."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return
    if "numba.cuda" in sys.modules:
        raise BackendError("backend 'sim' must be chosen before numba.cuda is imported "
                           "(set PROVER_BACKEND=sim or NUMBA_ENABLE_CUDASIM=1 at start-up)")
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"


def resolve_backend(name: str | None = None) -> str:
    """Resolve a backend name (argument, else ``PROVER_BACKEND``, else ``auto``)."""
    raw = name if name is not None else os.environ.get("PROVER_BACKEND", "auto")
    choice = raw.strip().lower()
    if choice == "auto":
        # a GPU without cupy (plain `pip install -e .`) falls back to the host, never crashes
        return "cuda" if _cuda_driver_usable() and _cupy_installed() else "host"
    if choice not in BACKEND_NAMES:
        raise BackendError(f"unknown backend {raw!r}; choose one of "
                           f"{', '.join(BACKEND_NAMES + ('auto',))}")
    if choice == "sim":
        enable_simulator()
    elif choice == "cuda" and not _cuda_driver_usable():
        raise BackendError("backend 'cuda' requested but no usable CUDA device/driver was found")
    elif choice == "cuda" and not _cupy_installed():
        raise BackendError(_NO_CUPY)
    return choice


def budget_from_env(default: int | None = None) -> int | None:
    raw = os.environ.get("PROVER_VRAM_BUDGET")
    return parse_bytes(raw) if raw else default


class BudgetLedger:
    """Atomic byte accounting against a budget.

    ``reserve`` checks and books under one lock, so two callers can never both pass
    the check with the same bytes.
    """

    def __init__(self, budget: int | None):
        self.budget = budget
        # re-entrant: a numba array's finaliser releases its booking and may run from a
        # garbage collection that starts inside this lock
        self._lock = threading.RLock()
        self.in_use = 0
        self.peak = 0

    def reserve(self, nbytes: int, detail: str = "") -> None:
        nbytes = int(nbytes)
        with self._lock:
            if self.budget is not None and self.in_use + nbytes > self.budget:
                raise DeviceOOM(nbytes, self.in_use, self.budget, detail)
            self.in_use += nbytes
            self.peak = max(self.peak, self.in_use)

    def release(self, nbytes: int) -> None:
        with self._lock:
            self.in_use -= int(nbytes)
            if self.in_use < 0:  # an accounting bug, never silently absorbed
                raise RuntimeError("device ledger went negative (double free?)")


def as_device_oom(exc: BaseException, requested: int = 0, ledger: BudgetLedger | None = None):
    """Return a :class:`DeviceOOM` if ``exc`` is a real CUDA out-of-memory error, else None."""
    if isinstance(exc, DeviceOOM):
        return exc
    name = type(exc).__name__
    text = str(exc)
    is_oom = (name == "OutOfMemoryError"                      # cupy.cuda.memory.OutOfMemoryError
              or "CUDA_ERROR_OUT_OF_MEMORY" in text            # numba CudaAPIError
              or "cudaErrorMemoryAllocation" in text)
    if not is_oom:
        return None
    in_use = ledger.in_use if ledger else 0
    budget = ledger.budget if ledger else None
    return DeviceOOM(requested, in_use, budget, detail=f"{name}: {text}")


#: numba's ``_PendingDeallocs.clear`` checks the queue and then pops without a lock: two
#: threads flushing at once can both see one item and one of them pops an empty deque.
#: Every flush the project makes goes through :func:`flush_numba_frees` under this lock.
_FLUSH_LOCK = threading.Lock()


def flush_numba_frees(cuda) -> None:
    """Flush numba's deferred deallocations (the context's pending-free queue) now, under
    one process-wide lock.  With the pooled memory manager installed (backend ``cuda``)
    device frees no longer wait in that queue (they go straight back to cupy's
    stream-ordered pool); what remains there is host-side (pinned memory, modules)."""
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
#: the DeviceMemory whose ledger books numba's own device allocations (kernel
#: temporaries, cached NTT tables, selectors); the newest ``cuda`` DeviceMemory
_NUMBA_ROUTE: list = [None]
_EMM_LOCK = threading.Lock()
_EMM_CLASS: list = [None]


def _route():
    ref = _NUMBA_ROUTE[0]
    return ref() if ref is not None else None


def pooled_memory_manager_class(cuda):
    """numba External Memory Manager (EMM interface version 1, numba-cuda 0.30) whose
    device allocations come from cupy's default pool and are booked in the routed
    :class:`DeviceMemory`'s ledger.

    * one allocator: numba's ``cuMemAlloc`` is no longer called, so every device byte the
      process holds is in cupy's pool, bounded by its limit (the budget);
    * booked: ``memalloc`` reserves the bytes in the ledger (first from the calling
      thread's :meth:`DeviceMemory.scratch` booking), so a request over the budget raises
      :class:`DeviceOOM` before any memory is touched; the finaliser releases them;
    * stream-ordered: the block is taken on the thread's current cupy stream (a table
      worker's stream inside :meth:`DeviceMemory.stream_scope`); when numba drops the
      array it goes straight back to cupy's pool for *that* stream, whose later users are
      queued after every kernel that read it.  No free waits in numba's pending queue and
      none relies on ``cuMemFree`` synchronising.
    """
    if _EMM_CLASS[0] is not None:
        return _EMM_CLASS[0]
    import ctypes
    import weakref

    class PooledNumbaMemoryManager(cuda.GetIpcHandleMixin, cuda.HostOnlyCUDAMemoryManager):
        def initialize(self):
            pass

        def memalloc(self, size):
            import cupy
            size = int(size)
            mem = _route()
            booked = mem._book_external(size) if mem is not None else (None, 0)
            try:
                block = cupy.get_default_memory_pool().malloc(size)
            except BaseException as exc:
                if mem is not None:
                    mem._unbook_external(booked)
                oom = as_device_oom(exc, size, mem.ledger if mem is not None else None)
                if oom is not None:
                    raise oom from exc
                raise

            def finalizer(block=block, booked=booked, mem=mem):
                if mem is not None:
                    mem._unbook_external(booked)
                # dropping the closure drops ``block``: back to cupy's pool, on the stream
                # it was allocated on

            ctx = weakref.proxy(self.context) if self.context is not None else None
            return cuda.MemoryPointer(ctx, ctypes.c_void_p(int(block.ptr)), size,
                                      finalizer=finalizer)

        def get_memory_info(self):
            import cupy
            free, total = cupy.cuda.runtime.memGetInfo()
            return cuda.MemoryInfo(free=free, total=total)

        def reset(self):
            super().reset()

        @property
        def interface_version(self):
            return 1

    _EMM_CLASS[0] = PooledNumbaMemoryManager
    return PooledNumbaMemoryManager


def install_pooled_memory_manager(cuda) -> type:
    """Make numba allocate device memory through cupy's pool (idempotent).  Before a
    context exists ``set_memory_manager`` suffices; a context created earlier gets the
    plugin swapped in (its earlier allocations keep their own finalisers)."""
    with _EMM_LOCK:
        cls = pooled_memory_manager_class(cuda)
        cuda.set_memory_manager(cls)
        try:
            ctx = cuda.current_context()    # a new context already takes the plugin
        except Exception:  # noqa: BLE001 - no usable driver: nothing to swap
            ctx = None
        if ctx is not None and not isinstance(getattr(ctx, "memory_manager", cls), cls):
            mm = cls(context=ctx)
            mm.initialize()
            ctx.memory_manager = mm
        return cls


POISON_WORD = 0xFFFFFFFF   # not a canonical BabyBear element: a stale read is visible


@dataclass(eq=False)
class DeviceArray:
    """A device buffer handed out by :class:`DeviceMemory`.

    ``data`` is the backend's array object (a numba simulator array, a cupy array, or
    a numpy array standing for emulated VRAM); ``nbytes`` is what the ledger booked;
    ``epoch`` is the proof epoch it was allocated in (see :meth:`DeviceMemory.end_epoch`);
    ``fresh_tag`` is the integrity tag of what was last written into it, when the write
    computed one on the way (``emu`` with XCHECK on, for buffers marked ``tag_on_write``),
    for the stage that seals it.
    """
    data: object
    nbytes: int
    tag: str = ""
    epoch: int = 0
    freed: bool = False
    fresh_tag: tuple | None = None
    tag_on_write: bool = False

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype


class DeviceMemory:
    """The one allocator interface for device memory (all device backends).

    Accounting: every allocation books its bytes in one :class:`BudgetLedger` under a
    lock before any memory is touched, so the budget check and the booking are atomic.

    Epochs: each proof runs in an epoch (``begin_epoch``/``end_epoch``).  Every buffer is
    tagged with the epoch it was allocated in.  ``end_epoch`` reclaims everything the epoch
    still holds, wholesale.  A ``free`` that arrives later for a buffer of an ended epoch
    (a late finaliser, a handle that outlived its proof in a long-lived node) is *dropped*
    and counted in ``stale_frees_dropped`` -- it never hands memory back to the pool a
    second time, where it could already belong to the next proof.

    Pool: freed blocks are cached per (shape, dtype) and reused, like cupy's pool does on
    a GPU (on ``cuda`` cupy's own pool does this).  ``PROVER_ARENA_POISON=1`` fills every
    freed block with 0xFFFFFFFF so that a read through a stale reference shows values
    that are not field elements.

    Serialisation: pool operations (allocate, free, reclaim) take ``self._lock``; cupy's
    pool and numba's simulator device-array creation are not safe to drive from several
    worker threads at once, and the pool's free lists must not be mutated concurrently.

    Streams (``cuda``, ``sim``; ``PROVER_GPU_STREAMS=0`` turns them off): a worker thread
    proving a table holds one stream for the duration of that table's phase
    (:meth:`stream_scope`; streams are pooled, so at most one per concurrent worker
    exists).  On ``cuda`` it is a blocking cupy stream made the thread's current cupy
    stream (allocations, uploads and downloads go to it) and handed to numba's launches
    as an external stream.  Safety rules that make several streams unable to reuse memory
    another stream may still read: :meth:`free` synchronises the freeing thread's stream
    (its work is all that can still read the buffer: a phase synchronises its stream when
    it ends, before a buffer can be handed to another thread); a drain and ``end_epoch``
    synchronise the whole device.
    """

    def __init__(self, kind: str, budget: int | None = None, poison: bool | None = None):
        if kind not in ("cuda", "sim", "emu"):
            raise BackendError(f"no device memory for backend {kind!r}")
        self.kind = kind
        self.ledger = BudgetLedger(budget)
        self._lock = threading.RLock()
        self.poison = (os.environ.get("PROVER_ARENA_POISON") == "1") if poison is None else poison
        self.epoch = 0
        self._live: dict[int, DeviceArray] = {}
        self._pool: dict[tuple, list] = {}
        self.stale_frees_dropped = 0
        self.bytes_h2d = 0
        self.bytes_d2h = 0
        self.streams_on = (kind in ("cuda", "sim")
                           and os.environ.get("PROVER_GPU_STREAMS", "1") != "0")
        self._streams: list = []          # idle (numba stream, cupy stream or None) pairs
        self.streams_created = 0
        self._tls = threading.local()
        if kind == "sim":
            enable_simulator()
        if kind in ("cuda", "sim"):
            from numba import cuda
            self._cuda = cuda
        self.external_allocs = 0          # numba allocations booked (pooled manager)
        self.external_live_bytes = 0
        self.external_peak_bytes = 0
        self.pool_trims = 0
        if kind == "cuda":
            if not _cupy_installed():
                raise BackendError(_NO_CUPY)
            import weakref

            import cupy  # the gpu extra
            self._cupy = cupy
            # one allocator: numba's device allocations come from cupy's pool and are
            # booked in this ledger; the pool (live + cached blocks) is capped at the budget
            install_pooled_memory_manager(self._cuda)
            _NUMBA_ROUTE[0] = weakref.ref(self)
            if budget is not None:
                cupy.get_default_memory_pool().set_limit(size=int(budget))

    # -- streams ------------------------------------------------------------------
    def _new_stream(self):
        self.streams_created += 1
        if self.kind == "sim":
            return self._cuda.stream(), None
        # non-blocking: no implicit ordering with the legacy default stream, so workers
        # overlap; everything a worker reads is written on its own stream, and shared
        # tables are uploaded on the uploading worker's stream and synchronised before
        # they are published (kernels.ntt_device, engines' selectors)
        cs = self._cupy.cuda.Stream(non_blocking=True)
        return self._cuda.external_stream(cs.ptr), cs

    @contextmanager
    def stream_scope(self):
        """Give the calling thread its own stream for a table phase; on exit the stream is
        synchronised (the phase's work is complete) and returned to the pool."""
        if not self.streams_on or getattr(self._tls, "stream", None) is not None:
            yield self.stream()
            return
        with self._lock:
            pair = self._streams.pop() if self._streams else self._new_stream()
        self._tls.stream = pair
        if pair[1] is not None:
            pair[1].use()                   # the thread's current cupy stream
        try:
            yield pair[0]
        finally:
            try:
                pair[0].synchronize()
                flush_numba_frees(self._cuda)    # the stage's deferred frees, now
            finally:
                if pair[1] is not None:
                    self._cupy.cuda.Stream.null.use()
                self._tls.stream = None
                with self._lock:
                    self._streams.append(pair)

    def stream(self):
        """The calling thread's stream for kernel launches (0: the default stream)."""
        pair = getattr(self._tls, "stream", None)
        return pair[0] if pair is not None else 0

    def _sync_before_free(self) -> None:
        # the freeing thread's queued work may still read the buffer; outside a stream
        # scope (default stream, proof teardown) wait for the whole device
        pair = getattr(self._tls, "stream", None)
        if pair is not None:
            pair[0].synchronize()
        elif self.kind == "cuda":
            self.synchronize()

    # -- epochs -------------------------------------------------------------------
    def begin_epoch(self) -> int:
        with self._lock:
            self.epoch += 1
            return self.epoch

    def end_epoch(self) -> int:
        """Reclaim every buffer the current epoch still holds; returns how many."""
        self.synchronize()           # nothing queued may still read what is reclaimed
        with self._lock:
            live = [a for a in self._live.values() if a.epoch == self.epoch]
            for arr in live:
                self._reclaim(arr)
            self.epoch += 1          # nothing allocates in an ended epoch
            return len(live)

    # -- allocation -------------------------------------------------------------
    def _raw_empty(self, shape, dtype):
        if self.kind == "emu":
            return np.empty(shape, dtype=dtype)
        if self.kind == "sim":
            return self._cuda.device_array(shape, dtype=dtype)
        return self._cupy.empty(shape, dtype=dtype)

    def empty(self, shape, dtype=np.uint32, tag: str = "") -> DeviceArray:
        if not isinstance(shape, tuple):
            shape = tuple(int(s) for s in np.atleast_1d(shape))
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        self.ledger.reserve(nbytes, tag)
        try:
            self._fit_pool(nbytes)
            with self._lock:
                cached = self._pool.get((shape, dtype.str))
                data = cached.pop() if cached else self._raw_empty(shape, dtype)
                arr = DeviceArray(data, nbytes, tag, self.epoch)
                self._live[id(arr)] = arr
        except Exception as exc:
            self.ledger.release(nbytes)
            oom = as_device_oom(exc, nbytes, self.ledger)
            if oom is not None:
                raise oom from exc
            raise
        return arr

    def _reclaim(self, arr: DeviceArray) -> None:
        # caller holds the lock
        data = arr.data
        arr.freed = True
        arr.data = None
        self._live.pop(id(arr), None)
        self.ledger.release(arr.nbytes)
        if data is None:
            return
        if self.poison:
            self._fill(data, POISON_WORD)
        if self.kind != "cuda":     # cupy's pool caches for us once the array is dropped
            self._pool.setdefault((tuple(data.shape), np.dtype(data.dtype).str), []).append(data)

    def _fill(self, data, word: int) -> None:
        if self.kind == "emu":
            data.view(np.uint8).fill(0xFF) if word == POISON_WORD else data.fill(word)
        elif self.kind == "sim":
            host = np.full(data.shape, word, dtype=np.uint64).astype(data.dtype, casting="unsafe")
            data.copy_to_device(host)
        else:
            data.view(self._cupy.uint8).fill(0xFF)
            # the fill is queued on the freeing thread's stream, but cupy hands the block
            # back to the pool of the stream that allocated it: finish the fill first
            self._cupy.cuda.get_current_stream().synchronize()

    @contextmanager
    def scratch(self, nbytes: int, tag: str = ""):
        """Book ``nbytes`` of kernel temporaries (allocated by the kernels themselves
        through numba) against the budget for the duration of a call; raises
        :class:`DeviceOOM` like :meth:`empty` when they do not fit.

        On ``cuda`` numba's allocations are booked one by one by the pooled memory
        manager: inside a scratch scope they draw on this booking first (a *credit*, so
        nothing is counted twice), beyond it they book fresh bytes (and may raise
        :class:`DeviceOOM`); an allocation that outlives the scope (a cached table) keeps
        its bytes booked until numba frees it.  On exit only the unused credit is
        released."""
        nbytes = max(0, int(nbytes))
        self.ledger.reserve(nbytes, f"scratch {tag}".strip())
        credit = [nbytes]
        stack = self._tls.__dict__.setdefault("credits", [])
        stack.append(credit)
        try:
            yield
        finally:
            stack.pop()
            self.ledger.release(credit[0])

    # -- numba's allocations (the pooled memory manager books them here) ---------
    def _book_external(self, nbytes: int):
        """Book one numba allocation; returns the token :meth:`_unbook_external` takes.
        Booked as cupy's pool holds it: rounded up to its 512-byte unit."""
        nbytes = max(512, -(-int(nbytes) // 512) * 512)
        stack = getattr(self._tls, "credits", None)
        take = 0
        if stack:
            credit = stack[-1]
            take = min(credit[0], nbytes)
            credit[0] -= take
        try:
            self.ledger.reserve(nbytes - take, "numba allocation")
        except DeviceOOM:
            if take:
                stack[-1][0] += take
            raise
        self._fit_pool(nbytes)
        with self._lock:
            self.external_allocs += 1
            self.external_live_bytes += nbytes
            self.external_peak_bytes = max(self.external_peak_bytes, self.external_live_bytes)
        return nbytes

    def _unbook_external(self, nbytes: int) -> None:
        with self._lock:
            self.external_live_bytes -= nbytes
        self.ledger.release(nbytes)

    def _fit_pool(self, nbytes: int) -> None:
        """``cuda`` with a budget: cupy's pool keeps freed blocks cached; when cached plus
        live plus this request would pass the budget, wait for the device (no queued
        work may still read a cached block) and give the cached blocks back."""
        if self.kind != "cuda" or self.ledger.budget is None:
            return
        pool = self._cupy.get_default_memory_pool()
        if pool.total_bytes() + nbytes > self.ledger.budget:
            self.synchronize()
            pool.free_all_blocks()
            with self._lock:
                self.pool_trims += 1

    def free(self, arr: DeviceArray) -> bool:
        """Return ``arr`` to the pool; False (and counted) if it was already reclaimed or stale."""
        if self.kind != "emu" and not arr.freed:
            self._sync_before_free()
        with self._lock:
            if arr.freed or arr.epoch != self.epoch:
                self.stale_frees_dropped += 1
                return False
            self._reclaim(arr)
            return True

    def release_pool(self) -> None:
        """Drain: wait for queued work, then give the pool's cached blocks back."""
        self.synchronize()
        with self._lock:
            self._pool.clear()
            if self.kind == "cuda":
                flush_numba_frees(self._cuda)
                self._cupy.get_default_memory_pool().free_all_blocks()

    # -- transfers ----------------------------------------------------------------
    def to_device(self, host: np.ndarray, tag: str = "") -> DeviceArray:
        host = np.ascontiguousarray(host)
        out = self.empty(host.shape, host.dtype, tag)
        if self.kind == "emu":
            np.copyto(out.data, host)
        elif self.kind == "sim":
            out.data.copy_to_device(host)
        else:
            out.data.set(host)
        self.bytes_h2d += host.nbytes
        return out

    def to_host(self, arr: DeviceArray) -> np.ndarray:
        if arr.freed or arr.data is None:
            raise RuntimeError(f"read of a freed device buffer ({arr.tag})")
        if self.kind == "emu":
            out = arr.data.copy()
        elif self.kind == "sim":
            out = arr.data.copy_to_host()
        else:
            out = arr.data.get()
        self.bytes_d2h += out.nbytes
        return out

    def synchronize(self) -> None:
        if self.kind == "cuda":
            self._cupy.cuda.Device().synchronize()
        elif self.kind == "sim":
            self._cuda.synchronize()
