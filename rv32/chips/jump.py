"""JUMP: LUI, AUIPC, JAL, JALR and FENCE -- one uniform row, no flags.

PROGRAM decodes all five to op OP_JUMP with: rd (the sink for FENCE), the value v to
write (imm << 12, pc + (imm << 12), pc + 4, pc + 4, 0), tgt ((pc + 4) / 4, the same, the
JAL target / 4 -- or BAD_TARGET --, 0 for JALR, (pc + 4) / 4), and for JALR rs1 and imm
(the others have rs1 = x0, imm = 0).  The row reads rs1 (ts 3 clk + 1), writes v to rd
(ts + 3) and goes to tgt + ((rs1 + imm) & ~3) / 4: for all but JALR rs1 + imm = 0.

JALR's target (rs1 + imm) & ~1 must be 4-aligned (else an execution error): the adder's
low limb is 4 wl + b0 (bit 1 zero, b0 the bit JALR clears), with wl an integer below 2^14
(range16(wl), range16(4 wl)) and the high limb s_hi range-checked, so wl + 2^14 s_hi is
exactly the target / 4 (below 2^30, never aliasing another pc).

Columns: pcw clk rd rs1 imm_lo imm_hi v_lo v_hi tgt real, a limbs, wl b0 s_hi k0 k1, and
the two accesses.
"""
from __future__ import annotations

import numpy as np


from .common import OP_JUMP, REG, TWO16, fetch, range16, read, step, ts_of, write
from .rows import Rows
from .slots import slotted


def build_jump(log_blowup: int, k: int = 1, piece: bool = False):
    """rv32_jump with k slots (chips/slots.py)."""
    return slotted("rv32_jump", _jump_slot, k, log_blowup, piece=piece)


def _jump_slot(b):
    c = {n: b.main(n) for n in ("pcw", "clk", "rd", "rs1", "imm_lo", "imm_hi", "v_lo", "v_hi",
                                "tgt", "real")}
    real = c["real"]
    a = (b.main("a_lo"), b.main("a_hi"))
    wl, b0, s_hi, k0, k1 = (b.main(n) for n in ("wl", "b0", "s_hi", "k0", "k1"))
    pcw, clk = c["pcw"], c["clk"]
    for name, x in (("real", real), ("b0", b0), ("k0", k0), ("k1", k1)):
        b.assert_bool(x, name=f"{name}_bool")
    fetch(b, real, pcw, OP_JUMP * real, c["rd"], c["rs1"], 0, (c["imm_lo"], c["imm_hi"]),
          (c["v_lo"], c["v_hi"]), c["tgt"])
    step(b, pcw, clk, c["tgt"] + wl + (1 << 14) * s_hi, real)
    read(b, "r1", REG, c["rs1"], a, ts_of(clk, 1), real)
    write(b, "rd", REG, c["rd"], (c["v_lo"], c["v_hi"]), ts_of(clk, 3), real)
    b.assert_zero(a[0] + c["imm_lo"] - 4 * wl - b0 - TWO16 * k0, name="target_lo")
    b.assert_zero(a[1] + c["imm_hi"] + k0 - s_hi - TWO16 * k1, name="target_hi")
    range16(b, wl, real)
    range16(b, 4 * wl, real)
    range16(b, s_hi, real)


def jump_rows(ctx, cyc: np.ndarray, acc) -> tuple[Rows, np.ndarray]:
    rows = Rows(cyc.size)
    a, imm, v = ctx.a[cyc], ctx.imm[cyc], ctx.v[cyc]
    lo = (a & 0xFFFF) + (imm & 0xFFFF)
    k0 = lo >> 16
    hi = (a >> 16) + (imm >> 16) + k0
    rows.update({"pcw": ctx.pcw[cyc], "clk": cyc, "rd": ctx.rd[cyc], "rs1": ctx.rs1[cyc],
                 "imm_lo": imm & 0xFFFF, "imm_hi": imm >> 16, "v_lo": v & 0xFFFF,
                 "v_hi": v >> 16, "tgt": ctx.tgt[cyc], "real": 1, "a_lo": a & 0xFFFF,
                 "a_hi": a >> 16, "wl": (lo & 0xFFFF) >> 2, "b0": lo & 1, "s_hi": hi & 0xFFFF,
                 "k0": k0, "k1": hi >> 16})
    rows.access(acc, "r1", REG, ctx.rs1[cyc], 3 * cyc + 1, a & 0xFFFF, a >> 16)
    rows.access(acc, "rd", REG, ctx.rd[cyc], 3 * cyc + 3, v & 0xFFFF, v >> 16, witness_old=True)
    return rows, v


__all__ = ["build_jump", "jump_rows"]
