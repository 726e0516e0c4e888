"""RV32IM proofs: committed cells per cycle per table, trace-building time and (with
--prove) whole host proofs, on guests/bin/bench.elf's mix (guests/models.py bench_input:
per iteration 8 ALU units, 4 memory units, 2 mul/div units, 1 Poseidon2 call).

    .venv/bin/python bench/rv32_cells.py 14 16 18 20            # cells, trace building
    .venv/bin/python bench/rv32_cells.py 14 16 --prove          # + prove and verify
    .venv/bin/python bench/rv32_cells.py 16 --mix 8,4,0,0       # another mix (alu,mem,mul,p2)
    .venv/bin/python bench/rv32_cells.py 20 --prove --bytes     # + where the proof's bytes go
    .venv/bin/python bench/rv32_cells.py 20 --prove --slots cells   # the fewest-cells slots

Cells = rows x (main + 4 aux EF columns + 4 quotient parts) per table (the committed
base-field cells per unit of blowup; rv32/traces.py committed_cells), divided by the
execution's cycles.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "guests"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("log_cycles", type=int, nargs="+")
    ap.add_argument("--mix", default="8,4,2,1", help="alu,mem,mul,p2 units per iteration")
    ap.add_argument("--prove", action="store_true", help="also prove (default parameters)")
    ap.add_argument("--log-blowup", type=int, default=2)
    ap.add_argument("--bytes", action="store_true",
                    help="with --prove: the proof's bytes per table (rows, nodes, OOD) and FRI")
    ap.add_argument("--slots", default="size", choices=("size", "cells", "split"),
                    help="build_traces' slot objective (default: the smallest proof, the "
                         "18 tables; split: docs/rv32.md \"Split chips\")")
    args = ap.parse_args(argv)
    import models
    from steadfast import rv32
    from steadfast.rv32.statement import verify_execution
    from steadfast.rv32.traces import build_traces
    alu, mem, mul, p2 = (int(x) for x in args.mix.split(","))
    prog = rv32.load_elf(ROOT / "guests" / "bin" / "bench.elf")
    limit = rv32.MAX_CYCLES_CEILING
    for k in args.log_cycles:
        data, _ = models.bench_input(1 << k, alu, mem, mul, p2)
        t = time.perf_counter()
        ex = rv32.execute(prog, data, max_cycles=limit, record=True)
        t_exec = time.perf_counter() - t
        t, c = time.perf_counter(), time.process_time()
        tr = build_traces(prog, ex, max_cycles=limit, log_blowup=args.log_blowup,
                          slot_objective=args.slots)
        t_build, c_build = time.perf_counter() - t, time.process_time() - c
        print(f"\n== 2^{k}: {ex.cycles:,} cycles, mix {args.mix}; execute {t_exec:.2f} s, "
              f"build_traces {t_build:.2f} s ({c_build:.2f} CPU s); load "
              f"{os.getloadavg()[0]:.1f}")
        print(tr.report())
        if args.prove:
            from steadfast.prover.core.prove import prove
            from steadfast.verifier.proof_format import Params
            params = Params(log_blowup=args.log_blowup)
            t, c = time.perf_counter(), time.process_time()
            proof = prove(tr.traces, tr.airs, tr.table_public_values, params, check=False)
            t_prove, c_prove = time.perf_counter() - t, time.process_time() - c
            t = time.perf_counter()
            claim, res = verify_execution(proof, prog, data, limit)
            t_ver = time.perf_counter() - t
            print(f"prove {t_prove:.1f} s ({c_prove:.1f} CPU s): {ex.cycles / t_prove:,.0f} "
                  f"cycles/s (+ build {ex.cycles / (t_prove + t_build):,.0f}); proof "
                  f"{len(proof) / 1024:.0f} KB, {res.security.bits} bits; verify {t_ver:.2f} s; "
                  f"load {os.getloadavg()[0]:.1f}")
            if args.bytes:
                print(proof_bytes(proof, tr))
    return 0


def proof_bytes(proof: bytes, tr) -> str:
    """Where a proof's bytes go (docs/protocol.md section 5): per table the opened rows
    (main, aux, parts), the OOD values, the section; the three mixed trees' multiproof
    nodes (format 6: one tree per kind for all tables); then the FRI's leaf values and
    nodes; and the model's estimate (rv32.tables opening_bytes) of a table's rows."""
    from steadfast.rv32.tables import opening_bytes
    from steadfast.verifier.proof_format import decode
    p = decode(proof)
    kb = lambda *a: sum(x.size for x in a) * 4 / 1024
    lines = [f"{'table':<10} {'log_n':>5} {'d':>3} {'rows KB':>8} {'nodes KB':>8} {'ood KB':>6} "
             f"{'total KB':>8} {'model KB':>8}"]
    tot = [0.0, 0.0, 0.0, 0.0]
    for name, air, t in zip(tr.names, tr.airs, p.tables):
        rows = kb(t.main_rows, t.aux_rows, t.parts_rows)
        nodes = 0.0                       # (the mixed trees' nodes: the commitments line)
        ood = kb(t.ood_main, t.ood_main_next, t.ood_aux, t.ood_aux_next, t.ood_parts)
        model = opening_bytes(air, 1 << t.log_n, p.params.log_blowup, p.params.num_queries) / 1024
        for i, v in enumerate((rows, nodes, ood, len(t.raw) / 1024)):
            tot[i] += v
        lines.append(f"{name:<10} {t.log_n:>5} {t.main_rows.shape[0]:>3} {rows:>8.1f} "
                     f"{nodes:>8.1f} {ood:>6.1f} {len(t.raw) / 1024:>8.1f} {model:>8.1f}")
    lines.append(f"{'tables':<10} {'':>5} {'':>3} {tot[0]:>8.1f} {tot[1]:>8.1f} {tot[2]:>6.1f} "
                 f"{tot[3]:>8.1f}")
    c = p.commits
    lines.append(f"{'mixed trees':<10} nodes KB main {kb(c.main_nodes):.1f}, aux {kb(c.aux_nodes):.1f}, "
                 f"parts {kb(c.parts_nodes):.1f} (caps {kb(c.main_cap, c.aux_cap, c.parts_cap):.1f})")
    f = p.fri
    lines.append(f"fri: {len(f.caps)} layers, values {kb(*f.values):.1f} KB, nodes "
                 f"{kb(*f.nodes):.1f} KB, final {kb(f.final_poly):.1f} KB; proof "
                 f"{len(proof) / 1024:.1f} KB")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
