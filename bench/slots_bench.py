"""POSEIDON2 slots (docs/vm.md "Slots"): committed cells with one permutation per row
(k = 1) against the k that build_traces chooses, from the traces alone, and optionally a
proof's CPU seconds at both.

    PYTHONPATH=. python bench/slots_bench.py [--sizes 12 14 16 18] [--hash-share 0.25]
                                             [--prove 14] [--reps 2] [--json out.json]
                                             [--log-blowup 2]

Cells: bench/block_bench.py ``cell_accounting`` (rows x (main + 4 aux + 4 parts) per
table, trace domain; POSEIDON2's real rows are ceil(perms / k)); only POSEIDON2's k is
forced, the other slotted tables take build_traces' choice on both sides.  ``--prove N``: the block
of 2^N cycles proved with the default parameters on the host backend, k = 1 and the chosen
k alternating, each proof in a fresh subprocess after a warm-up proof of a tiny block;
CPU seconds = the process's user + system time during the proof (steadier than wall time
on a shared machine).  The machine's load (uptime) is printed with every figure.
``--log-blowup``: the proofs' (default 2); the AIRs, hence the cells and the slot choices,
depend on it (proof format 5's LogUp batching degree).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cells(log_cycles: int, share: float, log_blowup: int = 2) -> dict:
    from bench.block_bench import cell_accounting
    from steadfast.vm.interpreter import execute
    from steadfast.vm.programs import sized_block
    from steadfast.vm.traces import build_traces
    rec = execute(sized_block(log_cycles, share))
    perms = int(rec.hash_in.shape[0])
    out = {"log_cycles": log_cycles, "cycles": int(rec.cycles), "perms": perms}
    for label, slots in (("k1", {"poseidon2": 1}), ("chosen", None)):
        bt = build_traces(rec, slots=slots, log_blowup=log_blowup)
        k = bt.slots["poseidon2"]
        tables = [{"name": a.name, "rows": int(t.shape[0]), "main_width": a.main_width,
                   "aux_width": a.aux_width, "parts": a.num_parts}
                  for a, t in zip(bt.airs, bt.traces)]
        real = {"CPU": int(rec.cycles), "POSEIDON2": -(-perms // k)}
        acc = cell_accounting(tables, real, int(rec.cycles))
        out[label] = {"k": k, "cells": acc["cells"], "cells_per_cycle": acc["cells_per_cycle"],
                      "poseidon2_rows": acc["tables"]["poseidon2"]["rows"],
                      "poseidon2_cells": acc["tables"]["poseidon2"]["cells"]}
    return out


_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from steadfast.prover.api import Prover, ProverConfig, verify
from steadfast.vm.interpreter import execute
from steadfast.vm.programs import sized_block
from steadfast.vm.traces import build_traces
from tests.vm_blocks import one_tx_block
log_cycles, share, k, lb = int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
prover = Prover(ProverConfig(backend="host", log_blowup=lb))
prover.prove_block(one_tx_block())                     # load the compiled kernels
rec = execute(sized_block(log_cycles, share))
bt = build_traces(rec, slots=None if k == "chosen" else {"poseidon2": int(k)}, log_blowup=lb)
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
c0, t0 = cpu(), time.perf_counter()
proof = prover.prove_tables(bt.traces, bt.public_values, rec.rom.rows)
c1, t1 = cpu(), time.perf_counter()
verify(proof, min_security_bits=0)
print(json.dumps({"k": bt.slots["poseidon2"], "cpu_s": c1 - c0, "wall_s": t1 - t0,
                  "proof_bytes": len(proof.proof)}))
"""


def prove_time(log_cycles: int, share: float, k: str, log_blowup: int = 2) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, ROOT, str(log_cycles), str(share), k,
                           str(log_blowup)],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]), load=_load())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[12, 14, 16, 18])
    ap.add_argument("--hash-share", type=float, default=0.25)
    ap.add_argument("--prove", type=int, default=None, help="also time proofs at 2^N cycles")
    ap.add_argument("--reps", type=int, default=2, help="alternating proof pairs")
    ap.add_argument("--json", default=None)
    ap.add_argument("--log-blowup", type=int, default=2)
    args = ap.parse_args(argv)
    res = {"cells": [], "proofs": []}
    print(f"load {_load()}")
    print(f"{'log':>3} {'cycles':>8} {'perms':>7} | {'k':>2} {'p2 rows':>8} {'p2 cells':>11} "
          f"{'cells':>11} {'c/cyc':>7} | {'k':>2} {'p2 rows':>8} {'p2 cells':>11} {'cells':>11} "
          f"{'c/cyc':>7} | {'saved':>6}")
    for n in args.sizes:
        r = cells(n, args.hash_share, args.log_blowup)
        a, b = r["k1"], r["chosen"]
        print(f"{n:>3} {r['cycles']:>8} {r['perms']:>7} | {a['k']:>2} {a['poseidon2_rows']:>8} "
              f"{a['poseidon2_cells']:>11,} {a['cells']:>11,} {a['cells_per_cycle']:>7.1f} | "
              f"{b['k']:>2} {b['poseidon2_rows']:>8} {b['poseidon2_cells']:>11,} "
              f"{b['cells']:>11,} {b['cells_per_cycle']:>7.1f} | {1 - b['cells'] / a['cells']:>6.1%}")
        res["cells"].append(r)
    if args.prove is not None:
        for rep in range(args.reps):
            for k in (("1", "chosen") if rep % 2 == 0 else ("chosen", "1")):
                p = dict(prove_time(args.prove, args.hash_share, k, args.log_blowup), rep=rep,
                         label=k)
                print(f"prove 2^{args.prove} k={p['k']} ({k}): {p['cpu_s']:.1f} CPU-s, "
                      f"{p['wall_s']:.1f} s wall, proof {p['proof_bytes']:,} B, load {p['load']}")
                res["proofs"].append(p)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
