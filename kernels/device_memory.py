"""Device memory: :class:`DeviceMemory`, the one allocator of every device backend --
buffers booked in its ledger, its pool (on ``cuda`` a private cupy pool), epochs that
reclaim a proof's buffers wholesale, per-thread streams and the rules that keep one
stream from reusing memory another may still read -- and :class:`DeviceArray`, the
buffer it hands out."""
from __future__ import annotations

import itertools
import os
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from . import backend_select as _select
from .backend_select import BackendError, enable_simulator
from .device_budget import BudgetLedger, DeviceOOM, as_device_oom
from .numba_emm import (_RETIRE_SYNC_AT, _RETIRED, _SHARED, _release_retired, _routed,
                        flush_numba_frees, install_pooled_memory_manager)


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
            if not _select._cupy_installed():
                raise BackendError(_select._NO_CUPY)
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
