"""Compile every registered device kernel to PTX for sm_90, without a GPU.

Run as ``python -m steadfast.kernels.ptx_check`` in a process where the CUDA simulator is *off*.
Needs the ``nvidia-cuda-nvcc`` / ``nvidia-cuda-nvrtc`` wheels (the ``test`` extra).
numba-cuda asks the current device for its compute capability when it compiles a
device function called from a kernel; with no driver we answer sm_90 ourselves, which
is the target we compile for anyway.  Exit status 1 if any kernel fails to compile.
"""
from __future__ import annotations

import importlib
import os
import sys
import time
import types

DEVICE_MODULES = (
    "steadfast.kernels.field_device",
    "steadfast.kernels.layout_device",
    "steadfast.kernels.ntt_device",
    "steadfast.kernels.poseidon2_device",
    "steadfast.kernels.merkle_device",
    "steadfast.kernels.stage_device",
    "steadfast.kernels.constraint_device",
)


def main(argv=None) -> int:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        print("ptx_check: the CUDA simulator is on; unset NUMBA_ENABLE_CUDASIM", file=sys.stderr)
        return 2
    import numba.cuda.dispatcher as dispatcher
    from numba import cuda

    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))
    from steadfast.kernels import devicelib

    modules = list(argv) if argv else list(DEVICE_MODULES)
    for name in modules:
        mod = importlib.import_module(name)
        hook = getattr(mod, "ptx_examples", None)   # e.g. kernels generated from example AIRs
        if hook is not None:
            hook()
    failures = 0
    count = 0
    for qualname, fn, sigs in devicelib.KERNELS:
        for sig in sigs:
            t0 = time.perf_counter()
            try:
                ptx, _ = cuda.compile_ptx(fn, sig, cc=(9, 0))
                ok = ".entry" in ptx or ".visible" in ptx
            except Exception as exc:  # report every kernel, then fail
                ok = False
                print(f"FAIL {qualname} {sig}: {type(exc).__name__}: {exc}".splitlines()[0])
            count += 1
            if ok:
                print(f"ok   {qualname} {sig} ({time.perf_counter() - t0:.1f}s)")
            else:
                failures += 1
    print(f"ptx_check: {count - failures}/{count} kernels compiled for sm_90")
    return 1 if failures or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
