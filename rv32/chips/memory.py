"""MEMORY: the boundary of the offline memory argument for memory words.

One row per word address that the execution touches or the image holds (a nonzero image
word), sorted by address (strictly increasing), then padding.  Columns:

=====  ==============================================================================
wl wh  the word address wa = wl + 2^16 wh (wl < 2^16, wh < 2^14, both range-checked)
img    1 if wa is a nonzero image word: its initial value comes from PROGRAM
i_lo   the initial value (lo, hi): the image word where img = 1, zero otherwise
i_hi
f_lo   the final value and the timestamp of the last access (0 if never accessed)
f_hi
f_ts
real   1 on the sorted rows, 0 on padding (padding only at the end)
eq     on row r > 0: wh_r = wh_(r-1)
gap    on row r > 0: wl_r - wl_(r-1) - 1 if eq else wh_r - wh_(r-1) - 1, range-checked
=====  ==============================================================================

Buses: receives (wa, i_lo, i_hi) on ``rv32_image`` with multiplicity img; sends the
initial tuple (MEMORY, wa, i, 0) and receives the final tuple (MEMORY, wa, f, f_ts) on
``rv32_mem`` with multiplicity real.

Why it is sound.  (1) Addresses are distinct: (wh, wl) are integer pairs below
(2^14, 2^16) and strictly increase lexicographically from row to row (the gap of the
limb that steps is a range-checked integer: a step back would be p - x, x < 2^16, not
below 2^16), so the wa = wl + 2^16 wh < 2^30 are distinct integers, hence distinct field
elements.  (2) Initial values are the image's: PROGRAM sends every nonzero image word
exactly once and MEMORY receives with multiplicity img on distinct addresses, so each
image word is received by exactly one row, the row of its own address, with its own
value; every other row has img = 0 and initial value 0, which is the machine's memory
outside the nonzero image words.  (3) Every address an access touches has exactly one
chain: an access's received tuple must have been sent, by an earlier access (prev_ts <
ts, common.ts_check) or by this table's initial tuple, so walking back from any access
ends at the single initial tuple of its address; a word address without a row here (one
>= 2^30, or one the prover left out) has no initial tuple and its accesses cannot
balance.
"""
from __future__ import annotations

import numpy as np

from ...air import AirBuilder

from .common import IMAGE, MEM, MEMORY, TWO16, range16


def build_memory(log_blowup: int):
    b = AirBuilder("rv32_memory")
    wl, wh, img = b.main("wl"), b.main("wh"), b.main("img")
    i_lo, i_hi, f_lo, f_hi, f_ts = (b.main(n) for n in ("i_lo", "i_hi", "f_lo", "f_hi", "f_ts"))
    real, eq, gap = b.main("real"), b.main("eq"), b.main("gap")
    wa = wl + TWO16 * wh
    for name, x in (("img", img), ("real", real), ("eq", eq)):
        b.assert_bool(x, name=f"{name}_bool")
    b.assert_zero(img * (1 - real), name="img_is_real")
    b.assert_zero((1 - img) * i_lo, name="init_zero_lo")
    b.assert_zero((1 - img) * i_hi, name="init_zero_hi")
    b.when_transition((1 - real) * real.next, name="padding_at_end")
    # strictly increasing (wh, wl): the step of the limb that moves is gap + 1 > 0
    b.when_transition(real.next * eq.next * (wh.next - wh), name="eq_high")
    b.when_transition(real.next * (gap.next - eq.next * (wl.next - wl - 1)
                                   - (1 - eq.next) * (wh.next - wh - 1)), name="sorted")
    range16(b, wl, real)
    range16(b, wh, real)
    range16(b, 4 * wh, real)          # wh < 2^14: wa < 2^30
    range16(b, gap, real)
    b.receive(IMAGE, [wa, i_lo, i_hi], multiplicity=img)
    b.send(MEM, [MEMORY, wa, i_lo, i_hi, 0], multiplicity=real)
    b.receive(MEM, [MEMORY, wa, f_lo, f_hi, f_ts], multiplicity=real)
    return b.build(log_blowup=log_blowup)


def memory_rows(wa: np.ndarray, img: np.ndarray, init: np.ndarray, f_lo: np.ndarray,
                f_hi: np.ndarray, final_ts: np.ndarray) -> dict:
    """The MEMORY columns of sorted distinct addresses ``wa`` (int64), ``img`` (bool),
    ``init`` (int64 words), the final limbs and ``final_ts``."""
    wl, wh = wa & 0xFFFF, wa >> 16
    eq = np.zeros(wa.size, np.int64)
    gap = np.zeros(wa.size, np.int64)
    if wa.size > 1:
        same = wh[1:] == wh[:-1]
        eq[1:] = same
        gap[1:] = np.where(same, wl[1:] - wl[:-1] - 1, wh[1:] - wh[:-1] - 1)
    return {"wl": wl, "wh": wh, "img": img.astype(np.int64), "i_lo": init & 0xFFFF,
            "i_hi": init >> 16, "f_lo": f_lo, "f_hi": f_hi, "f_ts": final_ts,
            "real": np.ones(wa.size, np.int64), "eq": eq, "gap": gap}


__all__ = ["build_memory", "memory_rows"]
