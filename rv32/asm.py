"""A tiny RV32IM assembler: the tests' and the bench generator's way to write programs.

:func:`encode` turns one instruction into its 32-bit word; operands come in GNU order with
an ``offset(base)`` operand written as ``base, offset`` (every I- and S-type instruction
takes ``(rd or rs2, rs1, imm)``)::

    encode("add", (rd, rs1, rs2))        encode("addi", (rd, rs1, imm))
    encode("lw", (rd, rs1, offset))      encode("sw", (rs2, rs1, offset))
    encode("beq", (rs1, rs2, offset))    encode("jal", (rd, offset))
    encode("jalr", (rd, rs1, imm))       encode("lui", (rd, imm20))   # imm20 in [0, 2^20)
    encode("ecall", ())  encode("fence", ())  encode("ebreak", ())  encode("fence.i", ())

Registers are ints 0..31 or names (``x7``, ``a0``, ``sp``, ``fp``).  Offsets of branches
and JAL are byte offsets from the instruction (even; the machine also wants them 4-byte
aligned, a rule this encoder leaves to the machine so that tests can break it).

:func:`assemble` reads GNU-style text, one instruction or label a line (``#`` comments,
``label:``, ``.word N``), with labels as branch/jump targets and the pseudo-instructions
``nop``, ``li``, ``la``, ``mv``, ``not``, ``neg``, ``seqz``, ``snez``, ``j``, ``jr``,
``ret``, ``call``, ``beqz``, ``bnez``, ``bgt``, ``ble``, ``bgtu``, ``bleu``.  ``li``/``la``
take one word when the value fits 12 signed bits (``addi``) and two otherwise (``lui`` +
``addi``; ``la`` always two), so sizes, and with them label addresses, are known in one pass.
"""
from __future__ import annotations

import re
from typing import Sequence

from . import isa

ABI_NAMES = ["zero", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "s0", "s1", "a0", "a1", "a2",
             "a3", "a4", "a5", "a6", "a7", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9",
             "s10", "s11", "t3", "t4", "t5", "t6"]
_REGS = {name: i for i, name in enumerate(ABI_NAMES)}
_REGS.update({f"x{i}": i for i in range(32)})
_REGS["fp"] = 8


class AsmError(ValueError):
    """An instruction or operand the assembler cannot encode (names the line if any)."""


def reg(r) -> int:
    """Register number of an int 0..31 or a name."""
    if isinstance(r, str):
        try:
            return _REGS[r.strip().lower()]
        except KeyError:
            raise AsmError(f"unknown register {r!r}") from None
    if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < 32:
        raise AsmError(f"bad register {r!r}")
    return r


def _imm(v, lo: int, hi: int, what: str, multiple: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise AsmError(f"{what} must be an int, got {v!r}")
    if not lo <= v <= hi or v % multiple:
        extra = f", a multiple of {multiple}" if multiple > 1 else ""
        raise AsmError(f"{what} {v} is outside [{lo}, {hi}]{extra}")
    return v


_R = {"add": (0, 0x00), "sub": (0, 0x20), "sll": (1, 0x00), "slt": (2, 0x00),
      "sltu": (3, 0x00), "xor": (4, 0x00), "srl": (5, 0x00), "sra": (5, 0x20),
      "or": (6, 0x00), "and": (7, 0x00), "mul": (0, 0x01), "mulh": (1, 0x01),
      "mulhsu": (2, 0x01), "mulhu": (3, 0x01), "div": (4, 0x01), "divu": (5, 0x01),
      "rem": (6, 0x01), "remu": (7, 0x01)}
_I_ALU = {"addi": 0, "slti": 2, "sltiu": 3, "xori": 4, "ori": 6, "andi": 7}
_SHIFT = {"slli": (1, 0x00), "srli": (5, 0x00), "srai": (5, 0x20)}
_LOAD = {"lb": 0, "lh": 1, "lw": 2, "lbu": 4, "lhu": 5}
_STORE = {"sb": 0, "sh": 1, "sw": 2}
_BRANCH = {"beq": 0, "bne": 1, "blt": 4, "bge": 5, "bltu": 6, "bgeu": 7}
_FIXED = {"ecall": isa.ECALL_WORD, "ebreak": isa.EBREAK_WORD, "fence": 0x0FF0_000F,
          "fence.i": 0x0000_100F}

MNEMONICS = frozenset([*_R, *_I_ALU, *_SHIFT, *_LOAD, *_STORE, *_BRANCH, *_FIXED, "lui",
                       "auipc", "jal", "jalr"])


def _i_type(opc, f3, rd, rs1, imm):
    return ((imm & 0xFFF) << 20) | (rs1 << 15) | (f3 << 12) | (rd << 7) | opc


def _arity(mnemonic: str, operands: Sequence, n: int):
    if len(operands) != n:
        raise AsmError(f"{mnemonic} takes {n} operand(s), got {len(operands)}")


def encode(mnemonic: str, operands: Sequence = ()) -> int:
    """The 32-bit word of one RV32IM instruction (see the module docstring)."""
    m = mnemonic.strip().lower()
    ops = tuple(operands)
    if m in _FIXED:
        _arity(m, ops, 0)
        return _FIXED[m]
    if m in _R:
        _arity(m, ops, 3)
        f3, f7 = _R[m]
        rd, rs1, rs2 = (reg(r) for r in ops)
        return (f7 << 25) | (rs2 << 20) | (rs1 << 15) | (f3 << 12) | (rd << 7) | isa.OPC_OP
    if m in _I_ALU:
        _arity(m, ops, 3)
        imm = _imm(ops[2], -2048, 2047, f"{m} immediate")
        return _i_type(isa.OPC_OP_IMM, _I_ALU[m], reg(ops[0]), reg(ops[1]), imm)
    if m in _SHIFT:
        _arity(m, ops, 3)
        f3, f7 = _SHIFT[m]
        sh = _imm(ops[2], 0, 31, f"{m} shift amount")
        return (f7 << 25) | (sh << 20) | (reg(ops[1]) << 15) | (f3 << 12) \
            | (reg(ops[0]) << 7) | isa.OPC_OP_IMM
    if m in _LOAD or m == "jalr":
        _arity(m, ops, 3)
        imm = _imm(ops[2], -2048, 2047, f"{m} offset")
        opc, f3 = (isa.OPC_JALR, 0) if m == "jalr" else (isa.OPC_LOAD, _LOAD[m])
        return _i_type(opc, f3, reg(ops[0]), reg(ops[1]), imm)
    if m in _STORE:
        _arity(m, ops, 3)
        imm = _imm(ops[2], -2048, 2047, f"{m} offset") & 0xFFF
        return ((imm >> 5) << 25) | (reg(ops[0]) << 20) | (reg(ops[1]) << 15) \
            | (_STORE[m] << 12) | ((imm & 0x1F) << 7) | isa.OPC_STORE
    if m in _BRANCH:
        _arity(m, ops, 3)
        off = _imm(ops[2], -4096, 4094, f"{m} offset", 2) & 0x1FFF
        return (((off >> 12) & 1) << 31) | (((off >> 5) & 0x3F) << 25) | (reg(ops[1]) << 20) \
            | (reg(ops[0]) << 15) | (_BRANCH[m] << 12) | (((off >> 1) & 0xF) << 8) \
            | (((off >> 11) & 1) << 7) | isa.OPC_BRANCH
    if m in ("lui", "auipc"):
        _arity(m, ops, 2)
        imm20 = _imm(ops[1], 0, 0xFFFFF, f"{m} immediate")
        return (imm20 << 12) | (reg(ops[0]) << 7) | (isa.OPC_LUI if m == "lui" else isa.OPC_AUIPC)
    if m == "jal":
        _arity(m, ops, 2)
        off = _imm(ops[1], -(1 << 20), (1 << 20) - 2, "jal offset", 2) & 0x1FFFFF
        return (((off >> 20) & 1) << 31) | (((off >> 1) & 0x3FF) << 21) \
            | (((off >> 11) & 1) << 20) | (((off >> 12) & 0xFF) << 12) \
            | (reg(ops[0]) << 7) | isa.OPC_JAL
    raise AsmError(f"unknown mnemonic {mnemonic!r}")


def split_imm(value: int) -> tuple[int, int]:
    """``(hi20, lo12)`` with ``(hi20 << 12) + lo12 == value`` mod 2^32 and lo12 in
    [-2048, 2047]: the operands of ``lui rd, hi20; addi rd, rd, lo12``."""
    v = value & 0xFFFF_FFFF
    lo = ((v & 0xFFF) ^ 0x800) - 0x800
    return ((v - lo) >> 12) & 0xFFFFF, lo


def li(rd, value: int) -> list[int]:
    """Words loading the 32-bit ``value`` (any int, taken mod 2^32) into ``rd``."""
    v = value & 0xFFFF_FFFF
    sv = v - (1 << 32) if v >> 31 else v
    if -2048 <= sv <= 2047:
        return [encode("addi", (rd, 0, sv))]
    hi, lo = split_imm(v)
    return [encode("lui", (rd, hi)), encode("addi", (rd, rd, lo))]


# ------------------------------------------------------------------------- text assembler

_MEM_OPERAND = re.compile(r"^(.*)\((\s*\w+\s*)\)$")
_LABEL = re.compile(r"^[A-Za-z_.$][\w.$]*$")
_BRANCH_PSEUDO = {"beqz": ("beq", False), "bnez": ("bne", False), "bgt": ("blt", True),
                  "ble": ("bge", True), "bgtu": ("bltu", True), "bleu": ("bgeu", True)}


def _split_operands(text: str) -> list[str]:
    out = []
    for tok in (t.strip() for t in text.split(",")) if text.strip() else []:
        mm = _MEM_OPERAND.match(tok)
        if mm:                                   # offset(base) -> base, offset
            out += [mm.group(2).strip(), mm.group(1).strip() or "0"]
        else:
            out.append(tok)
    return out


def _num(tok: str) -> int:
    try:
        return int(tok, 0)
    except ValueError:
        raise AsmError(f"expected a number, got {tok!r}") from None


def _size(m: str, ops: list[str]) -> int:
    if m == "li":
        v = _num(ops[1]) & 0xFFFF_FFFF
        sv = v - (1 << 32) if v >> 31 else v
        return 1 if -2048 <= sv <= 2047 else 2
    return 2 if m == "la" else 1


def _target(tok: str, labels: dict, pc: int) -> int:
    if tok in labels:
        return labels[tok] - pc
    if _LABEL.match(tok):
        raise AsmError(f"unknown label {tok!r}")
    return _num(tok)


def _expand(m: str, ops: list[str], labels: dict, pc: int) -> list[int]:
    if m == "nop":
        return [encode("addi", (0, 0, 0))]
    if m == "li":
        return li(ops[0], _num(ops[1]))
    if m == "la":
        hi, lo = split_imm(labels[ops[1]] if ops[1] in labels else _num(ops[1]))
        return [encode("lui", (ops[0], hi)), encode("addi", (ops[0], ops[0], lo))]
    if m == "mv":
        return [encode("addi", (ops[0], ops[1], 0))]
    if m == "not":
        return [encode("xori", (ops[0], ops[1], -1))]
    if m == "neg":
        return [encode("sub", (ops[0], 0, ops[1]))]
    if m == "seqz":
        return [encode("sltiu", (ops[0], ops[1], 1))]
    if m == "snez":
        return [encode("sltu", (ops[0], 0, ops[1]))]
    if m == "j":
        return [encode("jal", (0, _target(ops[0], labels, pc)))]
    if m == "call":
        return [encode("jal", (1, _target(ops[0], labels, pc)))]
    if m == "jr":
        return [encode("jalr", (0, ops[0], 0))]
    if m == "ret":
        return [encode("jalr", (0, 1, 0))]
    if m in _BRANCH_PSEUDO:
        base, swap = _BRANCH_PSEUDO[m]
        a, b = (ops[1], ops[0]) if swap else (ops[0], "zero")
        return [encode(base, (a, b, _target(ops[-1], labels, pc)))]
    if m == ".word":
        return [_num(t) & 0xFFFF_FFFF for t in ops]
    if m in _BRANCH:
        return [encode(m, (ops[0], ops[1], _target(ops[2], labels, pc)))]
    if m == "jal":
        if len(ops) == 1:
            ops = ["ra"] + ops
        return [encode(m, (ops[0], _target(ops[1], labels, pc)))]
    if m == "jalr" and len(ops) == 1:
        return [encode("jalr", (1, ops[0], 0))]
    if m not in MNEMONICS:
        raise AsmError(f"unknown mnemonic {m!r}")
    return [encode(m, [o if o.lower() in _REGS else _num(o) for o in ops])]


def assemble(text: str, base: int = 0) -> list[int]:
    """Words of the program ``text`` (see the module docstring) placed at ``base``."""
    lines = []
    labels: dict[str, int] = {}
    pc = base
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        while ":" in line:
            name, line = (s.strip() for s in line.split(":", 1))
            if not _LABEL.match(name) or name in labels:
                raise AsmError(f"line {n}: bad or repeated label {name!r}")
            labels[name] = pc
        if not line:
            continue
        m, _, rest = line.partition(" ")
        m = m.lower()
        ops = _split_operands(rest)
        try:
            size = len(ops) if m == ".word" else _size(m, ops)
        except (AsmError, IndexError) as exc:
            raise AsmError(f"line {n}: {raw.strip()!r}: {exc}") from None
        lines.append((n, raw, m, ops, pc))
        pc += 4 * size
    words: list[int] = []
    for n, raw, m, ops, at in lines:
        try:
            words += _expand(m, ops, labels, at)
        except (AsmError, IndexError) as exc:
            raise AsmError(f"line {n}: {raw.strip()!r}: {exc}") from None
    return words


__all__ = ["encode", "assemble", "li", "split_imm", "reg", "AsmError", "ABI_NAMES",
           "MNEMONICS"]
