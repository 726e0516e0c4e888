"""Committed cells per cycle of block proofs, from the traces alone; with ``--slots``,
POSEIDON2's one permutation per row against the slots the block chooses (and optionally
a proof's CPU seconds at both).

    PYTHONPATH=. python bench/cells_bench.py [--sizes 12 14 16 18] [--hash-share 0.25]
                                             [--seed 1] [--log-blowup 2] [--json out.json]
    PYTHONPATH=. python bench/cells_bench.py --slots [--sizes ...] [--hash-share ...]
                                             [--prove 14] [--reps 2] [--json out.json]

For each size it builds ``bench/make_block.py -k K --seed S --hash-share H``'s block of
RISC-V transactions (``make_block.v2_block``, block format 2; k >= 10), runs every
transaction, builds the tables the prover would commit (rv32/block.py
``build_block_traces``: each transaction's 16 tables, the shared BYTES and POSEIDON2,
slots included) and counts the committed cells per table on the trace domain: main
columns, aux (4 base columns per LogUp EF column) and quotient parts (4 per part), times
the table's rows; the table is summed over the transactions by kind (alu, memory, ...).
It also reports the padding: the share of committed cells that hold no real row or slot
(rows past a table's items, slots past the last item; fixed-height tables count as
full).  Cells on the LDE domain are these times 2^log_blowup for every table alike, so
cells per cycle compare across blowups -- but the AIRs depend on log_blowup (the LogUp
batching degree, hence the aux and quotient-part columns, and the slot choices that
follow; docs/protocol.md "LogUp"): ``--log-blowup`` (default 2, the default parameters')
picks the proof's.  This is the "cells per cycle" figure of issue #12 (docs/benchmarks.md);
it takes seconds per size, against minutes for a proof.

``--slots``: the same count with the shared POSEIDON2 forced to k = 1 and with the k the
block chooses (rv32.tables.choose_slots; the other slotted tables take their choice on
both sides).  ``--prove N``: the block of 2^N cycles proved with the default parameters on
the host backend, k = 1 and the chosen k alternating (``--reps`` pairs), each proof in a
fresh subprocess after a warm-up proof of a tiny block; CPU seconds = the process's user
+ system time during the proof (steadier than wall time on a shared machine).  The
machine's load (uptime) is printed with every figure.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


SHOWN = ("program", "memory", "alu", "load", "store", "bytes", "poseidon2")


def block_of(k: int, share: float, seed: int):
    from bench.make_block import v2_block
    from steadfast.rv32.blockfile import parse_block
    return parse_block(v2_block(k, share, seed)[0])


def traces_of(block, log_blowup: int, p2_slots=None):
    """rv32.block.build_block_traces of ``block`` (POSEIDON2 at ``p2_slots`` if given)."""
    from steadfast.rv32 import block as rblock
    from steadfast.rv32.run import execute
    exs = [execute(t.program, t.input, block.max_cycles, record=True) for t in block.transactions]
    progs = [t.program for t in block.transactions]
    bt = rblock.build_block_traces(progs, exs, block.max_cycles, log_blowup)
    if p2_slots is not None and p2_slots != bt.p2_slots:
        from steadfast.rv32.chips.poseidon2_trace import poseidon2_trace
        import numpy as np
        states = np.concatenate([t.p2_states for t in bt.txs]) if bt.txs else \
            np.zeros((0, 16), np.uint32)
        bt.airs[-1] = rblock.shared_airs(log_blowup, p2_slots)[1]
        bt.traces[-1] = poseidon2_trace(states, p2_slots)
        bt.p2_slots = p2_slots
    return bt


def count(k: int, share: float, seed: int = 1, log_blowup: int = 2, p2_slots=None) -> dict:
    """The committed cells of the 2^k block's tables (``p2_slots``: POSEIDON2's k forced,
    None: the block's choice), per table kind."""
    t0 = time.perf_counter()
    bt = traces_of(block_of(k, share, seed), log_blowup, p2_slots)
    real, slots = {}, {}
    for i, tr in enumerate(bt.txs):
        for name, n in tr.real_rows.items():
            if name not in ("bytes", "poseidon2"):
                real[f"tx{i}/{name}"] = int(n)
                slots[f"tx{i}/{name}"] = int(tr.slots.get(name, 1))
    perms = sum(int(tr.real_rows["poseidon2"]) for tr in bt.txs)
    real["poseidon2"], slots["poseidon2"] = perms, int(bt.p2_slots)
    cycles = bt.cycles
    tables, total, padded = {}, 0, 0
    for name, air, trace in zip(bt.names, bt.airs, bt.traces):
        n = int(trace.shape[0])
        kk = slots.get(name, 1)
        main, aux, parts = n * air.main_width, n * 4 * air.aux_width, n * 4 * air.num_parts
        cells = main + aux + parts
        cap = n * kk
        used = cap if air.fixed_height else min(cap, real.get(name, cap))
        kind = name.split("/")[-1]
        t = tables.setdefault(kind, {"rows": 0, "slots": kk, "real": 0, "main": 0, "aux": 0,
                                     "parts": 0, "cells": 0, "cells_per_row":
                                     air.main_width + 4 * air.aux_width + 4 * air.num_parts})
        t["slots"] = max(t["slots"], kk)
        for key, v in (("rows", n), ("real", used), ("main", main), ("aux", aux),
                       ("parts", parts), ("cells", cells)):
            t[key] += v
        total += cells
        padded += cells * (cap - used) / cap
    return {"k": k, "hash_share": share, "log_blowup": log_blowup, "cycles": int(cycles),
            "transactions": len(bt.txs), "perms": perms, "cells": total,
            "cells_per_cycle": total / cycles, "padding_share": padded / total,
            "tables": tables, "seconds": time.perf_counter() - t0}


def render(results: list) -> str:
    lines = ["| k | cycles | committed cells | cells/cycle | padding | "
             + " | ".join(n.upper() for n in SHOWN) + " | others |",
             "|---|---|---|---|---|" + "---|" * (len(SHOWN) + 1)]
    for r in results:
        cols = []
        for name in SHOWN:
            t = r["tables"][name]
            s = f" ×{t['slots']}" if t["slots"] > 1 else ""
            cols.append(f"{t['rows']:,} rows{s} ({t['real']:,} real) × {t['cells_per_row']} "
                        f"= {t['cells'] / 1e6:.2f} M")
        rest = sum(t["cells"] for n, t in r["tables"].items() if n not in SHOWN)
        lines.append(f"| {r['k']} | {r['cycles']:,} | {r['cells'] / 1e6:.2f} M | "
                     f"{r['cells_per_cycle']:.0f} | {100 * r['padding_share']:.1f} % | "
                     + " | ".join(cols) + f" | {rest / 1e6:.2f} M |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- --slots

def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def slot_cells(log_cycles: int, share: float, seed: int = 1, log_blowup: int = 2) -> dict:
    """POSEIDON2 at k = 1 against the block's choice: the block's and POSEIDON2's cells."""
    out = {}
    for label, slots in (("k1", 1), ("chosen", None)):
        r = count(log_cycles, share, seed, log_blowup, slots)
        p2 = r["tables"]["poseidon2"]
        out.update(log_cycles=log_cycles, cycles=r["cycles"], perms=r["perms"])
        out[label] = {"k": p2["slots"], "cells": r["cells"], "cells_per_cycle": r["cells_per_cycle"],
                      "poseidon2_rows": p2["rows"], "poseidon2_cells": p2["cells"]}
    return out


_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from steadfast.prover.api import Prover, ProverConfig, verify
from steadfast.prover.core.prove import prove
from steadfast.prover.blocks.proof import TxBlockProof
from steadfast.rv32.blockfile import Block, Transaction
from steadfast.rv32.elf import load_elf
from bench.cells_bench import block_of, traces_of
log_cycles, share, k, lb, seed = (int(sys.argv[2]), float(sys.argv[3]), sys.argv[4],
                                  int(sys.argv[5]), int(sys.argv[6]))
prover = Prover(ProverConfig(backend="host", log_blowup=lb))
hello = load_elf(sys.argv[1] + "/guests/bin/hello.elf")
prover.prove_block(Block((Transaction(hello, b"abc", None, None, "hello"),), 1 << 16,
                         bytes(32)))                     # load the compiled kernels
block = block_of(log_cycles, share, seed)
bt = traces_of(block, lb, None if k == "chosen" else int(k))
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
c0, t0 = cpu(), time.perf_counter()
body = prove(bt.traces, bt.airs, bt.table_public_values, prover.config.params())
c1, t1 = cpu(), time.perf_counter()
verify(TxBlockProof(len(block.transactions), body), block=block, min_security_bits=0)
print(json.dumps({"k": bt.p2_slots, "cpu_s": c1 - c0, "wall_s": t1 - t0,
                  "proof_bytes": len(body)}))
"""


def prove_time(log_cycles: int, share: float, k: str, log_blowup: int = 2, seed: int = 1) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, ROOT, str(log_cycles), str(share), k,
                           str(log_blowup), str(seed)],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]), load=_load())


def _slots_main(args) -> dict:
    res = {"cells": [], "proofs": []}
    print(f"load {_load()}")
    print(f"{'log':>3} {'cycles':>8} {'perms':>7} | {'k':>2} {'p2 rows':>8} {'p2 cells':>11} "
          f"{'cells':>11} {'c/cyc':>7} | {'k':>2} {'p2 rows':>8} {'p2 cells':>11} {'cells':>11} "
          f"{'c/cyc':>7} | {'saved':>6}")
    for n in args.sizes:
        r = slot_cells(n, args.hash_share, args.seed, args.log_blowup)
        a, b = r["k1"], r["chosen"]
        print(f"{n:>3} {r['cycles']:>8} {r['perms']:>7} | {a['k']:>2} {a['poseidon2_rows']:>8} "
              f"{a['poseidon2_cells']:>11,} {a['cells']:>11,} {a['cells_per_cycle']:>7.1f} | "
              f"{b['k']:>2} {b['poseidon2_rows']:>8} {b['poseidon2_cells']:>11,} "
              f"{b['cells']:>11,} {b['cells_per_cycle']:>7.1f} | {1 - b['cells'] / a['cells']:>6.1%}")
        res["cells"].append(r)
    if args.prove is not None:
        for rep in range(args.reps):
            for k in (("1", "chosen") if rep % 2 == 0 else ("chosen", "1")):
                p = dict(prove_time(args.prove, args.hash_share, k, args.log_blowup, args.seed),
                         rep=rep, label=k)
                print(f"prove 2^{args.prove} k={p['k']} ({k}): {p['cpu_s']:.1f} CPU-s, "
                      f"{p['wall_s']:.1f} s wall, proof {p['proof_bytes']:,} B, load {p['load']}")
                res["proofs"].append(p)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[12, 14, 16, 18])
    ap.add_argument("--hash-share", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log-blowup", type=int, default=2,
                    help="the proof's log_blowup (the AIRs' LogUp batching depends on it)")
    ap.add_argument("--json", help="write the results as JSON")
    ap.add_argument("--slots", action="store_true",
                    help="POSEIDON2 at k = 1 against the chosen k")
    ap.add_argument("--prove", type=int, default=None,
                    help="with --slots: also time proofs at 2^N cycles")
    ap.add_argument("--reps", type=int, default=2, help="with --prove: alternating proof pairs")
    args = ap.parse_args(argv)
    if args.prove is not None and not args.slots:
        ap.error("--prove compares the slot choices: use it with --slots")
    if args.slots:
        res = _slots_main(args)
    else:
        res = []
        for k in args.sizes:
            r = count(k, args.hash_share, args.seed, args.log_blowup)
            res.append(r)
            print(f"2^{k}: {r['cells_per_cycle']:.0f} cells/cycle, padding "
                  f"{100 * r['padding_share']:.1f} % ({r['seconds']:.1f} s)", file=sys.stderr,
                  flush=True)
        print(render(res))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
