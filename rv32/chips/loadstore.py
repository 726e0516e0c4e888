"""LOAD (LB LH LW LBU LHU) and STORE (SB SH SW).

Both compute the byte address s = rs1 + imm with one adder whose low limb is written
4 wl + o0 + 2 o1 (wl range-checked by range16(wl) and range16(4 wl): an integer below
2^14; o0, o1 bits) and whose high limb s_hi is range-checked, so the word address
wa = wl + 2^14 s_hi < 2^30 and the offset o0 + 2 o1 are exactly s >> 2 and s & 3 (an
unchecked wl could put wa anywhere).  Alignment: LW / SW need o0 = o1 = 0, LH / LHU / SH
o0 = 0 (a misaligned access is an execution error, never a proved cycle).  The word is
accessed at ts 3 clk + 2 in the MEMORY space.

**LOAD** columns: pcw clk rd rs1 imm_lo imm_hi, f_lb f_lh f_lw f_lbu f_lhu, a limbs, c limbs
(rd), wl o0 o1 s_hi k0 k1, w_lo w_hi (the word), x0 x1 (the bytes of the half h = o1 ?
w_hi : w_lo, pair8), sg (the loaded value's sign), sv (the sign check's value), and the
accesses (rs1 at ts + 1, the word, rd at ts + 3).  The byte is bt = o0 ? x1 : x0; LW
writes w, LH/LHU h, LB/LBU bt, sign-extended by sg for LH/LB.  sg is pinned by
range16(sv) with sv = 2 h - 2^16 sg (LH) or 256 (2 bt - 256 sg) (LB): negative or >= 2^16
unless sg is the top bit.

**STORE** columns: pcw clk rs1 rs2 imm_lo imm_hi, f_sb f_sh f_sw, a and r (rs2) limbs, wl o0
o1 s_hi k0 k1, w_lo w_hi (before) n_lo n_hi (after), x0 x1 (the bytes of the half h as in
LOAD), y0 y1 (the bytes of r_lo, pair8), hp (the new half for SB: o0 ? x0 + 256 y0 :
y0 + 256 x1), and the accesses (rs1, rs2, the word read-modify-write).  SW: n = r;
SH: the half o1 becomes r_lo; SB: the half o1 becomes hp; the other half is kept.
"""
from __future__ import annotations

import numpy as np


from .. import isa
from .common import (MEMORY, PAIR8, REG, TWO16, access, fetch, range16, read, step, sum_of,
                     ts_of, write)
from .rows import Rows
from .slots import slotted

LOAD_OPS = (isa.LB, isa.LH, isa.LW, isa.LBU, isa.LHU)
STORE_OPS = (isa.SB, isa.SH, isa.SW)
_LFLAGS = {isa.LB: "f_lb", isa.LH: "f_lh", isa.LW: "f_lw", isa.LBU: "f_lbu", isa.LHU: "f_lhu"}
_SFLAGS = {isa.SB: "f_sb", isa.SH: "f_sh", isa.SW: "f_sw"}


def _flags(b, flags):
    fl = {op: b.main(name) for op, name in flags.items()}
    real = sum_of(list(fl.values()))
    for op, f in fl.items():
        b.assert_bool(f, name=f"{flags[op]}_bool")
    b.assert_bool(real, name="one_op")
    return fl, real, sum_of([op * f for op, f in fl.items()])


def _address(b, a, imm, real):
    """s = a + imm: returns (wa, o0, o1)."""
    wl, o0, o1, s_hi, k0, k1 = (b.main(n) for n in ("wl", "o0", "o1", "s_hi", "k0", "k1"))
    for name, x in (("o0", o0), ("o1", o1), ("k0", k0), ("k1", k1)):
        b.assert_bool(x, name=f"{name}_bool")
    b.assert_zero(a[0] + imm[0] - 4 * wl - o0 - 2 * o1 - TWO16 * k0, name="addr_lo")
    b.assert_zero(a[1] + imm[1] + k0 - s_hi - TWO16 * k1, name="addr_hi")
    range16(b, wl, real)
    range16(b, 4 * wl, real)
    range16(b, s_hi, real)
    return wl + (1 << 14) * s_hi, o0, o1


def build_load(log_blowup: int, k: int = 1, piece: bool = False):
    """rv32_load with k slots (chips/slots.py)."""
    return slotted("rv32_load", _load_slot, k, log_blowup, piece=piece)


def _load_slot(b):
    c = {n: b.main(n) for n in ("pcw", "clk", "rd", "rs1", "imm_lo", "imm_hi")}
    fl, real, op_id = _flags(b, _LFLAGS)
    f_lb, f_lh, f_lw, f_lbu, f_lhu = (fl[op] for op in LOAD_OPS)
    a = (b.main("a_lo"), b.main("a_hi"))
    out = (b.main("c_lo"), b.main("c_hi"))
    pcw, clk = c["pcw"], c["clk"]
    fetch(b, real, pcw, op_id, c["rd"], c["rs1"], 0, (c["imm_lo"], c["imm_hi"]))
    step(b, pcw, clk, pcw + 1, real)
    read(b, "r1", REG, c["rs1"], a, ts_of(clk, 1), real)
    wa, o0, o1 = _address(b, a, (c["imm_lo"], c["imm_hi"]), real)
    w = (b.main("w_lo"), b.main("w_hi"))
    x0, x1, sg, sv = b.main("x0"), b.main("x1"), b.main("sg"), b.main("sv")
    read(b, "mem", MEMORY, wa, w, ts_of(clk, 2), real)
    write(b, "rd", REG, c["rd"], out, ts_of(clk, 3), real)
    b.assert_zero(f_lw * o0, name="lw_align0")
    b.assert_zero(f_lw * o1, name="lw_align1")
    b.assert_zero((f_lh + f_lhu) * o0, name="lh_align")
    h = w[0] + o1 * (w[1] - w[0])
    b.assert_zero(x0 + 256 * x1 - h, name="half_bytes")
    b.send(PAIR8, [x0, x1], multiplicity=real)
    bt = x0 + o0 * (x1 - x0)
    b.assert_bool(sg, name="sg_bool")
    b.assert_zero(sv - f_lh * (2 * h - TWO16 * sg) - f_lb * 256 * (2 * bt - 256 * sg), name="sv")
    range16(b, sv, f_lb + f_lh)
    b.assert_zero((f_lw + f_lbu + f_lhu) * sg, name="sg_unsigned")
    b.assert_zero(f_lw * (out[0] - w[0]) + (f_lh + f_lhu) * (out[0] - h)
                  + f_lb * (out[0] - bt - 0xFF00 * sg) + f_lbu * (out[0] - bt), name="c_lo")
    b.assert_zero(f_lw * (out[1] - w[1]) + (f_lh + f_lb) * (out[1] - 0xFFFF * sg)
                  + (f_lhu + f_lbu) * out[1], name="c_hi")


def build_store(log_blowup: int, k: int = 1, piece: bool = False):
    """rv32_store with k slots (chips/slots.py)."""
    return slotted("rv32_store", _store_slot, k, log_blowup, piece=piece)


def _store_slot(b):
    c = {n: b.main(n) for n in ("pcw", "clk", "rs1", "rs2", "imm_lo", "imm_hi")}
    fl, real, op_id = _flags(b, _SFLAGS)
    f_sb, f_sh, f_sw = (fl[op] for op in STORE_OPS)
    a = (b.main("a_lo"), b.main("a_hi"))
    r = (b.main("r_lo"), b.main("r_hi"))
    pcw, clk = c["pcw"], c["clk"]
    fetch(b, real, pcw, op_id, 0, c["rs1"], c["rs2"], (c["imm_lo"], c["imm_hi"]))
    step(b, pcw, clk, pcw + 1, real)
    read(b, "r1", REG, c["rs1"], a, ts_of(clk, 1), real)
    read(b, "r2", REG, c["rs2"], r, ts_of(clk, 2), real)
    wa, o0, o1 = _address(b, a, (c["imm_lo"], c["imm_hi"]), real)
    w = (b.main("w_lo"), b.main("w_hi"))
    n = (b.main("n_lo"), b.main("n_hi"))
    x0, x1, y0, y1, hp = (b.main(k) for k in ("x0", "x1", "y0", "y1", "hp"))
    access(b, "mem", MEMORY, wa, w, n, ts_of(clk, 2), real)
    b.assert_zero(f_sw * o0, name="sw_align0")
    b.assert_zero(f_sw * o1, name="sw_align1")
    b.assert_zero(f_sh * o0, name="sh_align")
    b.assert_zero(x0 + 256 * x1 - w[0] - o1 * (w[1] - w[0]), name="half_bytes")
    b.assert_zero(y0 + 256 * y1 - r[0], name="r_bytes")
    b.send(PAIR8, [x0, x1], multiplicity=real)
    b.send(PAIR8, [y0, y1], multiplicity=real)
    b.assert_zero(hp - o0 * (x0 + 256 * y0) - (1 - o0) * (y0 + 256 * x1), name="sb_half")
    half = f_sh * r[0] + f_sb * hp          # the new half (SH, SB)
    part = f_sh + f_sb
    b.assert_zero(f_sw * (n[0] - r[0]) + part * (n[0] - o1 * w[0]) - (1 - o1) * half,
                  name="n_lo")
    b.assert_zero(f_sw * (n[1] - r[1]) + part * (n[1] - (1 - o1) * w[1]) - o1 * half,
                  name="n_hi")


# --------------------------------------------------------------------------- traces

def _addr_cols(rows, a, imm):
    lo = (a & 0xFFFF) + (imm & 0xFFFF)
    k0 = lo >> 16
    hi = (a >> 16) + (imm >> 16) + k0
    s_lo = lo & 0xFFFF
    rows.update({"wl": s_lo >> 2, "o0": s_lo & 1, "o1": (s_lo >> 1) & 1, "s_hi": hi & 0xFFFF,
                 "k0": k0, "k1": hi >> 16})
    s = (a + imm) & 0xFFFF_FFFF
    return s >> 2, s & 3


def load_rows(ctx, cyc: np.ndarray, acc) -> tuple[Rows, np.ndarray]:
    rows = Rows(cyc.size)
    op = ctx.op[cyc]
    a, imm = ctx.a[cyc], ctx.imm[cyc]
    rows.update({"pcw": ctx.pcw[cyc], "clk": cyc, "rd": ctx.rd[cyc], "rs1": ctx.rs1[cyc],
                 "imm_lo": imm & 0xFFFF, "imm_hi": imm >> 16})
    for code, name in _LFLAGS.items():
        rows[name] = op == code
    wa, off = _addr_cols(rows, a, imm)
    w = ctx.mem_before[cyc]
    h = np.where(off >> 1, w >> 16, w & 0xFFFF)
    bt = np.where(off & 1, h >> 8, h & 0xFF)
    lb, lh = op == isa.LB, op == isa.LH
    sg = np.where(lb, bt >> 7, np.where(lh, h >> 15, 0))
    out = np.select([op == isa.LW, lh, op == isa.LHU, lb],
                    [w, h | (sg * 0xFFFF0000), h, bt | (sg * 0xFFFFFF00)], default=bt)
    sv = np.where(lh, 2 * h - (sg << 16), np.where(lb, 256 * (2 * bt - 256 * sg), 0))
    rows.update({"a_lo": a & 0xFFFF, "a_hi": a >> 16, "c_lo": out & 0xFFFF, "c_hi": out >> 16,
                 "w_lo": w & 0xFFFF, "w_hi": w >> 16, "x0": h & 0xFF, "x1": h >> 8, "sg": sg,
                 "sv": sv})
    rows.access(acc, "r1", REG, ctx.rs1[cyc], 3 * cyc + 1, a & 0xFFFF, a >> 16)
    rows.access(acc, "mem", MEMORY, wa, 3 * cyc + 2, w & 0xFFFF, w >> 16)
    rows.access(acc, "rd", REG, ctx.rd[cyc], 3 * cyc + 3, out & 0xFFFF, out >> 16,
                witness_old=True)
    return rows, out


def store_rows(ctx, cyc: np.ndarray, acc) -> Rows:
    rows = Rows(cyc.size)
    op = ctx.op[cyc]
    a, r, imm = ctx.a[cyc], ctx.r[cyc], ctx.imm[cyc]
    rows.update({"pcw": ctx.pcw[cyc], "clk": cyc, "rs1": ctx.rs1[cyc], "rs2": ctx.rs2[cyc],
                 "imm_lo": imm & 0xFFFF, "imm_hi": imm >> 16})
    for code, name in _SFLAGS.items():
        rows[name] = op == code
    wa, off = _addr_cols(rows, a, imm)
    w, n = ctx.mem_before[cyc], ctx.mem_after[cyc]
    h = np.where(off >> 1, w >> 16, w & 0xFFFF)
    x0, x1, y0 = h & 0xFF, h >> 8, r & 0xFF
    hp = np.where(off & 1, x0 + 256 * y0, y0 + 256 * x1)
    rows.update({"a_lo": a & 0xFFFF, "a_hi": a >> 16, "r_lo": r & 0xFFFF, "r_hi": r >> 16,
                 "w_lo": w & 0xFFFF, "w_hi": w >> 16, "n_lo": n & 0xFFFF, "n_hi": n >> 16,
                 "x0": x0, "x1": x1, "y0": y0, "y1": (r >> 8) & 0xFF, "hp": hp})
    rows.access(acc, "r1", REG, ctx.rs1[cyc], 3 * cyc + 1, a & 0xFFFF, a >> 16)
    rows.access(acc, "r2", REG, ctx.rs2[cyc], 3 * cyc + 2, r & 0xFFFF, r >> 16)
    rows.access(acc, "mem", MEMORY, wa, 3 * cyc + 2, n & 0xFFFF, n >> 16,
                old=(w & 0xFFFF, w >> 16))
    return rows


__all__ = ["build_load", "build_store", "load_rows", "store_rows", "LOAD_OPS", "STORE_OPS"]
