"""The byte budget: one ledger that books every device byte against
``PROVER_VRAM_BUDGET`` atomically, and the one out-of-memory type (:class:`DeviceOOM`)
that budget refusals and real CUDA out-of-memory errors (:func:`as_device_oom`) share;
and :class:`DeviceLost`, a sticky device error after which the context is unusable
(:func:`as_device_lost` maps numba-cuda's and cupy's real error types to it)."""
from __future__ import annotations

import os
import re
import threading

import numpy as np


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


#: CUDA errors after which the context is unusable for the rest of the process ("sticky"
#: errors: every later call of the context returns them).  The driver's CUresult and the
#: runtime's cudaError_t share these values (checked against cuda.bindings 12.x).
STICKY_CUDA_ERRORS = {
    214: "CUDA_ERROR_ECC_UNCORRECTABLE",
    700: "CUDA_ERROR_ILLEGAL_ADDRESS",
    702: "CUDA_ERROR_LAUNCH_TIMEOUT",
    709: "CUDA_ERROR_CONTEXT_IS_DESTROYED",
    714: "CUDA_ERROR_HARDWARE_STACK_ERROR",
    715: "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    716: "CUDA_ERROR_MISALIGNED_ADDRESS",
    717: "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    718: "CUDA_ERROR_INVALID_PC",
    719: "CUDA_ERROR_LAUNCH_FAILED",
}
#: the runtime API's names of the same codes (cupy's CUDARuntimeError messages)
_RUNTIME_NAMES = {214: "cudaErrorECCUncorrectable", 700: "cudaErrorIllegalAddress",
                  702: "cudaErrorLaunchTimeout", 709: "cudaErrorContextIsDestroyed",
                  714: "cudaErrorHardwareStackError", 715: "cudaErrorIllegalInstruction",
                  716: "cudaErrorMisalignedAddress", 717: "cudaErrorInvalidAddressSpace",
                  718: "cudaErrorInvalidPc", 719: "cudaErrorLaunchFailure"}


class DeviceLost(RuntimeError):
    """The device context is gone: a sticky CUDA error (illegal address, launch failure,
    ECC uncorrectable, context destroyed, ...) or an injected ``lost`` fault.  Never
    retried on the device: the proof finishes on the host.  ``injected``: a ``lost``
    fault (the device itself still works); ``code``: the CUDA error code (None when
    injected)."""

    def __init__(self, detail: str, *, code: int | None = None, injected: bool = False,
                 site: str | None = None, table: str | None = None):
        self.detail = detail
        self.code = code
        self.injected = bool(injected)
        self.site = site
        self.table = table
        super().__init__(f"device lost: {detail}")


def _sticky_code(exc: BaseException) -> int | None:
    """The sticky CUDA error code ``exc`` carries, if it is one of the real error types:
    numba-cuda's ``numba.cuda.cudadrv.driver.CudaAPIError`` (``.code``: a ``CUresult``,
    an int enum), cupy's ``cupy.cuda.driver.CUDADriverError`` and
    ``cupy.cuda.runtime.CUDARuntimeError`` (``cupy_backends.cuda.api.driver`` /
    ``.runtime``; ``.status``: an int).  Matched by class name and attribute, so neither
    package is imported here (cupy may be absent; numba.cuda must not be imported before
    the simulator is chosen)."""
    name = type(exc).__name__
    if name == "CudaAPIError":
        raw = getattr(exc, "code", None)
    elif name in ("CUDADriverError", "CUDARuntimeError"):
        raw = getattr(exc, "status", None)
    else:
        return None
    try:
        code = int(raw)
    except (TypeError, ValueError):        # no numeric code: read the name in the message
        text = str(exc)
        return next((c for c in STICKY_CUDA_ERRORS
                     if STICKY_CUDA_ERRORS[c] in text or _RUNTIME_NAMES[c] in text), None)
    return code if code in STICKY_CUDA_ERRORS else None


def as_device_lost(exc: BaseException | None) -> DeviceLost | None:
    """Return a :class:`DeviceLost` if ``exc`` -- or an exception it was raised from or
    while handling (``__cause__`` / ``__context__``) -- is an injected loss or a real
    sticky CUDA error, else None.  A sticky error surfaces at the next call on the
    context, often a synchronisation far from the kernel that caused it, so the chain is
    followed."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DeviceLost):
            return exc
        code = _sticky_code(exc)
        if code is not None:
            return DeviceLost(f"{type(exc).__name__} {code} {STICKY_CUDA_ERRORS[code]}: {exc}",
                              code=code)
        exc = exc.__cause__ or exc.__context__
    return None
