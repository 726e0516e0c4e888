"""Segmented proving: cycles/s and peak RSS against the run's length at a fixed segment
size (docs/benchmarks.md "Segments").  Each size runs in its own process (peak RSS is the
process's): ``python bench/segment_bench.py --segment 16 --lengths 16 18 20``.
The program is tests/test_rv32_segments.py's loop (memory, MUL, byte stores, fd 1 writes
and Poseidon2 calls every 64 iterations; ~10 cycles an iteration)."""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def one(log_len: int, log_seg: int) -> dict:
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    import test_rv32_segments as T
    from steadfast.prover.api import Prover
    from steadfast.prover.program_verify import verify_program
    from steadfast import rv32
    iters = max(1, (1 << log_len) // 10)
    prog = T.program(iters)
    cycles = rv32.execute(prog, T.INPUT, max_cycles=1 << 24).cycles
    t = time.perf_counter()
    p = Prover().prove_program(prog, T.INPUT, max_cycles=1 << 30, segment_cycles=1 << log_seg)
    prove_s = time.perf_counter() - t
    data = p.to_bytes()
    t = time.perf_counter()
    r = verify_program(data, prog, T.INPUT)
    return {"log_len": log_len, "log_segment": log_seg, "cycles": cycles,
            "segments": r.segments, "prove_s": round(prove_s, 2),
            "cycles_per_s": round(cycles / prove_s), "proof_bytes": len(data),
            "verify_s": round(time.perf_counter() - t, 3),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--segment", type=int, default=16, help="log2 segment cycles (default 16)")
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 18], help="log2 run lengths")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one is not None:
        print(json.dumps(one(a.one, a.segment)))
        return
    print(f"load average {os.getloadavg()[0]:.1f}")
    for n in a.lengths:
        out = subprocess.run([sys.executable, __file__, "--segment", str(a.segment), "--one",
                              str(n)], capture_output=True, text=True, check=True).stdout
        print(out.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
