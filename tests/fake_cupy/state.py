"""The stand-in's shared state: call and host-wait counters, the mode switches
(strict, deferred stream work, device capacity) and peaks, and strict mode's per-stream
work queues (:func:`_enqueue`, :func:`_drain`, :func:`pending`)."""
from __future__ import annotations

import itertools
import sys
import threading
from collections import Counter, deque
from pathlib import Path

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

#: (thread name, what) for every host wait on an exporting stream (strict mode)
SYNC_WAITS: list = []


def _host_wait(what: str) -> None:
    if not STRICT[0]:
        return
    _count("cai_sync")
    with _lock:
        SYNC_WAITS.append((threading.current_thread().name, what, _caller()))

#: this package's folder: frames in it are the stand-in's own (:func:`_caller`)
_HERE = Path(__file__).parent


def _caller() -> str:
    """The first frame outside this package and numba: who passed the stream."""
    f = sys._getframe(2)
    while f is not None and (Path(f.f_code.co_filename).parent == _HERE
                             or "numba" in Path(f.f_code.co_filename).parts):
        f = f.f_back
    return "?" if f is None else f"{f.f_code.co_filename}:{f.f_lineno}"
