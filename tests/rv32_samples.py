"""Small RV32IM programs and their traces for the AIR, soundness and proof tests
(tests/test_rv32_airs.py, test_rv32_soundness.py, test_rv32_prove.py)."""
from __future__ import annotations

import functools

from steadfast import rv32
from steadfast.rv32 import asm
from steadfast.rv32.traces import build_traces

# Every instruction class: ALU (R and I), bitwise, shifts, M, loads and stores of every
# width at every offset, taken and not-taken branches, JAL / JALR / LUI / AUIPC / FENCE,
# a write to x0, read / write / poseidon2 / exit system calls, a bad fd and fd 2.
ALL_CLASSES = """
    li a0, 5
    li a1, -7
    add a2, a0, a1
    sub a3, a0, a1
    slt a4, a1, a0
    sltu a5, a1, a0
    slti s0, a1, -8
    sltiu s1, a0, 6
    addi a6, a1, 100
    xor t0, a0, a1
    or t1, a0, a1
    and t2, a0, a1
    xori t0, t0, -1
    ori t1, t1, 0x55
    andi t3, a1, 0x7f
    sll t4, a1, a0
    srl t5, a1, a0
    sra t6, a1, a0
    slli s1, a1, 31
    srli s1, a1, 9
    srai s1, a1, 17
    sll s1, a1, a1
    mul s2, a0, a1
    mulh s3, a0, a1
    mulhsu s4, a1, a0
    mulhu s5, a1, a1
    div s6, a1, a0
    rem s7, a1, a0
    divu s8, a1, a0
    remu s9, a1, a0
    div s10, a0, zero
    remu s10, a0, zero
    li t0, 0x80000000
    li t1, -1
    div s11, t0, t1
    rem s11, t0, t1
    li sp, 0x20000
    sw a1, 0(sp)
    sh a0, 6(sp)
    sh a1, 4(sp)
    sb a0, 9(sp)
    sb a1, 10(sp)
    sb a0, 8(sp)
    sb a1, 11(sp)
    lw s11, 0(sp)
    lh t0, 0(sp)
    lh t0, 6(sp)
    lhu t1, 2(sp)
    lb t2, 3(sp)
    lb t2, 10(sp)
    lbu t3, 9(sp)
    lbu t3, 11(sp)
    lw s11, 8(sp)
    beq a0, a0, l1
    addi a0, a0, 1
l1: bne a0, a0, l1
    bne a0, a1, l2
    nop
l2: blt a1, a0, l3
    nop
l3: bge a1, a0, l3
    bltu a1, a0, l3
    bgeu a1, a0, l4
    nop
l4: beq a0, a1, l4
    jal ra, f
    lui t4, 0x12345
    auipc t5, 1
    fence
    addi zero, a0, 1
    li a7, 63
    li a0, 0
    li a1, 0x20101
    li a2, 5
    ecall
    li a7, 63
    li a0, 3
    ecall
    li a7, 64
    li a0, 1
    li a1, 0x20102
    li a2, 3
    ecall
    li a7, 64
    li a0, 2
    li a2, 2
    ecall
    li a7, 64
    li a0, 7
    ecall
    li a7, 0x53460001
    li a0, 0x30000
    li a1, 0x20040
    ecall
    li a7, 93
    li a0, 0x107
    ecall
f:  addi x0, a0, 3
    jalr zero, 0(ra)
"""
ALL_INPUT = b"hello world"


def program(src: str, data=()) -> rv32.Program:
    return rv32.Program.from_words(asm.assemble(src, base=0x10000), data=data)


@functools.lru_cache(maxsize=None)
def all_classes():
    """(program, execution, traces) of ALL_CLASSES (built once per session)."""
    prog = program(ALL_CLASSES, data=[(0x30000, b"\x01\x02\x03\x04\x05\x06\x07\x08")])
    ex = rv32.execute(prog, ALL_INPUT, record=True)
    return prog, ex, build_traces(prog, ex, max_cycles=1000)


def traced(src: str, input: bytes = b"", max_cycles: int = 10_000, data=()):
    prog = program(src, data)
    ex = rv32.execute(prog, input, max_cycles=max_cycles, record=True)
    return prog, ex, build_traces(prog, ex, max_cycles=max_cycles)
