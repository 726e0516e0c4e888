#!/usr/bin/env python3
"""Registers and spills per device kernel: PTX for sm_90 (numba-cuda, no GPU), then
``ptxas -v`` (the nvidia-cuda-nvcc wheel's), one table row per kernel and signature.

    PYTHONPATH=. python3 bench/ptxas_report.py                    # every registered kernel
    PYTHONPATH=. python3 bench/ptxas_report.py --match quotient_  # the generated quotients
    PYTHONPATH=. python3 bench/ptxas_report.py --json out.json
    PYTHONPATH=. python3 bench/ptxas_report.py --gate               # the resource gate
    PYTHONPATH=. python3 bench/ptxas_report.py --gate --skip REGEX  # ... leaving some out
    PYTHONPATH=. python3 bench/ptxas_report.py --gate --rv32 all    # + the RV32IM tables'
    PYTHONPATH=. python3 bench/ptxas_report.py --gate --rv32 p2call,ecall --rv32-blowups 1

Columns: NVVM seconds (numba -> PTX), ptxas seconds, registers, spill stores/loads
(bytes), stack frame (bytes), the largest launch block (``devicelib.launch_block``).  The
CUDA simulator must be off (it is unset here).

The registered kernels are the device modules' and those of kernels/constraint_device.py's
example AIRs (the protocol core registers no machine's tables); ``--rv32 all`` (or a
comma-separated list of rv32/tables.py names) adds the RV32IM tables' generated kernels at
k = 1 (the statement's tables built for guests/bin/hello.elf) at each of ``--rv32-blowups``
(default 1,2: LogUp batched at degree 3 and 5).

``--gate``: exit status 1 when any kernel fails the resource gate -- registers x largest
launch block > 65,536 (the register file of one SM: such a block cannot launch at all),
spill stores or loads > 512 B, or a stack frame > 1 KiB -- and one line per failure.
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


#: the resource gate (--gate)
GATE = {"regs_x_block": 65536, "spill": 512, "stack": 1024}


def gate_failures(row: dict) -> list:
    """Why ``row`` (registers, spills, stack frame, block) fails the gate; [] if it passes."""
    why = []
    if row["registers"] * row["block"] > GATE["regs_x_block"]:
        why.append(f"{row['registers']} registers x {row['block']} threads = "
                   f"{row['registers'] * row['block']:,} > {GATE['regs_x_block']:,}")
    spill = max(row["spill_stores"], row["spill_loads"])
    if spill > GATE["spill"]:
        why.append(f"{spill} B of spills > {GATE['spill']} B")
    if row["stack_frame"] > GATE["stack"]:
        why.append(f"{row['stack_frame']} B stack frame > {GATE['stack']} B")
    return why


def register_rv32(spec: str, blowups) -> list:
    """Generate (and so register) the kernels of the RV32IM tables ``spec`` names ('all'
    or comma-separated rv32/tables.py names) at each log_blowup -> their AIRs."""
    from steadfast.kernels.constraint_device import register_example_airs
    from steadfast.rv32.chips.program import image_of
    from steadfast.rv32.elf import load_elf
    from steadfast.rv32.tables import TABLES, table_airs
    names = list(TABLES) if spec == "all" else [n.strip() for n in spec.split(",") if n.strip()]
    bad = [n for n in names if n not in TABLES]
    if bad:
        raise SystemExit(f"ptxas_report: --rv32: no RV32 table {', '.join(bad)} "
                         f"(tables: {', '.join(TABLES)})")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    image = image_of(load_elf(os.path.join(root, "guests", "bin", "hello.elf")))
    airs = []
    for lb in blowups:
        by_name = dict(zip(TABLES, table_airs(image, b"abc", b"hello from rv32im\ncba", lb)))
        airs += [by_name[n] for n in names]
    register_example_airs(extra=airs)
    return airs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--match", help="only kernels whose name matches this regex")
    ap.add_argument("--skip", help="leave out kernels whose name matches this regex")
    ap.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--gate", action="store_true",
                    help=f"fail on registers x block > {GATE['regs_x_block']:,}, spills > "
                         f"{GATE['spill']} B or a stack frame > {GATE['stack']} B")
    ap.add_argument("--rv32", metavar="TABLES",
                    help="also the RV32IM tables' kernels: 'all' or names, comma-separated")
    ap.add_argument("--rv32-blowups", default="1,2", metavar="LB,..",
                    help="the log_blowups of the --rv32 tables (default 1,2)")
    args = ap.parse_args(argv)
    if args.rv32:
        register_rv32(args.rv32, [int(x) for x in args.rv32_blowups.split(",")])
    from numba import cuda
    from steadfast.kernels import devicelib
    from steadfast.kernels import ptx_check as pc
    pc.fake_sm90()
    exe = pc.ptxas_path()
    if exe is None:
        print("ptxas_report: ptxas not found (pip install nvidia-cuda-nvcc or set PTXAS)")
        return 2
    cc = tuple(int(c) for c in args.arch.split("_")[1])
    rows = []
    pat = re.compile(args.match) if args.match else None
    skip = re.compile(args.skip) if args.skip else None
    print(f"{'kernel':<58} {'nvvm s':>7} {'ptxas s':>7} {'regs':>5} {'spill st':>8} "
          f"{'spill ld':>8} {'stack':>6} {'block':>5}", flush=True)
    for qualname, fn, sigs in pc.registered_kernels():
        short = qualname.replace("steadfast.kernels.", "")
        if (pat and not pat.search(short)) or (skip and skip.search(short)):
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
            row = dict(kernel=name, nvvm_s=nvvm, ptxas_s=r["seconds"],
                       block=devicelib.launch_block(qualname), **{
                           k: r[k] for k in ("registers", "spill_stores", "spill_loads",
                                             "stack_frame")})
            row["gate"] = gate_failures(row)
            rows.append(row)
            print(f"{name[:58]:<58} {nvvm:7.1f} {r['seconds']:7.1f} {r['registers']:5d} "
                  f"{r['spill_stores']:8d} {r['spill_loads']:8d} {r['stack_frame']:6d} "
                  f"{row['block']:5d}" + ("  GATE: " + "; ".join(row["gate"]) if row["gate"] else ""),
                  flush=True)
    ok = [r for r in rows if "error" not in r]
    failed = [r for r in ok if r["gate"]]
    worst = max(ok, key=lambda r: r["registers"] * r["block"], default=None)
    print(f"ptxas_report: {len(ok)}/{len(rows)} kernels; NVVM {sum(r['nvvm_s'] for r in ok):.1f}s, "
          f"ptxas {sum(r['ptxas_s'] for r in ok):.1f}s; "
          f"{sum(r['spill_stores'] > 0 for r in ok)} spill; max spill "
          f"{max((max(r['spill_stores'], r['spill_loads']) for r in ok), default=0)} B, max stack "
          f"{max((r['stack_frame'] for r in ok), default=0)} B, max registers x block "
          + (f"{worst['registers'] * worst['block']:,} ({worst['kernel']})" if worst else "-"))
    if args.gate:
        for r in failed:
            print(f"ptxas gate: FAIL {r['kernel']}: {'; '.join(r['gate'])}")
        print(f"ptxas gate: {'FAILED' if failed or len(ok) != len(rows) else 'passed'} "
              f"({len(ok) - len(failed)}/{len(rows)} kernels within registers x block <= "
              f"{GATE['regs_x_block']:,}, spills <= {GATE['spill']} B, stack <= {GATE['stack']} B)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    if len(ok) != len(rows):
        return 1
    return 1 if args.gate and failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
