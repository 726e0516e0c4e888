"""Where a host proof's memory goes (issue #12, "a smaller footprint"): resident set size
sampled every 50 ms while a block is proven, tagged with the stage that was running.

    PYTHONPATH=. python bench/footprint_bench.py [--sizes 14 16] [--hash-share 0.25]
                                                 [--interval 0.05] [--json out.json]

Each size runs in a fresh subprocess (its peak is its own).  The subprocess proves a tiny
block first (one hello transaction: kernels compiled, caches warm), then builds the block
of RISC-V transactions ``bench/make_block.py -k K --hash-share H`` (``make_block.v2_block``,
seed 1, block format 2; k >= 10) and proves it on the host backend with the default parameters (self-check on, as a user
runs it).  A sampler thread reads ``/proc/self/statm`` every ``--interval`` seconds; the
prover's ``progress`` callback keeps the innermost running stage (round, table), so each
sample is charged to it.  Reported per stage: the largest RSS seen while it ran, and the
RSS when it ended; overall: the peak (and the stage holding it), the RSS before the proof
(traces built) and ``ru_maxrss`` (the kernel's own high-water mark, which the 50 ms
sampler may miss by a short spike).  Bytes per cell divide by the committed cells of
bench/block_bench.py's accounting (trace-domain cells of main, aux and parts).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_now() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * _PAGE


class Sampler:
    """RSS every ``interval`` seconds, charged to the innermost open stage."""

    def __init__(self, interval: float):
        self.interval = interval
        self.stack: list = []                 # open (table, stage), innermost last
        self.peak: dict = {}                  # "stage/table" -> largest RSS while open
        self.at_end: dict = {}                # "stage/table" -> RSS at its last end
        self.trace: list = []                 # (t, rss, tag)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.t0 = time.perf_counter()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def tag(self) -> str:
        if not self.stack:
            return "-"
        table, stage = self.stack[-1]
        return stage if table is None else f"{stage}/{table}"

    def progress(self, table, stage, event, seconds) -> None:
        with self.lock:
            if event == "start":
                self.stack.append((table, stage))
            else:
                tag = self.tag()
                if (table, stage) in self.stack:
                    self.stack.remove((table, stage))
                self.at_end[tag] = rss_now()
        self._sample()

    def _sample(self) -> None:
        r = rss_now()
        with self.lock:
            tag = self.tag()
            self.peak[tag] = max(self.peak.get(tag, 0), r)
            self.trace.append((round(time.perf_counter() - self.t0, 3), r, tag))

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            self._sample()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def one(k: int, share: float, interval: float) -> dict:
    from steadfast.prover.api import Prover, ProverConfig
    from steadfast.rv32.block import build_block_traces
    from steadfast.rv32.blockfile import Block, Transaction, parse_block
    from steadfast.rv32.elf import load_elf
    from steadfast.rv32.run import execute
    from bench.make_block import v2_block
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from block_bench import cell_accounting

    sampler = Sampler(interval)
    prover = Prover(ProverConfig(backend="host"), progress=sampler.progress)
    hello = load_elf(os.path.join(ROOT, "guests", "bin", "hello.elf"))
    prover.prove_block(Block((Transaction(hello, b"abc", None, None, "hello"),), 1 << 16,
                             bytes(32)))                                   # warm-up
    sampler.peak.clear()
    sampler.at_end.clear()
    block = parse_block(v2_block(k, share)[0])
    sampler.progress(None, "build", "start", 0.0)
    exs = [execute(t.program, t.input, block.max_cycles, record=True) for t in block.transactions]
    bt = build_block_traces([t.program for t in block.transactions], exs, block.max_cycles,
                            prover.config.params().log_blowup)
    rss_traces = rss_now()
    del bt, exs
    sampler.progress(None, "build", "end", 0.0)
    t = time.perf_counter()
    with sampler:
        proof = prover.prove_block(block)
    wall = time.perf_counter() - t
    st = proof.stats.to_json()
    acct = cell_accounting(st["tables"], None, proof.stats.cycles)
    peak_tag = max(sampler.peak, key=sampler.peak.get)
    return {"k": k, "cycles": proof.stats.cycles, "cells": acct["cells"], "wall_s": wall,
            "rss_traces": rss_traces, "peak_sampled": sampler.peak[peak_tag], "peak_at": peak_tag,
            "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "stage_peak": sampler.peak, "stage_end": sampler.at_end,
            "proof_sha256": hashlib.sha256(proof.to_bytes()).hexdigest(),
            "trace": sampler.trace}


def report(r: dict) -> str:
    M = 2 ** 20
    c = r["cells"]
    lines = [f"2^{r['k']}: {r['cycles']:,} cycles, {c / 1e6:.2f} M cells, {r['wall_s']:.1f} s wall, "
             f"proof {r['proof_sha256'][:16]}",
             f"  ru_maxrss {r['ru_maxrss'] / M:,.0f} MiB ({r['ru_maxrss'] / c:.1f} B/cell); sampled "
             f"peak {r['peak_sampled'] / M:,.0f} MiB in {r['peak_at']}; after traces "
             f"{r['rss_traces'] / M:,.0f} MiB",
             "  stage/table: peak MiB (at end MiB)"]
    for tag, v in r["stage_peak"].items():
        end = r["stage_end"].get(tag)
        lines.append(f"    {tag:28s} {v / M:8,.0f}" + (f" ({end / M:,.0f})" if end else ""))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[14, 16])
    ap.add_argument("--hash-share", type=float, default=0.25)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--json", help="write all results (with the RSS traces) as JSON")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one(args.one, args.hash_share, args.interval)))
        return 0
    results = []
    env = dict(os.environ, PYTHONPATH=ROOT)
    for k in args.sizes:
        load = os.getloadavg()[0]
        cmd = [sys.executable, os.path.abspath(__file__), "--one", str(k), "--hash-share",
               str(args.hash_share), "--interval", str(args.interval)]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode:
            print(f"2^{k}: failed\n{p.stderr[-3000:]}", file=sys.stderr)
            return 1
        r = json.loads(p.stdout.strip().splitlines()[-1])
        r["load"] = (load, os.getloadavg()[0])
        results.append(r)
        print(report(r) + f"\n  load average before/after {load:.1f}/{r['load'][1]:.1f}",
              flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
