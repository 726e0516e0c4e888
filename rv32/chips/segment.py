"""The boundary tables of a segment proof (docs/rv32.md "Long programs: segments").

A segment of a long run is proved by the ordinary tables but for these two, which
replace MEMORY and REGISTERS; both are *preprocessed from values the verifier fixes*
(the in-values it computes from the previous segments, the out-values the proof
carries), so that the AIR fingerprint that the segment's transcript absorbs binds them.

**PAGEMEM** (``rv32_pagemem``, in MEMORY's place): one row per word address the segment
touches, ascending (the verifier checks them strictly increasing and below 2^30).
Preprocessed ``wa, i_lo, i_hi, o_lo, o_hi, real``; main ``f_ts``.  Sends the initial
tuple (MEMORY, wa, i, 0) and receives the final one (MEMORY, wa, o, f_ts) with
multiplicity real.  As MEMORY's, the rows give every touched address exactly one chain,
from its in-value (here the verifier's, not the image's) to its out-value.

**SEGREGS** (``rv32_segregs``, in REGISTERS' place): 64 rows, rows 0..35 the registers
x0..x31, the sink and the three cursors.  Preprocessed ``idx, i_lo, i_hi, o_lo, o_hi,
reg, first, sink``; main ``f_lo, f_hi, f_ts``.  Sends (REG, idx, i, 0) and receives
(REG, idx, o + sink f, f_ts) (multiplicity reg): the sink (register 32, where writes to
x0 land; nothing reads it) starts every segment at 0 and ends at whatever was last
written to x0, its own main f (o is 0 on its row); every other register's out-value is
the verifier's; on row 0 sends (pc_in / 4, 0) on ``rv32_exec``, and receives either
(pc_out / 4, cycles) on ``rv32_exec`` (a segment that does not exit: its last row sends
that tuple, so the execution chain has exactly one row per local clk 0 .. cycles - 1)
or the public exit code on ``rv32_exit`` (the final segment).  Public values: the exit
code (final segment only).
"""
from __future__ import annotations

import numpy as np

from ...air import AirBuilder

from .common import EXEC, EXIT, MEM, MEMORY, NUM_REGS, REG, pow2_rows

PAGE_PREP = ("wa", "i_lo", "i_hi", "o_lo", "o_hi", "real")
REG_PREP = ("idx", "i_lo", "i_hi", "o_lo", "o_hi", "reg", "first", "sink")
SINK_ROW = 32
REG_ROWS = 64


def _limbs(v):
    v = np.asarray(v, dtype=np.int64)
    return v & 0xFFFF, v >> 16


def pagemem_prep(wa, v_in, v_out) -> np.ndarray:
    wa = np.asarray(wa, dtype=np.int64)
    k = wa.size
    prep = np.zeros((pow2_rows(k), len(PAGE_PREP)), dtype=np.uint32)
    prep[:k, 0] = wa
    prep[:k, 1], prep[:k, 2] = _limbs(v_in)
    prep[:k, 3], prep[:k, 4] = _limbs(v_out)
    prep[:k, 5] = 1
    return prep


def build_pagemem(wa, v_in, v_out, log_blowup: int):
    b = AirBuilder("rv32_pagemem")
    c = {name: b.prep(name) for name in PAGE_PREP}
    f_ts = b.main("f_ts")
    b.send(MEM, [MEMORY, c["wa"], c["i_lo"], c["i_hi"], 0], multiplicity=c["real"])
    b.receive(MEM, [MEMORY, c["wa"], c["o_lo"], c["o_hi"], f_ts], multiplicity=c["real"])
    return b.build(preprocessed=pagemem_prep(wa, v_in, v_out), log_blowup=log_blowup)


def segregs_prep(regs_in, regs_out) -> np.ndarray:
    """Rows 0..35: register i's value at the segment's start and end (cursors as one
    field element in the lo slot, below 2^27)."""
    prep = np.zeros((REG_ROWS, len(REG_PREP)), dtype=np.uint32)
    r_in = np.asarray(regs_in, dtype=np.int64)
    r_out = np.asarray(regs_out, dtype=np.int64)
    if r_in.shape != (NUM_REGS,) or r_out.shape != (NUM_REGS,):
        raise ValueError(f"a segment boundary has {NUM_REGS} registers")
    prep[:NUM_REGS, 0] = np.arange(NUM_REGS)
    for col, v in ((1, r_in), (3, r_out)):
        lo, hi = _limbs(v)
        cur = np.arange(NUM_REGS) >= 33            # the cursors: one element, lo slot
        prep[:NUM_REGS, col] = np.where(cur, v, lo)
        prep[:NUM_REGS, col + 1] = np.where(cur, 0, hi)
    prep[:NUM_REGS, 5] = 1
    prep[0, 6] = 1
    prep[SINK_ROW, 1:5] = 0
    prep[SINK_ROW, 7] = 1
    return prep


def build_segregs(regs_in, regs_out, pc_in: int, pc_out: int | None, cycles: int,
                  log_blowup: int):
    """``pc_out`` None: the final segment (it exits; the exit code is public)."""
    final = pc_out is None
    b = AirBuilder("rv32_segregs", public=("exit_code",) if final else ())
    c = {name: b.prep(name) for name in REG_PREP}
    f_lo, f_hi, f_ts = b.main("f_lo"), b.main("f_hi"), b.main("f_ts")
    b.assert_zero((1 - c["sink"]) * f_lo, name="f_lo_sink_only")
    b.assert_zero((1 - c["sink"]) * f_hi, name="f_hi_sink_only")
    b.send(MEM, [REG, c["idx"], c["i_lo"], c["i_hi"], 0], multiplicity=c["reg"])
    b.receive(MEM, [REG, c["idx"], c["o_lo"] + c["sink"] * f_lo, c["o_hi"] + c["sink"] * f_hi,
                    f_ts], multiplicity=c["reg"])
    b.send(EXEC, [int(pc_in) >> 2, 0], multiplicity=c["first"])
    if final:
        b.receive(EXIT, [b.pv("exit_code")], multiplicity=c["first"])
    else:
        b.receive(EXEC, [int(pc_out) >> 2, int(cycles)], multiplicity=c["first"])
    return b.build(preprocessed=segregs_prep(regs_in, regs_out), log_blowup=log_blowup)


__all__ = ["build_pagemem", "build_segregs", "pagemem_prep", "segregs_prep", "PAGE_PREP",
           "REG_PREP", "REG_ROWS", "SINK_ROW"]
