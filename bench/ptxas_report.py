#!/usr/bin/env python3
"""Registers and spills per device kernel: PTX for sm_90 (numba-cuda, no GPU), then
``ptxas -v`` (the nvidia-cuda-nvcc wheel's), one table row per kernel and signature.

    PYTHONPATH=. python3 bench/ptxas_report.py                    # every registered kernel
    PYTHONPATH=. python3 bench/ptxas_report.py --match quotient_  # the generated quotients
    PYTHONPATH=. python3 bench/ptxas_report.py --json out.json

Columns: NVVM seconds (numba -> PTX), ptxas seconds, registers, spill stores/loads
(bytes), stack frame (bytes).  The CUDA simulator must be off (it is unset here).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--match", help="only kernels whose name matches this regex")
    ap.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args(argv)
    from numba import cuda
    from steadfast.kernels import ptx_check as pc
    pc.fake_sm90()
    exe = pc.ptxas_path()
    if exe is None:
        print("ptxas_report: ptxas not found (pip install nvidia-cuda-nvcc or set PTXAS)")
        return 2
    cc = tuple(int(c) for c in args.arch.split("_")[1])
    rows = []
    pat = re.compile(args.match) if args.match else None
    print(f"{'kernel':<58} {'nvvm s':>7} {'ptxas s':>7} {'regs':>5} {'spill st':>8} "
          f"{'spill ld':>8} {'stack':>6}", flush=True)
    for qualname, fn, sigs in pc.registered_kernels():
        short = qualname.replace("steadfast.kernels.", "")
        if pat and not pat.search(short):
            continue
        for i, sig in enumerate(sigs):
            name = short + (f"#{i}" if len(sigs) > 1 else "")
            t0 = time.perf_counter()
            try:
                ptx, _ = cuda.compile_ptx(fn, sig, cc=cc)
                nvvm = time.perf_counter() - t0
                r = pc.ptxas(ptx, args.arch, exe)
            except Exception as exc:  # noqa: BLE001 - report it, go on
                print(f"{name:<58} FAILED {type(exc).__name__}: {str(exc)[:80]}", flush=True)
                rows.append(dict(kernel=name, error=f"{type(exc).__name__}: {exc}"[:300]))
                continue
            rows.append(dict(kernel=name, nvvm_s=nvvm, ptxas_s=r["seconds"], **{
                k: r[k] for k in ("registers", "spill_stores", "spill_loads", "stack_frame")}))
            print(f"{name[:58]:<58} {nvvm:7.1f} {r['seconds']:7.1f} {r['registers']:5d} "
                  f"{r['spill_stores']:8d} {r['spill_loads']:8d} {r['stack_frame']:6d}", flush=True)
    ok = [r for r in rows if "error" not in r]
    print(f"ptxas_report: {len(ok)}/{len(rows)} kernels; NVVM {sum(r['nvvm_s'] for r in ok):.1f}s, "
          f"ptxas {sum(r['ptxas_s'] for r in ok):.1f}s; "
          f"{sum(r['spill_stores'] > 0 for r in ok)} spill")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
