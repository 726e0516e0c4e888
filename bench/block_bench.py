"""Block proving on the host path: cycles/s, time per round and per table, peak RSS,
proof size and verify time for blocks of 2^k cycles (docs/benchmarks.md, "Block proving"),
and the cell accounting of issue #12 (docs/benchmarks.md, "Throughput and footprint").

    PYTHONPATH=. python bench/block_bench.py [--sizes 12 14 16 18] [--hash-share 0.25]
                                             [--queries 100] [--json out.json]
                                             [--no-emu] [--no-roofline] [--repeat R]
                                             [--seed S]

Each size runs in a fresh subprocess (so its peak RSS is its own) that first proves a tiny
block to load the compiled kernels, then builds the block (bench/make_block.py's
generator: ``make_block.v2_block``, seed 1 by default -- the ``make_block.py -k K
--hash-share H`` block of RISC-V transactions), proves it with the default parameters and
verifies the proof.

Cells.  A table of n rows commits ``n * (main_width + 4 * aux_width + 4 * parts)`` cells
on its trace domain (aux: 4 base columns per EF column; parts: 4 per quotient part), each
then LDE'd by 2^log_blowup and hashed.  The padding share is the fraction of the committed
cells that sit in padding rows (rows beyond each table's real items -- a chip's cycles,
the memory's words, the permutations -- over its k slots a row; rv32 Rv32Traces.real_rows).
cells/s per core = cells / prove seconds / cores (numba threads); cells/CPU-s = cells / the
process's user+system seconds during the proof (steadier than wall time on a shared machine).

Roofline.  In the same subprocess, after the proof: the time of the primitives the proof
cannot avoid for those cells -- for every (table, main | aux | parts) matrix of c columns,
``lde_columns`` of random (c, n) and ``merkle.commit`` of the (n 2^log_blowup, c) result
(quotient-domain evaluation, FRI and openings excluded).  ratio = prove s / primitives s.

Emulated device.  Unless ``--no-emu``, a second subprocess proves the same block with
``backend="emu"`` (the device pipeline over host kernels) and reports the pipeline
ledger's peak bytes (``counters["device"]["peak_device_bytes"]``) per committed cell.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _blocks(k: int, share: float, seed):
    """(warm-up block, the block of about 2^k cycles)."""
    from bench.make_block import v2_block
    from steadfast.rv32.blockfile import parse_block
    return (parse_block(v2_block(10, 0.25, 1)[0]),
            parse_block(v2_block(k, share, 1 if seed is None else seed)[0]))


def _real_rows(prover, block) -> dict:
    """Rows of each table (by AIR name, upper case) that are not padding: a table's real
    items over its k slots a row (fixed-height tables: all of them)."""
    from steadfast.rv32.block import TX_TABLES
    _, bt = prover._build_txblock(block, {}, claims=False)
    out = {}
    for i, tr in enumerate(bt.txs):
        for name in TX_TABLES:
            air = tr.airs[tr.names.index(name)]
            k = int(tr.slots.get(name, 1))
            out[air.name.upper()] = -(-int(tr.real_rows.get(name, 0)) // k)
    states = sum(int(tr.real_rows.get("poseidon2", 0)) for tr in bt.txs)
    out[bt.airs[-1].name.upper()] = -(-states // int(bt.p2_slots))
    return out


def cell_accounting(tables: list, real_rows: dict | None, cycles: int) -> dict:
    """Committed cells per table (main, aux, parts) and the padding share (None when
    ``real_rows`` is None)."""
    unknown = real_rows is None
    real_rows = real_rows or {}
    per, total, padded = {}, 0, 0
    for t in tables:
        n = t["rows"]
        main, aux, parts = n * t["main_width"], n * 4 * t["aux_width"], n * 4 * t["parts"]
        cells = main + aux + parts
        real = min(n, real_rows.get(t["name"].upper(), n))
        per[t["name"]] = {"rows": n, "real_rows": real, "main": main, "aux": aux,
                          "parts": parts, "cells": cells}
        total += cells
        padded += cells * (n - real) // n
    return {"tables": per, "cells": total, "cells_per_cycle": total / cycles,
            "padding_share": None if unknown else padded / total if total else 0.0}


def roofline_seconds(tables: list, log_blowup: int, seed: int = 1) -> dict:
    """LDE + Merkle commit of random matrices of the proof's committed shapes."""
    import numpy as np
    from steadfast.kernels.field import P
    from steadfast.kernels.merkle import commit
    from steadfast.kernels.ntt_host import lde_columns
    from steadfast.verifier.protocol import SHIFT
    rng = np.random.default_rng(seed)
    lde_s = commit_s = 0.0
    for t in tables:
        for c in (t["main_width"], 4 * t["aux_width"], 4 * t["parts"]):
            if not c:
                continue
            m = rng.integers(0, P, (c, t["rows"]), dtype=np.uint32)
            t0 = time.perf_counter()
            lde = lde_columns(m, log_blowup, SHIFT)
            t1 = time.perf_counter()
            rows = np.ascontiguousarray(lde.T)
            del lde, m
            t2 = time.perf_counter()
            commit(rows)
            t3 = time.perf_counter()
            lde_s += t1 - t0
            commit_s += t3 - t2
            del rows
    return {"lde_s": lde_s, "commit_s": commit_s, "seconds": lde_s + commit_s}


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process (all threads): on a shared machine a
    steadier measure of work than wall time."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def one_emu(k: int, share: float, queries: int, pow_bits: int, seed=None) -> dict:
    from steadfast.prover.api import Prover, ProverConfig
    prover = Prover(ProverConfig(backend="emu", num_queries=queries, pow_bits=pow_bits))
    warm, block = _blocks(k, share, seed)
    prover.prove_block(warm)                                       # warm-up
    proof = prover.prove_block(block)
    dev = proof.stats.counters.get("device", {})
    return {"peak_device_bytes": int(dev.get("peak_device_bytes", 0)),
            "prove_s": proof.stats.phases["total"],
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def one(k: int, share: float, queries: int, pow_bits: int, check: bool,
        roofline: bool = True, seed=None) -> dict:
    import numba
    from steadfast.prover.api import Prover, ProverConfig, verify

    prover = Prover(ProverConfig(backend="host", num_queries=queries, pow_bits=pow_bits,
                                 check=check))
    warm, block = _blocks(k, share, seed)
    prover.prove_block(warm)                                       # warm-up
    cpu0 = _cpu_seconds()
    proof = prover.prove_block(block)
    prove_cpu_s = _cpu_seconds() - cpu0
    t = time.perf_counter()
    verify(proof, block=block, min_security_bits=0)       # --queries may be weak
    st = proof.stats
    out = st.to_json()
    out.update(k=k, hash_share=share, verify_seconds=time.perf_counter() - t,
               proof_file_bytes=len(proof.to_bytes()),
               proof_sha256=hashlib.sha256(proof.to_bytes()).hexdigest(),
               peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
               cycles_per_s=st.cycles / st.phases["total"])
    cores = numba.get_num_threads()
    acct = cell_accounting(out["tables"], _real_rows(prover, block), st.cycles)
    prove_s = st.phases["prove"]
    acct.update(cores=cores, prove_s=prove_s, prove_cpu_s=prove_cpu_s,
                cells_per_cpu_s=acct["cells"] / prove_cpu_s,
                cells_per_s_per_core=acct["cells"] / prove_s / cores,
                rss_bytes_per_cell=out["peak_rss_bytes"] / acct["cells"])
    if roofline:
        rf = roofline_seconds(out["tables"], prover.config.log_blowup)
        acct.update(roofline=rf, roofline_ratio=prove_s / rf["seconds"])
    out["cells"] = acct
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
    lines.append("")
    lines.append(cells_table(results))
    return "\n".join(lines)


def cells_table(results: list) -> str:
    """The issue #12 figures: cells, cells per cycle, padding, rates, bytes per cell."""
    lines = ["| k | cycles | committed cells (main / aux / parts) | cells/cycle | padding | "
             "prove s (CPU s) | cells/s/core | cells/CPU-s | peak RSS B/cell | emu peak B/cell | "
             "primitives s | roofline ratio |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        c = r["cells"]
        t = c["tables"].values()
        main, aux, parts = (sum(x[f] for x in t) for f in ("main", "aux", "parts"))
        emu = r.get("emu", {}).get("peak_device_bytes")
        rf = c.get("roofline")
        lines.append(
            f"| {r['k']} | {r['cycles']:,} | {c['cells'] / 1e6:.2f} M ({main / 1e6:.2f} / "
            f"{aux / 1e6:.2f} / {parts / 1e6:.2f}) | {c['cells_per_cycle']:.0f} | "
            + ("–" if c["padding_share"] is None else f"{100 * c['padding_share']:.1f} %")
            + f" | {c['prove_s']:.2f} ({c['prove_cpu_s']:.1f}) | "
            f"{c['cells_per_s_per_core'] / 1e6:.3f} M | {c['cells_per_cpu_s'] / 1e6:.3f} M | "
            f"{c['rss_bytes_per_cell']:.1f} | "
            + (f"{emu / c['cells']:.1f}" if emu else "–") + " | "
            + (f"{rf['seconds']:.2f} ({rf['lde_s']:.2f} + {rf['commit_s']:.2f})" if rf else "–")
            + " | " + (f"{c['roofline_ratio']:.2f}" if rf else "–") + " |")
    lines.append("")
    names = list(results[0]["cells"]["tables"])
    lines.append("| k | " + " | ".join(f"{n} rows (real) main/aux/parts M cells" for n in names) + " |")
    lines.append("|---|" + "---|" * len(names))
    for r in results:
        cells = []
        for n in names:
            x = r["cells"]["tables"][n]
            cells.append(f"{x['rows']:,} ({x['real_rows']:,}) {x['main'] / 1e6:.2f}/"
                         f"{x['aux'] / 1e6:.2f}/{x['parts'] / 1e6:.2f}")
        lines.append(f"| {r['k']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[12, 14, 16, 18])
    ap.add_argument("--hash-share", type=float, default=0.25)
    ap.add_argument("--queries", type=int, default=50, help="default: Params' (50)")
    ap.add_argument("--pow-bits", type=int, default=16)
    ap.add_argument("--check", action="store_true", help="run the trace check first")
    ap.add_argument("--json", help="write all results as JSON")
    ap.add_argument("--no-emu", action="store_true", help="skip the emulated-device run")
    ap.add_argument("--no-roofline", action="store_true", help="skip the primitives timing")
    ap.add_argument("--repeat", type=int, default=1, help="run every size this many times")
    ap.add_argument("--seed", type=int, default=None,
                    help="the block generator's seed (default 1)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--one-emu", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one(args.one, args.hash_share, args.queries, args.pow_bits,
                             args.check, roofline=not args.no_roofline, seed=args.seed)))
        return 0
    if args.one_emu is not None:
        print(json.dumps(one_emu(args.one_emu, args.hash_share, args.queries, args.pow_bits,
                                 args.seed)))
        return 0
    load0 = os.getloadavg()
    results = []
    common = ["--hash-share", str(args.hash_share), "--queries", str(args.queries),
              "--pow-bits", str(args.pow_bits)] + \
        ([] if args.seed is None else ["--seed", str(args.seed)])
    env = dict(os.environ, PYTHONPATH=ROOT)
    for k in args.sizes:
        for _ in range(args.repeat):
            cmd = [sys.executable, os.path.abspath(__file__), "--one", str(k)] + common + \
                (["--check"] if args.check else []) + (["--no-roofline"] if args.no_roofline else [])
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if r.returncode:
                print(f"2^{k}: failed\n{r.stderr[-2000:]}", file=sys.stderr)
                return 1
            res = json.loads(r.stdout.strip().splitlines()[-1])
            if not args.no_emu:
                cmd = [sys.executable, os.path.abspath(__file__), "--one-emu", str(k)] + common
                r = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if r.returncode:
                    print(f"2^{k} emu: failed\n{r.stderr[-2000:]}", file=sys.stderr)
                    return 1
                res["emu"] = json.loads(r.stdout.strip().splitlines()[-1])
            results.append(res)
            c = res["cells"]
            print(f"2^{k}: {res['cycles_per_s']:,.0f} cycles/s, {res['phases']['total']:.1f}s, "
                  f"{c['cells_per_cycle']:.0f} cells/cycle, roofline "
                  f"{c.get('roofline_ratio', float('nan')):.2f}, proof {res['proof_sha256'][:16]}",
                  file=sys.stderr, flush=True)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}, load average before/after "
          f"{load0[0]:.1f}/{os.getloadavg()[0]:.1f}\n")
    print(table(results))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
