"""A VM node's loop: one Prover proves N different blocks in a row in one process.

    PYTHONPATH=. python bench/node_loop.py --blocks 20 [-k 10] [--queries 100]

The blocks are blocks of RISC-V transactions (block format 2): block i is
``bench/make_block.py -k K --seed i --hash-share H`` (:func:`bench.v2_blocks.sized_block`:
the bench guest, 0-2 small guests drawn by the seed and a hello filling it to about 2^K
cycles), made before the loop so that only proving is measured.  Prints one line per
block (transactions, cycles, prove seconds, cycles/s, proof bytes, RSS), then a last
line ``rss_growth_pct=X``: the resident set size after the last block against after the
second (the first blocks pay for numba compilation and caches).  The target is < 5 % for
20 blocks.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from steadfast.prover.api import Prover, ProverConfig, verify  # noqa: E402

from bench.v2_blocks import check_k, sized_block  # noqa: E402


def rss_bytes() -> int:
    """Current resident set size (Linux /proc; falls back to the peak elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # pragma: no cover - non-Linux
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=20)
    ap.add_argument("--log-cycles", "-k", type=int, default=10, help="about 2^k cycles a block")
    ap.add_argument("--hash-share", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=0, help="block i is make_block's seed SEED + i")
    ap.add_argument("--mem-log2", type=int, default=10,
                    help="the bench guest's memory working set: 2^N words (make_block's)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--pow-bits", type=int, default=16)
    ap.add_argument("--verify", action="store_true", help="also verify each proof")
    args = ap.parse_args(argv)
    if args.blocks < 2:
        ap.error("--blocks must be at least 2")
    check_k(ap, args.log_cycles)
    blocks = [sized_block(args.log_cycles, args.hash_share, args.seed + i, args.mem_log2)
              for i in range(args.blocks)]
    prover = Prover(ProverConfig(backend="host", num_queries=args.queries,
                                 pow_bits=args.pow_bits))
    gc.collect()
    rss = []
    for i in range(args.blocks):
        block, blocks[i] = blocks[i], None
        t = time.perf_counter()
        proof = prover.prove_block(block)
        dt = time.perf_counter() - t
        if args.verify:
            verify(proof, block=block, min_security_bits=0)   # --queries may be weak
        cycles = proof.stats.cycles
        size = len(proof.to_bytes())
        n_tx = len(block.transactions)
        del proof, block
        gc.collect()
        rss.append(rss_bytes())
        print(f"block {i:3d}: {n_tx} txs {cycles:>8,} cycles  {dt:7.2f}s  "
              f"{cycles / dt:9,.0f} cycles/s  proof {size:>9,} B  rss {rss[-1] / 2**20:8.1f} MiB",
              flush=True)
    growth = 100.0 * (rss[-1] - rss[1]) / rss[1]
    print(f"rss_growth_pct={growth:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
