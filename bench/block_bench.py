"""Block proving on the host path: cycles/s, time per round and per table, peak RSS,
proof size and verify time for blocks of 2^k cycles (docs/benchmarks.md, "Block proving"),
and the cell accounting of issue #12 (docs/benchmarks.md, "Throughput and footprint").

    PYTHONPATH=. python bench/block_bench.py [--sizes 12 14 16 18] [--hash-share 0.25]
                                             [--queries 100] [--json out.json]
                                             [--no-emu] [--no-roofline] [--repeat R]
                                             [--seed S]
    PYTHONPATH=. python bench/block_bench.py --synthetic WIDTH,LOG_ROWS,DEGREE[,TABLES]
                                             [--log-blowup B] [--queries 50] [--no-emu]
                                             [--no-roofline] [--repeat R] [--json out.json]

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

Synthetic AIRs.  ``--synthetic WIDTH,LOG_ROWS,DEGREE[,TABLES]`` (e.g. ``64,18,2`` or
``64,16,3,4``) proves, instead of a block, TABLES (default 1) tables of
bench/prove_bench.py's synthetic AIR -- WIDTH columns, 2^LOG_ROWS rows, every transition
x_j' = x_j x_(j+1) ... x_(j+DEGREE-1) + j + 1 of degree DEGREE, no LogUp -- through the
public entry for arbitrary AIRs (``Prover(ProverConfig(backend="host", ...)).prove_airs``,
verified with ``verify_airs``), with the same FRI parameters (``--queries``,
``--pow-bits``; ``--log-blowup``, default ProverConfig's) after a warm-up proof of the
same AIRs at 2^6 rows.  The same accounting: committed cells (as above; all rows real,
so no padding), ``lde_cells`` = cells x 2^log_blowup, cells/s per core with cores = the
CPUs the process may use (``os.sched_getaffinity``), cells/CPU-s, the roofline of the
proof's table shapes, peak RSS, proof bytes and sha256, and (unless ``--no-emu``) the
emulated device's peak bytes per cell.  As for blocks, "prove s" is the proof's
``phases["prove"]`` (the self-check verify excluded; ``prove_wall_s`` is the whole
``prove_airs`` call) and CPU s the process's CPU over the whole call, self-check included.
One row per run; ``--json`` has every field.
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
    return {"tables": per, "cells": total, "cells_per_cycle": total / cycles if cycles else None,
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


def parse_synthetic(text: str) -> tuple[int, int, int, int]:
    """``WIDTH,LOG_ROWS,DEGREE[,TABLES]`` -> (width, log_rows, degree, tables)."""
    try:
        v = [int(x) for x in text.split(",")]
    except ValueError:
        v = []
    if len(v) not in (3, 4) or min(v) < 1:
        raise argparse.ArgumentTypeError(
            f"--synthetic takes WIDTH,LOG_ROWS,DEGREE[,TABLES] (positive integers), not {text!r}")
    return v[0], v[1], v[2], v[3] if len(v) == 4 else 1


def synthetic_statement(width: int, log_rows: int, degree: int, tables: int = 1):
    """(airs, traces, public values): ``tables`` tables of bench/prove_bench.py's
    synthetic AIR at one fixed ``degree``."""
    from bench.prove_bench import synthetic_air, synthetic_trace
    airs = [synthetic_air(i, width, degree) for i in range(tables)]
    traces = [synthetic_trace(i, log_rows, width, degree) for i in range(tables)]
    return airs, traces, [[] for _ in airs]


def _synthetic_prover(backend: str, queries: int, pow_bits: int, log_blowup, check=False):
    from steadfast.prover.api import Prover, ProverConfig
    kw = {} if log_blowup is None else {"log_blowup": log_blowup}
    return Prover(ProverConfig(backend=backend, num_queries=queries, pow_bits=pow_bits,
                               check=check, **kw))


def one_synthetic(spec: tuple, queries: int, pow_bits: int, log_blowup=None,
                  check: bool = False, roofline: bool = True) -> dict:
    """Prove and verify the synthetic statement ``spec`` = (width, log_rows, degree,
    tables) on the host through ``Prover.prove_airs``: the block accounting."""
    import numba
    from steadfast.prover.api import verify_airs
    width, log_rows, degree, tables = spec
    prover = _synthetic_prover("host", queries, pow_bits, log_blowup, check)
    airs, traces, pvs = synthetic_statement(width, log_rows, degree, tables)
    _, small, _ = synthetic_statement(width, min(log_rows, 6), degree, tables)
    prover.prove_airs(airs, small, pvs)                            # warm-up
    cpu0, t0 = _cpu_seconds(), time.perf_counter()
    proof = prover.prove_airs(airs, traces, pvs)
    prove_wall_s = time.perf_counter() - t0
    prove_cpu_s = _cpu_seconds() - cpu0
    t = time.perf_counter()
    res = verify_airs(proof, airs, pvs, min_security_bits=0)      # --queries may be weak
    verify_s = time.perf_counter() - t
    assert res.public_values == pvs, res.public_values            # verify_airs raises if invalid
    st = proof.stats
    data = proof.to_bytes()
    log_b = prover.config.log_blowup
    out = st.to_json()
    out.update(synthetic={"width": width, "log_rows": log_rows, "degree": degree,
                          "tables": tables},
               label=f"{width},{log_rows},{degree},{tables}", log_blowup=log_b,
               queries=queries, pow_bits=pow_bits, verified=True, verify_seconds=verify_s,
               prove_wall_s=prove_wall_s, proof_file_bytes=len(data),
               proof_sha256=hashlib.sha256(data).hexdigest(),
               peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    cores = len(os.sched_getaffinity(0))
    acct = cell_accounting(out["tables"], {t["name"].upper(): t["rows"] for t in out["tables"]},
                           0)
    prove_s = st.phases["prove"]
    acct.update(cores=cores, numba_threads=numba.get_num_threads(), prove_s=prove_s,
                prove_wall_s=prove_wall_s, prove_cpu_s=prove_cpu_s,
                lde_cells=acct["cells"] << log_b,
                cells_per_cpu_s=acct["cells"] / prove_cpu_s,
                cells_per_s_per_core=acct["cells"] / prove_s / cores,
                rss_bytes_per_cell=out["peak_rss_bytes"] / acct["cells"])
    if roofline:
        rf = roofline_seconds(out["tables"], log_b)
        acct.update(roofline=rf, roofline_ratio=prove_s / rf["seconds"])
    out["cells"] = acct
    return out


def one_emu_synthetic(spec: tuple, queries: int, pow_bits: int, log_blowup=None) -> dict:
    """The synthetic statement on ``backend="emu"``: the device ledger's peak bytes."""
    width, log_rows, degree, tables = spec
    prover = _synthetic_prover("emu", queries, pow_bits, log_blowup)
    airs, traces, pvs = synthetic_statement(width, log_rows, degree, tables)
    _, small, _ = synthetic_statement(width, min(log_rows, 6), degree, tables)
    prover.prove_airs(airs, small, pvs)                            # warm-up
    proof = prover.prove_airs(airs, traces, pvs)
    dev = proof.stats.counters.get("device", {})
    return {"peak_device_bytes": int(dev.get("peak_device_bytes", 0)),
            "prove_s": proof.stats.phases["total"],
            "proof_sha256": hashlib.sha256(proof.to_bytes()).hexdigest(),
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def synthetic_table(results: list) -> str:
    """One row per synthetic run: the block rows' accounting where it applies."""
    lines = ["| AIR (width, 2^rows, degree, tables) | log_blowup | committed cells (main / aux "
             "/ parts) | LDE cells | prove s (call s, CPU s) | cores | cells/s/core | cells/CPU-s | "
             "peak RSS MiB (B/cell) | emu peak B/cell | proof KiB | sha256 | verify s | "
             "primitives s | roofline ratio |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        c, sy = r["cells"], r["synthetic"]
        t = c["tables"].values()
        main, aux, parts = (sum(x[f] for x in t) for f in ("main", "aux", "parts"))
        emu = r.get("emu", {}).get("peak_device_bytes")
        rf = c.get("roofline")
        lines.append(
            f"| {sy['width']} x 2^{sy['log_rows']}, d{sy['degree']}, x{sy['tables']} | "
            f"{r['log_blowup']} | {c['cells'] / 1e6:.2f} M ({main / 1e6:.2f} / {aux / 1e6:.2f} / "
            f"{parts / 1e6:.2f}) | {c['lde_cells'] / 1e6:.2f} M | {c['prove_s']:.2f} "
            f"({c['prove_wall_s']:.2f}, {c['prove_cpu_s']:.1f}) | {c['cores']} | {c['cells_per_s_per_core'] / 1e6:.3f} M | "
            f"{c['cells_per_cpu_s'] / 1e6:.3f} M | {r['peak_rss_bytes'] / 2**20:,.0f} "
            f"({c['rss_bytes_per_cell']:.1f}) | "
            + (f"{emu / c['cells']:.1f}" if emu else "–")
            + f" | {r['proof_file_bytes'] / 1024:,.0f} | {r['proof_sha256'][:16]} | "
            f"{r['verify_seconds']:.3f} | "
            + (f"{rf['seconds']:.3f} ({rf['lde_s']:.3f} + {rf['commit_s']:.3f})" if rf else "–")
            + " | " + (f"{c['roofline_ratio']:.2f}" if rf else "–") + " |")
    return "\n".join(lines)


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
    ap.add_argument("--synthetic", type=parse_synthetic, metavar="W,LOG_ROWS,DEGREE[,TABLES]",
                    help="prove TABLES (default 1) synthetic AIRs of W columns, 2^LOG_ROWS rows "
                         "and constraint degree DEGREE through Prover.prove_airs instead of "
                         "blocks (--sizes, --hash-share, --seed are then unused)")
    ap.add_argument("--log-blowup", type=int, default=None,
                    help="with --synthetic: the LDE blowup (default ProverConfig's)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--one-synthetic", type=parse_synthetic, help=argparse.SUPPRESS)
    ap.add_argument("--one-emu-synthetic", type=parse_synthetic, help=argparse.SUPPRESS)
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
    if args.one_synthetic is not None:
        print(json.dumps(one_synthetic(args.one_synthetic, args.queries, args.pow_bits,
                                       args.log_blowup, args.check,
                                       roofline=not args.no_roofline)))
        return 0
    if args.one_emu_synthetic is not None:
        print(json.dumps(one_emu_synthetic(args.one_emu_synthetic, args.queries,
                                           args.pow_bits, args.log_blowup)))
        return 0
    if args.synthetic is not None:
        return main_synthetic(args)
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
    return _report(results, load0, table(results), args.json)


def run_synthetic(spec: tuple, queries: int, pow_bits: int, log_blowup=None, check=False,
                  roofline: bool = True, emu: bool = True, python: str | None = None,
                  env: dict | None = None, preexec_fn=None) -> dict:
    """One synthetic run in fresh subprocesses (host, then emu unless ``emu`` is False)
    -> the result dict of :func:`one_synthetic` (``emu`` added); RuntimeError on failure."""
    text = ",".join(map(str, spec))
    common = ["--queries", str(queries), "--pow-bits", str(pow_bits)] + \
        ([] if log_blowup is None else ["--log-blowup", str(log_blowup)])
    env = dict(os.environ, PYTHONPATH=ROOT) if env is None else env
    base = [python or sys.executable, os.path.abspath(__file__)]
    cmd = base + ["--one-synthetic", text] + common + (["--check"] if check else []) + \
        ([] if roofline else ["--no-roofline"])
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, preexec_fn=preexec_fn)
    if r.returncode:
        raise RuntimeError(f"synthetic {text}: failed\n{r.stderr[-2000:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    if emu:
        cmd = base + ["--one-emu-synthetic", text] + common
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, preexec_fn=preexec_fn)
        if r.returncode:
            raise RuntimeError(f"synthetic {text} emu: failed\n{r.stderr[-2000:]}")
        res["emu"] = json.loads(r.stdout.strip().splitlines()[-1])
        res["emu"]["same_bytes_as_host"] = res["emu"]["proof_sha256"] == res["proof_sha256"]
    return res


def main_synthetic(args) -> int:
    load0 = os.getloadavg()
    results = []
    for _ in range(args.repeat):
        try:
            res = run_synthetic(args.synthetic, args.queries, args.pow_bits, args.log_blowup,
                                args.check, roofline=not args.no_roofline, emu=not args.no_emu)
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
        results.append(res)
        c = res["cells"]
        print(f"synthetic {res['label']}: {c['prove_s']:.2f}s, {c['cells'] / 1e6:.2f} M cells, "
              f"{c['cells_per_s_per_core'] / 1e6:.3f} M cells/s/core, roofline "
              f"{c.get('roofline_ratio', float('nan')):.2f}, proof {res['proof_sha256'][:16]}",
              file=sys.stderr, flush=True)
    return _report(results, load0, synthetic_table(results), args.json,
                   f" ({len(os.sched_getaffinity(0))} usable),")


def _report(results: list, load0, text: str, json_path: str | None, usable: str = ",") -> int:
    """The machine line, the results' table, the JSON file."""
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores"
          f"{usable} python {platform.python_version()}, load average before/after "
          f"{load0[0]:.1f}/{os.getloadavg()[0]:.1f}\n")
    print(text)
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
