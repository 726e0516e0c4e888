"""A block proof and its file (docs/api.md "BlockProof"): the ROM, needed to rebuild the
PROGRAM table's AIR without the block, and the protocol proof; a development-mode fake
has its own magic and carries no STARK.  Also what a block argument may be
(:data:`BlockLike`) and how one is read (:func:`as_block`)."""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Union

import numpy as np

from .proof_file import ProofFile
from ..verifier.errors import ShapeError
from ..verifier.proof_format import decode
from ..vm import isa
from ..vm.block import Block, load_block, loads_block, parse_block
from ..vm.statement import NUM_PUBLIC_VALUES, PV_FINAL

from .stats import ProofStats

#: What a block argument may be: a parsed Block, its JSON object as a dict, JSON text
#: (str starting with "{", or bytes), or a path to a JSON file.
BlockLike = Union[Block, dict, str, bytes, os.PathLike[str]]

MAX_ROM_ROWS = 1 << 20

_MAGIC = b"STBP"
_VERSION = 1
# Development mode (PROVER_DEV_MODE=1): same layout, another magic, and in place of the
# STARK this notice followed by the 42 public values as u32 -- nothing is proven.
DEV_MAGIC = b"STDV"
DEV_NOTICE = (b"STEADFAST DEVELOPMENT-MODE PROOF: execution and constraint check only; "
              b"NOT A STARK, PROVES NOTHING\n")


@dataclass(frozen=True, eq=False)
class BlockProof(ProofFile):
    """A block proof: the ROM (the statement's program, needed to rebuild the PROGRAM
    table's AIR) and the protocol proof (public values inside).  File layout, all
    little-endian: b"STBP", u16 version, u16 0, u32 ROM rows, u32[rows*4] ROM,
    u32 length, the protocol proof bytes (docs/api.md)."""
    rom: np.ndarray
    proof: bytes
    stats: ProofStats | None = field(default=None, compare=False, repr=False)
    dev: bool = False               # a development-mode fake (b"STDV"): proves nothing

    def __eq__(self, other) -> bool:
        return (isinstance(other, BlockProof) and self.proof == other.proof
                and self.dev == other.dev and np.array_equal(self.rom, other.rom))

    __hash__ = None  # type: ignore[assignment]

    @property
    def public_values(self) -> list[int]:
        """The 42 block public values (the CPU table's; vm/statement.py)."""
        if self.dev:
            return [int(v) for v in np.frombuffer(self.proof, "<u4", offset=len(DEV_NOTICE))]
        return [int(v) for v in decode(self.proof).tables[0].public_values]

    @property
    def final_digest(self) -> list[int]:
        return self.public_values[PV_FINAL]

    def to_bytes(self) -> bytes:
        rom = np.ascontiguousarray(self.rom, dtype="<u4")
        magic = DEV_MAGIC if self.dev else _MAGIC
        return b"".join([magic, struct.pack("<HHI", _VERSION, 0, rom.shape[0]), rom.tobytes(),
                         struct.pack("<I", len(self.proof)), self.proof])

    @classmethod
    def from_bytes(cls, data: bytes) -> "BlockProof":
        """Parse; any malformation is a :class:`verifier.errors.ShapeError`."""
        data = bytes(data)
        if len(data) < 12 or data[:4] not in (_MAGIC, DEV_MAGIC):
            raise ShapeError("not a Steadfast block proof (bad magic)")
        dev = data[:4] == DEV_MAGIC
        version, reserved, rows = struct.unpack_from("<HHI", data, 4)
        if version != _VERSION or reserved:
            raise ShapeError(f"unsupported block-proof version {version}")
        if not 1 <= rows <= MAX_ROM_ROWS:
            raise ShapeError(f"ROM of {rows} rows (limit {MAX_ROM_ROWS})")
        end = 12 + 16 * rows
        if len(data) < end + 4:
            raise ShapeError("truncated block proof (ROM)")
        rom = np.frombuffer(data, dtype="<u4", count=rows * 4, offset=12).reshape(rows, 4)
        if np.any(rom >= isa.P) or np.any(rom[:, 0] >= isa.NUM_OPCODES):
            raise ShapeError("ROM holds values that are not field elements / opcodes")
        (n,) = struct.unpack_from("<I", data, end)
        if len(data) != end + 4 + n:
            raise ShapeError(f"block proof length {len(data)} does not match its header")
        body = data[end + 4:]
        if dev and (len(body) != len(DEV_NOTICE) + 4 * NUM_PUBLIC_VALUES
                    or not body.startswith(DEV_NOTICE)):
            raise ShapeError("malformed development-mode proof")
        return cls(rom.astype(np.int64), body, dev=dev)



def as_block(block: BlockLike) -> Block:
    """``block`` as a parsed :class:`vm.block.Block` (:class:`vm.block.BlockError` when it is
    malformed, ``TypeError`` when it is none of :data:`BlockLike`)."""
    if isinstance(block, Block):
        return block
    if isinstance(block, dict):
        return parse_block(block)
    if isinstance(block, (str, bytes)) and (isinstance(block, bytes) or block.lstrip().startswith("{")):
        return loads_block(block)
    if isinstance(block, (str, os.PathLike)):
        return load_block(block)
    raise TypeError(f"a block is a Block, a dict, JSON text or a path, not {type(block).__name__}")


__all__ = ["BlockProof", "BlockLike", "as_block", "DEV_MAGIC", "DEV_NOTICE", "MAX_ROM_ROWS"]
