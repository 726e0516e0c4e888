"""The host kernels' one pool of worker threads, shared by kernels/ntt_host.py (a
transform's rows or tasks), kernels/poseidon2.py (sponge chunks; through :func:`run_ranges`
also the leaf hashes and row gathers of kernels/lde_rows.py, the chunked evaluations of
prover/core/hostops.py and kernels/mmcs.py's tree chunks) and kernels/constraint_host.py
(quotient and LogUp blocks).

The jobs are nogil numba kernels: the threads only give them parallelism, and every job
writes its own part of the output, so the bytes do not depend on the thread count.  The
count is numba's (``numba.get_num_threads()``: ``ProverConfig.threads`` / ``--threads``,
at most ``NUMBA_NUM_THREADS``), read by each caller at every call.  The pool grows to the
largest number of workers asked for; a replaced pool is not shut down under a caller that
still holds it (it finishes that caller's jobs, and its idle threads exit once it is
unreferenced).  No job submits to the pool again (each is one compiled kernel call, or
kernels/mmcs.py's build chunk: serial kernel calls on its own thread), so callers on several
threads at once (the pipeline's tables) only queue behind each other.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable

import numba

_POOL: ThreadPoolExecutor | None = None
_POOL_SIZE = 0
_POOL_LOCK = threading.Lock()
THREAD_NAME_PREFIX = "steadfast-host"


def threads() -> int:
    """numba's thread count for the calling thread: how many ways the callers split."""
    return numba.get_num_threads()


def pool(workers: int) -> ThreadPoolExecutor:
    """The shared pool, with at least ``workers`` threads."""
    global _POOL, _POOL_SIZE
    with _POOL_LOCK:
        if _POOL is None or _POOL_SIZE < workers:
            _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=THREAD_NAME_PREFIX)
            _POOL_SIZE = workers
        return _POOL


def run(fn: Callable, argsets: Iterable[tuple], caller_first: bool = False) -> None:
    """``fn(*args)`` for every tuple of ``argsets`` on the shared pool, waiting for all
    (their first exception, in order, is raised).  ``caller_first``: the first tuple runs on
    the calling thread, after the others are submitted."""
    argsets = list(argsets)
    mine, rest = (argsets[0], argsets[1:]) if caller_first else (None, argsets)
    p = pool(len(rest))
    _finish([p.submit(fn, *a) for a in rest], (lambda: fn(*mine)) if mine is not None else None)


def _finish(futures: list, mine: Callable[[], object] | None, cancel: bool = False) -> None:
    """Run ``mine`` (if any) on the calling thread, then wait for ``futures`` -- all of
    them, whatever failed -- and raise the first exception (``mine``'s first).
    ``cancel``: a future not yet started is cancelled instead of waited for."""
    err = None
    if mine is not None:
        try:
            mine()
        except BaseException as e:             # the others are waited for all the same
            err = e
    for f in futures:
        if cancel and f.cancel():
            continue
        try:
            f.result()
        except BaseException as e:
            err = e if err is None else err
    if err is not None:
        raise err


#: a dynamic split hands out about this many ranges per worker
SHARES = 8


def run_ranges(fn: Callable[[int, int], object], nitems: int, min_per_worker: int = 4) -> None:
    """fn(i0, i1) over [0, nitems) in contiguous ranges on numba's thread count of workers
    (at most one per ``min_per_worker`` items; fn must release the GIL: a nogil kernel);
    on the calling thread alone when that leaves one worker.  See :func:`run_dynamic`."""
    if nitems <= 0:
        return
    workers = min(threads(), max(1, nitems // min_per_worker))
    if workers <= 1:
        fn(0, nitems)
        return
    run_dynamic(fn, nitems, workers)


def run_dynamic(fn: Callable[[int, int], object], nitems: int, workers: int,
                grain: int | None = None) -> None:
    """fn(i0, i1) over [0, nitems) on ``workers`` threads (the caller one of them), each
    taking the next ``grain`` items (default: about :data:`SHARES` ranges per worker)
    until none are left: a worker slowed down -- by the first touch of fresh pages, by
    another process on its core -- takes fewer ranges instead of the others waiting for
    its fixed half.  Every range writes its own part of the output (fn's contract), so
    the bytes do not depend on who ran which.  The first exception is raised after all
    workers stop; the others stop taking ranges once one has failed."""
    if nitems <= 0:
        return
    grain = max(1, -(-nitems // (workers * SHARES)) if grain is None else int(grain))
    if workers <= 1 or nitems <= grain:
        fn(0, nitems)
        return
    state = [0, False]                              # next item, failed
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i0 = state[0]
                if i0 >= nitems or state[1]:
                    return
                i1 = state[0] = min(nitems, i0 + grain)
            try:
                fn(i0, i1)
            except BaseException:
                state[1] = True
                raise

    # the caller is a worker too; a helper not yet started when the caller's loop ends
    # has nothing left to take and is cancelled -- so a caller that is itself a pool job
    # (the pool's only free thread busy) does not wait on it
    helpers = min(workers, -(-nitems // grain)) - 1
    p = pool(helpers)
    _finish([p.submit(worker) for _ in range(helpers)], worker, cancel=True)


__all__ = ["pool", "run", "run_dynamic", "run_ranges", "threads", "THREAD_NAME_PREFIX"]
