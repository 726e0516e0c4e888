"""Blocks of RISC-V transactions (block format 2) for the benches that prove many of them
(node_loop, recovery_soak, cluster_bench, proof_identity): ``bench/make_block.py``'s
blocks parsed, and a tiny one."""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.make_block import K_RANGE, v2_block  # noqa: E402

HELLO_OUT = b"hello from rv32im\ncba"


def sized_block(k: int, hash_share: float = 0.25, seed: int = 1, mem_log2: int = 10):
    """``bench/make_block.py -k K --seed SEED --hash-share H`` as a parsed
    :class:`rv32.blockfile.Block` (about 2^k cycles, k in K_RANGE)."""
    from steadfast.rv32.blockfile import parse_block
    return parse_block(v2_block(k, hash_share, seed, mem_log2)[0])


def tiny_block():
    """One hello transaction (guests/bin/hello.elf on b"abc"), its output and exit code
    claimed (tests/txblocks.py's one_tx_block): 172 cycles, 18 tables (its 16, the shared
    BYTES and POSEIDON2)."""
    from steadfast.rv32.blockfile import Block, Transaction
    from steadfast.rv32.elf import load_elf
    hello = load_elf(os.path.join(ROOT, "guests", "bin", "hello.elf"))
    return Block((Transaction(hello, b"abc", HELLO_OUT, 0, "hello"),), 1 << 16, bytes(32))


def check_k(ap, k: int) -> None:
    """argparse error unless make_block accepts k."""
    if not K_RANGE[0] <= k <= K_RANGE[1]:
        ap.error(f"--log-cycles must be in [{K_RANGE[0]}, {K_RANGE[1]}] (make_block's k)")


__all__ = ["sized_block", "tiny_block", "check_k", "K_RANGE"]
