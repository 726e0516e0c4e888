"""RV32IM proofs end to end: guests/bin/bench.elf sized by its input
(guests/models.py ``bench_input``: the iteration count sets the cycles, the per-iteration
mix the share of ALU, memory, multiply/divide and Poseidon2-precompile work), proven with
``Prover.prove_program`` and verified with ``verify(proof, elf=, input=)``.

    .venv/bin/python bench/rv32_bench.py -k 14                     # about 2^14 cycles
    .venv/bin/python bench/rv32_bench.py -k 14 16 --json           # one process per size
    .venv/bin/python bench/rv32_bench.py -k 16 --mix alu=8,mem=4,mul=0,p2=0 --backend emu

Per run: cycles, execute / trace / prove / self-check / verify seconds, cycles per second
(over the whole prove_program call), committed cells per cycle per table and in total
(rows x (main + 4 aux + 4 parts) / cycles: per unit of blowup, as docs/rv32.md counts),
peak RSS, proof bytes, the load average.  Before the first run a small program is proven
untimed (``--no-warmup`` skips it) so that loading the compiled kernels is not in the
figures.  Several sizes run in fresh processes (each its own peak RSS).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH_ELF = ROOT / "guests" / "bin" / "bench.elf"
MIX = {"alu": 8, "mem": 4, "mul": 2, "p2": 1}     # guests.models.bench_input's defaults


def parse_mix(text: str) -> dict:
    mix = dict(MIX)
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        if name not in MIX or not value.isdigit():
            raise SystemExit(f"--mix: {part!r} is not one of {', '.join(MIX)}=N")
        mix[name] = int(value)
    if not any(mix.values()):
        raise SystemExit("--mix: at least one unit per iteration")
    return mix


def run(k: int, mix: dict, seed: int, mem_log2: int, backend: str, queries: int | None,
        warmup: bool) -> dict:
    sys.path.insert(0, str(ROOT / "guests"))
    import models
    from steadfast import rv32
    from steadfast.prover.api import Prover, ProverConfig, verify
    data, cycles = models.bench_input(1 << k, mix["alu"], mix["mem"], mix["mul"], mix["p2"],
                                      mem_log2=mem_log2, seed=seed)
    cfg = ProverConfig(backend=backend) if queries is None else ProverConfig(
        backend=backend, num_queries=queries)
    prover = Prover(cfg)
    program = rv32.load_elf(BENCH_ELF)
    limit = rv32.MAX_CYCLES_CEILING
    if warmup:              # load the compiled kernels (numba's cache) outside the figures
        small, _ = models.bench_input(1 << 10, **{n: mix[n] for n in MIX}, seed=seed)
        prover.prove_program(program, small, max_cycles=limit)
    t = time.perf_counter()
    proof = prover.prove_program(program, data, max_cycles=limit)
    wall = time.perf_counter() - t
    t = time.perf_counter()
    res = verify(proof, elf=program, input=data, min_security_bits=0)
    t_verify = time.perf_counter() - t
    st = proof.stats
    assert st.cycles == cycles, (st.cycles, cycles)      # the model's formula
    cells = {tb.name: tb.rows * (tb.main_width + 4 * tb.aux_width + 4 * tb.parts)
             for tb in st.tables}
    total = sum(cells.values())
    return {"k": k, "cycles": st.cycles, "mix": mix, "seed": seed, "mem_log2": mem_log2,
            "backend": st.backend, "log_blowup": cfg.params().log_blowup,
            "queries": cfg.params().num_queries, "exit_code": proof.exit_code,
            "execute_s": st.phases.get("execute", 0.0), "traces_s": st.phases.get("traces", 0.0),
            "prove_s": st.phases.get("prove", 0.0),
            "self_check_s": st.phases.get("self_check", 0.0), "total_s": wall,
            "cycles_per_s": st.cycles / wall, "verify_s": t_verify,
            "security_bits": res.security_bits, "proof_bytes": len(proof.to_bytes()),
            "peak_rss_bytes": st.peak_rss_bytes,
            "cells_per_cycle": {n: c / st.cycles for n, c in cells.items()},
            "cells_per_cycle_total": total / st.cycles,
            "rows": {tb.name: tb.rows for tb in st.tables},
            "load_avg": os.getloadavg()[0]}


def show(r: dict) -> str:
    mix = ",".join(f"{n}={v}" for n, v in r["mix"].items())
    lines = [f"== bench.elf at 2^{r['k']}: {r['cycles']:,} cycles (mix {mix}, seed {r['seed']}); "
             f"backend {r['backend']}, log_blowup {r['log_blowup']}, {r['queries']} queries "
             f"({r['security_bits']} bits); load {r['load_avg']:.1f}",
             f"execute {r['execute_s']:.2f} s, traces {r['traces_s']:.2f} s, prove "
             f"{r['prove_s']:.2f} s, self-check {r['self_check_s']:.2f} s; total "
             f"{r['total_s']:.2f} s = {r['cycles_per_s']:,.0f} cycles/s",
             f"proof {r['proof_bytes']:,} bytes; verify {r['verify_s']:.2f} s; peak RSS "
             f"{r['peak_rss_bytes'] / 2**20:,.0f} MiB",
             f"{'table':<15} {'rows':>9} {'cells/cycle':>12}"]
    for name, c in r["cells_per_cycle"].items():
        lines.append(f"{name:<15} {r['rows'][name]:>9,} {c:>12.1f}")
    lines.append(f"{'total':<15} {'':>9} {r['cells_per_cycle_total']:>12.1f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-k", type=int, nargs="+", required=True, metavar="K",
                    help="about 2^K cycles (several: one process each)")
    ap.add_argument("--mix", default="", help="units per iteration, e.g. alu=8,mem=4,mul=2,p2=1 "
                                              "(the defaults; missing names keep theirs)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mem-log2", type=int, default=10, help="the bench's memory (2^N words)")
    ap.add_argument("--backend", default=os.environ.get("PROVER_BACKEND", "host"))
    ap.add_argument("--queries", type=int, default=None, help="FRI queries (default: the "
                                                              "prover's, 50)")
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--json", action="store_true", help="one JSON object per run")
    args = ap.parse_args(argv)
    mix = parse_mix(args.mix)
    for k in args.k:
        if not 8 <= k <= 24:
            raise SystemExit(f"-k {k}: between 8 and 24")
    if len(args.k) > 1:
        base = [a for a in (argv if argv is not None else sys.argv[1:])]
        i = base.index("-k")
        rest = base[:i] + base[i + 1 + len(args.k):]
        for k in args.k:
            cmd = [sys.executable, __file__, "-k", str(k), *rest, "--json"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                sys.stderr.write(r.stderr)
                return r.returncode
            res = json.loads(r.stdout.strip().splitlines()[-1])
            print(json.dumps(res) if args.json else show(res), flush=True)
        return 0
    res = run(args.k[0], mix, args.seed, args.mem_log2, args.backend, args.queries,
              not args.no_warmup)
    print(json.dumps(res) if args.json else show(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
