"""Segmented proving: cycles/s and peak RSS against the run's length at a fixed segment
size (docs/benchmarks.md "Segments").  Each size runs in its own process (peak RSS is the
process's): ``python bench/segment_bench.py --segment 20 --lengths 22 24 --baseline``
(issue #36's figures: runs of just under 2^22 and 2^24 cycles at segments of 2^20, and
the baseline, one proof of a run just under 2^20 cycles -- one full segment).
The program is tests/test_rv32_segments.py's loop (memory, MUL, byte stores, fd 1 writes
and Poseidon2 calls every 64 iterations); its iterations are chosen so that the run is
``2^length - 2^10`` cycles (within one iteration), whatever its cycles per iteration.

``--block``: blocks in epochs (docs/rv32.md "Blocks in epochs") instead of programs -- for
each length, a block of 2^length cycles in all: one long transaction of half of them (the
loop, proved in segments) and 2^(length-1) / 2^18 transactions of just under 2^18 cycles
each (packed four to an epoch of 2^20: group parts); its peak RSS should not grow with
the length.  ``python bench/segment_bench.py --block --lengths 22 23``."""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _iterations(T, cycles: int) -> int:
    """Iterations of the loop that run about ``cycles`` cycles."""
    from steadfast import rv32
    a = rv32.execute(T.program(100), T.INPUT).cycles
    b = rv32.execute(T.program(1100), T.INPUT).cycles
    per = (b - a) / 1000
    return max(1, int(100 + (cycles - a) / per))


def _cycles(prog, data: bytes) -> int:
    from steadfast.rv32.segments import run_segments
    return sum(s.cycles for s in run_segments(prog, data, (1 << 32) - 1, 1 << 22,
                                              record=False))


def one(log_len: int, log_seg: int | None) -> dict:
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    import test_rv32_segments as T
    from steadfast.prover.api import Prover
    from steadfast.prover.programs.verify import verify_program
    prog = T.program(_iterations(T, (1 << log_len) - (1 << 10)))
    cycles = _cycles(prog, T.INPUT)
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    if log_seg is None:                          # the baseline: one proof
        p = Prover().prove_program(prog, T.INPUT, max_cycles=1 << 24, segment_cycles=None)
    else:
        p = Prover().prove_program(prog, T.INPUT, max_cycles=1 << 30,
                                   segment_cycles=1 << log_seg)
    prove_s = time.perf_counter() - t
    data = p.to_bytes()
    t = time.perf_counter()
    r = verify_program(data, prog, T.INPUT)
    return {"log_len": log_len, "log_segment": log_seg, "cycles": cycles,
            "segments": getattr(r, "segments", 1), "prove_s": round(prove_s, 2),
            "cycles_per_s": round(cycles / prove_s), "proof_bytes": len(data),
            "verify_s": round(time.perf_counter() - t, 3),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "load": [round(load0, 1), round(os.getloadavg()[0], 1)]}


def one_block(log_len: int, log_seg: int) -> dict:
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    import test_rv32_segments as T
    from steadfast.prover.api import Prover, verify
    from steadfast.rv32.blockfile import Block, Transaction
    long_prog = T.program(_iterations(T, (1 << (log_len - 1)) - (1 << 10)))
    short_prog = T.program(_iterations(T, (1 << 18) - (1 << 10)))
    txs = [Transaction(long_prog, T.INPUT, None, None, "long")]
    txs += [Transaction(short_prog, T.INPUT, None, None, f"short{i}")
            for i in range(1 << (log_len - 1 - 18))]
    blk = Block(tuple(txs), 1 << 30)
    cycles = _cycles(long_prog, T.INPUT) + (len(txs) - 1) * _cycles(short_prog, T.INPUT)
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    p = Prover().prove_block(blk)
    prove_s = time.perf_counter() - t
    data = p.to_bytes()
    t = time.perf_counter()
    r = verify(data, blk)
    return {"block": True, "log_len": log_len, "log_segment": log_seg, "cycles": cycles,
            "transactions": len(txs), "parts": len(r.parts),
            "segments": sum(q.segments for q in r.parts), "prove_s": round(prove_s, 2),
            "cycles_per_s": round(cycles / prove_s), "proof_bytes": len(data),
            "verify_s": round(time.perf_counter() - t, 3),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "load": [round(load0, 1), round(os.getloadavg()[0], 1)]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--segment", type=int, default=20, help="log2 segment cycles (default 20)")
    ap.add_argument("--lengths", type=int, nargs="+", default=[22, 24],
                    help="log2 run lengths (default 22 24)")
    ap.add_argument("--baseline", action="store_true",
                    help="first, one proof of a run of one segment's length (the ratio's base)")
    ap.add_argument("--block", action="store_true",
                    help="blocks in epochs of these lengths instead of programs")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one is not None:
        print(json.dumps(one_block(a.one, a.segment) if a.block
                         else one(a.one, None if a.single else a.segment)))
        return
    print(f"load average {os.getloadavg()[0]:.1f}; tree "
          + subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True, cwd=HERE).stdout.strip())
    runs = ([(a.segment, True)] if a.baseline else []) + [(n, False) for n in a.lengths]
    rows = []
    for n, single in runs:
        cmd = [sys.executable, __file__, "--segment", str(a.segment), "--one", str(n)]
        out = subprocess.run(cmd + (["--single"] if single else [])
                             + (["--block"] if a.block and not single else []),
                             capture_output=True,
                             text=True, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    if a.baseline and len(rows) > 1:
        base = rows[0]
        for r in rows[1:]:
            print(f"2^{r['log_len']}: {r['cycles']:,} cycles in {r['segments']} segments: "
                  f"{r['cycles_per_s'] / base['cycles_per_s']:.2f}x the one-segment "
                  f"cycles/s, peak RSS {r['peak_rss_mib']:,} MiB "
                  f"({r['peak_rss_mib'] / base['peak_rss_mib']:.2f}x)")
        big = rows[1:]
        if len(big) > 1:
            print(f"peak RSS 2^{big[-1]['log_len']} / 2^{big[0]['log_len']}: "
                  f"{big[-1]['peak_rss_mib'] / big[0]['peak_rss_mib']:.3f}")


if __name__ == "__main__":
    main()
