"""Backend selection and the device-memory seam.

One backend is chosen per prover (``PROVER_BACKEND``, SPEC §7):

* ``host`` -- numpy + numba on the CPU; the executable reference.
* ``cuda`` -- the numba.cuda kernels on a real GPU, memory from cupy's pool.
* ``sim``  -- the same numba.cuda kernels under numba's CUDA simulator (CI).
* ``emu``  -- the host kernels behind the device interface: a separate memory space
  with explicit transfers and the same byte budget (used by the residency work).
* ``auto`` -- ``cuda`` if a usable GPU is present, else ``host``.

All device memory goes through :class:`DeviceMemory`, whose :class:`BudgetLedger` keeps
an atomic byte count against ``PROVER_VRAM_BUDGET`` and raises :class:`DeviceOOM` when a
request would exceed it.  Real out-of-memory errors from cupy and numba are mapped to the
same type by :func:`as_device_oom`, so callers handle exactly one exception.
"""
from __future__ import annotations

import os
import re
import sys
import threading
from dataclasses import dataclass

import numpy as np

BACKEND_NAMES = ("host", "cuda", "sim", "emu")


class BackendError(RuntimeError):
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
        return "cuda" if _cuda_driver_usable() else "host"
    if choice not in BACKEND_NAMES:
        raise BackendError(f"unknown backend {raw!r}; choose one of "
                           f"{', '.join(BACKEND_NAMES + ('auto',))}")
    if choice == "sim":
        enable_simulator()
    elif choice == "cuda" and not _cuda_driver_usable():
        raise BackendError("backend 'cuda' requested but no usable CUDA device/driver was found")
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
        self._lock = threading.Lock()
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


@dataclass
class DeviceArray:
    """A device buffer handed out by :class:`DeviceMemory`.

    ``data`` is the backend's array object (a numba simulator array, a cupy array, or
    a numpy array standing for emulated VRAM); ``nbytes`` is what the ledger booked.
    """
    data: object
    nbytes: int
    tag: str = ""
    freed: bool = False

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype


class DeviceMemory:
    """The one allocator interface for device memory (all device backends)."""

    def __init__(self, kind: str, budget: int | None = None):
        if kind not in ("cuda", "sim", "emu"):
            raise BackendError(f"no device memory for backend {kind!r}")
        self.kind = kind
        self.ledger = BudgetLedger(budget)
        self._lock = threading.Lock()   # serialises pool calls (cupy's pool is not re-entrant-safe across streams)
        if kind == "sim":
            enable_simulator()
        if kind in ("cuda", "sim"):
            from numba import cuda
            self._cuda = cuda
        if kind == "cuda":
            import cupy  # noqa: F401  (the gpu extra)
            self._cupy = cupy

    # -- allocation -------------------------------------------------------------
    def empty(self, shape, dtype=np.uint32, tag: str = "") -> DeviceArray:
        shape = tuple(int(s) for s in np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        self.ledger.reserve(nbytes, tag)
        try:
            with self._lock:
                if self.kind == "emu":
                    data = np.empty(shape, dtype=dtype)
                elif self.kind == "sim":
                    data = self._cuda.device_array(shape, dtype=dtype)
                else:
                    data = self._cupy.empty(shape, dtype=dtype)
        except Exception as exc:
            self.ledger.release(nbytes)
            oom = as_device_oom(exc, nbytes, self.ledger)
            if oom is not None:
                raise oom from exc
            raise
        return DeviceArray(data, nbytes, tag)

    def free(self, arr: DeviceArray) -> None:
        if arr.freed:
            return
        arr.freed = True
        self.ledger.release(arr.nbytes)
        arr.data = None

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
        return out

    def to_host(self, arr: DeviceArray) -> np.ndarray:
        if arr.freed:
            raise RuntimeError(f"read of a freed device buffer ({arr.tag})")
        if self.kind == "emu":
            return arr.data.copy()
        if self.kind == "sim":
            return arr.data.copy_to_host()
        return arr.data.get()

    def synchronize(self) -> None:
        if self.kind == "cuda":
            self._cupy.cuda.get_current_stream().synchronize()
        elif self.kind == "sim":
            self._cuda.synchronize()

    def release_pool(self) -> None:
        """Give the pool's cached blocks back to the driver (the 'drain' step)."""
        if self.kind == "cuda":
            self.synchronize()
            self._cupy.get_default_memory_pool().free_all_blocks()
