#!/usr/bin/env python3
"""Cold vs warm kernel compile on a machine without a GPU, through the real kernel cache.

    PYTHONPATH=. python3 bench/compile_cache_bench.py             # the RV32 tables' generated kernels
    PYTHONPATH=. python3 bench/compile_cache_bench.py --all       # + every stage kernel

Runs ``Prover.precompile``'s compile step (kernels.constraint_device.precompile) in two
fresh processes sharing one empty kernel cache (``PROVER_KERNEL_CACHE``): the first is
cold (code generation + NVVM -> PTX, stored by numba-cuda's disk cache), the second warm
(generated sources and compiled kernels loaded from the cache).  With no driver, the child
answers compute capability 9.0 and stops each kernel at PTX (``bind`` = PTX only); on a
GPU the cache also holds the cubin, so a warm start also skips ptxas (the ``ptxas s``
column of bench/ptxas_report.py, reported here for the same kernels when ``--ptxas``).
The AIRs: the 18 RV32IM tables of a program proof (rv32.tables.table_airs of
guests/bin/hello.elf's image at log_blowup 2, k = 1) -- a block's per-transaction tables
are these in a bus namespace.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _child(all_kernels: bool, ptxas: bool) -> None:
    import types
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    t_import = time.perf_counter()
    from steadfast.kernels import ptx_check as pc
    pc.fake_sm90()
    import numba.cuda.codegen as cg
    import numba.cuda.dispatcher as disp
    from numba.cuda.cudadrv import devices, runtime
    ctx = types.SimpleNamespace(device=types.SimpleNamespace(compute_capability=(9, 0), id=0))
    devices.get_context = cg.devices.get_context = lambda *a, **k: ctx
    runtime.runtime.get_version = lambda: (13, 0)
    disp._Kernel.bind = lambda self: self._codelibrary.get_asm_str((9, 0))   # PTX, no cubin
    from steadfast.kernels import constraint_device as cd, kernel_cache as kc
    from steadfast.rv32.chips.program import image_of
    from steadfast.rv32.elf import load_elf
    from steadfast.rv32.tables import table_airs
    image = image_of(load_elf(os.path.join(ROOT, "guests", "bin", "hello.elf")))
    airs = table_airs(image, b"abc", b"hello from rv32im\ncba", 2)
    t0 = time.perf_counter()
    if all_kernels:
        rows = cd.precompile(airs)
    else:                                       # the generated kernels only
        rows = cd.precompile(airs, compile=False)
        from steadfast.kernels import devicelib
        sigs = {q: s for q, _, s in devicelib.KERNELS}
        for air in airs:
            gk = cd.generated(air)
            for k in (gk.quotient, gk.logup):
                if k is None:
                    continue
                q = f"steadfast.kernels.constraint_device.generated.{k.py_func.__name__}"
                for sig in sigs[q]:
                    h, m = cd._counts(k)
                    t = time.perf_counter()
                    kern = k.compile(sig)
                    h2, m2 = cd._counts(k)
                    rows.append(dict(name=q.split(".")[-1], seconds=time.perf_counter() - t,
                                     how="compiled" if m2 > m else "cache" if h2 > h else "memory"))
                    if ptxas and m2 > m:       # what a GPU's cold start adds (cubin)
                        rows[-1]["ptxas_s"] = pc.ptxas(kern.inspect_asm((9, 0)))["seconds"]
    total = time.perf_counter() - t0
    print(json.dumps(dict(total_s=total, import_s=t0 - t_import, rows=rows, stats=kc.STATS)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="also every stage kernel")
    ap.add_argument("--ptxas", action="store_true", help="time ptxas on the cold run's PTX")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.all, args.ptxas)
        return 0
    out = {}
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, PYTHONPATH=ROOT, PROVER_KERNEL_CACHE=d)
        env.pop("NUMBA_ENABLE_CUDASIM", None)
        for run in ("cold", "warm"):
            t0 = time.perf_counter()
            cmd = [sys.executable, os.path.abspath(__file__), "--child"] + \
                ["--all"] * args.all + ["--ptxas"] * (args.ptxas and run == "cold")
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if proc.returncode:
                print(proc.stderr[-3000:])
                return 1
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            res["process_s"] = time.perf_counter() - t0
            out[run] = res
            how = {}
            for r in res["rows"]:
                how[r["how"]] = how.get(r["how"], 0) + 1
            print(f"{run}: process {res['process_s']:.1f}s, import {res['import_s']:.1f}s, "
                  f"precompile {res['total_s']:.1f}s ({', '.join(f'{n} {h}' for h, n in how.items())})"
                  + (f"; ptxas on the PTX {sum(r.get('ptxas_s', 0) for r in res['rows']):.1f}s"
                     if any('ptxas_s' in r for r in res['rows']) else ""), flush=True)
    c, w = out["cold"]["total_s"], out["warm"]["total_s"]
    print(f"compile_cache_bench: cold {c:.1f}s, warm {w:.1f}s (x{c / max(w, 1e-9):.1f}); "
          f"load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
