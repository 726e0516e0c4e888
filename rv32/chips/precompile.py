"""P2CALL: the memory side of SYS_POSEIDON2; the permutation itself is chips/poseidon2.py's
POSEIDON2 table (bus ``poseidon2``: (input[16], output[16])), reused unchanged.

One row per call: receives (clk, wa_in, wa_out) from its ECALL on ``rv32_p2call``, reads
the 16 words at wa_in .. wa_in + 15 (ts 3 clk + 2) and writes the 8 words at wa_out ..
(ts 3 clk + 3, after the reads: the buffers may overlap), and sends (the 16 inputs, the
8 outputs, lanes 8..15 of the permuted state) on ``poseidon2``.  A word w = lo + 2^16 hi
is the field element lo + 2^16 hi only if it is below p, which each of the 24 words
proves: w <= p - 1 = 0x7800_0000 iff 0x7800 - hi - beta >= 0 with beta = 0 only if
lo = 0 (range16(0x7800 - hi - beta), (1 - beta) lo = 0, beta boolean) -- *given* that lo
and hi are integers below 2^16.  For an input the limbs come from the memory argument
(every value in memory was range-checked when it was written) and the check is the
machine's (a non-canonical input is an execution error).  An output word is a fresh
witness, so its two limbs are range-checked first (range16(lo), range16(hi): issue #40,
without them hi = p - t, t <= 0x87FF, passed the canonical check and the word aliased
its lane with a second, non-canonical limb pair); then the canonical check makes the
written word the canonical representative of the lane.  A call costs 16 x 3 (a read's two
ts-gap limbs, the canonical check) + 8 x 5 (a write's two, the two limbs, the canonical
check) = 88 range lookups (docs/rv32.md "No count wraps mod p").

Columns: clk, wa_in, wa_out, real; per input k: in{k}_lo, in{k}_hi, in{k}_beta and the
read's columns; per output k: out{k}_lo, out{k}_hi, out{k}_beta and the write's columns;
lane[8..15].
"""
from __future__ import annotations

import numpy as np

from ...air import AirBuilder

from .. import abi
from .common import MEMORY, P2CALL, POSEIDON2, TWO16, access, range16, ts_of, write
from .rows import Rows

N_IN, N_OUT = abi.POSEIDON2_IN_WORDS, abi.POSEIDON2_OUT_WORDS
_TOP = (abi.P - 1) >> 16          # 0x7800


def _canonical(b, name, lo, hi, real):
    """lo + 2^16 hi < p, given lo and hi integers in [0, 2^16) (the caller's part: an
    input's limbs come from the memory argument, an output's are range-checked by
    :func:`_output_limbs`).  Without that premise this proves nothing: hi = p - t passes
    range16(0x7800 - hi - beta) for every t <= 0x87FF (issue #40)."""
    beta = b.main(f"{name}_beta")
    b.assert_bool(beta, name=f"{name}_beta_bool")
    b.assert_zero((1 - beta) * lo, name=f"{name}_canonical")
    range16(b, _TOP - hi - beta, real)


def _output_limbs(b, lo, hi, real):
    """An output word is a fresh witness written to memory: both limbs range-checked, so
    that the word is the 32-bit integer lo + 2^16 hi < 2^32 (and then, by _canonical,
    the canonical representative of its lane)."""
    range16(b, lo, real)
    range16(b, hi, real)


def build_p2call(log_blowup: int, piece: bool = False):
    """rv32_p2call; ``piece``: its split table's AIR, ``rv32_p2call+`` with the public
    value piece_of that no constraint reads (chips/slots.py ``slotted``, rv32/tables.py
    "Split chips")."""
    b = AirBuilder("rv32_p2call+", public=("piece_of",)) if piece else AirBuilder("rv32_p2call")
    clk, wa_in, wa_out, real = (b.main(n) for n in ("clk", "wa_in", "wa_out", "real"))
    b.assert_bool(real, name="real_bool")
    b.receive(P2CALL, [clk, wa_in, wa_out], multiplicity=real)
    ins, outs = [], []
    for k in range(N_IN):
        lo, hi = b.main(f"in{k}_lo"), b.main(f"in{k}_hi")
        access(b, f"in{k}", MEMORY, wa_in + k, (lo, hi), (lo, hi), ts_of(clk, 2), real)
        _canonical(b, f"in{k}", lo, hi, real)
        ins.append(lo + TWO16 * hi)
    for k in range(N_OUT):
        lo, hi = b.main(f"out{k}_lo"), b.main(f"out{k}_hi")
        write(b, f"out{k}", MEMORY, wa_out + k, (lo, hi), ts_of(clk, 3), real)
        _output_limbs(b, lo, hi, real)
        _canonical(b, f"out{k}", lo, hi, real)
        outs.append(lo + TWO16 * hi)
    lanes = b.main_cols("lane", 16 - N_OUT)
    b.send(POSEIDON2, ins + outs + list(lanes), multiplicity=real)
    return b.build(log_blowup=log_blowup)


def p2call_rows(clk, wa_in, wa_out, words_in, words_out, lanes, acc) -> Rows:
    """Rows of the POSEIDON2 calls: clk, word addresses (int64[m]), the input words
    (int64[m, 16]), the output words (int64[m, 8]), lanes 8..15 of the permuted states."""
    m = clk.size
    rows = Rows(m)
    rows.update({"clk": clk, "wa_in": wa_in, "wa_out": wa_out, "real": 1})
    for k in range(N_IN):
        w = words_in[:, k]
        rows[f"in{k}_lo"], rows[f"in{k}_hi"] = w & 0xFFFF, w >> 16
        rows[f"in{k}_beta"] = (w & 0xFFFF) != 0
        rows.access(acc, f"in{k}", MEMORY, wa_in + k, 3 * clk + 2, w & 0xFFFF, w >> 16)
    for k in range(N_OUT):
        w = words_out[:, k]
        rows[f"out{k}_lo"], rows[f"out{k}_hi"] = w & 0xFFFF, w >> 16
        rows[f"out{k}_beta"] = (w & 0xFFFF) != 0
        rows.access(acc, f"out{k}", MEMORY, wa_out + k, 3 * clk + 3, w & 0xFFFF, w >> 16,
                    witness_old=True)
    for j in range(16 - N_OUT):
        rows[f"lane[{j}]"] = lanes[:, j]
    return rows


__all__ = ["build_p2call", "p2call_rows", "N_IN", "N_OUT"]
