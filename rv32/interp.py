"""The reference interpreter: the RV32IM machine in plain Python, the executable spec.

Slow (0.2-2 M instructions/s) and clear; :mod:`rv32.fastexec` is the compiled loop
that must agree with it exactly (registers, memory, outputs, exit code, errors with pc and
cycle, and the record).  docs/rv32.md states the same semantics in prose.

Values are Python ints in [0, 2^32); :func:`signed` reads one as two's complement.  One
cycle per instruction: the cycle limit is checked before each instruction, so a run that
exits on its max_cycles-th instruction succeeds.
"""
from __future__ import annotations

import struct

from . import abi, isa
from .errors import (ERR_BUFFER, ERR_CANONICAL, ERR_CYCLES, ERR_FETCH, ERR_ILLEGAL,
                     ERR_JUMP, ERR_MISALIGNED, ERR_OUTPUT, ERR_POINTER, ERR_SYSCALL,
                     execution_error)
from .execution import Execution
from .memory import Memory
from .record import Record

MASK = abi.MASK


def signed(v: int) -> int:
    return v - (1 << 32) if v & 0x8000_0000 else v


def _div(a: int, b: int) -> tuple[int, int]:
    """Signed quotient and remainder (toward zero) with the spec's special cases."""
    if b == 0:
        return MASK, a                             # -1, dividend
    sa, sb = signed(a), signed(b)
    if sa == -(1 << 31) and sb == -1:
        return a, 0                                # overflow: -2^31, 0
    q = abs(sa) // abs(sb)
    if (sa < 0) != (sb < 0):
        q = -q
    return q & MASK, (sa - q * sb) & MASK


def alu(op: int, a: int, b: int) -> int:
    """The result of register-register op ``op`` (ADD .. REMU) on a, b in [0, 2^32)."""
    if op == isa.ADD:
        return (a + b) & MASK
    if op == isa.SUB:
        return (a - b) & MASK
    if op == isa.SLL:
        return (a << (b & 31)) & MASK
    if op == isa.SLT:
        return int(signed(a) < signed(b))
    if op == isa.SLTU:
        return int(a < b)
    if op == isa.XOR:
        return a ^ b
    if op == isa.SRL:
        return a >> (b & 31)
    if op == isa.SRA:
        return (signed(a) >> (b & 31)) & MASK
    if op == isa.OR:
        return a | b
    if op == isa.AND:
        return a & b
    if op == isa.MUL:
        return (a * b) & MASK
    if op == isa.MULH:
        return ((signed(a) * signed(b)) >> 32) & MASK
    if op == isa.MULHSU:
        return ((signed(a) * b) >> 32) & MASK
    if op == isa.MULHU:
        return (a * b) >> 32
    if op == isa.DIV:
        return _div(a, b)[0]
    if op == isa.REM:
        return _div(a, b)[1]
    if op == isa.DIVU:
        return MASK if b == 0 else a // b
    if op == isa.REMU:
        return a if b == 0 else a % b
    raise ValueError(f"not an ALU op: {op}")


def branch_taken(op: int, a: int, b: int) -> bool:
    if op == isa.BEQ:
        return a == b
    if op == isa.BNE:
        return a != b
    if op == isa.BLT:
        return signed(a) < signed(b)
    if op == isa.BGE:
        return signed(a) >= signed(b)
    if op == isa.BLTU:
        return a < b
    return a >= b                                  # BGEU


_LOAD_SIZE = {isa.LB: 1, isa.LH: 2, isa.LW: 4, isa.LBU: 1, isa.LHU: 2}
_STORE_SIZE = {isa.SB: 1, isa.SH: 2, isa.SW: 4}


class _Fail(Exception):
    def __init__(self, code, *detail):
        self.code = code
        self.detail = detail


def _poseidon2(words: list[int]) -> list[int]:
    """Lanes 0..7 of Poseidon2 over the 16 words: the verifier's compression."""
    import numpy as np
    from ..verifier.poseidon2 import compress
    out = compress(np.array(words[:8], np.uint32), np.array(words[8:], np.uint32))
    return [int(v) for v in out[0]]


class _Machine:
    def __init__(self, program, input: bytes, record: bool):
        self.x = [0] * 32
        self.x[abi.SP] = abi.STACK_TOP
        self.pc = program.entry
        self.mem = Memory.from_program(program)
        self.code = program.code_ranges()
        self.decoded: dict[int, tuple] = {}
        self.input = bytes(input)
        self.in_pos = 0
        self.out = bytearray()
        self.err = bytearray()
        self.exit_code = None
        self.keep = record
        self.rows: list = []
        self.ecalls: list = []
        self.ecall_mem: list = []

    def fetch(self, pc: int) -> tuple:
        hit = self.decoded.get(pc)
        if hit is None:
            for start, data in self.code:
                if start <= pc and pc + 4 <= start + len(data):
                    word = struct.unpack_from("<I", data, pc - start)[0]
                    hit = self.decoded[pc] = (word, *isa.decode_fields(word))
                    break
            else:
                raise _Fail(ERR_FETCH)
        return hit

    # ------------------------------------------------------------------ one instruction

    def step(self, cycle: int) -> None:
        pc, x = self.pc, self.x
        word, op, rd, rs1, rs2, imm = self.fetch(pc)
        if op == isa.INVALID:
            raise _Fail(ERR_ILLEGAL, word)
        a, b = x[rs1], x[rs2]
        npc = (pc + 4) & MASK
        val = None                       # the value written to rd, if any
        maddr = mb = ma = 0
        if isa.R_FIRST <= op <= isa.R_LAST:
            val = alu(op, a, b)
        elif isa.I_FIRST <= op <= isa.I_LAST:
            val = alu(op - isa.I_OFFSET, a, imm & MASK)
        elif isa.LOAD_FIRST <= op <= isa.LOAD_LAST:
            maddr = (a + imm) & MASK
            size = _LOAD_SIZE[op]
            if maddr % size:
                raise _Fail(ERR_MISALIGNED, maddr, size, 0)
            mb = ma = self.mem.load_word(maddr & ~3)
            raw = (mb >> (8 * (maddr & 3))) & ((1 << (8 * size)) - 1)
            if op in (isa.LB, isa.LH) and raw >> (8 * size - 1):
                raw -= 1 << (8 * size)                       # sign-extend
            val = raw & MASK
        elif isa.STORE_FIRST <= op <= isa.STORE_LAST:
            maddr = (a + imm) & MASK
            size = _STORE_SIZE[op]
            if maddr % size:
                raise _Fail(ERR_MISALIGNED, maddr, size, 1)
            mb = self.mem.load_word(maddr & ~3)
            shift = 8 * (maddr & 3)
            field = ((1 << (8 * size)) - 1) << shift
            ma = (mb & ~field) | ((b << shift) & field)
            self.mem.store_word(maddr & ~3, ma)
        elif isa.BRANCH_FIRST <= op <= isa.BRANCH_LAST:
            if branch_taken(op, a, b):
                npc = self._target(pc + imm)
        elif op == isa.LUI:
            val = imm & MASK
        elif op == isa.AUIPC:
            val = (pc + imm) & MASK
        elif op == isa.JAL:
            val = npc
            npc = self._target(pc + imm)
        elif op == isa.JALR:
            val = npc
            npc = self._target((a + imm) & ~1)
        elif op == isa.FENCE:
            pass
        else:                                                # ECALL
            npc = self.ecall(cycle, npc)
        rd_val = 0
        if val is not None and rd != 0:
            x[rd] = rd_val = val
        if self.keep:
            self.rows.append((pc, word, a, b, rd_val, maddr, mb, ma, npc))
        self.pc = npc

    @staticmethod
    def _target(t: int) -> int:
        t &= MASK
        if t % 4:
            raise _Fail(ERR_JUMP, t)
        return t

    # ------------------------------------------------------------------ system calls

    def ecall(self, cycle: int, npc: int) -> int:
        x = self.x
        n, a0, a1, a2 = x[17], x[10], x[11], x[12]
        event = len(self.ecalls)
        touched: list = []
        if n == abi.SYS_READ:
            if a0 != abi.FD_STDIN:
                res = abi.NEG_EBADF
            else:
                self._buffer(n, a1, a2)
                data = self.input[self.in_pos:self.in_pos + a2]
                self.in_pos += len(data)
                res = len(data)
                for w in _words(a1, res):
                    before = self.mem.load_word(w)
                    self.mem.write(max(w, a1), data[max(w, a1) - a1:min(w + 4, a1 + res) - a1])
                    touched.append((w, before, self.mem.load_word(w), 1))
        elif n == abi.SYS_WRITE:
            if a0 not in (abi.FD_STDOUT, abi.FD_STDERR):
                res = abi.NEG_EBADF
            else:
                self._buffer(n, a1, a2)
                sink = self.out if a0 == abi.FD_STDOUT else self.err
                if len(sink) + a2 > abi.MAX_OUTPUT_BYTES:
                    raise _Fail(ERR_OUTPUT, a0, len(sink) + a2)
                for w in _words(a1, a2):
                    v = self.mem.load_word(w)
                    touched.append((w, v, v, 0))
                sink += self.mem.read(a1, a2)
                res = a2
        elif n in (abi.SYS_EXIT, abi.SYS_EXIT_GROUP):
            self.exit_code = a0 & 0xFF
            res = a0
            npc = self.pc                                    # halts at the ECALL
        elif n == abi.SYS_POSEIDON2:
            for p in (a0, a1):
                if p % 4:
                    raise _Fail(ERR_POINTER, n, p)
            self._buffer(n, a0, 4 * abi.POSEIDON2_IN_WORDS)
            self._buffer(n, a1, 4 * abi.POSEIDON2_OUT_WORDS)
            ins = [self.mem.load_word(a0 + 4 * i) for i in range(abi.POSEIDON2_IN_WORDS)]
            for i, v in enumerate(ins):
                if v >= abi.P:
                    raise _Fail(ERR_CANONICAL, a0 + 4 * i, v)
            touched = [(a0 + 4 * i, v, v, 0) for i, v in enumerate(ins)]
            for i, v in enumerate(_poseidon2(ins)):
                w = a1 + 4 * i
                touched.append((w, self.mem.load_word(w), v, 1))
                self.mem.store_word(w, v)
            res = 0
        else:
            raise _Fail(ERR_SYSCALL, n)
        x[10] = res
        if self.keep:
            self.ecalls.append((cycle, n, a0, a1, a2, res))
            self.ecall_mem += [(event, *t) for t in touched]
        return npc

    @staticmethod
    def _buffer(n: int, addr: int, length: int) -> None:
        if addr + length > 1 << 32:
            raise _Fail(ERR_BUFFER, n, addr, length)


def _words(addr: int, length: int) -> range:
    """The aligned word addresses overlapping [addr, addr + length)."""
    if length == 0:
        return range(0)
    return range(addr & ~3, addr + length, 4)


def run(program, input: bytes = b"", max_cycles: int = abi.DEFAULT_MAX_CYCLES,
        record: bool = False) -> Execution:
    """Execute ``program`` on ``input``; raise :class:`~rv32.errors.ExecutionError`."""
    max_cycles = abi.check_run_limits(input, max_cycles)
    m = _Machine(program, input, record)
    cycle = 0
    while m.exit_code is None:
        try:
            if cycle >= max_cycles:
                raise _Fail(ERR_CYCLES, max_cycles)
            m.step(cycle)
        except _Fail as f:
            raise execution_error(f.code, m.pc, cycle, f.detail) from None
        cycle += 1
    rec = None
    if record:
        rec = Record.from_lists(m.rows, m.ecalls, m.ecall_mem, m.input, bytes(m.out))
    return Execution(cycles=cycle, exit_code=m.exit_code, output=bytes(m.out),
                     stderr=bytes(m.err), regs=m.x, pc=m.pc, memory=m.mem, record=rec)


__all__ = ["run", "alu", "branch_taken", "signed"]
