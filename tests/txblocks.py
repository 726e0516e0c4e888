"""Small blocks of RISC-V transactions (block format 2) shared by the API, CLI, cluster and
recovery tests: the guests' ELFs (guests/bin) on their committed inputs, kept to a few
hundred cycles each.  Each function returns a parsed :class:`rv32.blockfile.Block`;
:func:`block_json` its self-contained JSON object (ELFs inline)."""
from __future__ import annotations

from pathlib import Path

from steadfast.rv32.blockfile import Block, Transaction
from steadfast.rv32.elf import load_elf

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / "guests" / "bin"
INPUTS = ROOT / "guests" / "inputs"
_ELF: dict = {}


def program(name: str):
    """guests/bin/NAME.elf, loaded once per process."""
    if name not in _ELF:
        _ELF[name] = load_elf(BIN / f"{name}.elf")
    return _ELF[name]


def guest_input(guest: str, case: str) -> bytes:
    return (INPUTS / guest / f"{case}.in").read_bytes()


def tx(name: str, data: bytes = b"", output: bytes | None = None,
       exit_code: int | None = None) -> Transaction:
    return Transaction(program(name), bytes(data), output, exit_code, name)


def block(*txs: Transaction, max_cycles: int = 1 << 16,
          state_in: bytes = bytes(32)) -> Block:
    return Block(tuple(txs), max_cycles, state_in)


def empty_block() -> Block:
    """No transactions: only the shared BYTES and POSEIDON2 tables."""
    return block()


def one_tx_block() -> Block:
    """One hello transaction with its output and exit code claimed."""
    return block(tx("hello", b"abc", b"hello from rv32im\ncba", 0))


def hash_heavy_block() -> Block:
    """Two Merkle-root transactions (Poseidon2 precompile calls) and a hello."""
    return block(tx("merkle", guest_input("merkle", "n5")), tx("hello", b"xy"),
                 tx("merkle", guest_input("merkle", "n2")))


def memory_heavy_block() -> Block:
    """Sorting and a transfer ledger: loads and stores."""
    return block(tx("sort", guest_input("sort", "extremes")),
                 tx("transfer", guest_input("transfer", "statuses")))


def block_json(blk: Block) -> dict:
    return blk.to_json()
