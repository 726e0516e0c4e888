"""PROGRAM: the loaded image, one row per nonzero word, with every code word decoded.

Preprocessed columns (part of the statement: the verifier rebuilds them from the ELF, and
the AIR fingerprint the transcript absorbs covers their values):

====  ===================================================================================
wa    word address (byte address / 4), ascending
lo    the word's low and high 16-bit limbs (the initial memory contents)
hi
img   1 on the rows of nonzero image words, 0 on padding
op    the decoded instruction's op id on the program bus (0 for data words and words that
      do not decode: no instruction row sends op 0)
rd    destination register; 32 (the sink) when rd = x0; 0 when the format has none
rs1   source registers (0 when the format has none: they read x0)
rs2
imm   the sign-extended immediate as two limbs (I, S formats; shifts: the amount)
v     the value LUI / AUIPC / JAL / JALR write: imm << 12, pc + imm << 12, pc + 4
tgt   the next pc / 4 that a JUMP-class row goes to (JALR adds rs1 + imm), the target / 4
      of a branch when taken; BAD_TARGET (p - 1, no pc) for a target not 4-aligned
====  ===================================================================================

Main column: ``mult``, how many times the row's instruction executed.  It receives
``rv32_program`` (pcw, op, rd, rs1, rs2, imm, v, tgt) with multiplicity mult and sends each
image word (wa, lo, hi) on ``rv32_image`` exactly once (multiplicity img).

Why it is sound: the rows are fixed by the program, each word address appears once, and
an instruction row can only obtain (pcw, op, fields) that a row holds, so every executed
pc is a code word of the image executed with its own decoding.  Instruction fetch reads
executable segments only (rv32/elf.py code_ranges); words outside them get op 0.  Zero
words are left out: their initial value is the default, 0 (MEMORY), and the word 0 does
not decode.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from steadfast._jit_cache import adopt

from ...air import AirBuilder

from .. import isa
from ..memory import Memory
from .common import BAD_TARGET, IMAGE, OP_JUMP, PROGRAM, SINK, pow2_rows

PREP = ("wa", "lo", "hi", "img", "op", "rd", "rs1", "rs2", "imm_lo", "imm_hi", "v_lo", "v_hi",
        "tgt")
_decode = njit(cache=True)(isa.decode_fields)
_MASK = 0xFFFF_FFFF


@njit(cache=True, _nrt=False)
def _decode_rows(words, pcs, out):
    """out[i] = (op, rd, rs1, rs2, imm, v, tgt) of code word i at byte address pcs[i]."""
    for i in range(words.shape[0]):
        w = np.int64(words[i])
        pc = np.int64(pcs[i])
        op, rd, rs1, rs2, imm = _decode(w)
        rdp = rd if rd != 0 else SINK
        nxt = (pc + 4) & _MASK
        r = (0, 0, 0, 0, 0, 0, 0)
        if op == 0:
            r = (0, 0, 0, 0, 0, 0, 0)
        elif op <= isa.R_LAST:
            r = (op, rdp, rs1, rs2, 0, 0, 0)
        elif op <= isa.I_LAST:
            r = (op - isa.I_OFFSET, rdp, rs1, 0, imm & _MASK, 0, 0)
        elif op <= isa.LOAD_LAST:
            r = (op, rdp, rs1, 0, imm & _MASK, 0, 0)
        elif op <= isa.STORE_LAST:
            r = (op, 0, rs1, rs2, imm & _MASK, 0, 0)
        elif op <= isa.BRANCH_LAST:
            t = (pc + imm) & _MASK
            r = (op, 0, rs1, rs2, 0, 0, t >> 2 if t % 4 == 0 else BAD_TARGET)
        elif op == isa.LUI:
            r = (OP_JUMP, rdp, 0, 0, 0, imm & _MASK, nxt >> 2)
        elif op == isa.AUIPC:
            r = (OP_JUMP, rdp, 0, 0, 0, (pc + imm) & _MASK, nxt >> 2)
        elif op == isa.JAL:
            t = (pc + imm) & _MASK
            r = (OP_JUMP, rdp, 0, 0, 0, nxt, t >> 2 if t % 4 == 0 else BAD_TARGET)
        elif op == isa.JALR:
            r = (OP_JUMP, rdp, rs1, 0, imm & _MASK, nxt, 0)
        elif op == isa.FENCE:
            r = (OP_JUMP, SINK, 0, 0, 0, 0, nxt >> 2)
        elif op == isa.ECALL:
            r = (isa.ECALL, 0, 0, 0, 0, 0, 0)
        for k in range(7):
            out[i, k] = r[k]


@dataclass(frozen=True)
class Image:
    """The nonzero words of a program's initial memory, and the decoded code words.

    ``wa``: int64 word addresses, ascending; ``word``: uint32 values; ``dec``: int64[n, 7]
    (op, rd, rs1, rs2, imm, v, tgt) -- zeros for words that are not code; ``entry_w``."""
    wa: np.ndarray
    word: np.ndarray
    dec: np.ndarray
    entry_w: int

    def index(self, wa: np.ndarray) -> np.ndarray:
        """Row of each word address (they must be image words)."""
        return np.searchsorted(self.wa, wa)


def image_of(program) -> Image:
    """The :class:`Image` of an :class:`rv32.Program`."""
    mem = Memory.from_program(program)
    was, words = [], []
    for pn in sorted(mem.pages):
        w = np.frombuffer(bytes(mem.pages[pn]), dtype="<u4")
        nz = np.flatnonzero(w)
        if nz.size:
            was.append((pn << 10) + nz.astype(np.int64))
            words.append(w[nz].astype(np.uint32))
    wa = np.concatenate(was) if was else np.zeros(0, np.int64)
    word = np.concatenate(words) if words else np.zeros(0, np.uint32)
    dec = np.zeros((wa.size, 7), dtype=np.int64)
    code = np.zeros(wa.size, dtype=bool)
    for start, data in program.code_ranges():
        lo, hi = start >> 2, (start + len(data)) >> 2
        code |= (wa >= lo) & (wa < hi)
    ci = np.flatnonzero(code)
    if ci.size:
        out = np.zeros((ci.size, 7), dtype=np.int64)
        _decode_rows(word[ci].astype(np.int64), wa[ci] << 2, out)
        dec[ci] = out
    return Image(wa, word, dec, program.entry >> 2)


def program_prep(image: Image, paged: bool = False) -> np.ndarray:
    """uint32[n, 13], the PREP columns (module docstring), n = pow2_rows(words);
    ``paged``: a segment's (img = 0: its memory comes from its page-in rows, chips/segment.py)."""
    k = image.wa.size
    prep = np.zeros((pow2_rows(k), len(PREP)), dtype=np.uint32)
    d = image.dec
    cols = {"wa": image.wa, "lo": image.word & 0xFFFF, "hi": image.word >> 16,
            "img": np.full(k, 0 if paged else 1, np.int64), "op": d[:, 0], "rd": d[:, 1], "rs1": d[:, 2],
            "rs2": d[:, 3], "imm_lo": d[:, 4] & 0xFFFF, "imm_hi": d[:, 4] >> 16,
            "v_lo": d[:, 5] & 0xFFFF, "v_hi": d[:, 5] >> 16, "tgt": d[:, 6]}
    for j, name in enumerate(PREP):
        prep[:k, j] = cols[name]
    return prep


def build_program(image: Image, log_blowup: int, paged: bool = False):
    b = AirBuilder("rv32_program")
    c = {name: b.prep(name) for name in PREP}
    mult = b.main("mult")
    b.receive(PROGRAM, [c["wa"], c["op"], c["rd"], c["rs1"], c["rs2"], c["imm_lo"], c["imm_hi"],
                        c["v_lo"], c["v_hi"], c["tgt"]], multiplicity=mult)
    b.send(IMAGE, [c["wa"], c["lo"], c["hi"]], multiplicity=c["img"])
    return b.build(preprocessed=program_prep(image, paged), log_blowup=log_blowup)


def program_trace(image: Image, pcw_executed: np.ndarray, height: int) -> np.ndarray:
    """The ``mult`` column: executions per row (every executed pcw is a code word)."""
    rows = image.index(pcw_executed)
    counts = np.bincount(rows, minlength=height)[:height]
    return counts.astype(np.uint32).reshape(-1, 1)


__all__ = ["Image", "image_of", "program_prep", "build_program", "program_trace", "PREP"]


# cache hits start numba's runtime only, not its compiler (steadfast/_jit_cache.py)
adopt(globals(), depends=("../isa.py",))
