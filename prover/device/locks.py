"""Serialisation of device work: the locks device stages take and the R2 windows.

* :data:`R2_LOCK` -- the process-wide lock around every table's device R2 window
  (constraint evaluation + decomposition) unless ``PROVER_GPU_SERIALIZE_R2=0``;
* :class:`R2Windows` -- every device R2 window recorded (start, end, table), to tell
  whether one overlapped another (the ``race`` fault needs an overlap; the stats list them);
* :data:`SIM_SUBMIT_LOCK` -- kernel submission on the simulator; :data:`NULL_LOCK` on the
  backends that need none.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

#: the process-wide R2 lock (SPEC §6: R2 serialisation is process-wide, not per prover)
R2_LOCK = threading.Lock()

#: numba's CUDA simulator swaps module globals while a kernel runs and stores a launch's
#: configuration on the kernel object: two launches from different worker threads corrupt
#: each other.  On ``sim`` every device stage attempt holds this lock (on ``cuda`` each
#: worker's launches go to its own stream -- DeviceMemory.stream_scope -- and need no
#: lock; on ``emu`` there are no launches).
SIM_SUBMIT_LOCK = threading.RLock()


class _NullLock:
    """A lock that never blocks (backends whose runtime needs no submission lock)."""

    def acquire(self):
        return True

    def release(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


#: the submission lock of ``emu`` and ``cuda``
NULL_LOCK = _NullLock()


@dataclass
class R2Window:
    table: str
    start: float
    end: float | None = None


class R2Windows:
    """Records every device R2 window; tells whether one overlapped another."""

    def __init__(self):
        self._lock = threading.Lock()
        self.windows: list[R2Window] = []

    def open(self, table: str) -> R2Window:
        w = R2Window(table, time.perf_counter())
        with self._lock:
            self.windows.append(w)
        return w

    def close(self, w: R2Window) -> None:
        w.end = time.perf_counter()

    def overlapped(self, w: R2Window) -> bool:
        end = w.end if w.end is not None else time.perf_counter()
        with self._lock:
            for o in self.windows:
                if o is w:
                    continue
                o_end = o.end if o.end is not None else time.perf_counter()
                if o.start < end and o_end > w.start:
                    return True
        return False

    def any_overlap(self) -> bool:
        return any(self.overlapped(w) for w in self.windows)


__all__ = ["R2_LOCK", "SIM_SUBMIT_LOCK", "NULL_LOCK", "R2Window", "R2Windows"]
