"""How one proof call runs: one proof at a time per process (:data:`PROVE_LOCK`: the host
kernels use numba's parallel pool, which is not re-entrant, so concurrent calls queue) --
unless the calling thread was admitted by a proof service's gate (:func:`admitted`,
:mod:`prover.service`): then the gate, not the lock, decides what runs at once -- the
call's ``timeout`` and ``cancel`` event checked at every protocol stage boundary and while
it waits for the lock (:class:`prover.common.errors.ProofAborted`), the ``progress`` callback
told as each stage starts and ends (:class:`ProgressSpans`), and the call's buffers on
ordinary pages (:func:`prover.core.pages.small_pages`)."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

from ..common import spans as _spans
from ..common.errors import ConfigError, ProofAborted
from ..core.pages import small_pages

PROVE_LOCK = threading.Lock()       # one proof at a time per process
_CALL = threading.local()           # the running call's Abort (and service slot), per thread


class Abort:
    """A call's deadline and cancel event, checked at every protocol stage boundary."""

    def __init__(self, timeout: float | None, cancel, t0: float):
        if timeout is not None and (isinstance(timeout, bool)
                                    or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}",
                              "timeout")
        if cancel is not None and not callable(getattr(cancel, "is_set", None)):
            raise ConfigError("cancel must be a threading.Event (or have is_set())", "cancel")
        self.deadline = None if timeout is None else t0 + timeout
        self.timeout = timeout
        self.cancel = cancel

    def remaining(self) -> float:
        return -1 if self.deadline is None else self.deadline - time.perf_counter()

    def check(self, stage: str = "", table: str | None = None) -> None:
        where = f" before {stage}" + (f" of table {table}" if table else "") if stage else ""
        if self.cancel is not None and self.cancel.is_set():
            raise ProofAborted(f"proof cancelled{where}", "cancelled")
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            raise ProofAborted(f"proof ran past its timeout of {self.timeout}s{where}", "timeout")


@contextmanager
def limits(timeout: float | None, cancel) -> Iterator["Abort | None"]:
    """The running call's :class:`Abort` (None with neither a timeout nor a cancel event)
    for :func:`current_abort` on this thread, until the call ends; numpy's huge-page
    advice paused meanwhile (:func:`prover.core.pages.small_pages`: its execution, traces
    and proof allocate on ordinary pages)."""
    abort = None
    if timeout is not None or cancel is not None:
        abort = Abort(timeout, cancel, time.perf_counter())
    _CALL.abort = abort
    try:
        with small_pages():
            yield abort
    finally:
        _CALL.abort = None


def current_abort() -> "Abort | None":
    """The :class:`Abort` of the call running on this thread (:func:`limits`), or None."""
    return getattr(_CALL, "abort", None)


@contextmanager
def admitted(slot: object) -> Iterator[None]:
    """The calling thread's proofs were admitted by a proof service's gate (its slot,
    :class:`prover.service.ServiceGate`): :func:`locked` does not take the process lock
    for them -- the gate bounds how many run at once, each in its own device memory and
    budget share; the host kernels they run concurrently need numba's thread-safe layer,
    which every backend already requires (kernels.backend_select)."""
    prev = getattr(_CALL, "slot", None)
    _CALL.slot = slot
    try:
        yield
    finally:
        _CALL.slot = prev


def current_slot() -> object:
    """The service slot that admitted the calling thread (:func:`admitted`), or None."""
    return getattr(_CALL, "slot", None)


@contextmanager
def locked(abort: "Abort | None"):
    """The process lock; with a deadline or a cancel event, waited for in slices so that
    either stops the wait (:class:`ProofAborted`).  A thread a proof service's gate
    admitted (:func:`admitted`) does not take it."""
    if current_slot() is not None:
        if abort is not None:
            abort.check("waiting for the process lock")
        yield
        return
    if abort is None or (abort.deadline is None and abort.cancel is None):
        with PROVE_LOCK:
            yield
        return
    while True:
        abort.check("waiting for the process lock")
        left = abort.remaining()
        if PROVE_LOCK.acquire(timeout=0.05 if left < 0 else max(0.0, min(0.05, left))):
            break
    try:
        yield
    finally:
        PROVE_LOCK.release()


class ProgressSpans(_spans.Spans):
    """Spans that also report each stage's start and end to a callback
    ``progress(table, stage, event, seconds)`` (event "start" or "end"), and check a call's
    :class:`Abort` as each stage starts."""

    def __init__(self, progress, abort: "Abort | None" = None):
        super().__init__()
        self._progress = progress
        self._abort = abort

    def span(self, name: str, table: str | None = None):
        if self._abort is not None:
            self._abort.check(name, table)
        inner = super().span(name, table)
        progress = self._progress
        if progress is None:
            return inner

        class _Ctx:
            def __enter__(self_):
                self_.t0 = time.perf_counter()
                progress(table, name, "start", 0.0)
                return inner.__enter__()

            def __exit__(self_, *exc):
                r = inner.__exit__(*exc)
                progress(table, name, "end", time.perf_counter() - self_.t0)
                return r
        return _Ctx()



__all__ = ["PROVE_LOCK", "Abort", "limits", "current_abort", "locked", "admitted",
           "current_slot", "ProgressSpans"]
