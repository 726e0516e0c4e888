"""The public values of a block proof and how to compute them.

Layout (42 canonical field elements; docs/vm.md "Public values")::

    [0]       memory_size M
    [1:9]     initial-state digest   D(initial memory, M cells)
    [9:17]    final-state digest     D(final memory) -- proven, not claimed by the block
    [17:25]   program digest         D(ROM rows (opcode, a, b, c), in pc order)
    [25:33]   input digest           I/O chain over the DISPATCH and READ events
    [33:41]   output digest          I/O chain over the claimed outputs (WRITE events)
    [41]      max_cycles             the block's cycle limit (1..2^21; default 2^21)

D is :func:`vm.poseidon2.statement_digest`: the SPEC section 3 overwrite sponge started
from a state whose lane 8 holds the input length (so it binds the length).  The CPU AIR
enforces clk < max_cycles on its STOP row, i.e. cycles <= max_cycles, exactly the
interpreter's rule.

An I/O chain starts at eight zeros and absorbs each event e (8 elements) as
acc' = compress(e, acc); events are (value, tag, tx, position, 0, 0, 0, 0) with tag 1 =
DISPATCH (value = the entry pc, position 0), 2 = input, 3 = output.  The chains need no
length rule: every step absorbs one whole 8-element event (no partial block), so two
different event sequences with one chain value give either a compress collision or a
compress preimage of the all-zero start (Merkle-Damgard from a fixed IV); the input
chain also ends with the terminal DISPATCH event, which carries the transaction count.

Everything except the final digest is a function of the block alone
(:func:`block_public_values`), so a verifier holding the block checks those without
executing it; the final digest is what the proof establishes.
"""
from __future__ import annotations

from . import isa
from .block import Block
from .poseidon2 import compress, statement_digest
from .rom import Rom, build_rom

NUM_PUBLIC_VALUES = 42
PV_MEMORY_SIZE = 0
PV_INITIAL = slice(1, 9)
PV_FINAL = slice(9, 17)
PV_PROGRAMS = slice(17, 25)
PV_INPUTS = slice(25, 33)
PV_OUTPUTS = slice(33, 41)
PV_MAX_CYCLES = 41
PV_NAMES = {"memory_size": PV_MEMORY_SIZE, "initial_digest": PV_INITIAL, "final_digest": PV_FINAL,
            "program_digest": PV_PROGRAMS, "input_digest": PV_INPUTS,
            "output_digest": PV_OUTPUTS, "max_cycles": PV_MAX_CYCLES}


def program_digest(rom_rows) -> list[int]:
    """The program digest of a ROM (int[rows, 4] or a :class:`Rom`): D over its rows
    (opcode, a, b, c) in pc order -- what ``verify`` recomputes from a proof's ROM."""
    rows = rom_rows.rows if isinstance(rom_rows, Rom) else rom_rows
    return statement_digest(rows.reshape(-1))


def input_chain(block: Block, rom: Rom) -> list[int]:
    acc = [0] * 8
    for i, tx in enumerate(block.transactions):
        acc = compress([rom.entries[tx.program], isa.TAG_DISPATCH, i, 0, 0, 0, 0, 0], acc)
        for j, v in enumerate(tx.inputs):
            acc = compress([v, isa.TAG_INPUT, i, j, 0, 0, 0, 0], acc)
    n = len(block.transactions)
    return compress([rom.epi_start, isa.TAG_DISPATCH, n, 0, 0, 0, 0, 0], acc)


def output_chain(block: Block) -> list[int]:
    acc = [0] * 8
    for i, tx in enumerate(block.transactions):
        for j, v in enumerate(tx.outputs):
            acc = compress([v, isa.TAG_OUTPUT, i, j, 0, 0, 0, 0], acc)
    return acc


def block_public_values(block: Block, rom: Rom | None = None,
                        final_digest: list[int] | None = None) -> list[int]:
    """The public values a proof of ``block`` must carry; the final digest slot holds
    ``final_digest`` (zeros if not given -- a verifier compares the other slots)."""
    rom = rom if rom is not None else build_rom(block)
    pv = [0] * NUM_PUBLIC_VALUES
    pv[PV_MEMORY_SIZE] = block.memory_size
    pv[PV_INITIAL] = statement_digest(block.dense_memory())
    pv[PV_FINAL] = list(final_digest) if final_digest is not None else [0] * 8
    pv[PV_PROGRAMS] = program_digest(rom)
    pv[PV_INPUTS] = input_chain(block, rom)
    pv[PV_OUTPUTS] = output_chain(block)
    pv[PV_MAX_CYCLES] = block.max_cycles
    return pv


def describe_mismatch(expected: list[int], got: list[int], check_final: bool = False) -> list[str]:
    """Names of the public-value groups that differ (the final digest only if asked)."""
    bad = []
    for name, idx in PV_NAMES.items():
        if name == "final_digest" and not check_final:
            continue
        e = expected[idx] if isinstance(idx, slice) else [expected[idx]]
        g = got[idx] if isinstance(idx, slice) else [got[idx]]
        if list(map(int, e)) != list(map(int, g)):
            bad.append(name)
    return bad
