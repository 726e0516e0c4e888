"""Write a valid block of about 2^k cycles with a chosen share of HASH instructions.

    PYTHONPATH=. python bench/make_block.py --log-cycles 16 --hash-share 0.25 -o /tmp/b16.json

The block runs the ``mix`` sample program (vm/programs.py): arithmetic, LOAD/STORE on a
wrapping table pointer, an LT per iteration, and HASHes, over ``--txs`` transactions whose
iteration counts are drawn from ``--seed``.  The cycle count (prologue and epilogue
included) is at most 2^k and within one loop iteration of it, so the CPU table has exactly
2^k rows.  Claimed outputs are filled in by running the block once.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from steadfast.vm.interpreter import execute  # noqa: E402
from steadfast.vm.programs import dump_block, sized_block  # noqa: E402
from steadfast.vm import isa  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log-cycles", "-k", type=int, required=True, help="k: about 2^k cycles")
    ap.add_argument("--hash-share", type=float, default=0.25,
                    help="share of cycles that are HASH instructions (0 <= x < 1)")
    ap.add_argument("--memory-size", type=int, default=1024)
    ap.add_argument("--table-size", type=int, default=256)
    ap.add_argument("--txs", type=int, default=8, help="number of transactions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    args = ap.parse_args(argv)
    if not 8 <= args.log_cycles <= 21:
        ap.error("--log-cycles must be in [8, 21]")
    try:
        block = sized_block(args.log_cycles, args.hash_share, args.seed, args.memory_size,
                            args.table_size, args.txs)
    except ValueError as exc:
        ap.error(str(exc))
    rec = execute(block)
    ops = rec.rom.rows[rec.pc, 0]
    share = float((ops == isa.HASH).mean())
    text = dump_block(block)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as fh:
            fh.write(text)
    print(f"block: {rec.cycles} cycles (2^{args.log_cycles} = {1 << args.log_cycles}), "
          f"{len(block.transactions)} transactions, HASH share {share:.3f}, "
          f"{len(rec.hash_cycle)} permutations", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
