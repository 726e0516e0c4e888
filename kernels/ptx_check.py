"""Compile every registered device kernel to PTX for sm_90, without a GPU.

Run as ``python -m steadfast.kernels.ptx_check`` in a process where the CUDA simulator is *off*.
Needs the ``nvidia-cuda-nvcc`` / ``nvidia-cuda-nvrtc`` wheels (the ``test`` extra).
numba-cuda asks the current device for its compute capability when it compiles a
device function called from a kernel; with no driver we answer sm_90 ourselves, which
is the target we compile for anyway.  Exit status 1 if any kernel fails to compile.

:func:`registered_kernels` (the same list) and :func:`ptxas` are shared with
``bench/ptxas_report.py`` (registers and spills per kernel from ``ptxas -v``).
"""
from __future__ import annotations

import glob
import importlib
import os
import re
import subprocess
import sys
import tempfile
import time
import types

#: every module that declares device kernels at import (``devicelib.kernel`` or a bare
#: ``cuda.jit``); tests/test_ptx.py scans the sources and fails on one missing here.  The
#: per-AIR kernels of kernels/constraint_codegen.py are generated on demand and reach the
#: check through constraint_device's ``ptx_examples`` hook (and rv32/ptx_examples.py).
DEVICE_MODULES = (
    "steadfast.kernels.field_device",
    "steadfast.kernels.layout_device",
    "steadfast.kernels.ntt_device",
    "steadfast.kernels.poseidon2_device",
    "steadfast.kernels.merkle_device",
    "steadfast.kernels.stage_device",
    "steadfast.kernels.fri_device",
    "steadfast.kernels.logup_device",
    "steadfast.kernels.constraint_device",
)


def fake_sm90() -> None:
    """Answer compute capability 9.0 for numba-cuda's "current device" (no driver here)."""
    import numba.cuda.dispatcher as dispatcher
    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))


def registered_kernels(modules=None) -> list:
    """Import the device modules (running their ``ptx_examples`` hooks, e.g. the kernels
    generated from the example AIRs) -> devicelib.KERNELS: (qualname, fn, signatures)."""
    from . import devicelib
    for name in (list(modules) if modules else list(DEVICE_MODULES)):
        mod = importlib.import_module(name)
        hook = getattr(mod, "ptx_examples", None)
        if hook is not None:
            hook()
    return list(devicelib.KERNELS)


def ptxas_path() -> str | None:
    """The ptxas of the nvidia-cuda-nvcc wheel (or $PTXAS, or one on PATH)."""
    if os.environ.get("PTXAS"):
        return os.environ["PTXAS"]
    import shutil
    for site in sys.path:
        for p in glob.glob(os.path.join(site, "nvidia", "*", "bin", "ptxas")) + \
                glob.glob(os.path.join(site, "nvidia", "cuda_nvcc", "bin", "ptxas")):
            if os.access(p, os.X_OK):
                return p
    return shutil.which("ptxas")


_USED = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_STACK = re.compile(r"(\d+) bytes stack frame")


def ptxas(ptx: str, arch: str = "sm_90", exe: str | None = None) -> dict:
    """Assemble ``ptx`` with ``ptxas -v`` -> {registers, spill_stores, spill_loads,
    stack_frame, seconds} (the largest figures over the module's entries)."""
    exe = exe or ptxas_path()
    if exe is None:
        raise FileNotFoundError("ptxas not found (install nvidia-cuda-nvcc or set PTXAS)")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as fh:
            fh.write(ptx)
        t0 = time.perf_counter()
        proc = subprocess.run([exe, "-v", f"-arch={arch}", src, "-o", os.path.join(d, "k.cubin")],
                              capture_output=True, text=True)
        dt = time.perf_counter() - t0
    out = proc.stdout + proc.stderr
    if proc.returncode:
        raise RuntimeError(f"ptxas failed: {out[-2000:]}")
    regs = [int(x) for x in _USED.findall(out)]
    sp = [(int(a), int(b)) for a, b in _SPILL.findall(out)]
    st = [int(x) for x in _STACK.findall(out)]
    return dict(registers=max(regs, default=0), spill_stores=max((a for a, _ in sp), default=0),
                spill_loads=max((b for _, b in sp), default=0), stack_frame=max(st, default=0),
                seconds=dt)


def main(argv=None) -> int:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        print("ptx_check: the CUDA simulator is on; unset NUMBA_ENABLE_CUDASIM", file=sys.stderr)
        return 2
    from numba import cuda

    fake_sm90()
    failures = 0
    count = 0
    for qualname, fn, sigs in registered_kernels(argv or None):
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
