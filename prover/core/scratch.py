"""Buffers of the host stages' short-lived LDEs, lent again instead of allocated afresh.

A host proof computes several hundred column LDEs that live for one stage only: R1 commits
each table's main and LogUp columns and releases their LDE at once, R2 evaluates main and
aux on the quotient domain for one table's constraints, and the parts' LDE is released
after its commit (prover/core/stages.py; an LDE the stages' hold budget keeps for the
whole proof is allocated on its own, not lent).  Allocated afresh each time, every one of them
is memory the kernel must hand over zeroed page by page: at 2^20 cycles about 3.4 GB a
proof, ~10 % of the process's samples in ``clear_page_erms`` (perf, this host) and a
quarter of the LDEs' wall time.  :class:`Scratch` keeps the buffers the stages give back
and lends them for the next LDE of at most their size: the same bytes are written before
they are read (an LDE writes every element of its output), so the proof does not change.

Only buffers of at least :data:`MIN_BYTES` are lent (smaller ones cost the allocator
little); at most :data:`MAX_FREE` are kept between loans, the largest, and a request that
none fits drops them all before its own allocation, so the pool holds about one buffer
of the largest size per concurrent loan; the rounds clear it once the parts are
committed (its last user, prover/core/rounds.py).  Sizes grow table by table, so without
a plan each larger table missed and allocated afresh (a 2^20 program proof: 8 buffers,
1.6 GB of new pages); :meth:`Scratch.reserve` tells the pool the proof's largest request
per concurrent loan, and a miss allocates that size at once (3 buffers, 0.7 GB, the same
peak: the largest buffers are lent together in R2 either way).  A
:class:`prover.core.stages.HostStages` holds two, one for the LDEs and one for their
transforms' work buffers (a quarter of the size: in one pool they would take each
other's buffers), so a proof's buffers go with its stages object.  Thread-safe: a buffer is lent to one caller at a
time.  :class:`HoldBudget` is the other side: the bytes of LDEs the stages keep, not lend.
"""
from __future__ import annotations

import threading

import numpy as np

#: requests below this many bytes are allocated as before (not pooled)
MIN_BYTES = 8 << 20
#: free buffers kept between loans (the largest)
MAX_FREE = 2


class Scratch:
    """Lends uint32 buffers of a given shape: :meth:`take`, then :meth:`give` back."""

    def __init__(self, max_free: int = MAX_FREE, min_bytes: int = MIN_BYTES):
        self._lock = threading.Lock()
        self._free: list[np.ndarray] = []            # flat uint32 bases, ascending size
        self._lent: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.max_free = int(max_free)
        self.min_bytes = int(min_bytes)
        self.loans = 0          # buffers lent from the free list (not allocated)
        self.allocations = 0    # buffers allocated for a loan
        self._reserve: tuple[int, ...] = ()

    def reserve(self, sizes) -> None:
        """Elements a miss allocates at least while k buffers are lent: ``sizes[k]`` (the
        largest request the caller will make as its (k+1)-th concurrent loan), until
        :meth:`clear`.  A request larger than that still gets its own size."""
        with self._lock:
            self._reserve = tuple(max(0, int(x)) for x in sizes)

    def take(self, shape) -> np.ndarray:
        """A C-contiguous uint32 array of ``shape`` whose contents are undefined (the
        caller writes all of it before reading): a free buffer's first elements when one
        is large enough (the smallest such), else a new one."""
        shape = tuple(int(s) for s in shape)
        need = int(np.prod(shape, dtype=np.int64))
        if 4 * need < self.min_bytes:
            return np.empty(shape, np.uint32)
        with self._lock:
            k = next((k for k, b in enumerate(self._free) if b.size >= need), None)
            if k is not None:
                base = self._free.pop(k)
            else:
                # none fits: the smaller free buffers go (kept, they would sit beside the
                # new one: a proof's sizes grow table by table, so the pool holds about
                # one buffer of the largest size per concurrent loan, not one per size)
                self._free.clear()
                base = None
            size = need
            if base is None:
                self.allocations += 1
                k = len(self._lent)
                if k < len(self._reserve):
                    size = max(need, self._reserve[k])
            else:
                self.loans += 1
        if base is None:
            base = np.empty(size, np.uint32)
        view = base[:need].reshape(shape)
        with self._lock:
            self._lent[id(view)] = (view, base)
        return view

    def give(self, view) -> None:
        """Take back a buffer :meth:`take` lent (anything else: ignored).  The caller
        holds no reference to it afterwards."""
        if view is None:
            return
        with self._lock:
            got = self._lent.pop(id(view), None)      # (held there: its id is its own)
            if got is None:
                return
            self._free.append(got[1])
            self._free.sort(key=lambda b: b.size)
            if len(self._free) > self.max_free:
                del self._free[:len(self._free) - self.max_free]

    def clear(self) -> None:
        """Drop every free buffer (lent ones stay with their callers) and the
        :meth:`reserve` sizes."""
        with self._lock:
            self._free.clear()
            self._reserve = ()

    @property
    def free_bytes(self) -> int:
        with self._lock:
            return sum(b.nbytes for b in self._free)


class HoldBudget:
    """A byte budget for host LDEs held between rounds (prover/core/stages.py HostStages'
    hold): one proof's (each ``HostStages`` makes its own) or a cluster worker's, shared
    by the stages of every table it keeps (prover/cluster/worker.py), which give their
    bytes back when the table's state is dropped.  Thread-safe."""

    def __init__(self, nbytes: int) -> None:
        self.budget = max(0, int(nbytes))
        self.left = self.budget
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> bool:
        """Take ``nbytes`` if they fit in what is left."""
        with self._lock:
            if nbytes > self.left:
                return False
            self.left -= nbytes
            return True

    def give(self, nbytes: int) -> None:
        """Return ``nbytes`` taken before."""
        with self._lock:
            self.left = min(self.budget, self.left + int(nbytes))


__all__ = ["Scratch", "HoldBudget", "MIN_BYTES", "MAX_FREE"]
