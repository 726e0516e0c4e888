"""Issue #38's throughput figures in one command: the 2^20-cycle program and the 2^18-cycle
block, each a fresh process, base and new trees alternating, medians reported.

    PYTHONPATH=. .venv/bin/python bench/throughput_bench.py                  # new tree only
    PYTHONPATH=. .venv/bin/python bench/throughput_bench.py --base 1eaeb8d --rounds 3
    PYTHONPATH=. .venv/bin/python bench/throughput_bench.py --cases prog --rounds 1 --json out.json
    PYTHONPATH=. .venv/bin/python bench/throughput_bench.py --base HEAD --profiles default fastest

Cases (the issue's):
  prog   guests/bin/sha256.elf on 13,000 bytes of bench/realworld_bench.py's pattern
         (1,039,868 cycles, one segment of 2^20, 2^19-row tables)
  block  bench/make_block.py -k 18 --hash-share 0.25 (seed 1, 262,138 cycles)

Each run is ``python -c CHILD case profile`` in the tree (cwd and PYTHONPATH the tree): an
untimed small warm-up proof of the same kind (numba's cache loaded), then one proof through
``Prover(ProverConfig.for_profile(profile))`` -- default parameters unless ``--profiles``
names others (this checkout runs each profile named; the base tree the default only), host
backend, the machine's threads.
Per run: cycles, prove-phase seconds (``stats.phases["prove"]``: the protocol, not the
execution or the trace building), cycles/s over it, the whole call's seconds, the
process's CPU seconds over the proof (user + system, all threads: steadier than wall on a
shared machine), seconds per round and per table, committed cells per cycle
(bench/block_bench.py's ``cell_accounting``: rows x (main + 4 aux + 4 parts) / cycles,
per unit of blowup, as docs/rv32.md counts),
proof bytes and their sha256 (base and new must agree where the format is unchanged), peak
RSS and the load average before and after.

The base tree is ``git archive BASE`` unpacked in a temporary folder (``--base``; none:
only this checkout is measured).  Order alternates per round (base first in even rounds).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import hashlib, json, os, resource, sys, time
sys.path.insert(0, os.getcwd())
case, profile = sys.argv[1], sys.argv[2]

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

load0 = os.getloadavg()[0]
from steadfast.prover.api import Prover, ProverConfig
prover = Prover(ProverConfig.for_profile(profile))
if case == "prog":
    from steadfast import rv32
    from bench.realworld_bench import pattern
    program = rv32.load_elf("guests/bin/sha256.elf")
    prover.prove_program(program, pattern(200))                       # warm-up
    data = pattern(13000)
    c0, t0 = cpu(), time.perf_counter()
    proof = prover.prove_program(program, data)
else:
    from bench.make_block import v2_block
    from steadfast.rv32.blockfile import parse_block
    prover.prove_block(parse_block(v2_block(10, 0.25, 1)[0]))          # warm-up
    block = parse_block(v2_block(18, 0.25, 1)[0])
    c0, t0 = cpu(), time.perf_counter()
    proof = prover.prove_block(block)
wall, cpu_s = time.perf_counter() - t0, cpu() - c0
st = proof.stats
raw = proof.to_bytes()
from bench.block_bench import cell_accounting
cells = cell_accounting(st.to_json()["tables"], None, st.cycles)
print(json.dumps({
    "case": case, "cycles": st.cycles, "prove_s": st.phases.get("prove", 0.0),
    "call_s": wall, "cpu_s": cpu_s, "rounds": st.rounds(),
    "tables": {t.name: t.total for t in st.tables},
    "cells_per_cycle": cells["cells_per_cycle"],
    "proof_bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest(),
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "load": [load0, os.getloadavg()[0]]}))
"""

CASES = ("prog", "block")


def base_tree(rev: str, dest: str) -> str:
    """``git archive rev`` unpacked under ``dest``."""
    tree = os.path.join(dest, "base")
    os.makedirs(tree)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
    return tree


def run_child(tree: str, case: str, profile: str = "default") -> dict:
    env = dict(os.environ, PYTHONPATH=tree)
    env.pop("PYTHONDONTWRITEBYTECODE", None)          # a user's install has bytecode
    res = subprocess.run([sys.executable, "-c", CHILD, case, profile], cwd=tree, env=env,
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"{case} in {tree} failed:\n{res.stderr[-4000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _med(runs, key):
    return statistics.median(r[key] for r in runs)


def report(samples: dict) -> str:
    lines = []
    for case, trees in samples.items():
        runs = {t: r for t, r in trees.items() if r}
        first = next(iter(runs.values()))[0]
        lines.append(f"== {case}: {first['cycles']:,} cycles, "
                     f"{first['cells_per_cycle']:.1f} committed cells/cycle")
        head = f"{'':24s}" + "".join(f"{t:>22s}" for t in runs)
        lines.append(head)

        def row(label, fn, fmt="{:.2f}"):
            cells = []
            for rs in runs.values():
                vals = [fn(r) for r in rs]
                med = statistics.median(vals)
                cells.append(f"{fmt.format(med)} ({'/'.join(fmt.format(v) for v in vals)})"
                             if len(vals) > 1 else fmt.format(med))
            lines.append(f"{label:24s}" + "".join(f"{c:>22s}" for c in cells))

        for rnd in first["rounds"]:
            row(rnd, lambda r, k=rnd: r["rounds"].get(k, 0.0))
        row("cells/cycle", lambda r: r["cells_per_cycle"], "{:.1f}")
        row("prove phase s", lambda r: r["prove_s"])
        row("cycles/s (prove phase)", lambda r: r["cycles"] / r["prove_s"], "{:,.0f}")
        row("whole call s", lambda r: r["call_s"])
        row("CPU s (the proof)", lambda r: r["cpu_s"], "{:.1f}")
        row("peak RSS MiB", lambda r: r["peak_rss_mib"], "{:,.0f}")
        row("load before", lambda r: r["load"][0], "{:.1f}")
        for t in sorted(first["tables"], key=lambda n: -first["tables"][n])[:4]:
            row(f"table {t} s", lambda r, k=t: r["tables"].get(k, 0.0))
        for t, rs in runs.items():
            hashes = sorted({r["sha256"][:16] for r in rs})
            lines.append(f"{t}: proof {rs[0]['proof_bytes']:,} bytes, sha256 {', '.join(hashes)}")
        for t, rs in runs.items():
            if t == "base" or "base" not in runs:
                continue
            b = runs["base"]
            lines.append(f"{t}/base prove phase {_med(rs, 'prove_s') / _med(b, 'prove_s'):.3f}, "
                         f"CPU {_med(rs, 'cpu_s') / _med(b, 'cpu_s'):.3f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", help="the baseline commit (default: none, this tree only)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--profiles", nargs="+", default=["default"],
                    help="this checkout's profiles (ProverConfig.for_profile), each a column "
                         "'new' (default) or 'new:NAME'; the base tree runs the default")
    ap.add_argument("--json", help="write every sample here")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    news = {("new" if p == "default" else f"new:{p}"): p for p in args.profiles}
    samples = {c: {"base": [], **{t: [] for t in news}} for c in args.cases}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {t: (ROOT, p) for t, p in news.items()}
        if args.base:
            trees["base"] = (base_tree(args.base, tmp), "default")
        print(f"base {args.base or '-'}; cases {' '.join(args.cases)}; rounds {args.rounds}; "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
        for r in range(args.rounds):
            labels = ["base", *news]
            order = [t for t in (labels if r % 2 == 0 else labels[::-1]) if t in trees]
            for case in args.cases:
                for t in order:
                    tree, profile = trees[t]
                    out = run_child(tree, case, profile)
                    samples[case][t].append(out)
                    print(f"round {r} {case} {t}: prove {out['prove_s']:.2f} s = "
                          f"{out['cycles'] / out['prove_s']:,.0f} cycles/s, CPU "
                          f"{out['cpu_s']:.1f} s, {out['proof_bytes']:,} B "
                          f"{out['sha256'][:12]}, load {out['load'][0]:.1f}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"base": args.base, "samples": samples}, fh, indent=1)
    print(report(samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
