"""REGISTERS: the boundary of the register file, the start of the execution, the exit.

64 preprocessed rows: rows 0..31 are x0..x31, row 32 the sink (writes to x0 land there,
nothing reads it), rows 33..35 the system-call cursors (fd 0's read position, the byte
counts of fd 1 and fd 2; a cursor is one field element in the ``lo`` slot).  Preprocessed
``idx, i_lo, i_hi`` (the state at entry: sp = STACK_TOP, everything else 0), ``reg``
(1 on rows 0..35), ``first`` (row 0), ``outc`` (row 34); main ``f_lo, f_hi, f_ts``: the
final value and the timestamp of the last access.

Buses: sends (REG, idx, i, 0) and receives (REG, idx, f, f_ts) on ``rv32_mem`` for every
register (multiplicity reg); on row 0 sends (entry / 4, 0) on ``rv32_exec`` -- the first
instruction -- and receives the public exit code on ``rv32_exit``.

Constraint ``output_len``: the final fd 1 cursor is the public output length.

Public values (the statement, rv32/statement.py): exit_code, output_len, input_len,
max_cycles, entry, the program digest (16 limbs of 16 bits), the input's SHA-256 (16
limbs).  The constraints read exit_code and output_len; the verifier compares the others
with the values it computes from the ELF and the input.

Why it is sound: each register has exactly one initial tuple (the preprocessed rows, one
per index), so as in MEMORY every register's accesses form one chain from the state at
entry.  The execution chain (common.py ``rv32_exec``) starts from the single tuple sent
here, and ends at the single exit ECALL whose code is received here (statement.py).
"""
from __future__ import annotations

import numpy as np

from ...air import AirBuilder

from .. import abi
from .common import CUR_OUT, EXEC, EXIT, MEM, NUM_REGS, REG, limbs16

PV_NAMES = (["exit_code", "output_len", "input_len", "max_cycles", "entry"]
            + [f"program_digest[{i}]" for i in range(16)]
            + [f"input_sha256[{i}]" for i in range(16)])
ROWS = 64
PREP = ("idx", "i_lo", "i_hi", "reg", "first", "outc")


def registers_prep() -> np.ndarray:
    prep = np.zeros((ROWS, len(PREP)), dtype=np.uint32)
    prep[:NUM_REGS, 0] = np.arange(NUM_REGS)
    prep[abi.SP, 1:3] = limbs16(abi.STACK_TOP)
    prep[:NUM_REGS, 3] = 1
    prep[0, 4] = 1
    prep[CUR_OUT, 5] = 1
    return prep


def build_registers(entry_w: int, log_blowup: int):
    b = AirBuilder("rv32_registers", public=PV_NAMES)
    c = {name: b.prep(name) for name in PREP}
    f_lo, f_hi, f_ts = b.main("f_lo"), b.main("f_hi"), b.main("f_ts")
    b.assert_zero(c["outc"] * (f_lo - b.pv("output_len")), name="output_len")
    b.assert_zero(c["outc"] * f_hi, name="output_len_hi")
    b.send(MEM, [REG, c["idx"], c["i_lo"], c["i_hi"], 0], multiplicity=c["reg"])
    b.receive(MEM, [REG, c["idx"], f_lo, f_hi, f_ts], multiplicity=c["reg"])
    b.send(EXEC, [int(entry_w), 0], multiplicity=c["first"])
    b.receive(EXIT, [b.pv("exit_code")], multiplicity=c["first"])
    return b.build(preprocessed=registers_prep(), log_blowup=log_blowup)


def register_init() -> np.ndarray:
    """uint32[NUM_REGS]: every register's value at entry (cursors 0)."""
    init = np.zeros(NUM_REGS, dtype=np.uint32)
    init[abi.SP] = abi.STACK_TOP
    return init


def registers_rows(f_lo: np.ndarray, f_hi: np.ndarray, f_ts: np.ndarray) -> dict:
    """Columns of rows 0..NUM_REGS-1: each register's final (lo, hi) slots and the
    timestamp of its last access."""
    return {"f_lo": f_lo, "f_hi": f_hi, "f_ts": f_ts}


__all__ = ["build_registers", "registers_prep", "register_init", "registers_rows", "PV_NAMES",
           "ROWS"]
