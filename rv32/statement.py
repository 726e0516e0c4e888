"""The statement of an RV32IM proof: what it binds, its public values, and the AIRs a
verifier builds from the ELF, the input and what the proof says.

A proof of ``(program, input, max_cycles)`` says: the machine (docs/rv32.md) runs the
program on the input within max_cycles cycles and exits with ``exit_code``, having
written ``output`` to fd 1.  It binds

* the program: PROGRAM's preprocessed columns are the image's nonzero words and their
  decoding, REGISTERS' the entry point, both in the AIR fingerprints the transcript
  absorbs; the public values also carry the program digest (rv32/elf.py ``digest``),
  which the verifier compares with its ELF's;
* the input: IO's preprocessed rows (and its SHA-256 in the public values);
* the output: IO's preprocessed output rows, which the verifier builds from IO's public
  values (the output bytes, three to a field element) -- read off the proof before the
  AIRs are built -- and REGISTERS' constraint that the final fd 1 count is output_len;
* the exit code: REGISTERS' public value, received from the exit ECALL;
* max_cycles: ECALL's public value, the exit row's clk <= max_cycles - 1.

Public values per table (all others have none):

* registers: exit_code, output_len, input_len, max_cycles, entry, program digest (16
  limbs of 16 bits), input SHA-256 (16 limbs);
* io: the output bytes, packed (chips/io.py ``pack_output``);
* ecall: max_cycles, input_len.

The verifier (``verify_execution`` or, step by step: ``claimed_output`` on the decoded
proof, ``program_airs``, ``public_values``, then ``steadfast.verifier.verify.verify``)
computes every expected value itself; only exit_code and the output come from the proof.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..verifier.errors import PublicValuesError, ShapeError

from . import abi
from .chips.io import pack_output, unpack_output
from .chips.program import image_of
from .chips.registers import PV_NAMES as REG_PV
from .tables import (INDEX, TABLES, piece_public_values, slots_from_widths,
                     split_of_public_values, table_airs, table_names)

PV_EXIT, PV_OUT_LEN, PV_IN_LEN, PV_MAX_CYCLES, PV_ENTRY = range(5)
PV_DIGEST = slice(5, 21)
PV_INPUT_SHA = slice(21, 37)


def _limbs(digest: bytes) -> list[int]:
    return [int.from_bytes(digest[2 * i:2 * i + 2], "little") for i in range(16)]


def input_sha256(input: bytes) -> list[int]:
    return _limbs(hashlib.sha256(bytes(input)).digest())


def check_max_cycles(max_cycles) -> int:
    if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) \
            or not 1 <= max_cycles <= abi.MAX_CYCLES_CEILING:
        raise ValueError(f"max_cycles must be an int in [1, {abi.MAX_CYCLES_CEILING}], "
                         f"got {max_cycles!r}")
    return max_cycles


def public_values(program, input: bytes, output: bytes, exit_code: int,
                  max_cycles: int) -> list[list[int]]:
    """Every table's public values, in proof order (module docstring)."""
    check_max_cycles(max_cycles)
    pv = [[] for _ in TABLES]
    reg = [int(exit_code), len(output), len(input), int(max_cycles), int(program.entry)]
    reg += list(program.digest_elements()) + input_sha256(input)
    assert len(reg) == len(REG_PV)
    pv[INDEX["registers"]] = reg
    pv[INDEX["io"]] = pack_output(output)
    pv[INDEX["ecall"]] = [int(max_cycles), len(input)]
    return pv


@dataclass(frozen=True)
class Claim:
    """What a proof says about its execution: the exit code and the fd 1 output."""
    exit_code: int
    output: bytes


def claimed_output(proof) -> Claim:
    """The exit code and output a proof claims: ``proof`` is a decoded proof
    (verifier.proof_format.Proof) or its per-table public values (a list of lists in
    proof order, e.g. ``VerifyResult.public_values``).  ShapeError / PublicValuesError if
    they cannot be an RV32 statement."""
    pvs = _pvs(proof)
    split_of(pvs)
    reg = [int(v) for v in pvs[INDEX["registers"]]]
    if len(reg) != len(REG_PV):
        raise PublicValuesError(f"registers: {len(reg)} public values, expected {len(REG_PV)}",
                                "rv32_registers")
    if not 0 <= reg[PV_EXIT] < 256 or reg[PV_OUT_LEN] > abi.MAX_OUTPUT_BYTES:
        raise PublicValuesError("exit code or output length out of range", "rv32_registers")
    try:
        out = unpack_output(pvs[INDEX["io"]], reg[PV_OUT_LEN])
    except ValueError as e:
        raise PublicValuesError(f"io: {e}", "rv32_io") from None
    return Claim(reg[PV_EXIT], out)


def _pvs(proof) -> list:
    tables = getattr(proof, "tables", None)
    return [list(tp.public_values) for tp in tables] if tables is not None else list(proof)


def split_of(proof) -> tuple:
    """The chips a proof splits over two tables (docs/rv32.md "Split chips"), from the
    public values of its tables after the 18: ``proof`` as for :func:`claimed_output`.
    ShapeError for fewer than 18 tables, PublicValuesError for a table after them that
    is not a piece in order."""
    pvs = _pvs(proof)
    if len(pvs) < len(TABLES):
        raise ShapeError(f"an RV32 proof has {len(TABLES)} tables (and a split chip's "
                         f"second ones), this one {len(pvs)}")
    try:
        return split_of_public_values(pvs)
    except ValueError as e:
        raise PublicValuesError(str(e), "rv32_pieces") from None


def slots_of(proof) -> dict:
    """The k of every slotted table (a split chip's piece too, as ``"alu+"``), read off
    the proof's main widths (ShapeError if a width is no k's)."""
    widths = [len(tp.ood_main) for tp in proof.tables]
    try:
        return slots_from_widths(widths, proof.params.log_blowup,
                                 table_names(split_of(proof)))
    except ValueError as e:
        raise ShapeError(str(e)) from None


def program_airs(program, input: bytes, output: bytes, log_blowup: int = 2,
                 slots: dict | None = None, image=None, split=()) -> list:
    """The AIRs of a proof about ``program`` on ``input`` claiming ``output``, for
    proofs at ``log_blowup`` with ``slots`` (table -> k, from :func:`slots_of`; 1 where
    not given) and the chips ``split`` over two tables (:func:`split_of`)."""
    image = image_of(program) if image is None else image
    return table_airs(image, bytes(input), bytes(output), log_blowup, slots,
                      names=table_names(split))


def statement_values(program, input: bytes, output: bytes, exit_code: int,
                     max_cycles: int, split=()) -> list[list[int]]:
    """:func:`public_values`, then the pieces' (the chips ``split``)."""
    return public_values(program, input, output, exit_code, max_cycles) + \
        piece_public_values(split)


def verify_execution(proof_bytes: bytes, program, input: bytes,
                     max_cycles: int = abi.DEFAULT_MAX_CYCLES, *,
                     min_security_bits: int | None = 100):
    """Verify a proof of ``program`` on ``input`` with limit ``max_cycles``; returns
    (Claim, VerifyResult).  Raises a verifier.errors.VerificationError."""
    from ..verifier.proof_format import decode
    from ..verifier.verify import verify
    proof = decode(proof_bytes)
    claim = claimed_output(proof)
    split = split_of(proof)
    airs = program_airs(program, input, claim.output, proof.params.log_blowup,
                        slots_of(proof), split=split)
    expected = statement_values(program, input, claim.output, claim.exit_code, max_cycles,
                                split)
    result = verify(proof, airs, expected, min_security_bits=min_security_bits)
    return claim, result


__all__ = ["public_values", "program_airs", "claimed_output", "slots_of", "verify_execution",
           "split_of", "statement_values",
           "Claim", "input_sha256", "check_max_cycles"]
