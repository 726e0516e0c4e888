"""Segmented program proofs (docs/rv32.md "Long programs: segments", docs/api.md): a run
longer than one segment is proved as linked segment proofs in one file.

File layout, all little-endian::

    b"STRS"          magic
    u16 version      1
    u16 reserved     0
    u32 S            segment_cycles (a power of two in [2^10, 2^22])
    u32 max_cycles   the statement's limit
    u32 n            segments, at least 1 (a run within one segment under max_cycles
                     <= 2^24 is a one-proof b"STRV" file instead)
    per segment j, in order:
      u32 cycles, u8 final, u8 exit_code (0 unless final), u16 0, u32 pc_out (0 if final)
      36 x u32       the registers at its end (x0..x31, the sink 0, the three cursors)
      u32 k, k x u32 the word addresses it touches (ascending), k x u32 their end values
      u32 m, m bytes the fd 1 bytes it wrote
      u32 b, b bytes its protocol proof (docs/protocol.md)

The in-values of a segment are not in the file: the verifier computes them
(rv32.segments.Chain).
"""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field

import numpy as np

from ...rv32.chips.common import NUM_REGS
from ...rv32.segments import (Chain, Segment, check_segment_cycles, segment_airs,
                              segment_public_values, MAX_SEGMENTED_CYCLES)
from ...rv32.statement import slots_of, split_of
from ...rv32.tables import piece_public_values
from ...verifier.errors import ShapeError, VerificationError
from ...verifier.proof_format import Params

from ..engine.air_proof import decode_proof
from .proof import SEGMENTED_MAGIC
from ..common.proof_file import ProofFile
from ..common.stats import ProofStats

MAGIC = SEGMENTED_MAGIC
VERSION = 1
MAX_SEGMENTS = 1 << 22


@dataclass(frozen=True)
class SegmentRecord:
    """One segment as the file carries it (the verifier completes it)."""
    cycles: int
    final: bool
    exit_code: int
    pc_out: int
    regs_out: tuple
    wa: np.ndarray = field(repr=False)
    v_out: np.ndarray = field(repr=False)
    output: bytes
    proof: bytes = field(repr=False)

    def carried(self, index: int) -> Segment:
        z = np.zeros(0, np.int64)
        return Segment(index, 0, self.cycles, 0, z, None if self.final else self.pc_out,
                       np.asarray(self.regs_out, np.int64), self.wa.astype(np.int64), z,
                       self.v_out.astype(np.int64), self.output,
                       self.exit_code if self.final else None)


@dataclass(frozen=True)
class SegmentedProof(ProofFile):
    """A proof of a run in segments: ``exit_code``, ``output``, ``cycles``, ``segments``."""
    segment_cycles: int
    max_cycles: int
    segments: tuple
    stats: ProofStats | None = field(default=None, compare=False, repr=False)
    dev: bool = False
    #: each segment's prove seconds (the prover's record; not in the file)
    segment_seconds: tuple = field(default=(), compare=False, repr=False)

    @property
    def exit_code(self) -> int:
        return self.segments[-1].exit_code

    @property
    def output(self) -> bytes:
        return b"".join(s.output for s in self.segments)

    @property
    def cycles(self) -> int:
        return sum(s.cycles for s in self.segments)

    def to_bytes(self) -> bytes:
        parts = [MAGIC, struct.pack("<HHIII", VERSION, 0, self.segment_cycles, self.max_cycles,
                                    len(self.segments))]
        for s in self.segments:
            parts.append(struct.pack("<IBBHI", s.cycles, int(s.final), s.exit_code, 0,
                                     s.pc_out))
            parts.append(np.asarray(s.regs_out, "<u4").tobytes())
            parts.append(struct.pack("<I", len(s.wa)))
            parts.append(np.asarray(s.wa, "<u4").tobytes())
            parts.append(np.asarray(s.v_out, "<u4").tobytes())
            parts.append(struct.pack("<I", len(s.output)) + s.output)
            parts.append(struct.pack("<I", len(s.proof)) + s.proof)
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes) -> "SegmentedProof":
        """Parse; any malformation (a truncated file, a count past the data) is a
        :class:`ShapeError` naming the segment."""
        data = bytes(data)
        if data[:4] != MAGIC:
            raise ShapeError("not a Steadfast segmented program proof (bad magic)")
        r = _Reader(data, 4)
        version, reserved, S, max_cycles, n = r.unpack("<HHIII", "the header")
        if version != VERSION or reserved:
            raise ShapeError(f"unsupported segmented-proof version {version}")
        try:
            check_segment_cycles(S)
        except ValueError as e:
            raise ShapeError(f"the header's {e}") from None
        if not 1 <= n <= MAX_SEGMENTS:
            raise ShapeError(f"{n} segments (a segmented proof has 1 .. {MAX_SEGMENTS:,})")
        segs = []
        for j in range(n):
            where = f"segment {j}"
            cycles, final, code, pad, pc_out = r.unpack("<IBBHI", where)
            if final > 1 or pad:
                raise ShapeError(f"{where}: malformed header")
            # one encoding per proof: the fields the verifier does not read must be zero
            if code and not final:
                raise ShapeError(f"{where}: a non-final segment's exit code must be 0, "
                                 f"not {code}")
            if pc_out and final:
                raise ShapeError(f"{where}: the final segment's pc_out must be 0, not "
                                 f"{pc_out:#x}")
            if pc_out & 3:                      # the proof binds pc_out / 4 (rv32_exec)
                raise ShapeError(f"{where}: pc_out {pc_out:#x} is not a multiple of 4")
            regs = r.array(NUM_REGS, where)
            (k,) = r.unpack("<I", where)
            wa, v_out = r.array(k, where), r.array(k, where)
            (m,) = r.unpack("<I", where)
            out = r.take(m, where)
            (b,) = r.unpack("<I", where)
            proof = r.take(b, where)
            segs.append(SegmentRecord(cycles, bool(final), code, pc_out, tuple(int(x) for x in regs),
                                      wa, v_out, out, proof))
        if r.at != len(data):
            raise ShapeError(f"{len(data) - r.at} bytes after the last segment")
        return cls(S, max_cycles, tuple(segs))


class _Reader:
    def __init__(self, data: bytes, at: int):
        self.data, self.at = data, at

    def take(self, n: int, where: str) -> bytes:
        if self.at + n > len(self.data):
            raise ShapeError(f"{where}: the file is truncated")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def unpack(self, fmt: str, where: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), where))

    def array(self, k: int, where: str) -> np.ndarray:
        return np.frombuffer(self.take(4 * k, where), "<u4").astype(np.int64)


@dataclass(frozen=True)
class VerifiedSegments:
    """A verified segmented run: the statement's exit code, output and max_cycles, and
    its segments (with each segment's verify seconds).  ``cycles`` is None, as a one-proof
    :class:`VerifiedProgram`'s: the proofs bind every non-final segment's S cycles and the
    exit within max_cycles (the final segment's ECALL budget), not the final segment's
    count -- ``claimed_cycles`` is the file's, the prover's word only."""
    exit_code: int
    output: bytes
    max_cycles: int
    cycles: int | None
    segments: int
    segment_seconds: tuple
    seconds: float
    params: Params
    security_bits: int
    program_digest: bytes = b""
    dev: bool = False
    claimed_cycles: int = 0


def verify_segmented(proof: SegmentedProof, program, input: bytes, max_cycles: int | None,
                     min_security_bits) -> VerifiedSegments:
    """Verify every segment against the chain (rv32.segments.Chain): a
    :class:`VerificationError` subclass naming the segment on any refusal."""
    from ...rv32.chips.program import image_of
    from ...verifier.errors import PublicValuesError
    from ...verifier.verify import check_security, verify
    t0 = time.perf_counter()
    if max_cycles is not None and max_cycles != proof.max_cycles:
        raise PublicValuesError(f"the proof is for max_cycles {proof.max_cycles:,}, not "
                                f"{max_cycles:,}", "rv32_segregs")
    if not 1 <= proof.max_cycles <= MAX_SEGMENTED_CYCLES:
        raise PublicValuesError(f"max_cycles {proof.max_cycles} out of range", "rv32_segregs")
    total = sum(r.cycles for r in proof.segments)
    if total > proof.max_cycles:
        raise PublicValuesError(f"the segments run {total:,} cycles: the run passes "
                                f"max_cycles {proof.max_cycles:,}", "rv32_segregs")
    chain = Chain(program, input, proof.max_cycles, proof.segment_cycles)
    image = image_of(program)
    times, bits, params = [], None, None
    n = len(proof.segments)
    for j, rec in enumerate(proof.segments):
        t1 = time.perf_counter()
        seg = chain.link(rec.carried(j), j == n - 1)
        decoded = decode_proof(rec.proof)
        if params is not None and decoded.params != params:
            raise ShapeError(f"segment {j}: other parameters than segment 0's")
        params = decoded.params
        try:                                    # the pieces: docs/rv32.md "Split chips"
            split, slots = split_of(decoded), slots_of(decoded)
        except VerificationError as e:
            msg = str(e)[len(f"[{e.table}] "):] if e.table else str(e)
            raise type(e)(f"segment {j}: {msg}", e.table) from None
        airs = segment_airs(image, chain.input, seg, decoded.params.log_blowup, slots, split)
        sec = check_security(decoded.params, min_security_bits, airs,
                             [t.log_n for t in decoded.tables])
        expected = segment_public_values(chain.input, seg, proof.max_cycles) + \
            piece_public_values(split)
        try:
            verify(decoded, airs, expected, min_security_bits=min_security_bits)
        except VerificationError as e:
            raise type(e)(f"segment {j}: {e}") from None
        bits = sec.bits if bits is None else min(bits, sec.bits)
        chain.advance(seg)
        times.append(time.perf_counter() - t1)
    return VerifiedSegments(proof.exit_code, bytes(chain.output), proof.max_cycles,
                            None, n, tuple(times), time.perf_counter() - t0, params,
                            int(bits or 0), program.digest(), claimed_cycles=chain.cycles)


__all__ = ["SegmentedProof", "SegmentRecord", "VerifiedSegments", "verify_segmented", "MAGIC"]
