"""SHIFT: SLL SRL SRA (and SLLI SRLI SRAI: the amount is rs2 + imm as in the ALU).

The amount s = b mod 32 of b = rs2 + imm: b_lo = s0 + 2 s1 + 4 s2 + 8 q + 32 t with bits
s0..s2, the byte shift q = g1 + 2 g2 + 3 g3 from a one-hot g[0..3], and t range-checked
(range16(t), range16(32 t): an integer below 2^11, so 32 t is a multiple of 32 below 2^16
and s is b_lo mod 32).  With r = s0 + 2 s1 + 4 s2, pw = 2^r = (1 + s0)(1 + 3 s1)(1 + 15 s2)
and the byte multiplier m = pw (SLL) or 256 / pw (SRL, SRA): ``m pw = 256``.

Each byte a[i] of rs1 (a pair8-checked split of its limbs) times m is lo[i] + 256 hi[i]
(both bytes, pair8: a[i] m < 2^16, so the split is the integer one): for SLL lo[i] is a[i]
shifted left by r within the byte and hi[i] the bits that leave it; for a right shift
(m = 2^(8-r)) hi[i] = a[i] >> r and lo[i] the bits moving to the byte below.  The shifted
bytes are then t[i] = lo[i] + hi[i-1] (SLL) or u[i] = hi[i] + lo[i+1] (right; lo[4] is
the fill byte's: e (256 - m) with e = f_sra * sign(a), held in the column u3 for byte 3),
and the result byte c[j] is t[j - q] (0 below) or u[j + q] (fill 255 e above), selected
by g.  sg, the sign of rs1, is pinned by pair8(2 a[3] - 256 sg, 0).

Columns: pcw clk rd rs1 rs2 imm_lo imm_hi, f_sll f_srl f_sra, a[0..3], r_lo r_hi, s0 s1 s2,
g[0..3], t, pm = pw - 1, m, lo[0..3], hi[0..3], sg, e, u3, c[0..3], and the three accesses.
"""
from __future__ import annotations

import numpy as np


from .. import isa
from .common import PAIR8, REG, range16, read, sum_of, ts_of, write
from .alu import _adapter, _adapter_rows, _accesses
from .rows import Rows
from .slots import slotted

SHIFT_OPS = (isa.SLL, isa.SRL, isa.SRA)
_FLAGS = {isa.SLL: "f_sll", isa.SRL: "f_srl", isa.SRA: "f_sra"}


def build_shift(log_blowup: int, k: int = 1, piece: bool = False):
    """rv32_shift with k slots (chips/slots.py)."""
    return slotted("rv32_shift", _shift_slot, k, log_blowup, piece=piece)


def _shift_slot(b):
    c, fl, real = _adapter(b, _FLAGS)
    f_sll, f_srl, f_sra = (fl[op] for op in SHIFT_OPS)
    right = f_srl + f_sra
    a = b.main_cols("a", 4)
    r = (b.main("r_lo"), b.main("r_hi"))
    s0, s1, s2 = b.main("s0"), b.main("s1"), b.main("s2")
    g = b.main_cols("g", 4)
    t, pm, m = b.main("t"), b.main("pm"), b.main("m")
    pw = pm + 1                       # stored as 2^r - 1 so that an all-zero row holds
    lo, hi = b.main_cols("lo", 4), b.main_cols("hi", 4)
    sg, e, u3 = b.main("sg"), b.main("e"), b.main("u3")
    out = b.main_cols("c", 4)
    clk = c["clk"]
    read(b, "r1", REG, c["rs1"], (a[0] + 256 * a[1], a[2] + 256 * a[3]), ts_of(clk, 1), real)
    read(b, "r2", REG, c["rs2"], r, ts_of(clk, 2), real)
    write(b, "rd", REG, c["rd"], (out[0] + 256 * out[1], out[2] + 256 * out[3]),
          ts_of(clk, 3), real)
    for name, x in (("s0", s0), ("s1", s1), ("s2", s2), ("sg", sg)):
        b.assert_bool(x, name=f"{name}_bool")
    for j in range(4):
        b.assert_bool(g[j], name=f"g{j}_bool")
    b.assert_zero(sum_of(g) - real, name="g_one_hot")
    q = g[1] + 2 * g[2] + 3 * g[3]
    b.assert_zero(r[0] + c["imm_lo"] - (s0 + 2 * s1 + 4 * s2 + 8 * q + 32 * t), name="amount")
    range16(b, t, real)
    range16(b, 32 * t, real)
    b.assert_zero(pw - (1 + s0) * (1 + 3 * s1) * (1 + 15 * s2), name="pow")   # 2^r
    b.assert_zero(f_sll * (m - pw) + right * (m * pw - 256), name="multiplier")
    for i in range(4):
        b.assert_zero(real * (a[i] * m - lo[i] - 256 * hi[i]), name=f"split{i}")
    b.assert_zero(e - f_sra * sg, name="fill")
    b.assert_zero(u3 - hi[3] - e * (256 - m), name="u3")
    tl = [lo[0], lo[1] + hi[0], lo[2] + hi[1], lo[3] + hi[2]]
    ur = [hi[0] + lo[1], hi[1] + lo[2], hi[2] + lo[3], u3]
    fill = 255 * e
    for j in range(4):
        left = sum_of([g[k] * tl[j - k] for k in range(j + 1)])
        rgt = sum_of([g[k] * (ur[j + k] if j + k < 4 else fill) for k in range(4)])
        b.assert_zero(f_sll * (out[j] - left) + right * (out[j] - rgt), name=f"c{j}")
    b.send(PAIR8, [a[0], a[1]], multiplicity=real)
    b.send(PAIR8, [a[2], a[3]], multiplicity=real)
    for i in range(4):
        b.send(PAIR8, [lo[i], hi[i]], multiplicity=real)
    b.send(PAIR8, [2 * a[3] - 256 * sg, 0], multiplicity=real)


def shift_rows(ctx, cyc: np.ndarray, acc) -> tuple[Rows, np.ndarray]:
    rows = _adapter_rows(ctx, cyc, _FLAGS)
    op = ctx.op[cyc]
    a, r, imm = ctx.a[cyc], ctx.r[cyc], ctx.imm[cyc]
    bv = (r + imm) & 0xFFFF_FFFF
    s = bv & 31
    rr, q = s & 7, s >> 3
    sll, sra = op == isa.SLL, op == isa.SRA
    sign = a >> 31
    signed_a = np.where(sign == 1, a - (1 << 32), a)
    out = np.where(sll, (a << s) & 0xFFFF_FFFF,
                   np.where(sra, (signed_a >> s) & 0xFFFF_FFFF, a >> s))
    pw = np.left_shift(1, rr)
    m = np.where(sll, pw, 256 >> rr)
    e = np.where(sra, sign, 0)
    for i in range(4):
        ai = (a >> (8 * i)) & 0xFF
        prod = ai * m
        rows[f"a[{i}]"] = ai
        rows[f"lo[{i}]"] = prod & 0xFF
        rows[f"hi[{i}]"] = prod >> 8
        rows[f"g[{i}]"] = q == i
        rows[f"c[{i}]"] = (out >> (8 * i)) & 0xFF
    rows.update({"r_lo": r & 0xFFFF, "r_hi": r >> 16, "s0": rr & 1, "s1": (rr >> 1) & 1,
                 "s2": rr >> 2, "t": (bv & 0xFFFF) >> 5, "pm": pw - 1, "m": m, "sg": sign,
                 "e": e, "u3": rows["hi[3]"] + e * (256 - m)})
    _accesses(rows, ctx, acc, cyc, a, r, out)
    return rows, out


__all__ = ["build_shift", "shift_rows", "SHIFT_OPS"]
