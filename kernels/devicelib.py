"""Shared pieces of the numba.cuda kernels.

Importing this module imports ``numba.cuda``; the backend module makes sure the
simulator switch (``NUMBA_ENABLE_CUDASIM``) is set first when backend ``sim`` is chosen.

* ``DF`` -- the field functions of :mod:`kernels.field` compiled as CUDA device functions
  (the same source the host kernels use through ``field.HOST``).
* ``kernel(*signatures)`` -- decorator for every device kernel: compiles it with
  ``cuda.jit`` (lazily, once per signature, at module scope) and records the signatures
  so that :mod:`kernels.ptx_check` can compile every kernel to PTX for sm_90 in CI.
"""
from __future__ import annotations

from numba import cuda

from . import field

DF = field.build(cuda.jit(device=True, inline="always"))

#: (qualified name, python function, signatures) for every device kernel.
KERNELS: list[tuple[str, object, tuple]] = []

def kernel(*signatures):
    """Declare a device kernel; ``signatures`` are numba signatures used for the PTX check."""
    def deco(fn):
        KERNELS.append((f"{fn.__module__}.{fn.__qualname__}", fn, signatures))
        return cuda.jit(fn)
    return deco


def grid_1d(n: int, block: int = 256) -> tuple[int, int]:
    """Launch configuration covering ``n`` threads (at least one block)."""
    return max(1, (n + block - 1) // block), block


def is_simulator() -> bool:
    import os
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
