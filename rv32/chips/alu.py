"""ALU (ADD SUB SLT SLTU, and ADDI SLTI SLTIU) and BITWISE (XOR OR AND, and their I forms).

Both read rs1 (ts 3 clk + 1) and rs2 (ts + 2), write rd (ts + 3) and go on to pc + 4.  The
second operand is b = rs2 + imm limb by limb: PROGRAM gives an R-type instruction imm = 0
and an I-type one rs2 = x0 (which always holds 0), so b is one of them and its limbs are
valid; an I form sends the op id of its R form.

**ALU** columns: pcw, clk, rd, rs1, rs2, imm_lo, imm_hi, the flags f_add f_sub f_slt
f_sltu (boolean, at most one: real = their sum), a (rs1) and r (rs2) limbs, c (rd) limbs,
u limbs (range-checked), carries k0 k1, the sign bits sa sb (SLT), and the memory
argument's columns of the three accesses (common.access).  One adder (common.adder's
limb equations) does all four: ADD  a + b = u + 2^32 k1, c = u;  SUB  u + b = a +
2^32 k1, c = u (u = a - b);  SLTU  the same u, c = k1 = [a < b];  SLT  the same on the
sign-flipped limbs a_hi + 2^15 - 2^16 sa, b_hi + 2^15 - 2^16 sb (signed order is the
unsigned order of a xor 2^31), c = k1.  The sign bits are pinned by range16(2 a_hi -
2^16 sa) (and b's): sa = 1 with a_hi < 2^15 makes it negative, sa = 0 with a_hi >= 2^15
makes it >= 2^16.  Every limb equation is an integer identity (all terms below 2^18), so
the 32-bit results are exact.

**BITWISE** columns: the same adapter, flags f_xor f_or f_and, a as bytes a[0..3] (its
limbs a[0] + 256 a[1], a[2] + 256 a[3] are what the rs1 read carries), r limbs, b bytes
b[0..3] with b[0] + 256 b[1] = r_lo + imm_lo (and hi), n[0..3] = a AND b byte by byte
from ``rv32_and8`` (which also makes a[i], b[i], n[i] bytes), c limbs.  XOR = a + b -
2 AND, OR = a + b - AND byte by byte; the c limbs are sums of bytes, hence valid.
"""
from __future__ import annotations

import numpy as np


from .. import isa
from .common import AND8, REG, TWO16, fetch, range16, read, step, sum_of, ts_of, write
from .rows import Rows
from .slots import slotted

ALU_OPS = (isa.ADD, isa.SUB, isa.SLT, isa.SLTU)
BITWISE_OPS = (isa.XOR, isa.OR, isa.AND)
_FLAG = {isa.ADD: "f_add", isa.SUB: "f_sub", isa.SLT: "f_slt", isa.SLTU: "f_sltu",
         isa.XOR: "f_xor", isa.OR: "f_or", isa.AND: "f_and"}


def _adapter(b, flags: dict, imm: bool = True):
    """pcw, clk, rd, rs1, rs2 (and imm); fetch + step.  ``flags``: op id -> flag column."""
    c = {n: b.main(n) for n in ("pcw", "clk", "rd", "rs1", "rs2")
         + (("imm_lo", "imm_hi") if imm else ())}
    if not imm:
        c["imm_lo"] = c["imm_hi"] = 0
    fl = {op: b.main(name) for op, name in flags.items()}
    real = sum_of(list(fl.values()))
    for op, f in fl.items():
        b.assert_bool(f, name=f"{flags[op]}_bool")
    b.assert_bool(real, name="one_op")
    op_id = sum_of([op * f for op, f in fl.items()])
    fetch(b, real, c["pcw"], op_id, c["rd"], c["rs1"], c["rs2"], (c["imm_lo"], c["imm_hi"]))
    step(b, c["pcw"], c["clk"], c["pcw"] + 1, real)
    return c, fl, real


def build_alu(log_blowup: int, k: int = 1, piece: bool = False):
    """rv32_alu with k slots (chips/slots.py)."""
    return slotted("rv32_alu", _alu_slot, k, log_blowup, piece=piece)


def _alu_slot(b):
    c, fl, real = _adapter(b, {op: _FLAG[op] for op in ALU_OPS})
    f_add, f_sub, f_slt, f_sltu = (fl[op] for op in ALU_OPS)
    a = (b.main("a_lo"), b.main("a_hi"))
    r = (b.main("r_lo"), b.main("r_hi"))
    out = (b.main("c_lo"), b.main("c_hi"))
    u = (b.main("u_lo"), b.main("u_hi"))
    k0, k1, sa, sb = b.main("k0"), b.main("k1"), b.main("sa"), b.main("sb")
    clk = c["clk"]
    read(b, "r1", REG, c["rs1"], a, ts_of(clk, 1), real)
    read(b, "r2", REG, c["rs2"], r, ts_of(clk, 2), real)
    write(b, "rd", REG, c["rd"], out, ts_of(clk, 3), real)
    bv = (r[0] + c["imm_lo"], r[1] + c["imm_hi"])
    b.assert_bool(sa, name="sa_bool")
    b.assert_bool(sb, name="sb_bool")
    flip = (1 << 15)
    a_hi = a[1] + f_slt * (flip - TWO16 * sa)
    b_hi = bv[1] + f_slt * (flip - TWO16 * sb)
    sub_like = f_sub + f_slt + f_sltu
    b.assert_bool(k0, name="k0_bool")
    b.assert_bool(k1, name="k1_bool")
    b.assert_zero(f_add * (a[0] + bv[0] - u[0] - TWO16 * k0)
                  + sub_like * (u[0] + bv[0] - a[0] - TWO16 * k0), name="adder_lo")
    b.assert_zero(f_add * (a[1] + bv[1] + k0 - u[1] - TWO16 * k1)
                  + sub_like * (u[1] + b_hi + k0 - a_hi - TWO16 * k1), name="adder_hi")
    range16(b, u[0], real)
    range16(b, u[1], real)
    range16(b, 2 * a[1] - TWO16 * sa, f_slt)
    range16(b, 2 * bv[1] - TWO16 * sb, f_slt)
    arith, cmp_ = f_add + f_sub, f_slt + f_sltu
    b.assert_zero(arith * (out[0] - u[0]), name="c_lo_arith")
    b.assert_zero(arith * (out[1] - u[1]), name="c_hi_arith")
    b.assert_zero(cmp_ * (out[0] - k1), name="c_lo_cmp")
    b.assert_zero(cmp_ * out[1], name="c_hi_cmp")


def build_bitwise(log_blowup: int, k: int = 1, piece: bool = False):
    """rv32_bitwise with k slots (chips/slots.py)."""
    return slotted("rv32_bitwise", _bitwise_slot, k, log_blowup, piece=piece)


def _bitwise_slot(b):
    c, fl, real = _adapter(b, {op: _FLAG[op] for op in BITWISE_OPS})
    f_xor, f_or, f_and = (fl[op] for op in BITWISE_OPS)
    ab = b.main_cols("a", 4)
    r = (b.main("r_lo"), b.main("r_hi"))
    bb = b.main_cols("b", 4)
    nn = b.main_cols("n", 4)
    out = (b.main("c_lo"), b.main("c_hi"))
    clk = c["clk"]
    read(b, "r1", REG, c["rs1"], (ab[0] + 256 * ab[1], ab[2] + 256 * ab[3]), ts_of(clk, 1), real)
    read(b, "r2", REG, c["rs2"], r, ts_of(clk, 2), real)
    write(b, "rd", REG, c["rd"], out, ts_of(clk, 3), real)
    b.assert_zero(bb[0] + 256 * bb[1] - r[0] - c["imm_lo"], name="b_lo")
    b.assert_zero(bb[2] + 256 * bb[3] - r[1] - c["imm_hi"], name="b_hi")
    res = [f_xor * (ab[i] + bb[i] - 2 * nn[i]) + f_or * (ab[i] + bb[i] - nn[i]) + f_and * nn[i]
           for i in range(4)]
    b.assert_zero(out[0] - res[0] - 256 * res[1], name="c_lo")
    b.assert_zero(out[1] - res[2] - 256 * res[3], name="c_hi")
    for i in range(4):
        b.send(AND8, [ab[i], bb[i], nn[i]], multiplicity=real)


# --------------------------------------------------------------------------- traces

def _adapter_rows(ctx, cyc, flags: dict, imm: bool = True) -> Rows:
    rows = Rows(cyc.size)
    rows.update({"pcw": ctx.pcw[cyc], "clk": cyc, "rd": ctx.rd[cyc], "rs1": ctx.rs1[cyc],
                 "rs2": ctx.rs2[cyc]})
    if imm:
        rows.update({"imm_lo": ctx.imm[cyc] & 0xFFFF, "imm_hi": ctx.imm[cyc] >> 16})
    op = ctx.op[cyc]
    for code, name in flags.items():
        rows[name] = op == code
    return rows


def _accesses(rows: Rows, ctx, acc, cyc, a, r, c) -> None:
    rows.access(acc, "r1", REG, ctx.rs1[cyc], 3 * cyc + 1, a & 0xFFFF, a >> 16)
    rows.access(acc, "r2", REG, ctx.rs2[cyc], 3 * cyc + 2, r & 0xFFFF, r >> 16)
    rows.access(acc, "rd", REG, ctx.rd[cyc], 3 * cyc + 3, c & 0xFFFF, c >> 16,
                witness_old=True)


def alu_rows(ctx, cyc: np.ndarray, acc) -> tuple[Rows, np.ndarray]:
    """ALU rows of cycles ``cyc``; returns (rows, rd values)."""
    rows = _adapter_rows(ctx, cyc, {op: _FLAG[op] for op in ALU_OPS})
    op = ctx.op[cyc]
    a, r, imm = ctx.a[cyc], ctx.r[cyc], ctx.imm[cyc]
    bv = (r + imm) & 0xFFFF_FFFF
    slt = op == isa.SLT
    flip = np.where(slt, 1 << 31, 0)
    x, y = a ^ flip, bv ^ flip
    is_add = op == isa.ADD
    u = np.where(is_add, a + bv, x - y) & 0xFFFF_FFFF
    # the adder's carries: ADD a + b = u + 2^32 k1; the others u + y = x + 2^32 k1
    p, q = np.where(is_add, a, u), np.where(is_add, bv, y)
    k0 = ((p & 0xFFFF) + (q & 0xFFFF)) >> 16
    k1 = ((p >> 16) + (q >> 16) + k0) >> 16
    out = np.where(is_add | (op == isa.SUB), u, k1)
    rows.update({"a_lo": a & 0xFFFF, "a_hi": a >> 16, "r_lo": r & 0xFFFF, "r_hi": r >> 16,
                 "c_lo": out & 0xFFFF, "c_hi": out >> 16, "u_lo": u & 0xFFFF, "u_hi": u >> 16,
                 "k0": k0, "k1": k1, "sa": np.where(slt, a >> 31, 0),
                 "sb": np.where(slt, bv >> 31, 0)})
    _accesses(rows, ctx, acc, cyc, a, r, out)
    return rows, out


def bitwise_rows(ctx, cyc: np.ndarray, acc) -> tuple[Rows, np.ndarray]:
    rows = _adapter_rows(ctx, cyc, {op: _FLAG[op] for op in BITWISE_OPS})
    op = ctx.op[cyc]
    a, r, imm = ctx.a[cyc], ctx.r[cyc], ctx.imm[cyc]
    bv = (r + imm) & 0xFFFF_FFFF
    out = np.where(op == isa.XOR, a ^ bv, np.where(op == isa.OR, a | bv, a & bv))
    n = a & bv
    for i in range(4):
        rows[f"a[{i}]"] = (a >> (8 * i)) & 0xFF
        rows[f"b[{i}]"] = (bv >> (8 * i)) & 0xFF
        rows[f"n[{i}]"] = (n >> (8 * i)) & 0xFF
    rows.update({"r_lo": r & 0xFFFF, "r_hi": r >> 16, "c_lo": out & 0xFFFF, "c_hi": out >> 16})
    _accesses(rows, ctx, acc, cyc, a, r, out)
    return rows, out


__all__ = ["build_alu", "build_bitwise", "alu_rows", "bitwise_rows", "ALU_OPS", "BITWISE_OPS"]
