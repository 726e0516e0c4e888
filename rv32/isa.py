"""RV32IM: the instructions the machine executes, and their decoder.

Every RV32I user-level instruction and the M extension (docs/rv32.md "Instructions" has the
table with each one's semantics).  An instruction decodes to ``(op, rd, rs1, rs2, imm)``:
``op`` one of the ids below, register fields 0 where the format has none (so x[field] reads
0: U/J formats have no rs1, I/U/J no rs2, S/B no rd; FENCE and ECALL read and write no
register), ``imm`` the sign-extended immediate as a Python int (LUI/AUIPC: the value
``imm20 << 12`` as a signed 32-bit int; shifts: the amount 0..31).

The ids are grouped so that an interpreter can test ranges: R-type ALU 1..10, M 11..18,
I-type ALU 19..28 in the R order (an I op is its R op + 18; 20 would be "SUBI" and is never
decoded), loads, stores, branches, then LUI .. ECALL.

What does not decode (:data:`INVALID`): EBREAK, every CSR and other SYSTEM instruction,
FENCE.I (the Zifencei extension is not part of the machine: instruction fetch reads the
program image, which stores never change), compressed (C) encodings, the reserved
encodings of every major opcode (a funct3/funct7 the spec leaves unused, SLLI/SRLI/SRAI
with shamt[5] set).  FENCE (funct3 0, including FENCE.TSO and PAUSE) is a no-op whatever
its other fields hold, as the spec allows.

:func:`decode_fields` is written in the subset of Python that numba compiles, and the
compiled loop (:mod:`rv32.fastexec`) compiles this very function: one decoder for both
interpreters (the tests check it against the assembler of :mod:`rv32.asm` and GNU as).
"""
from __future__ import annotations

from dataclasses import dataclass

INVALID = 0
ADD, SUB, SLL, SLT, SLTU, XOR, SRL, SRA, OR, AND = range(1, 11)
MUL, MULH, MULHSU, MULHU, DIV, DIVU, REM, REMU = range(11, 19)
I_OFFSET = 18                                   # I-type ALU op = its R-type op + 18
ADDI, SLLI, SLTI, SLTIU, XORI, SRLI, SRAI, ORI, ANDI = (ADD + 18, SLL + 18, SLT + 18,
                                                       SLTU + 18, XOR + 18, SRL + 18,
                                                       SRA + 18, OR + 18, AND + 18)
LB, LH, LW, LBU, LHU = range(29, 34)
SB, SH, SW = range(34, 37)
BEQ, BNE, BLT, BGE, BLTU, BGEU = range(37, 43)
LUI, AUIPC, JAL, JALR, FENCE, ECALL = range(43, 49)
NUM_OPS = 49

R_FIRST, R_LAST = ADD, REMU                     # register-register ops (ALU and M)
I_FIRST, I_LAST = ADDI, ANDI
LOAD_FIRST, LOAD_LAST = LB, LHU
STORE_FIRST, STORE_LAST = SB, SW
BRANCH_FIRST, BRANCH_LAST = BEQ, BGEU

NAMES = {INVALID: "invalid", ADD: "add", SUB: "sub", SLL: "sll", SLT: "slt", SLTU: "sltu",
         XOR: "xor", SRL: "srl", SRA: "sra", OR: "or", AND: "and", MUL: "mul",
         MULH: "mulh", MULHSU: "mulhsu", MULHU: "mulhu", DIV: "div", DIVU: "divu",
         REM: "rem", REMU: "remu", ADDI: "addi", SLLI: "slli", SLTI: "slti",
         SLTIU: "sltiu", XORI: "xori", SRLI: "srli", SRAI: "srai", ORI: "ori",
         ANDI: "andi", LB: "lb", LH: "lh", LW: "lw", LBU: "lbu", LHU: "lhu", SB: "sb",
         SH: "sh", SW: "sw", BEQ: "beq", BNE: "bne", BLT: "blt", BGE: "bge", BLTU: "bltu",
         BGEU: "bgeu", LUI: "lui", AUIPC: "auipc", JAL: "jal", JALR: "jalr",
         FENCE: "fence", ECALL: "ecall"}
OPS = {name: op for op, name in NAMES.items() if op != INVALID}

# Major opcodes (bits 6..0)
OPC_LOAD, OPC_MISC_MEM, OPC_OP_IMM, OPC_AUIPC, OPC_STORE, OPC_OP, OPC_LUI, OPC_BRANCH, \
    OPC_JALR, OPC_JAL, OPC_SYSTEM = 0x03, 0x0F, 0x13, 0x17, 0x23, 0x33, 0x37, 0x63, 0x67, \
    0x6F, 0x73
ECALL_WORD = 0x0000_0073
EBREAK_WORD = 0x0010_0073

# funct3 -> op of each group (-1: reserved)
_LOAD_F3 = (LB, LH, LW, -1, LBU, LHU, -1, -1)
_STORE_F3 = (SB, SH, SW, -1, -1, -1, -1, -1)
_BRANCH_F3 = (BEQ, BNE, -1, -1, BLT, BGE, BLTU, BGEU)
_OP_F3 = (ADD, SLL, SLT, SLTU, XOR, SRL, OR, AND)          # funct7 0 (SUB/SRA: funct7 0x20)
_M_F3 = (MUL, MULH, MULHSU, MULHU, DIV, DIVU, REM, REMU)    # funct7 1
_OPIMM_F3 = (ADDI, SLLI, SLTI, SLTIU, XORI, SRLI, ORI, ANDI)


def decode_fields(word):
    """``(op, rd, rs1, rs2, imm)`` of a 32-bit instruction word; op = INVALID when the
    machine does not execute it (then the other fields are 0).  Numba-compilable."""
    opc = word & 0x7F
    rd = (word >> 7) & 0x1F
    f3 = (word >> 12) & 0x7
    rs1 = (word >> 15) & 0x1F
    rs2 = (word >> 20) & 0x1F
    f7 = (word >> 25) & 0x7F
    imm_i = ((word >> 20) ^ 0x800) - 0x800
    if opc == OPC_OP_IMM:
        if f3 == 1:
            if f7 != 0:
                return INVALID, 0, 0, 0, 0
            return SLLI, rd, rs1, 0, rs2
        if f3 == 5:
            if f7 == 0:
                return SRLI, rd, rs1, 0, rs2
            if f7 == 0x20:
                return SRAI, rd, rs1, 0, rs2
            return INVALID, 0, 0, 0, 0
        return _OPIMM_F3[f3], rd, rs1, 0, imm_i
    if opc == OPC_OP:
        if f7 == 0:
            return _OP_F3[f3], rd, rs1, rs2, 0
        if f7 == 1:
            return _M_F3[f3], rd, rs1, rs2, 0
        if f7 == 0x20:
            if f3 == 0:
                return SUB, rd, rs1, rs2, 0
            if f3 == 5:
                return SRA, rd, rs1, rs2, 0
        return INVALID, 0, 0, 0, 0
    if opc == OPC_LOAD:
        op = _LOAD_F3[f3]
        if op < 0:
            return INVALID, 0, 0, 0, 0
        return op, rd, rs1, 0, imm_i
    if opc == OPC_STORE:
        op = _STORE_F3[f3]
        if op < 0:
            return INVALID, 0, 0, 0, 0
        imm_s = ((((word >> 25) << 5) | rd) ^ 0x800) - 0x800
        return op, 0, rs1, rs2, imm_s
    if opc == OPC_BRANCH:
        op = _BRANCH_F3[f3]
        if op < 0:
            return INVALID, 0, 0, 0, 0
        imm_b = (((word >> 31) & 1) << 12) | (((word >> 7) & 1) << 11) \
            | (((word >> 25) & 0x3F) << 5) | (((word >> 8) & 0xF) << 1)
        return op, 0, rs1, rs2, (imm_b ^ 0x1000) - 0x1000
    if opc == OPC_LUI or opc == OPC_AUIPC:
        imm_u = ((word & 0xFFFFF000) ^ 0x80000000) - 0x80000000
        return (LUI if opc == OPC_LUI else AUIPC), rd, 0, 0, imm_u
    if opc == OPC_JAL:
        imm_j = (((word >> 31) & 1) << 20) | (((word >> 12) & 0xFF) << 12) \
            | (((word >> 20) & 1) << 11) | (((word >> 21) & 0x3FF) << 1)
        return JAL, rd, 0, 0, (imm_j ^ 0x100000) - 0x100000
    if opc == OPC_JALR:
        if f3 != 0:
            return INVALID, 0, 0, 0, 0
        return JALR, rd, rs1, 0, imm_i
    if opc == OPC_MISC_MEM:
        if f3 == 0:
            return FENCE, 0, 0, 0, 0
        return INVALID, 0, 0, 0, 0
    if opc == OPC_SYSTEM:
        if word == ECALL_WORD:
            return ECALL, 0, 0, 0, 0
    return INVALID, 0, 0, 0, 0


@dataclass(frozen=True)
class Instruction:
    """A decoded instruction word (see the module docstring for the fields)."""
    word: int
    op: int
    rd: int
    rs1: int
    rs2: int
    imm: int

    @property
    def name(self) -> str:
        return NAMES[self.op]


def decode(word: int) -> Instruction:
    """Decode ``word`` (an int in [0, 2^32)); ``op`` is INVALID for a word the machine does
    not execute."""
    word = int(word)
    if not 0 <= word <= 0xFFFF_FFFF:
        raise ValueError(f"instruction word {word} is not a 32-bit value")
    return Instruction(word, *decode_fields(word))


def describe_illegal(word: int) -> str:
    """Why ``word`` does not execute (the text of an illegal-instruction error)."""
    opc = word & 0x7F
    f3 = (word >> 12) & 7
    if word & 3 != 3:
        return "a compressed (C extension) encoding; the machine is RV32IM"
    if word == EBREAK_WORD:
        return "EBREAK"
    if opc == OPC_SYSTEM:
        if f3 != 0:
            return "a CSR instruction (Zicsr is not part of the machine)"
        return "a SYSTEM instruction other than ECALL"
    if opc == OPC_MISC_MEM and f3 == 1:
        return ("FENCE.I (Zifencei is not part of the machine: instructions are fetched "
                "from the program image)")
    return "not an RV32IM instruction"


__all__ = ["decode", "decode_fields", "describe_illegal", "Instruction", "NAMES", "OPS",
           "INVALID", "NUM_OPS", "I_OFFSET"] + [n.upper() for n in OPS]
