"""The ROM: how a block's programs and the system code are laid out in the PROGRAM table.

Layout (pc = row index; ``M`` = memory_size)::

    [0, M/8)            ABSORB_INIT a=8k      hash the initial memory (state sponge)
    M/8                 DISPATCH              start a transaction / the epilogue
    entry_0 ...         program 0 (targets relocated), then one INVALID guard row
    entry_1 ...         program 1, guard
    ...
    epi_start ...       ABSORB_FINAL a=8k     hash the final memory, M/8 rows
    stop_pc             STOP

A program that runs past its last instruction reaches its guard row; an instruction with an
unknown opcode or an out-of-range operand is stored as INVALID (operands 0).  INVALID rows
have opcode 0, which no CPU row can carry, so no execution -- honest or not -- passes them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import isa
from .block import Block

FIELDS = ("opcode", "a", "b", "c")


@dataclass(frozen=True)
class Rom:
    """``rows``: int64[n, 4] of (opcode, a, b, c) canonical; ``source[pc]`` is
    ``(program index, instruction index)`` for user code, ``(-1, -1)`` for system rows and
    ``(program, len)`` for a program's guard row; ``errors[pc]`` says why a row is INVALID."""
    rows: np.ndarray
    entries: tuple
    dispatch_pc: int
    epi_start: int
    stop_pc: int
    source: tuple
    errors: dict

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def flat(self) -> list[int]:
        """The ROM as one list (opcode, a, b, c per row): what the program digest hashes."""
        return [int(x) for x in self.rows.reshape(-1)]


def build_rom(block: Block) -> Rom:
    n_chunks = block.memory_size // 8
    rows: list[tuple] = []
    source: list[tuple] = []
    errors: dict[int, str] = {}
    for k in range(n_chunks):
        rows.append((isa.ABSORB_INIT, 8 * k, 0, 0))
        source.append((-1, -1))
    dispatch_pc = len(rows)
    rows.append((isa.DISPATCH, 0, 0, 0))
    source.append((-1, -1))
    entries = []
    for pi, prog in enumerate(block.programs):
        base = len(rows)
        entries.append(base)
        for ii, ins in enumerate(prog.code):
            pc = len(rows)
            source.append((pi, ii))
            if ins.error is not None:
                rows.append((isa.INVALID, 0, 0, 0))
                errors[pc] = ins.error
                continue
            spec = isa.USER_OPS[ins.op]
            f = {"a": 0, "b": 0, "c": 0}
            for kind, name, value in zip(spec.operands, spec.fields, ins.operands):
                f[name] = (value + base) if kind == "target" else value % isa.P
            rows.append((spec.opcode, f["a"], f["b"], f["c"]))
        errors[len(rows)] = f"ran past the end of program {prog.name!r}"
        source.append((pi, len(prog.code)))
        rows.append((isa.INVALID, 0, 0, 0))
    epi_start = len(rows)
    for k in range(n_chunks):
        rows.append((isa.ABSORB_FINAL, 8 * k, 0, 0))
        source.append((-1, -1))
    stop_pc = len(rows)
    rows.append((isa.STOP, 0, 0, 0))
    source.append((-1, -1))
    return Rom(np.array(rows, dtype=np.int64), tuple(entries), dispatch_pc, epi_start, stop_pc,
               tuple(source), errors)
