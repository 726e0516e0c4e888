"""Verifying a program proof (docs/api.md "Proving programs"): :func:`verify_program`
checks a :class:`prover.programs.proof.ProgramProof` against the program and the input the
verifier holds -- the AIRs are rebuilt from the ELF, the input and the output the proof
claims (rv32/statement.py), the parameters' security is checked before any hashing, the
proof's program digest, input digest and max_cycles are compared with the expected
statement (naming what differs), then the protocol verifier runs.  A development-mode
fake is refused unless ``accept_dev``.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from ...rv32 import abi
from ...rv32.statement import (PV_DIGEST, PV_ENTRY, PV_IN_LEN, PV_INPUT_SHA,
                               PV_MAX_CYCLES, claimed_output, program_airs,
                               public_values, slots_of, split_of, statement_values)
from ...rv32.tables import INDEX
from ...verifier import verify as _verify_proof
from ...verifier.errors import PublicValuesError
from ...verifier.proof_format import Params
from ...verifier.security import SecurityReport
from ...verifier.verify import (DEFAULT_MIN_SECURITY_BITS, check_security,
                                validate_min_security_bits)

from ..engine.air_proof import decode_proof, read_proof
from ..common.errors import DevProofRefused
from .proof import (ElfLike, ProgramProof, as_input, as_program, check_max_cycles,
                    claim_of)

log = logging.getLogger("steadfast.prover")


@dataclass(frozen=True)
class VerifiedProgram:
    """What a successful :func:`verify_program` establishes: the program (its digest), run
    on the input (its SHA-256), exits within ``max_cycles`` cycles with ``exit_code``
    having written ``output`` to fd 1.  ``cycles``: the statement does not bind the exact
    count (only that the exit came within max_cycles), so it is None."""
    exit_code: int
    output: bytes
    max_cycles: int
    program_digest: bytes
    input_sha256: bytes
    public_values: list = field(repr=False)
    seconds: float = 0.0
    params: Params = field(default_factory=Params)
    security: SecurityReport | None = None
    dev: bool = False               # a development-mode fake accepted with accept_dev=True
    cycles: int | None = None

    @property
    def security_bits(self) -> int:
        """Conjectured security of the proof: its parameters for its table shapes
        (docs/protocol.md section 7); 0 for an accepted fake."""
        return self.security.bits if self.security is not None else 0


def verify_program(proof: ProgramProof | bytes | str | os.PathLike[str], elf: ElfLike,
                   input: bytes = b"", *, max_cycles: int | None = None,
                   min_security_bits: int | None = DEFAULT_MIN_SECURITY_BITS,
                   accept_dev: bool = False) -> VerifiedProgram:
    """Verify a program proof (a :class:`ProgramProof`, its bytes or a path) for ``elf`` (a
    Program, the ELF's bytes or its path) run on ``input``.  ``max_cycles``: the limit the
    proof must be for (None: the proof's own, returned in the result).  Raises a
    :class:`verifier.errors.VerificationError` subclass on rejection -- ShapeError (a
    malformed proof, or a block proof), PublicValuesError (a proof for another program,
    input or limit: the message says which), ParameterError (``min_security_bits``, as for
    blocks: default 100, checked before any hashing), LogUpError / ... -- and
    :class:`rv32.ElfError` for an ELF the machine does not load.  ``accept_dev``: as for
    blocks (a fake's statement is checked, nothing is proven)."""
    t0 = time.perf_counter()
    min_security_bits = validate_min_security_bits(min_security_bits)
    from .segment_proof import MAGIC as SEG_MAGIC, SegmentedProof, verify_segmented
    if isinstance(proof, (str, os.PathLike)):
        with open(proof, "rb") as fh:
            proof = fh.read()
    if isinstance(proof, (bytes, bytearray, memoryview)) and bytes(proof[:4]) == SEG_MAGIC:
        proof = SegmentedProof.from_bytes(bytes(proof))
    from ...rv32.segments import MAX_SEGMENTED_CYCLES
    if max_cycles is not None and (isinstance(max_cycles, bool) or not isinstance(
            max_cycles, int) or not 1 <= max_cycles <= MAX_SEGMENTED_CYCLES):
        raise ValueError(f"max_cycles must be an int in [1, 2^32 - 1], got {max_cycles!r}")
    if isinstance(proof, SegmentedProof):
        return verify_segmented(proof, as_program(elf), as_input(input), max_cycles,
                                min_security_bits)
    proof = read_proof(proof, ProgramProof, "a ProgramProof")
    program, data = as_program(elf), as_input(input)
    if proof.dev:
        return _verify_dev(proof, program, data, max_cycles, accept_dev, t0)
    decoded = decode_proof(proof.proof)
    claim = claimed_output(decoded)                  # ShapeError / PublicValuesError
    got = [[int(v) for v in t.public_values] for t in decoded.tables]
    limit = _limit(got, max_cycles)
    split = split_of(decoded)
    airs = program_airs(program, data, claim.output, decoded.params.log_blowup,
                        slots_of(decoded), split=split)
    sec = check_security(decoded.params, min_security_bits, airs,
                         [t.log_n for t in decoded.tables])
    expected = statement_values(program, data, claim.output, claim.exit_code, limit, split)
    _check_statement(expected, got)
    res = _verify_proof(decoded, airs, expected, min_security_bits=min_security_bits)
    reg = got[INDEX["registers"]]
    return VerifiedProgram(claim.exit_code, claim.output, limit, program.digest(),
                           _bytes(reg[PV_INPUT_SHA]), got, time.perf_counter() - t0,
                           decoded.params, res.security or sec)


def _limit(got: list, max_cycles: int | None) -> int:
    """The proof's max_cycles (registers' public value), in range and, when the verifier
    names one, equal to it."""
    limit = got[INDEX["registers"]][PV_MAX_CYCLES]
    if not 1 <= limit <= abi.MAX_CYCLES_CEILING:
        raise PublicValuesError(f"max_cycles {limit} is outside [1, 2^24]", "rv32_registers")
    # a one-proof carries min(max_cycles, 2^24): proved within 2^24 cycles, the run is
    # within any larger limit
    if max_cycles is not None and limit != min(max_cycles, abi.MAX_CYCLES_CEILING):
        raise PublicValuesError(f"the proof is for max_cycles {limit:,}, not {max_cycles:,}",
                                "rv32_registers")
    return limit


def _check_statement(expected: list, got: list) -> None:
    """The proof's statement values are the expected ones (the protocol verifier would
    refuse them too; this names what differs): the program (digest, entry), the input
    (length, SHA-256)."""
    r = INDEX["registers"]
    e, g = expected[r], got[r]
    if len(g) != len(e):
        return                                   # the verifier names the count
    if g[PV_DIGEST] != e[PV_DIGEST] or g[PV_ENTRY] != e[PV_ENTRY]:
        raise PublicValuesError("the proof is not for this program (its program digest "
                                f"{_show(g[PV_DIGEST])} differs from the "
                                f"ELF's {_show(e[PV_DIGEST])})", "rv32_registers")
    if g[PV_IN_LEN] != e[PV_IN_LEN] or g[PV_INPUT_SHA] != e[PV_INPUT_SHA]:
        raise PublicValuesError(f"the proof is not for this input (it is for {g[PV_IN_LEN]:,} "
                                f"bytes with SHA-256 {_show(g[PV_INPUT_SHA])}, "
                                f"this input is {e[PV_IN_LEN]:,} bytes, "
                                f"{_show(e[PV_INPUT_SHA])})", "rv32_registers")
    for i, (a, b) in enumerate(zip(expected, got)):
        if a != b and i != r:
            from ...rv32.tables import TABLES
            what = TABLES[i] if i < len(TABLES) else f"table {i}"
            raise PublicValuesError(f"{what}: the public values are not the "
                                    f"statement's", f"rv32_{what}")
    if e != g:
        raise PublicValuesError("registers: the public values are not the statement's",
                                "rv32_registers")


def _verify_dev(proof: ProgramProof, program, data: bytes, max_cycles, accept_dev: bool,
                t0: float) -> VerifiedProgram:
    if not accept_dev:
        raise DevProofRefused("this is a development-mode proof (made with PROVER_DEV_MODE=1 "
                              "/ dev_mode=True): execution and constraint check only, no "
                              "STARK, it proves nothing; accept it only in development with "
                              "--accept-dev (verify) / accept_dev=True (library)")
    got = proof.public_values
    claim = claim_of(proof)
    limit = _limit(got, max_cycles)
    _check_statement(public_values(program, data, claim.output, claim.exit_code, limit), got)
    log.warning("accepted a development-mode proof: it proves nothing")
    return VerifiedProgram(claim.exit_code, claim.output, limit, program.digest(),
                           _bytes(got[INDEX["registers"]][PV_INPUT_SHA]), got,
                           time.perf_counter() - t0, Params(), None, dev=True)


def _bytes(limbs) -> bytes:
    return b"".join(int(v).to_bytes(2, "little") for v in limbs)


def _show(limbs) -> str:
    """A digest's 16-bit limbs for a message: its first 8 bytes in hex -- or, for a
    tampered proof's limbs that are not 16-bit values, say so (never an OverflowError)."""
    if all(0 <= int(v) < 1 << 16 for v in limbs):
        return _bytes(limbs).hex()[:16] + "..."
    return "(not 16-bit limbs)"


__all__ = ["verify_program", "VerifiedProgram"]
