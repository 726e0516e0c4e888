"""Committed cells per cycle of block proofs, from the traces alone (no proof).

    PYTHONPATH=. python bench/cells_bench.py --sizes 12 14 16 18 20 [--hash-share 0.25]
                                             [--log-blowup 2]

For each size it executes ``sized_block(k, share)`` (the bench block of bench/block_bench.py
and bench/make_block.py), builds the traces the prover would commit (vm/traces.py: the
table shapes, slots included) and counts the committed cells per table on the trace
domain: main columns, aux (4 base columns per LogUp EF column) and quotient parts (4 per
part), times the table's rows.  It also reports the padding: the share of committed cells
that hold no real row or slot (CPU rows past the last cycle, MEMORY slots past the last
access, POSEIDON2 slots past the last permutation).  Cells on the LDE domain are these
times 2^log_blowup for every table alike, so cells per cycle compare across blowups --
but the AIRs depend on log_blowup (proof format 5: the LogUp batching degree, hence the
aux and quotient-part columns, and the slot choices that follow; docs/protocol.md
"LogUp"): ``--log-blowup`` (default 2, the default parameters') picks the proof's.

This is the "cells per cycle" figure of issue #12 (docs/benchmarks.md); it takes seconds
per size, against minutes for a proof.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def count(k: int, share: float, seed: int = 0, log_blowup: int = 2) -> dict:
    from steadfast.vm.interpreter import execute
    from steadfast.vm.programs import sized_block
    from steadfast.vm.traces import build_traces, memory_accesses
    t0 = time.perf_counter()
    rec = execute(sized_block(k, share, seed=seed))
    bt = build_traces(rec, log_blowup=log_blowup)
    real = {"cpu": int(rec.cycles), "memory": int(memory_accesses(bt.traces[0]).shape[0]),
            "poseidon2": int(rec.hash_in.shape[0])}
    slots = dict(getattr(bt, "slots", {}) or {})
    tables, total, padded = {}, 0, 0
    for air, trace in zip(bt.airs, bt.traces):
        n = int(trace.shape[0])
        kk = int(slots.get(air.name, 1))
        main, aux, parts = n * air.main_width, n * 4 * air.aux_width, n * 4 * air.num_parts
        cells = main + aux + parts
        cap = n * kk
        used = min(cap, real.get(air.name, cap))
        tables[air.name] = {"rows": n, "slots": kk, "real": used, "main": main, "aux": aux,
                            "parts": parts, "cells": cells,
                            "cells_per_row": air.main_width + 4 * air.aux_width + 4 * air.num_parts}
        total += cells
        padded += cells * (cap - used) / cap
    return {"k": k, "hash_share": share, "log_blowup": log_blowup, "cycles": int(rec.cycles),
            "cells": total,
            "cells_per_cycle": total / rec.cycles, "padding_share": padded / total,
            "tables": tables, "seconds": time.perf_counter() - t0}


def render(results: list) -> str:
    lines = ["| k | cycles | committed cells | cells/cycle | padding | "
             + " | ".join(["CPU", "PROGRAM", "MEMORY", "RANGE", "POSEIDON2"]) + " |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        cols = []
        for name in ("cpu", "program", "memory", "range", "poseidon2"):
            t = r["tables"][name]
            s = f" ×{t['slots']}" if t["slots"] > 1 else ""
            cols.append(f"{t['rows']:,} rows{s} ({t['real']:,} real) × {t['cells_per_row']} "
                        f"= {t['cells'] / 1e6:.2f} M")
        lines.append(f"| {r['k']} | {r['cycles']:,} | {r['cells'] / 1e6:.2f} M | "
                     f"{r['cells_per_cycle']:.0f} | {100 * r['padding_share']:.1f} % | "
                     + " | ".join(cols) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[12, 14, 16, 18])
    ap.add_argument("--hash-share", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-blowup", type=int, default=2,
                    help="the proof's log_blowup (the AIRs' LogUp batching depends on it)")
    ap.add_argument("--json", help="write the results as JSON")
    args = ap.parse_args(argv)
    results = []
    for k in args.sizes:
        r = count(k, args.hash_share, args.seed, args.log_blowup)
        results.append(r)
        print(f"2^{k}: {r['cells_per_cycle']:.0f} cells/cycle, padding "
              f"{100 * r['padding_share']:.1f} % ({r['seconds']:.1f} s)", file=sys.stderr, flush=True)
    print(render(results))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
