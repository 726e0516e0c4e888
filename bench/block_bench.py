"""Block proving on the host path: cycles/s, time per round and per table, peak RSS,
proof size and verify time for blocks of 2^k cycles (docs/benchmarks.md, "Block proving").

    PYTHONPATH=. python bench/block_bench.py [--sizes 12 14 16 18] [--hash-share 0.25]
                                             [--queries 100] [--json out.json]

Each size runs in a fresh subprocess (so its peak RSS is its own) that first proves a tiny
block to load the compiled kernels, then builds the block (bench/make_block.py's
generator, seed 0), proves it with the default parameters and verifies the proof.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def one(k: int, share: float, queries: int, pow_bits: int, check: bool) -> dict:
    from steadfast.prover.api import Prover, ProverConfig, verify
    from steadfast.vm.programs import sized_block

    prover = Prover(ProverConfig(backend="host", num_queries=queries, pow_bits=pow_bits,
                                 check=check))
    prover.prove_block(sized_block(8, 0.25, memory_size=64, table_size=16, n_tx=1))  # warm-up
    block = sized_block(k, share, seed=0)
    proof = prover.prove_block(block)
    t = time.perf_counter()
    verify(proof, block=block)
    st = proof.stats
    out = st.to_json()
    out.update(k=k, hash_share=share, verify_seconds=time.perf_counter() - t,
               proof_file_bytes=len(proof.to_bytes()),
               peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
               cycles_per_s=st.cycles / st.phases["total"])
    return out


def table(results: list) -> str:
    lines = ["| cycles | k | prove s | cycles/s | exec+traces s | check s | peak RSS MiB | "
             "proof KiB | verify s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        ph = r["phases"]
        lines.append(f"| {r['cycles']:,} | {r['k']} | {ph['total']:.1f} | {r['cycles_per_s']:,.0f} | "
                     f"{ph['execute'] + ph['traces']:.1f} | {ph.get('check', 0):.1f} | "
                     f"{r['peak_rss_bytes'] / 2**20:,.0f} | {r['proof_file_bytes'] / 1024:,.0f} | "
                     f"{r['verify_seconds']:.2f} |")
    lines.append("")
    rounds = list(results[0]["rounds"])
    lines.append("| k | " + " | ".join(rounds) + " |")
    lines.append("|---|" + "---|" * len(rounds))
    for r in results:
        lines.append(f"| {r['k']} | " + " | ".join(f"{r['rounds'].get(n, 0):.1f}" for n in rounds) + " |")
    lines.append("")
    names = [t["name"] for t in results[0]["tables"]]
    lines.append("| k | " + " | ".join(f"{n} (rows) s" for n in names) + " |")
    lines.append("|---|" + "---|" * len(names))
    for r in results:
        cells = [f"{t['rows']:,}: {sum(t['seconds'].values()):.1f}" for t in r["tables"]]
        lines.append(f"| {r['k']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[12, 14, 16, 18])
    ap.add_argument("--hash-share", type=float, default=0.25)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--pow-bits", type=int, default=16)
    ap.add_argument("--check", action="store_true", help="run the trace check first")
    ap.add_argument("--json", help="write all results as JSON")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one(args.one, args.hash_share, args.queries, args.pow_bits,
                             args.check)))
        return 0
    results = []
    for k in args.sizes:
        cmd = [sys.executable, os.path.abspath(__file__), "--one", str(k), "--hash-share",
               str(args.hash_share), "--queries", str(args.queries), "--pow-bits",
               str(args.pow_bits)] + (["--check"] if args.check else [])
        r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
        if r.returncode:
            print(f"2^{k}: failed\n{r.stderr[-2000:]}", file=sys.stderr)
            return 1
        results.append(json.loads(r.stdout.strip().splitlines()[-1]))
        print(f"2^{k}: {results[-1]['cycles_per_s']:,.0f} cycles/s, "
              f"{results[-1]['phases']['total']:.1f}s", file=sys.stderr, flush=True)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}\n")
    print(table(results))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
