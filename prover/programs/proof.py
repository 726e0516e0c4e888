"""A program proof and its file (docs/api.md "Proving programs"): the protocol proof of an
RV32IM execution (rv32/statement.py: the program, the input, max_cycles, the exit code and
the fd 1 output), in a small header that tells it from a block proof; a development-mode
fake has its own magic and carries the public values, no STARK.  Also what a program
argument may be (:data:`ElfLike`, :func:`as_program`) and an input (:func:`as_input`).

File layout, all little-endian::

    b"STRV"          magic (b"STRD": a development-mode fake, proves nothing)
    u16 version      2 (1: before the P2CALL output limbs were range-checked, #40)
    u16 reserved     0
    u32 n            the body's length
    n bytes          the protocol proof (docs/protocol.md), or for a fake: DEV_NOTICE,
                     u32 tables, then per table u32 count and count u32 public values

The program and the input are not in the file: the verifier holds them (``verify PROOF
--elf PROGRAM.elf --input FILE``); the proof's public values carry their digests, the exit
code, the output and max_cycles.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Union

import numpy as np

from ..common.proof_file import ProofFile
from ...rv32 import abi
from ...rv32.elf import Program, load_elf, parse_elf
from ...rv32.statement import PV_DIGEST, PV_INPUT_SHA, PV_MAX_CYCLES, claimed_output
from ...rv32.tables import INDEX, TABLES
from ...verifier.errors import ShapeError
from ...verifier.proof_format import Params, decode

from ..common.stats import ProofStats

#: What a program argument may be: a loaded :class:`rv32.Program`, the ELF file's bytes,
#: or its path.
ElfLike = Union[Program, bytes, bytearray, str, os.PathLike]

MAGIC = b"STRV"
DEV_MAGIC = b"STRD"
VERSION = 2                 # 2: P2CALL range-checks its output limbs (#40)
ELF_MAGIC = b"\x7fELF"
DEV_NOTICE = (b"STEADFAST DEVELOPMENT-MODE PROGRAM PROOF: execution and constraint check "
              b"only; NOT A STARK, PROVES NOTHING\n")
MAX_BODY = 1 << 31                  # no proof (or fake) is larger
_MAX_DEV_VALUES = 1 << 25           # public values of a fake (the output, 3 bytes each)


@dataclass(frozen=True)
class ProgramProof(ProofFile):
    """The proof that a program, run on an input, exits within max_cycles with
    :attr:`exit_code` having written :attr:`output` to fd 1.  ``proof``: the protocol
    proof's bytes (a fake's body when ``dev``); ``stats`` the prover's record (None once
    read back)."""
    proof: bytes
    stats: ProofStats | None = field(default=None, compare=False, repr=False)
    dev: bool = False               # a development-mode fake (b"STRD"): proves nothing

    # -- what the proof says (read off its public values; verify() checks them) --------
    @property
    def public_values(self) -> list[list[int]]:
        """Every table's public values, in proof order (rv32/statement.py)."""
        if self.dev:
            return _dev_values(self.proof)
        return [[int(v) for v in t.public_values] for t in decode(self.proof).tables]

    @property
    def params(self) -> Params:
        """The protocol parameters (a fake's are the defaults: it has none)."""
        return Params() if self.dev else decode(self.proof).params

    @property
    def exit_code(self) -> int:
        return claim_of(self).exit_code

    @property
    def output(self) -> bytes:
        """The fd 1 bytes the proof claims."""
        return claim_of(self).output

    @property
    def max_cycles(self) -> int:
        return self.public_values[INDEX["registers"]][PV_MAX_CYCLES]

    @property
    def program_digest(self) -> bytes:
        """The program's digest (rv32/elf.py ``Program.digest``) the proof is for."""
        return _limbs_bytes(self.public_values[INDEX["registers"]][PV_DIGEST])

    @property
    def input_sha256(self) -> bytes:
        """SHA-256 of the input the proof is for."""
        return _limbs_bytes(self.public_values[INDEX["registers"]][PV_INPUT_SHA])

    # -- the file ---------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        magic = DEV_MAGIC if self.dev else MAGIC
        return b"".join([magic, struct.pack("<HHI", VERSION, 0, len(self.proof)), self.proof])

    @classmethod
    def from_bytes(cls, data: bytes) -> "ProgramProof":
        """Parse; any malformation is a :class:`verifier.errors.ShapeError` (a block proof
        too: it says so)."""
        data = bytes(data)
        if data[:4] in (b"STBP", b"STDV"):
            raise ShapeError("this is a block proof, not a program proof (verify it with "
                             "--block / block=)")
        if len(data) < 12 or data[:4] not in (MAGIC, DEV_MAGIC):
            raise ShapeError("not a Steadfast program proof (bad magic)")
        dev = data[:4] == DEV_MAGIC
        version, reserved, n = struct.unpack_from("<HHI", data, 4)
        if version != VERSION or reserved:
            raise ShapeError(f"unsupported program-proof version {version}")
        if len(data) != 12 + n:
            raise ShapeError(f"program proof of {len(data)} bytes does not match its header "
                             f"({12 + n})")
        body = data[12:]
        if dev:
            _dev_values(body)                   # ShapeError when malformed
        return cls(body, dev=dev)



def dev_body(public_values, notice: bytes = DEV_NOTICE) -> bytes:
    """A development-mode fake's body: the notice, then every table's public values (u32
    tables, then per table u32 count and count u32 values).  The block fakes
    (prover.blocks.proof) have the same layout behind their own notice."""
    parts = [notice, struct.pack("<I", len(public_values))]
    for pv in public_values:
        parts.append(struct.pack("<I", len(pv)))
        parts.append(np.asarray(pv, dtype="<u4").tobytes())
    return b"".join(parts)


def parse_dev_body(body: bytes, notice: bytes, tables: int, what: str) -> list[list[int]]:
    """Every table's public values of a fake's body (:func:`dev_body`) with ``notice`` and
    ``tables`` tables; ShapeError naming ``what`` (e.g. "program proof") when malformed."""
    if not body.startswith(notice):
        raise ShapeError(f"malformed development-mode {what} (notice)")
    pos = len(notice)
    try:
        (n,) = struct.unpack_from("<I", body, pos)
        if n != tables:
            raise ShapeError(f"development-mode {what} of {n} tables, expected {tables}")
        pos += 4
        out = []
        for _ in range(n):
            (k,) = struct.unpack_from("<I", body, pos)
            pos += 4
            if k > _MAX_DEV_VALUES or pos + 4 * k > len(body):
                raise ShapeError(f"malformed development-mode {what} (truncated)")
            out.append([int(v) for v in np.frombuffer(body, "<u4", k, pos)])
            pos += 4 * k
    except struct.error:
        raise ShapeError(f"malformed development-mode {what} (truncated)") from None
    if pos != len(body):
        raise ShapeError(f"malformed development-mode {what} (trailing bytes)")
    return out


def _dev_values(body: bytes) -> list[list[int]]:
    return parse_dev_body(body, DEV_NOTICE, len(TABLES), "program proof")


def claim_of(proof: ProgramProof):
    """The exit code and output the proof claims (rv32.statement.claimed_output of the
    decoded proof, or of a fake's public values)."""
    return claimed_output(_dev_values(proof.proof) if proof.dev else decode(proof.proof))


def _limbs_bytes(limbs) -> bytes:
    return b"".join(int(v).to_bytes(2, "little") for v in limbs)


def as_program(elf: ElfLike) -> Program:
    """``elf`` as a loaded :class:`rv32.Program`: a Program, the ELF's bytes or its path
    (:class:`rv32.ElfError` when the file is not a program the machine runs, OSError
    when it cannot be read, ``TypeError`` for anything else)."""
    if isinstance(elf, Program):
        return elf
    if isinstance(elf, (bytes, bytearray, memoryview)):
        return parse_elf(bytes(elf))
    if isinstance(elf, (str, os.PathLike)):
        return load_elf(elf)
    raise TypeError(f"a program is an rv32.Program, the ELF's bytes or its path, not "
                    f"{type(elf).__name__}")


def as_input(data) -> bytes:
    """A program's input (fd 0's bytes): bytes-like, or None for none; ``TypeError`` for
    a str (a path is not an input: read the file), ``ValueError`` past MAX_INPUT_BYTES."""
    if data is None:
        return b""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"a program's input is bytes, not {type(data).__name__}"
                        + (" (to use a file's contents, read it: open(path, 'rb').read())"
                           if isinstance(data, (str, os.PathLike)) else ""))
    data = bytes(data)
    if len(data) > abi.MAX_INPUT_BYTES:
        raise ValueError(f"input of {len(data):,} bytes is over the machine's limit of "
                         f"{abi.MAX_INPUT_BYTES:,} (MAX_INPUT_BYTES)")
    return data


def check_max_cycles(max_cycles) -> int:
    """``max_cycles`` as an int in [1, MAX_CYCLES_CEILING]: ``TypeError`` for a non-integer
    (bool included), ``ValueError`` out of range."""
    if isinstance(max_cycles, bool) or not isinstance(max_cycles, (int, np.integer)):
        raise TypeError(f"max_cycles must be an int, not {type(max_cycles).__name__}")
    max_cycles = int(max_cycles)
    if not 1 <= max_cycles <= abi.MAX_CYCLES_CEILING:
        raise ValueError(f"max_cycles must be in [1, {abi.MAX_CYCLES_CEILING:,}] (2^24), got "
                         f"{max_cycles:,}")
    return max_cycles


#: a run in segments (prover/programs/segment_proof.py's file), here so that telling the
#: kinds apart does not import the segment machinery
SEGMENTED_MAGIC = b"STRS"


def is_program_proof(data: bytes) -> bool:
    """A program proof's magic: one STARK (STRV), its fake (STRD) or a run in segments
    (STRS)."""
    return bytes(data[:4]) in (MAGIC, DEV_MAGIC, SEGMENTED_MAGIC)


__all__ = ["ProgramProof", "ElfLike", "as_program", "as_input", "check_max_cycles",
           "is_program_proof", "SEGMENTED_MAGIC", "dev_body", "parse_dev_body", "claim_of", "MAGIC", "DEV_MAGIC", "DEV_NOTICE", "ELF_MAGIC"]
