"""MUL (MUL MULH MULHSU MULHU) and DIV (DIV DIVU REM REMU).

Both read rs1 (ts 3 clk + 1), rs2 (ts + 2) and write rd (ts + 3).  Products are taken on
bytes: for byte vectors x, y the column sums S_k = sum_{i+j=k} x_i y_j are below 2^18, and
S_k + c_(k-1) = p_k + 256 c_k with bytes p_k (pair8) and carries c_k (range16) is an
integer identity, so the p_k are the base-256 digits of the product.

**MUL** columns: the adapter (pcw clk rd rs1 rs2, f_mul f_mulh f_mulhsu f_mulhu), a[0..3]
and b[0..3] (the operands' bytes; the reads carry a[0] + 256 a[1], ...), p[0..7] (the
unsigned 64-bit product), c[0..5] (carries; p[7] is the last), sa sb (sign bits, one
pair8 lookup (2 a[3] - 256 sa, 2 b[3] - 256 sb)), sae = sa (f_mulh + f_mulhsu), sbe = sb
f_mulh, res (range-checked limbs), e0 e1 (in {0, 1, 2}), c_lo c_hi (rd).  The signed high
word: a_s b_s = a b - 2^32 (sa b + sb a) mod 2^64, so res + sae b + sbe a = H + 2^32 E
with H the product's high word; MUL writes the low word, the others res.

**DIV** proves the unsigned division of the absolute values, |a| = Q |b| + R with R < |b|
(when b != 0), then signs the results: q = (sa xor sb) ? -Q : Q, r = sa ? -R : R -- RISC-V's
truncating division, its overflow case included (|-2^31| = 2^31 as an unsigned word, Q =
2^31, q = Q).  b = 0 (bz, with an inverse witness for b != 0): Q |b| = 0 so R = |a| and
r = a, and q is forced to 2^32 - 1.  Unsigned ops have sa = sb = 0.  Columns: the adapter
(f_div f_divu f_rem f_remu), a b c limbs, sa sb x bz inv, four negation gadgets N(v) = -v
mod 2^32 (v + N = 2^32 [v != 0]: limbs range-checked, carries boolean) for a, b, Q, R,
Q's bytes q[0..3], |b|'s bytes bb[0..3], the product's low bytes p[0..3] with carries
pc[0..2] (no carry out of byte 3 and S_4 = S_5 = S_6 = 0: Q |b| < 2^32), R limbs, the
carry m0 of P + R = |a|, the comparison R < |b| (u limbs, lk0, lk1 = 1 unless bz), and
the quotient q_lo q_hi.
"""
from __future__ import annotations

import numpy as np

from ...air import field as F

from .. import isa
from .common import PAIR8, REG, TWO16, range16, read, sum_of, ts_of, write
from .alu import _adapter, _adapter_rows, _accesses
from .rows import Rows
from .slots import slotted

MUL_OPS = (isa.MUL, isa.MULH, isa.MULHSU, isa.MULHU)
DIV_OPS = (isa.DIV, isa.DIVU, isa.REM, isa.REMU)
_MFLAGS = {isa.MUL: "f_mul", isa.MULH: "f_mulh", isa.MULHSU: "f_mulhsu", isa.MULHU: "f_mulhu"}
_DFLAGS = {isa.DIV: "f_div", isa.DIVU: "f_divu", isa.REM: "f_rem", isa.REMU: "f_remu"}
M32 = 0xFFFF_FFFF


def _products(x, y, k):
    return sum_of([x[i] * y[k - i] for i in range(4) if 0 <= k - i < 4])


def build_mul(log_blowup: int, k: int = 1, piece: bool = False):
    """rv32_mul with k slots (chips/slots.py)."""
    return slotted("rv32_mul", _mul_slot, k, log_blowup, piece=piece)


def _mul_slot(b):
    c, fl, real = _adapter(b, _MFLAGS, imm=False)   # R-type only: PROGRAM's imm is 0
    f_mul, f_mulh, f_mulhsu, f_mulhu = (fl[op] for op in MUL_OPS)
    a, bb = b.main_cols("a", 4), b.main_cols("b", 4)
    p, cr = b.main_cols("p", 8), b.main_cols("cr", 6)
    sa, sb, sae, sbe = (b.main(n) for n in ("sa", "sb", "sae", "sbe"))
    res = (b.main("res_lo"), b.main("res_hi"))
    e0, e1 = b.main("e0"), b.main("e1")
    out = (b.main("c_lo"), b.main("c_hi"))
    clk = c["clk"]
    al, bl = (a[0] + 256 * a[1], a[2] + 256 * a[3]), (bb[0] + 256 * bb[1], bb[2] + 256 * bb[3])
    read(b, "r1", REG, c["rs1"], al, ts_of(clk, 1), real)
    read(b, "r2", REG, c["rs2"], bl, ts_of(clk, 2), real)
    write(b, "rd", REG, c["rd"], out, ts_of(clk, 3), real)
    for k in range(7):
        carry_in = cr[k - 1] if k else 0
        carry_out = p[7] if k == 6 else cr[k]
        b.assert_zero(_products(a, bb, k) + carry_in - p[k] - 256 * carry_out, name=f"prod{k}")
    for j in range(0, 8, 2):
        b.send(PAIR8, [p[j], p[j + 1]], multiplicity=real)
    for j in range(0, 4, 2):
        b.send(PAIR8, [a[j], a[j + 1]], multiplicity=real)
        b.send(PAIR8, [bb[j], bb[j + 1]], multiplicity=real)
    for k in range(6):
        range16(b, cr[k], real)
    b.assert_bool(sa, name="sa_bool")
    b.assert_bool(sb, name="sb_bool")
    b.send(PAIR8, [2 * a[3] - 256 * sa, 2 * bb[3] - 256 * sb], multiplicity=real)
    b.assert_zero(sae - sa * (f_mulh + f_mulhsu), name="sae")
    b.assert_zero(sbe - sb * f_mulh, name="sbe")
    H = (p[4] + 256 * p[5], p[6] + 256 * p[7])
    b.assert_zero(res[0] + sae * bl[0] + sbe * al[0] - H[0] - TWO16 * e0, name="high_lo")
    b.assert_zero(res[1] + sae * bl[1] + sbe * al[1] + e0 - H[1] - TWO16 * e1, name="high_hi")
    b.assert_zero(e0 * (e0 - 1) * (e0 - 2), name="e0_small")
    b.assert_zero(e1 * (e1 - 1) * (e1 - 2), name="e1_small")
    range16(b, res[0], real)
    range16(b, res[1], real)
    high = f_mulh + f_mulhsu + f_mulhu
    b.assert_zero(f_mul * (out[0] - p[0] - 256 * p[1]) + high * (out[0] - res[0]), name="c_lo")
    b.assert_zero(f_mul * (out[1] - p[2] - 256 * p[3]) + high * (out[1] - res[1]), name="c_hi")


def _negation(b, name, v, real):
    """N = -v mod 2^32 (columns {name}_lo/_hi, carries {name}_k0/_k1); returns N."""
    n = (b.main(f"{name}_lo"), b.main(f"{name}_hi"))
    k0, k1 = b.main(f"{name}_k0"), b.main(f"{name}_k1")
    b.assert_bool(k0, name=f"{name}_k0_bool")
    b.assert_bool(k1, name=f"{name}_k1_bool")
    b.assert_zero(v[0] + n[0] - TWO16 * k0, name=f"{name}_neg_lo")
    b.assert_zero(v[1] + n[1] + k0 - TWO16 * k1, name=f"{name}_neg_hi")
    range16(b, n[0], real)
    range16(b, n[1], real)
    return n


def _select(s, x, y):
    """s ? y : x limb by limb."""
    return (x[0] + s * (y[0] - x[0]), x[1] + s * (y[1] - x[1]))


def build_div(log_blowup: int, k: int = 1, piece: bool = False):
    """rv32_div with k slots (chips/slots.py)."""
    return slotted("rv32_div", _div_slot, k, log_blowup, piece=piece)


def _div_slot(b):
    c, fl, real = _adapter(b, _DFLAGS, imm=False)
    f_div, f_divu, f_rem, f_remu = (fl[op] for op in DIV_OPS)
    signed = f_div + f_rem
    a = (b.main("a_lo"), b.main("a_hi"))
    bv = (b.main("b_lo"), b.main("b_hi"))
    out = (b.main("c_lo"), b.main("c_hi"))
    sa, sb, x, bz, inv = (b.main(n) for n in ("sa", "sb", "x", "bz", "inv"))
    clk = c["clk"]
    read(b, "r1", REG, c["rs1"], a, ts_of(clk, 1), real)
    read(b, "r2", REG, c["rs2"], bv, ts_of(clk, 2), real)
    write(b, "rd", REG, c["rd"], out, ts_of(clk, 3), real)
    for name, s in (("sa", sa), ("sb", sb), ("bz", bz)):
        b.assert_bool(s, name=f"{name}_bool")
    range16(b, 2 * a[1] - TWO16 * sa, signed)
    range16(b, 2 * bv[1] - TWO16 * sb, signed)
    b.assert_zero((f_divu + f_remu) * sa, name="sa_unsigned")
    b.assert_zero((f_divu + f_remu) * sb, name="sb_unsigned")
    b.assert_zero(x - sa - sb + 2 * sa * sb, name="x_xor")
    # b = 0 exactly when bz: bz b = 0 and, unless bz, (b_lo + b_hi) inv = 1
    b.assert_zero(bz * bv[0], name="bz_lo")
    b.assert_zero(bz * bv[1], name="bz_hi")
    b.assert_zero((bv[0] + bv[1]) * inv - (real - bz), name="b_nonzero")
    na = _negation(b, "na", a, real)
    nb = _negation(b, "nb", bv, real)
    abs_a = _select(sa, a, na)
    qb, bb = b.main_cols("q", 4), b.main_cols("bb", 4)
    abs_b = (bb[0] + 256 * bb[1], bb[2] + 256 * bb[3])
    babs = _select(sb, bv, nb)
    b.assert_zero(abs_b[0] - babs[0], name="abs_b_lo")
    b.assert_zero(abs_b[1] - babs[1], name="abs_b_hi")
    pp, pc = b.main_cols("p", 4), b.main_cols("pc", 3)
    for k in range(7):
        carry_in = pc[k - 1] if 0 < k < 4 else 0
        if k < 3:
            b.assert_zero(_products(qb, bb, k) + carry_in - pp[k] - 256 * pc[k], name=f"prod{k}")
        elif k == 3:
            b.assert_zero(_products(qb, bb, k) + carry_in - pp[k], name="prod3")
        else:
            b.assert_zero(_products(qb, bb, k), name=f"prod{k}")
    for j in (0, 2):
        b.send(PAIR8, [qb[j], qb[j + 1]], multiplicity=real)
        b.send(PAIR8, [bb[j], bb[j + 1]], multiplicity=real)
        b.send(PAIR8, [pp[j], pp[j + 1]], multiplicity=real)
    for k in range(3):
        range16(b, pc[k], real)
    R = (b.main("R_lo"), b.main("R_hi"))
    m0 = b.main("m0")
    b.assert_bool(m0, name="m0_bool")
    range16(b, R[0], real)
    range16(b, R[1], real)
    b.assert_zero(pp[0] + 256 * pp[1] + R[0] - abs_a[0] - TWO16 * m0, name="rem_lo")
    b.assert_zero(pp[2] + 256 * pp[3] + R[1] + m0 - abs_a[1], name="rem_hi")
    # R < |b| unless b = 0: u + |b| = R + 2^32 lk1 with lk1 = 1
    u = (b.main("u_lo"), b.main("u_hi"))
    lk0, lk1 = b.main("lk0"), b.main("lk1")
    b.assert_bool(lk0, name="lk0_bool")
    b.assert_bool(lk1, name="lk1_bool")
    b.assert_zero(u[0] + abs_b[0] - R[0] - TWO16 * lk0, name="lt_lo")
    b.assert_zero(u[1] + abs_b[1] + lk0 - R[1] - TWO16 * lk1, name="lt_hi")
    range16(b, u[0], real)
    range16(b, u[1], real)
    b.assert_zero((real - bz) * (1 - lk1), name="rem_below_divisor")
    Q = (qb[0] + 256 * qb[1], qb[2] + 256 * qb[3])
    nq = _negation(b, "nq", Q, real)
    nr = _negation(b, "nr", R, real)
    q = (b.main("q_lo"), b.main("q_hi"))
    sq = _select(x, Q, nq)
    b.assert_zero(q[0] - bz * 0xFFFF - (1 - bz) * sq[0], name="q_lo")
    b.assert_zero(q[1] - bz * 0xFFFF - (1 - bz) * sq[1], name="q_hi")
    r = _select(sa, R, nr)
    for j in range(2):
        b.assert_zero((f_div + f_divu) * (out[j] - q[j]) + (f_rem + f_remu) * (out[j] - r[j]),
                      name=f"c{j}")


# --------------------------------------------------------------------------- traces

def _bytes(rows, name, v, k=4):
    for i in range(k):
        rows[f"{name}[{i}]"] = (v >> (8 * i)) & 0xFF


def mul_rows(ctx, cyc: np.ndarray, acc) -> tuple[Rows, np.ndarray]:
    rows = _adapter_rows(ctx, cyc, _MFLAGS, imm=False)
    op = ctx.op[cyc]
    a, bv = ctx.a[cyc], ctx.r[cyc]
    _bytes(rows, "a", a)
    _bytes(rows, "b", bv)
    ab = [(a >> (8 * i)) & 0xFF for i in range(4)]
    bb = [(bv >> (8 * i)) & 0xFF for i in range(4)]
    carry = np.zeros(cyc.size, np.int64)
    pbytes = []
    for k in range(7):
        s = sum(ab[i] * bb[k - i] for i in range(4) if 0 <= k - i < 4) + carry
        pbytes.append(s & 0xFF)
        carry = s >> 8
        if k < 6:
            rows[f"cr[{k}]"] = carry
    pbytes.append(carry)
    for k in range(8):
        rows[f"p[{k}]"] = pbytes[k]
    sa, sb = a >> 31, bv >> 31
    sae = np.where((op == isa.MULH) | (op == isa.MULHSU), sa, 0)
    sbe = np.where(op == isa.MULH, sb, 0)
    H = (pbytes[4] + 256 * pbytes[5]) + ((pbytes[6] + 256 * pbytes[7]) << 16)
    res = (H - sae * bv - sbe * a) & M32
    lo_sum = (res & 0xFFFF) + sae * (bv & 0xFFFF) + sbe * (a & 0xFFFF)
    e0 = (lo_sum - (H & 0xFFFF)) >> 16
    hi_sum = (res >> 16) + sae * (bv >> 16) + sbe * (a >> 16) + e0
    e1 = (hi_sum - (H >> 16)) >> 16
    low = (pbytes[0] + 256 * pbytes[1]) + ((pbytes[2] + 256 * pbytes[3]) << 16)
    out = np.where(op == isa.MUL, low, res)
    rows.update({"sa": sa, "sb": sb, "sae": sae, "sbe": sbe, "res_lo": res & 0xFFFF,
                 "res_hi": res >> 16, "e0": e0, "e1": e1, "c_lo": out & 0xFFFF,
                 "c_hi": out >> 16})
    _accesses(rows, ctx, acc, cyc, a, bv, out)
    return rows, out


def _neg_cols(rows, name, v):
    n = (-v) & M32
    k0 = ((v & 0xFFFF) + (n & 0xFFFF)) >> 16
    rows.update({f"{name}_lo": n & 0xFFFF, f"{name}_hi": n >> 16, f"{name}_k0": k0,
                 f"{name}_k1": ((v >> 16) + (n >> 16) + k0) >> 16})
    return n


def div_rows(ctx, cyc: np.ndarray, acc) -> tuple[Rows, np.ndarray]:
    rows = _adapter_rows(ctx, cyc, _DFLAGS, imm=False)
    op = ctx.op[cyc]
    a, bv = ctx.a[cyc], ctx.r[cyc]
    signed = (op == isa.DIV) | (op == isa.REM)
    sa, sb = np.where(signed, a >> 31, 0), np.where(signed, bv >> 31, 0)
    na, nb = _neg_cols(rows, "na", a), _neg_cols(rows, "nb", bv)
    abs_a, abs_b = np.where(sa == 1, na, a), np.where(sb == 1, nb, bv)
    bz = bv == 0
    Q = np.where(bz, 0, abs_a // np.where(bz, 1, abs_b))
    R = abs_a - Q * abs_b
    x = sa ^ sb
    nq, nr = _neg_cols(rows, "nq", Q), _neg_cols(rows, "nr", R)
    q = np.where(bz, M32, np.where(x == 1, nq, Q))
    r = np.where(sa == 1, nr, R)
    out = np.where((op == isa.DIV) | (op == isa.DIVU), q, r)
    _bytes(rows, "q", Q)
    _bytes(rows, "bb", abs_b)
    qb = [(Q >> (8 * i)) & 0xFF for i in range(4)]
    bbb = [(abs_b >> (8 * i)) & 0xFF for i in range(4)]
    carry = np.zeros(cyc.size, np.int64)
    for k in range(4):
        s = sum(qb[i] * bbb[k - i] for i in range(4) if 0 <= k - i < 4) + carry
        rows[f"p[{k}]"] = s & 0xFF
        carry = s >> 8
        if k < 3:
            rows[f"pc[{k}]"] = carry
    P = Q * abs_b
    m0 = ((P & 0xFFFF) + (R & 0xFFFF)) >> 16
    u = (R - abs_b) & M32
    lk0 = ((u & 0xFFFF) + (abs_b & 0xFFFF)) >> 16
    lk1 = ((u >> 16) + (abs_b >> 16) + lk0) >> 16
    s_b = (bv & 0xFFFF) + (bv >> 16)
    inv = np.where(bz, 0, F.inv(np.where(bz, 1, s_b).astype(np.uint64)).astype(np.int64))
    rows.update({"a_lo": a & 0xFFFF, "a_hi": a >> 16, "b_lo": bv & 0xFFFF, "b_hi": bv >> 16,
                 "c_lo": out & 0xFFFF, "c_hi": out >> 16, "sa": sa, "sb": sb, "x": x,
                 "bz": bz, "inv": inv, "R_lo": R & 0xFFFF, "R_hi": R >> 16, "m0": m0,
                 "u_lo": u & 0xFFFF, "u_hi": u >> 16, "lk0": lk0, "lk1": lk1,
                 "q_lo": q & 0xFFFF, "q_hi": q >> 16})
    _accesses(rows, ctx, acc, cyc, a, bv, out)
    return rows, out


__all__ = ["build_mul", "build_div", "mul_rows", "div_rows", "MUL_OPS", "DIV_OPS"]
