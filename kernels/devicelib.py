"""Shared pieces of the numba.cuda kernels.

Importing this module imports ``numba.cuda``; the backend module makes sure the
simulator switch (``NUMBA_ENABLE_CUDASIM``) is set first when backend ``sim`` is chosen.

* ``DF`` -- the field functions of :mod:`kernels.field` compiled as CUDA device functions
  (the same source the host kernels use through ``field.HOST``).
* ``fetch(dev, stream, out)`` -- a device array's contents on the host, complete on return.
* ``kernel(*signatures)`` -- decorator for every device kernel: compiles it with
  ``cuda.jit`` (lazily, once per signature, at module scope) with numba-cuda's disk cache
  in the steadfast kernel cache (:mod:`kernels.kernel_cache`, ``PROVER_KERNEL_CACHE``; off
  the simulator), and records the signatures so that :mod:`kernels.ptx_check` can compile
  every kernel to PTX for sm_90 in CI and ``Prover.precompile`` ahead of a proof.
"""
from __future__ import annotations

from numba import cuda

from . import field


def is_simulator() -> bool:
    import os
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def device_function(**options):
    """Decorator for every CUDA device function (``cuda.jit(device=True, **options)``).

    Under numba's CUDA simulator a device function that does not touch ``cuda.*`` is
    left a plain Python function.  The simulator gives both the same Python semantics,
    but it wraps each device-function call in a module-wide lock and a swap of the
    module's globals; with one Python thread per simulated GPU thread those locks form
    a convoy with the simulator's polling main thread, and a Poseidon2 kernel of 16
    threads was seen to take many minutes instead of seconds.  Functions that call
    ``cuda.*`` (``syncthreads``, shared arrays) keep the simulator's wrapper.  Off the
    simulator nothing changes: the PTX check and real GPUs compile every function.
    """
    jit = cuda.jit(device=True, **options)

    def deco(fn):
        if is_simulator() and "cuda" not in fn.__code__.co_names:
            return fn
        return jit(fn)
    return deco


DF = field.build(device_function(inline="always"))

#: (qualified name, python function, signatures) for every device kernel.
KERNELS: list[tuple[str, object, tuple]] = []
#: qualified name -> the cuda.jit dispatcher of that kernel (for ``precompile``)
DISPATCHERS: dict[str, object] = {}
#: the largest block (threads) the project launches a kernel with, unless it declares
#: its own (``kernel(..., block=N)``); ``bench/ptxas_report.py --gate`` checks
#: registers x this <= 65,536 and tests/test_launch_audit.py every launch against it
DEFAULT_LAUNCH_BLOCK = 256
#: qualified name -> the largest launch block it declares
LAUNCH_BLOCKS: dict[str, int] = {}


def launch_block(name: str) -> int:
    """The largest block (threads) kernel ``name`` may be launched with."""
    return LAUNCH_BLOCKS.get(name, DEFAULT_LAUNCH_BLOCK)


def kernel(*signatures, block: int | None = None):
    """Declare a device kernel; ``signatures`` are numba signatures -- the PTX check and
    ``Prover.precompile`` compile exactly these, and numba reuses a compiled kernel only
    for a launch whose argument types match one exactly (tests/test_launch_audit.py);
    ``block``: the largest launch block, if not :data:`DEFAULT_LAUNCH_BLOCK`."""
    def deco(fn):
        name = f"{fn.__module__}.{fn.__qualname__}"
        KERNELS.append((name, fn, signatures))
        if block is not None:
            LAUNCH_BLOCKS[name] = int(block)
        disp = cuda.jit(fn)
        if not is_simulator():
            from .kernel_cache import numba_cache
            cache = numba_cache(fn)         # None: disabled or unavailable (no disk cache)
            if cache is not None and hasattr(disp, "_cache"):
                disp._cache = cache
        DISPATCHERS[name] = disp
        return disp
    return deco


def grid_1d(n: int, block: int = 256) -> tuple[int, int]:
    """Launch configuration covering ``n`` threads (at least one block)."""
    return max(1, (n + block - 1) // block), block


def fetch(dev, stream=None, out=None):
    """Copy a device array to the host (into ``out`` when given) and wait for it: the
    copy on a stream is asynchronous, and the caller reads the result next."""
    host = dev.copy_to_host(out, stream=stream or 0) if out is not None \
        else dev.copy_to_host(stream=stream or 0)
    if stream:
        stream.synchronize()
    return host
