"""Block proofs in epochs (docs/rv32.md "Blocks in epochs", docs/protocol.md "Block proofs
in epochs"): a block that does not fit one epoch of ``segment_cycles`` cycles is proved as
parts -- groups of consecutive short transactions, each one block STARK, and long
transactions, each one segmented program proof -- in one file.

File layout, all little-endian::

    b"STBE"          magic
    u16 version      1
    u16 reserved     0
    u32 n_tx         the block's transactions
    u32 S            segment_cycles (the epoch; a power of two in [2^10, 2^22])
    u32 n            parts, at least 1
    per part p, in order:
      u8 kind        0: a group (a block STARK), 1: a long transaction (segments)
      u8 0, u16 0
      u32 first      its first transaction
      u32 count      its transactions (1 for a long part)
      u32 b, b bytes a group: its protocol proof (docs/protocol.md), the body of the block
                     proof of those transactions; a long part: its segmented program
                     proof file (b"STRS", prover/programs/segment_proof.py)

The block is not in the file (the verifier holds it); the parts must cover its
transactions exactly once, in order (:func:`check_cover`).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ...rv32 import block as rblock
from ...rv32.blockfile import MAX_TRANSACTIONS
from ...rv32.segments import check_segment_cycles
from ...rv32.statement import Claim, claimed_output
from ...verifier.errors import ShapeError
from ...verifier.proof_format import decode

from ..common.proof_file import ProofFile
from ..common.stats import ProofStats
from ..programs.segment_proof import SegmentedProof
from .parts import EPOCHS_MAGIC as MAGIC, PartReport     # PartReport re-exported here
VERSION = 1
GROUP, LONG = 0, 1
KIND_NAMES = {GROUP: "group", LONG: "long"}
MAX_PARTS = MAX_TRANSACTIONS


@dataclass(frozen=True)
class Part:
    """One part of a block proof in epochs: ``kind`` GROUP or LONG, its transactions
    ``first`` .. ``first + count - 1``, its proof's bytes (a group's protocol proof, a
    long part's STRS file)."""
    kind: int
    first: int
    count: int
    proof: bytes = field(repr=False)

    @property
    def stop(self) -> int:
        return self.first + self.count

    @property
    def name(self) -> str:
        txs = f"transaction {self.first}" if self.count == 1 else \
            f"transactions {self.first}..{self.stop - 1}"
        return f"{KIND_NAMES.get(self.kind, '?')} part ({txs})"

    def claims(self) -> list:
        """Its transactions' claims (exit code, output) as its proof states them."""
        if self.kind == LONG:
            seg = SegmentedProof.from_bytes(self.proof)
            return [Claim(seg.exit_code, seg.output)]
        pvs = [[int(v) for v in t.public_values] for t in decode(self.proof).tables]
        return [claimed_output(rblock.tx_public_values(pvs, i)) for i in range(self.count)]


@dataclass(frozen=True)
class BlockEpochsProof(ProofFile):
    """The proof of a block in epochs: ``n_tx``, ``segment_cycles``, ``parts``;
    ``exit_codes`` / ``outputs`` as a :class:`prover.blocks.proof.TxBlockProof`'s;
    ``stats`` the prover's record (None once read back); ``state_out`` set by the prover
    and the verifier, not stored."""
    n_tx: int
    segment_cycles: int
    parts: tuple[Part, ...]
    stats: ProofStats | None = field(default=None, compare=False, repr=False)
    state_out: bytes | None = field(default=None, compare=False)
    dev: bool = False
    #: each part's prove seconds (the prover's record; not in the file)
    part_seconds: tuple[float, ...] = field(default=(), compare=False, repr=False)

    @property
    def claims(self) -> list:
        return [c for p in self.parts for c in p.claims()]

    @property
    def exit_codes(self) -> list:
        return [c.exit_code for c in self.claims]

    @property
    def outputs(self) -> list:
        return [c.output for c in self.claims]

    def to_bytes(self) -> bytes:
        out = [MAGIC, struct.pack("<HHIII", VERSION, 0, self.n_tx, self.segment_cycles,
                                  len(self.parts))]
        for p in self.parts:
            out.append(struct.pack("<BBHIII", p.kind, 0, 0, p.first, p.count, len(p.proof)))
            out.append(p.proof)
        return b"".join(out)

    @classmethod
    def from_bytes(cls, data: bytes) -> "BlockEpochsProof":
        """Parse; a malformation (bad magic or version, a truncated part, bytes after the
        last) is a :class:`ShapeError` naming the part.  The cover is checked against a
        block by :func:`check_cover`."""
        data = bytes(data)
        if data[:4] != MAGIC or len(data) < 20:
            raise ShapeError("not a Steadfast block proof in epochs (bad magic)")
        version, reserved, n_tx, S, n = struct.unpack_from("<HHIII", data, 4)
        if version != VERSION or reserved:
            raise ShapeError(f"unsupported block-epochs proof version {version}")
        try:
            check_segment_cycles(S)
        except ValueError as e:
            raise ShapeError(f"the header's {e}") from None
        if not 1 <= n_tx <= MAX_TRANSACTIONS:
            raise ShapeError(f"a block proof of {n_tx} transactions (1 .. {MAX_TRANSACTIONS})")
        if not 1 <= n <= MAX_PARTS:
            raise ShapeError(f"{n} parts (a block proof in epochs has 1 .. {MAX_PARTS})")
        at, parts = 20, []
        for j in range(n):
            if at + 16 > len(data):
                raise ShapeError(f"part {j}: the file is truncated")
            kind, z8, z16, first, count, b = struct.unpack_from("<BBHIII", data, at)
            if kind not in KIND_NAMES or z8 or z16:
                raise ShapeError(f"part {j}: malformed header (kind {kind})")
            at += 16
            if at + b > len(data):
                raise ShapeError(f"part {j}: the file is truncated")
            parts.append(Part(kind, first, count, data[at:at + b]))
            at += b
        if at != len(data):
            raise ShapeError(f"{len(data) - at} bytes after the last part")
        return cls(n_tx, S, tuple(parts))


def check_cover(parts, n_tx: int) -> None:
    """The parts cover transactions 0 .. n_tx - 1 exactly once, in order, a long part one
    transaction and a group at least one; else a :class:`ShapeError` naming the part."""
    at = 0
    for j, p in enumerate(parts):
        if p.first != at:
            what = "repeats or overlaps" if p.first < at else "skips"
            raise ShapeError(f"part {j} starts at transaction {p.first}, the previous part "
                             f"ends at {at}: it {what} transactions (a part dropped, "
                             f"duplicated or reordered)")
        if p.count < 1 or (p.kind == LONG and p.count != 1):
            raise ShapeError(f"part {j}: a {KIND_NAMES[p.kind]} part of {p.count} "
                             f"transactions")
        if p.stop > n_tx:
            raise ShapeError(f"part {j} ends at transaction {p.stop - 1}: the block has "
                             f"{n_tx}")
        at = p.stop
    if at != n_tx:
        raise ShapeError(f"the parts end at transaction {at}: the block has {n_tx} (a part "
                         f"dropped or the file truncated)")


def plan_parts(cycles, segment_cycles: int) -> list:
    """The parts of a block whose transactions run ``cycles`` (None: longer than one
    epoch) -> [(kind, first, count)]: a long transaction alone, the others packed in
    order into groups of at most ``segment_cycles`` cycles in all."""
    plan: list = []
    start, total = None, 0
    for i, c in enumerate(cycles):
        if c is None or c > segment_cycles:
            if start is not None:
                plan.append((GROUP, start, i - start))
                start = None
            plan.append((LONG, i, 1))
            continue
        if start is not None and total + c > segment_cycles:
            plan.append((GROUP, start, i - start))
            start = None
        if start is None:
            start, total = i, 0
        total += c
    if start is not None:
        plan.append((GROUP, start, len(cycles) - start))
    return plan


__all__ = ["BlockEpochsProof", "Part", "PartReport", "plan_parts", "check_cover",
           "MAGIC", "GROUP", "LONG"]
