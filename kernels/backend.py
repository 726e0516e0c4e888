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
"""
from __future__ import annotations

import importlib.util
import itertools
import os
import re
import sys
import threading
import weakref
from collections import deque
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
        choice = "cuda" if _cuda_driver_usable() and _cupy_installed() else "host"
        require_threadsafe_layer()
        return choice
    if choice not in BACKEND_NAMES:
        raise BackendError(f"unknown backend {raw!r}; choose one of "
                           f"{', '.join(BACKEND_NAMES + ('auto',))}")
    if choice == "sim":
        enable_simulator()
    elif choice == "cuda" and not _cuda_driver_usable():
        raise BackendError("backend 'cuda' requested but no usable CUDA device/driver was found")
    elif choice == "cuda" and not _cupy_installed():
        raise BackendError(_NO_CUPY)
    require_threadsafe_layer()          # every backend runs the parallel host kernels
    return choice


def budget_from_env(default: int | None = None) -> int | None:
    raw = os.environ.get("PROVER_VRAM_BUDGET")
    return parse_bytes(raw) if raw else default


class BudgetLedger:
    """Atomic byte accounting against a budget.

    ``reserve`` checks and books under one lock, so two callers can never both pass
    the check with the same bytes.  The lock is a leaf: nothing else is taken while it is
    held (a numba finaliser that runs inside it books here and nowhere else).
    ``external_*``: numba's allocations booked through the pooled memory manager.
    """

    def __init__(self, budget: int | None):
        self.budget = budget
        # re-entrant: a numba array's finaliser releases its booking and may run from a
        # garbage collection that starts inside this lock
        self._lock = threading.RLock()
        self.in_use = 0
        self.peak = 0
        self.external_allocs = 0
        self.external_live = 0
        self.external_peak = 0

    def reserve(self, nbytes: int, detail: str = "") -> None:
        nbytes = int(nbytes)
        with self._lock:
            if self.budget is not None and self.in_use + nbytes > self.budget:
                raise DeviceOOM(nbytes, self.in_use, self.budget, detail)
            self.in_use += nbytes
            self.peak = max(self.peak, self.in_use)

    def book_external(self, nbytes: int, credited: int = 0) -> None:
        """One numba allocation of ``nbytes``, ``credited`` of them already booked (a
        scratch booking): reserve the rest and count it, atomically."""
        with self._lock:
            self.reserve(int(nbytes) - int(credited), "numba allocation")
            self.external_allocs += 1
            self.external_live += int(nbytes)
            self.external_peak = max(self.external_peak, self.external_live)

    def release(self, nbytes: int, external: bool = False) -> None:
        with self._lock:
            self.in_use -= int(nbytes)
            if external:
                self.external_live -= int(nbytes)
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


# ----------------------------------------------------------- numba's threading layer
#: numba's threading layers that are safe to drive from several threads at once: the host
#: kernels are ``parallel=True`` and the pipeline calls them from several table workers;
#: ``workqueue`` is not thread-safe (a concurrent launch aborts the process)
THREADSAFE_LAYERS = ("tbb", "omp")
_LAYER: list = []                  # [(layer, error or "")] once checked


def threading_layer() -> tuple[str, str]:
    """(numba's threading layer in use, "" or why it cannot be used).  Starts numba's
    thread pool if nothing has yet (the first ``parallel=True`` kernel would), so the
    answer is the layer this process really uses."""
    if _LAYER:
        return _LAYER[0]
    import numba
    try:
        from numba.np.ufunc import parallel
        parallel._launch_threads()
        layer = str(numba.threading_layer())
    except Exception as exc:  # noqa: BLE001 - e.g. NUMBA_THREADING_LAYER=tbb without tbb
        res = ("none", f"numba could not start a threading layer ({exc}); "
               f"{_LAYER_FIX}")
    else:
        res = (layer, "" if layer in THREADSAFE_LAYERS else
               f"numba's threading layer is {layer!r}, which is not thread-safe: steadfast "
               f"runs parallel host kernels from several pipeline threads at once, which "
               f"aborts the process under it; {_LAYER_FIX}")
    _LAYER.append(res)
    return res


_LAYER_FIX = ("use NUMBA_THREADING_LAYER=omp (GNU OpenMP: libgomp, e.g. apt-get install "
              "libgomp1) or tbb (pip install tbb), or leave it unset (numba then picks tbb "
              "or omp when either loads)")


def require_threadsafe_layer() -> str:
    """The threading layer in use; :class:`BackendError` (one line saying how to fix it)
    when it is not thread-safe (every backend: the host kernels run on the host ones)."""
    layer, why = threading_layer()
    if why:
        raise BackendError(why)
    return layer


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


POISON_WORD = 0xFFFFFFFF   # not a canonical BabyBear element: a stale read is visible


@dataclass(eq=False)
class DeviceArray:
    """A device buffer handed out by :class:`DeviceMemory`.

    ``data`` is the backend's array object (a numba simulator array, a cupy array, or
    a numpy array standing for emulated VRAM); ``nbytes`` is what the ledger booked;
    ``epoch`` is the epoch that owns it (0: none -- freed one by one only; see
    :meth:`DeviceMemory.end_epoch`); ``stream`` the cupy stream it was allocated on
    (``cuda``: its pool block goes back to that stream); ``fresh_tag`` is the integrity
    tag of what was last written into it, when the write computed one on the way
    (``emu`` with XCHECK on, for buffers marked ``tag_on_write``), for the stage that
    seals it.
    """
    data: object
    nbytes: int
    tag: str = ""
    epoch: int = 0
    freed: bool = False
    fresh_tag: tuple | None = None
    tag_on_write: bool = False
    stream: int = 0

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype


#: every DeviceMemory of the process (weakly), for :func:`trim_pools`
_MEMORIES: "weakref.WeakSet" = weakref.WeakSet()


def trim_pools() -> None:
    """Drain every DeviceMemory of the process (wait for the device, give their pools'
    cached blocks back): a benchmark's clean slate."""
    for mem in list(_MEMORIES):
        mem.release_pool()


class DeviceMemory:
    """The one allocator interface for device memory (all device backends).

    Accounting: every allocation books its bytes in one :class:`BudgetLedger` under a
    lock before any memory is touched, so the budget check and the booking are atomic.
    The ledger is never updated while ``self._lock`` is held (a numba finaliser, which
    may run inside the ledger's lock during a garbage collection, books through the
    ledger alone).

    Epochs: a proof runs in an epoch (``begin_epoch``/``end_epoch``); every buffer is
    owned by the epoch it was allocated in -- the calling thread's own
    (:meth:`epoch_scope`), else the default one (the last ``begin_epoch(default=True)``
    not yet ended), else none.  ``end_epoch(e)`` reclaims what epoch ``e`` still holds,
    wholesale.  A ``free`` that arrives later for a reclaimed buffer (a late finaliser, a
    handle that outlived its proof in a long-lived node) is *dropped* and counted in
    ``stale_frees_dropped`` -- it never hands memory back to the pool a second time,
    where it could already belong to the next proof.  A buffer no epoch reclaimed (owned
    by none, or by one still open) is always freed, whichever epochs ended meanwhile.

    Pool: freed blocks are cached per (shape, dtype) and reused (``sim``, ``emu``); on
    ``cuda`` each DeviceMemory has its own cupy ``MemoryPool`` (limit: the budget), so
    neither another prover's budget nor a host application's cupy code shares it.
    ``PROVER_ARENA_POISON=1`` fills every freed block with 0xFFFFFFFF so that a read
    through a stale reference shows values that are not field elements.

    Serialisation: pool operations (allocate, free, reclaim) take ``self._lock``; cupy's
    pool and numba's simulator device-array creation are not safe to drive from several
    worker threads at once, and the pool's free lists must not be mutated concurrently.

    Streams (``cuda``, ``sim``; ``PROVER_GPU_STREAMS=0`` turns them off): a worker thread
    proving a table holds one stream for the duration of that table's phase
    (:meth:`stream_scope`; streams are pooled, so at most one per concurrent worker
    exists).  On ``cuda`` it is a non-blocking cupy stream made the thread's current cupy
    stream (allocations, uploads and downloads go to it) and handed to numba's launches
    as an external stream.  Safety rules that make several streams unable to reuse memory
    another stream may still read: :meth:`free` waits for the freeing thread's current
    stream unless that stream allocated the buffer (then the pool reuses the block only
    for later work of that stream, queued after everything that read it); a phase
    synchronises its stream when it ends, before a buffer can be handed to another
    thread; a drain and ``end_epoch`` synchronise the whole device.
    """

    def __init__(self, kind: str, budget: int | None = None, poison: bool | None = None):
        if kind not in ("cuda", "sim", "emu"):
            raise BackendError(f"no device memory for backend {kind!r}")
        self.kind = kind
        self.ledger = BudgetLedger(budget)
        self._lock = threading.RLock()
        self._stats_lock = threading.Lock()      # a leaf: nothing is taken inside it
        self.poison = (os.environ.get("PROVER_ARENA_POISON") == "1") if poison is None else poison
        self.epoch = 0                           # the default epoch (0: none open)
        self._epochs = itertools.count(1)
        self._live: dict[int, DeviceArray] = {}
        self._cache: dict[tuple, list] = {}
        self.stale_frees_dropped = 0
        self.bytes_h2d = 0
        self.bytes_d2h = 0
        self.streams_on = (kind in ("cuda", "sim")
                           and os.environ.get("PROVER_GPU_STREAMS", "1") != "0")
        self._streams: list = []          # idle (numba stream, cupy stream or None) pairs
        self.streams_created = 0
        self._tls = threading.local()
        self._pool = None                 # cuda: this memory's own cupy MemoryPool
        self.pool_trims = 0
        if kind == "sim":
            enable_simulator()
        if kind in ("cuda", "sim"):
            from numba import cuda
            self._cuda = cuda
        if kind == "cuda":
            if not _cupy_installed():
                raise BackendError(_NO_CUPY)
            import cupy  # the gpu extra
            self._cupy = cupy
            # one allocator: our numba allocations come from this pool and are booked in
            # this ledger; the pool (live + cached blocks) is capped at the budget
            self._pool = cupy.cuda.MemoryPool()
            if budget is not None:
                self._pool.set_limit(size=int(budget))
            install_pooled_memory_manager(self._cuda)
        _MEMORIES.add(self)

    # -- counters (booked in the ledger, under its lock) ---------------------------
    external_allocs = property(lambda self: self.ledger.external_allocs,
                               doc="numba allocations booked (pooled manager)")
    external_live_bytes = property(lambda self: self.ledger.external_live)
    external_peak_bytes = property(lambda self: self.ledger.external_peak)

    def _count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            setattr(self, name, getattr(self, name) + n)

    # -- scopes -------------------------------------------------------------------
    @contextmanager
    def scope(self):
        """numba allocations of the calling thread inside are this memory's: taken from
        its pool and booked in its ledger (``cuda``).  :meth:`stream_scope` and
        :meth:`scratch` open one; outside every scope an allocation is not ours."""
        with _routed(self):
            yield

    @contextmanager
    def epoch_scope(self, epoch: int):
        """Buffers the calling thread allocates inside belong to ``epoch`` (an epoch
        from ``begin_epoch(default=False)``: a job of its own, e.g. a sharded table
        across several calls), whatever the default epoch is meanwhile."""
        prev = getattr(self._tls, "epoch", None)
        self._tls.epoch = int(epoch)
        try:
            yield
        finally:
            self._tls.epoch = prev

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
        """Give the calling thread its own stream for a table phase (and book its numba
        allocations here: :meth:`scope`); on exit the stream is synchronised (the phase's
        work is complete) and returned to the pool."""
        with _routed(self):
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

    def _current_stream_ptr(self) -> int:
        return int(self._cupy.cuda.get_current_stream().ptr) if self.kind == "cuda" else 0

    def _sync_before_free(self, arr: DeviceArray) -> None:
        """Wait until nothing queued may still read ``arr``.  On ``cuda``: the freeing
        thread's current stream, unless it allocated the buffer (the pool hands the block
        only to later work of that stream); every other stream that read it synchronised
        when its phase ended.  On ``sim``: the thread's stream."""
        pair = getattr(self._tls, "stream", None)
        if self.kind == "cuda":
            cur = self._current_stream_ptr()
            if cur == arr.stream:
                return
            if pair is not None:
                pair[0].synchronize()
            else:
                self._cupy.cuda.Stream.null.synchronize()
        elif pair is not None:
            pair[0].synchronize()

    # -- epochs -------------------------------------------------------------------
    def begin_epoch(self, default: bool = True) -> int:
        """Open an epoch; ``default``: it owns the buffers of threads without an epoch of
        their own (the pipeline's proof), else only those inside :meth:`epoch_scope`."""
        with self._lock:
            e = next(self._epochs)
            if default:
                self.epoch = e
            return e

    def end_epoch(self, epoch: int | None = None) -> int:
        """Reclaim every buffer epoch ``epoch`` (default: the default epoch) still holds;
        returns how many."""
        self.synchronize()           # nothing queued may still read what is reclaimed
        with self._lock:
            e = self.epoch if epoch is None else int(epoch)
            live = [a for a in self._live.values() if e and a.epoch == e]
            detached = [(a, self._detach(a)) for a in live]
            if self.epoch == e:
                self.epoch = 0       # nothing allocates in an ended epoch
        for arr, data in detached:
            self._recycle(arr, data)
        return len(detached)

    # -- allocation -------------------------------------------------------------
    def _raw_empty(self, shape, dtype):
        if self.kind == "emu":
            return np.empty(shape, dtype=dtype)
        if self.kind == "sim":
            return self._cuda.device_array(shape, dtype=dtype)
        with self._cupy.cuda.using_allocator(self._pool.malloc):
            return self._cupy.empty(shape, dtype=dtype)

    def empty(self, shape, dtype=np.uint32, tag: str = "") -> DeviceArray:
        if not isinstance(shape, tuple):
            shape = tuple(int(s) for s in np.atleast_1d(shape))
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        self.ledger.reserve(nbytes, tag)
        try:
            self._fit_pool(nbytes)
            epoch = getattr(self._tls, "epoch", None) or self.epoch
            with self._lock:
                cached = self._cache.get((shape, dtype.str))
                data = cached.pop() if cached else self._raw_empty(shape, dtype)
                arr = DeviceArray(data, nbytes, tag, epoch, stream=self._current_stream_ptr())
                self._live[id(arr)] = arr
        except Exception as exc:
            self.ledger.release(nbytes)
            oom = as_device_oom(exc, nbytes, self.ledger)
            if oom is not None:
                raise oom from exc
            raise
        return arr

    def _detach(self, arr: DeviceArray):
        # caller holds the lock; the ledger and the pool are updated after (_recycle)
        data = arr.data
        arr.freed = True
        arr.data = None
        self._live.pop(id(arr), None)
        return data

    def _recycle(self, arr: DeviceArray, data) -> None:
        """A detached buffer's bytes back to the budget and its block to the pool (never
        under ``self._lock``)."""
        self.ledger.release(arr.nbytes)
        if data is None:
            return
        if self.poison:
            self._fill(data, POISON_WORD, arr.stream)
        if self.kind != "cuda":     # cupy's pool caches for us once the array is dropped
            with self._lock:
                self._cache.setdefault((tuple(data.shape), np.dtype(data.dtype).str),
                                       []).append(data)

    def _fill(self, data, word: int, alloc_stream: int | None = None) -> None:
        if self.kind == "emu":
            data.view(np.uint8).fill(0xFF) if word == POISON_WORD else data.fill(word)
        elif self.kind == "sim":
            host = np.full(data.shape, word, dtype=np.uint64).astype(data.dtype, casting="unsafe")
            data.copy_to_device(host)
        else:
            data.view(self._cupy.uint8).fill(0xFF)
            # the fill is queued on the freeing thread's stream, but cupy hands the block
            # back to the pool of the stream that allocated it: unless that is the same
            # stream, finish the fill first
            if alloc_stream is None or alloc_stream != self._current_stream_ptr():
                self._cupy.cuda.get_current_stream().synchronize()

    @contextmanager
    def scratch(self, nbytes: int, tag: str = ""):
        """Book ``nbytes`` of kernel temporaries (allocated by the kernels themselves
        through numba) against the budget for the duration of a call; raises
        :class:`DeviceOOM` like :meth:`empty` when they do not fit.

        On ``cuda`` numba's allocations inside (this memory's: :meth:`scope`) are booked
        one by one by the pooled memory manager: they draw on this booking first (a
        *credit*, so nothing is counted twice), beyond it they book fresh bytes (and may
        raise :class:`DeviceOOM`); an allocation that outlives the scope (a cached table)
        keeps its bytes booked until numba frees it.  On exit only the unused credit is
        released."""
        nbytes = max(0, int(nbytes))
        self.ledger.reserve(nbytes, f"scratch {tag}".strip())
        credit = [nbytes]
        stack = self._tls.__dict__.setdefault("credits", [])
        stack.append(credit)
        try:
            with _routed(self):
                yield
        finally:
            stack.pop()
            self.ledger.release(credit[0])

    # -- numba's allocations (the pooled memory manager books them here) ---------
    def _book_external(self, nbytes: int):
        """Book one numba allocation; returns the token :meth:`_unbook_external` takes.
        Booked as cupy's pool holds it: rounded up to its 512-byte unit."""
        nbytes = max(512, -(-int(nbytes) // 512) * 512)
        if len(_RETIRED) >= _RETIRE_SYNC_AT and not getattr(_SHARED, "depth", 0):
            self.synchronize()                  # releases the retired shared tables
        stack = getattr(self._tls, "credits", None)
        take = 0
        if stack:
            credit = stack[-1]
            take = min(credit[0], nbytes)
            credit[0] -= take
        try:
            self.ledger.book_external(nbytes, take)
        except DeviceOOM:
            if take:
                stack[-1][0] += take
            raise
        self._fit_pool(nbytes)
        return nbytes

    def _unbook_external(self, nbytes: int) -> None:
        """A numba allocation's bytes back (its finaliser, maybe from inside the ledger's
        lock: the ledger alone is touched, its lock is re-entrant)."""
        self.ledger.release(nbytes, external=True)

    def _fit_pool(self, nbytes: int) -> None:
        """``cuda`` with a budget: the pool keeps freed blocks cached; when cached plus
        live plus this request would pass the budget, wait for the device (no queued
        work may still read a cached block) and give the cached blocks back."""
        if self.kind != "cuda" or self.ledger.budget is None:
            return
        if self._pool.total_bytes() + nbytes > self.ledger.budget:
            self.synchronize()
            self._pool.free_all_blocks()
            self._count("pool_trims")

    def free(self, arr: DeviceArray) -> bool:
        """Return ``arr`` to the pool; False (and counted) if it was already reclaimed."""
        if not arr.freed and self.kind != "emu":
            self._sync_before_free(arr)
        with self._lock:
            if arr.freed:
                stale = True
            else:
                stale, data = False, self._detach(arr)
        if stale:
            self._count("stale_frees_dropped")
            return False
        self._recycle(arr, data)
        return True

    def release_pool(self) -> None:
        """Drain: wait for queued work, then give the pool's cached blocks back."""
        self.synchronize()
        with self._lock:
            self._cache.clear()
        if self.kind == "cuda":
            flush_numba_frees(self._cuda)
            self._pool.free_all_blocks()

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
        self._count("bytes_h2d", host.nbytes)
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
        self._count("bytes_d2h", out.nbytes)
        return out

    def synchronize(self) -> None:
        """Wait for the whole device; then the shared tables retired before are released."""
        if self.kind == "cuda":
            upto = len(_RETIRED)
            self._cupy.cuda.Device().synchronize()
            _release_retired(upto)
        elif self.kind == "sim":
            self._cuda.synchronize()
