"""BRANCH: BEQ BNE BLT BGE BLTU BGEU.

Reads rs1 (ts 3 clk + 1) and rs2 (ts + 2), writes nothing; goes to tgt (PROGRAM's
(pc + imm) / 4, or BAD_TARGET, which no instruction has) when taken, else to pc + 4.

Columns: pcw clk rs1 rs2 tgt, the six flags (boolean, at most one), a and b limbs, u
limbs, carries k0 k1, sign bits sa sb, z (a = b), the inverses w_lo w_hi, taken, and the
two reads' columns.

* Equality: z (a_lo - b_lo) = z (a_hi - b_hi) = 0, and (a_lo - b_lo) w_lo + (a_hi - b_hi)
  w_hi = f_eq (1 - z) with f_eq = f_beq + f_bne: for BEQ/BNE, z = 0 only if a limb differs.
* Order: one adder u + b' = a' + 2^32 k1 (ALU's SLT/SLTU construction, sign-flipped for
  BLT/BGE), so k1 = [a < b] signed or unsigned.
* taken = f_beq z + f_bne (1 - z) + (f_blt + f_bltu) k1 + (f_bge + f_bgeu)(1 - k1), and
  the next pcw is pcw + 1 + taken (tgt - pcw - 1).
"""
from __future__ import annotations

import numpy as np

from ...air import field as F

from .. import isa
from .common import REG, TWO16, fetch, range16, read, step, sum_of, ts_of
from .rows import Rows
from .slots import slotted

BRANCH_OPS = (isa.BEQ, isa.BNE, isa.BLT, isa.BGE, isa.BLTU, isa.BGEU)
_FLAGS = {isa.BEQ: "f_beq", isa.BNE: "f_bne", isa.BLT: "f_blt", isa.BGE: "f_bge",
          isa.BLTU: "f_bltu", isa.BGEU: "f_bgeu"}


def build_branch(log_blowup: int, k: int = 1, piece: bool = False):
    """rv32_branch with k slots (chips/slots.py)."""
    return slotted("rv32_branch", _branch_slot, k, log_blowup, piece=piece)


def _branch_slot(b):
    c = {n: b.main(n) for n in ("pcw", "clk", "rs1", "rs2", "tgt")}
    fl = {op: b.main(name) for op, name in _FLAGS.items()}
    f_beq, f_bne, f_blt, f_bge, f_bltu, f_bgeu = (fl[op] for op in BRANCH_OPS)
    real = sum_of(list(fl.values()))
    for op, f in fl.items():
        b.assert_bool(f, name=f"{_FLAGS[op]}_bool")
    b.assert_bool(real, name="one_op")
    a = (b.main("a_lo"), b.main("a_hi"))
    bv = (b.main("b_lo"), b.main("b_hi"))
    u = (b.main("u_lo"), b.main("u_hi"))
    k0, k1, sa, sb = b.main("k0"), b.main("k1"), b.main("sa"), b.main("sb")
    z, w_lo, w_hi, taken = b.main("z"), b.main("w_lo"), b.main("w_hi"), b.main("taken")
    pcw, clk = c["pcw"], c["clk"]
    op_id = sum_of([op * f for op, f in fl.items()])
    fetch(b, real, pcw, op_id, 0, c["rs1"], c["rs2"], tgt=c["tgt"])
    step(b, pcw, clk, pcw + 1 + taken * (c["tgt"] - pcw - 1), real)
    read(b, "r1", REG, c["rs1"], a, ts_of(clk, 1), real)
    read(b, "r2", REG, c["rs2"], bv, ts_of(clk, 2), real)
    # equality
    f_eq = f_beq + f_bne
    b.assert_bool(z, name="z_bool")
    b.assert_zero(z * (a[0] - bv[0]), name="eq_lo")
    b.assert_zero(z * (a[1] - bv[1]), name="eq_hi")
    b.assert_zero((a[0] - bv[0]) * w_lo + (a[1] - bv[1]) * w_hi - f_eq * (1 - z), name="neq")
    # order: u + b' = a' + 2^32 k1
    signed = f_blt + f_bge
    for name, x in (("sa", sa), ("sb", sb), ("k0", k0), ("k1", k1)):
        b.assert_bool(x, name=f"{name}_bool")
    flip = 1 << 15
    a_hi = a[1] + signed * (flip - TWO16 * sa)
    b_hi = bv[1] + signed * (flip - TWO16 * sb)
    b.assert_zero(real * (u[0] + bv[0] - a[0] - TWO16 * k0), name="adder_lo")
    b.assert_zero(real * (u[1] + b_hi + k0 - a_hi - TWO16 * k1), name="adder_hi")
    range16(b, u[0], real)
    range16(b, u[1], real)
    range16(b, 2 * a[1] - TWO16 * sa, signed)
    range16(b, 2 * bv[1] - TWO16 * sb, signed)
    b.assert_zero(taken - f_beq * z - f_bne * (1 - z) - (f_blt + f_bltu) * k1
                  - (f_bge + f_bgeu) * (1 - k1), name="taken")


def branch_rows(ctx, cyc: np.ndarray, acc) -> Rows:
    rows = Rows(cyc.size)
    op = ctx.op[cyc]
    a, bv = ctx.a[cyc], ctx.r[cyc]
    rows.update({"pcw": ctx.pcw[cyc], "clk": cyc, "rs1": ctx.rs1[cyc], "rs2": ctx.rs2[cyc],
                 "tgt": ctx.tgt[cyc]})
    for code, name in _FLAGS.items():
        rows[name] = op == code
    signed = (op == isa.BLT) | (op == isa.BGE)
    flip = np.where(signed, 1 << 31, 0)
    x, y = a ^ flip, bv ^ flip
    u = (x - y) & 0xFFFF_FFFF
    k0 = ((u & 0xFFFF) + (y & 0xFFFF)) >> 16
    k1 = ((u >> 16) + (y >> 16) + k0) >> 16
    eq = a == bv
    dlo = ((a & 0xFFFF) - (bv & 0xFFFF)) % F.P
    dhi = ((a >> 16) - (bv >> 16)) % F.P
    # w: the inverse of the first nonzero limb difference (only BEQ/BNE need it)
    use_lo = dlo != 0
    inv_lo = np.where(use_lo, F.inv(np.where(use_lo, dlo, 1).astype(np.uint64)), 0)
    use_hi = ~use_lo & (dhi != 0)
    inv_hi = np.where(use_hi, F.inv(np.where(use_hi, dhi, 1).astype(np.uint64)), 0)
    f_eq = (op == isa.BEQ) | (op == isa.BNE)
    taken = np.select([op == isa.BEQ, op == isa.BNE, (op == isa.BLT) | (op == isa.BLTU)],
                      [eq, ~eq, k1 == 1], default=k1 == 0)
    rows.update({"a_lo": a & 0xFFFF, "a_hi": a >> 16, "b_lo": bv & 0xFFFF, "b_hi": bv >> 16,
                 "u_lo": u & 0xFFFF, "u_hi": u >> 16, "k0": k0, "k1": k1,
                 "sa": np.where(signed, a >> 31, 0), "sb": np.where(signed, bv >> 31, 0),
                 "z": eq, "w_lo": np.where(f_eq, inv_lo, 0).astype(np.int64),
                 "w_hi": np.where(f_eq, inv_hi, 0).astype(np.int64), "taken": taken})
    rows.access(acc, "r1", REG, ctx.rs1[cyc], 3 * cyc + 1, a & 0xFFFF, a >> 16)
    rows.access(acc, "r2", REG, ctx.rs2[cyc], 3 * cyc + 2, bv & 0xFFFF, bv >> 16)
    return rows


__all__ = ["build_branch", "branch_rows", "BRANCH_OPS"]
