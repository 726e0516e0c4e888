"""Verifying a block proof (docs/api.md "Verifying"): :func:`verify` rebuilds the block's
AIRs from the proof's ROM and table widths, checks what the block format bounds (memory
size, max_cycles, the CPU table's height) and the program digest, runs the protocol
verifier with its minimum security, and -- given the block -- that the public values are
that block's.  A development-mode fake is refused unless ``accept_dev``.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from ..verifier import verify as _verify_proof
from ..verifier.errors import PublicValuesError, ShapeError
from ..verifier.proof_format import Params
from ..verifier.security import SecurityReport
from ..verifier.verify import (DEFAULT_MIN_SECURITY_BITS, check_security,
                               validate_min_security_bits)
from ..vm.airs import TABLES, block_airs, slots_from_widths
from ..vm.block import MAX_CYCLES, MAX_LOG_CYCLES
from ..vm.rom import build_rom
from ..vm.statement import (NUM_PUBLIC_VALUES, PV_FINAL, PV_MAX_CYCLES, PV_PROGRAMS,
                            block_public_values, describe_mismatch, program_digest)

from .air_proof import decode_proof, read_proof
from .block_proof import BlockLike, BlockProof, as_block
from .errors import DevProofRefused

log = logging.getLogger("steadfast.prover")


@dataclass(frozen=True)
class VerifiedBlock:
    """What a successful :func:`verify` establishes, and the parameters it rests on."""
    public_values: list[int]
    seconds: float
    params: Params = field(default_factory=Params)
    security: SecurityReport | None = None
    dev: bool = False               # a development-mode fake accepted with accept_dev=True

    @property
    def memory_size(self) -> int:
        return self.public_values[0]

    @property
    def final_digest(self) -> list[int]:
        return self.public_values[PV_FINAL]

    @property
    def security_bits(self) -> int:
        """Conjectured security of the proof: its parameters for its table shapes, the sum
        of every soundness term (docs/protocol.md section 7)."""
        return self.security.bits if self.security is not None else 0


def verify(proof: BlockProof | bytes | str | os.PathLike[str], block: BlockLike | None = None, *,
           min_security_bits: int | None = DEFAULT_MIN_SECURITY_BITS,
           accept_dev: bool = False) -> VerifiedBlock:
    """Verify a block proof (a :class:`BlockProof`, its bytes, or a path); with ``block``
    also check that its public values are that block's (everything but the final-state
    digest, which the proof establishes).  Raises a
    :class:`verifier.errors.VerificationError` subclass on rejection (ShapeError for a
    malformed proof, PublicValuesError for a statement mismatch, ...).

    ``min_security_bits``: refuse a proof whose parameters give fewer conjectured security
    bits for its tables (:class:`verifier.errors.ParameterError`, raised after parsing,
    before any hashing; the figure is :attr:`VerifiedBlock.security`, docs/protocol.md
    section 7).  Default 100, like the ``verify`` command; 0 accepts any parameters --
    never do that for proofs from others.

    ``accept_dev``: a development-mode proof (``PROVER_DEV_MODE=1``; no STARK, proves
    nothing) raises :class:`DevProofRefused` unless this is True; accepted, only its ROM's
    program digest and (with ``block``) its public values are checked, and the result has
    ``dev=True`` and no security figure."""
    t0 = time.perf_counter()
    min_security_bits = validate_min_security_bits(min_security_bits)
    proof = read_proof(proof, BlockProof, "a BlockProof")
    if proof.dev:
        return _verify_dev(proof, block, accept_dev, t0)
    decoded = decode_proof(proof.proof)
    pv = [int(v) for v in decoded.tables[0].public_values] if decoded.tables else []
    if len(pv) != NUM_PUBLIC_VALUES:
        raise ShapeError(f"the CPU table carries {len(pv)} public values, expected {NUM_PUBLIC_VALUES}")
    msize = pv[0]
    if not (8 <= msize <= 1 << 16 and msize % 8 == 0):
        raise PublicValuesError(f"memory_size {msize} is not a valid block memory size")
    if not 1 <= pv[PV_MAX_CYCLES] <= MAX_CYCLES:
        raise PublicValuesError(f"max_cycles {pv[PV_MAX_CYCLES]} is outside the block format's "
                                f"[1, 2^{MAX_LOG_CYCLES}]")
    # one ceiling with the block format: no block runs more than 2^21 cycles, so no CPU
    # table is taller (the protocol alone admits 2^24 rows)
    if decoded.tables[0].log_n > MAX_LOG_CYCLES:
        raise ShapeError(f"CPU table of 2^{decoded.tables[0].log_n} rows exceeds the block "
                         f"ceiling of 2^{MAX_LOG_CYCLES} cycles")
    if len(decoded.tables) != len(TABLES):
        raise ShapeError(f"proof has {len(decoded.tables)} tables, a block proof {len(TABLES)}")
    # a slotted table's k (POSEIDON2: permutations per row) is the prover's choice, read
    # off its main width; each k's AIR is sound on its own (docs/vm.md "Slots")
    try:
        slots = slots_from_widths([len(t.ood_main) for t in decoded.tables])
    except ValueError as exc:
        raise ShapeError(f"table shapes: {exc}") from None
    # the AIRs of the proof's log_blowup (their LogUp batching degree depends on it,
    # air/builder.py choose_logup_degree): a proof whose aux / quotient shapes were made for
    # other AIRs fails the shape checks (and the AIR fingerprints in the transcript)
    airs = block_airs(proof.rom, slots, decoded.params.log_blowup)
    check_security(decoded.params, min_security_bits, airs, [t.log_n for t in decoded.tables])
    if program_digest(proof.rom) != pv[PV_PROGRAMS]:
        raise PublicValuesError("the program digest does not match the proof's ROM")
    res = _verify_proof(decoded, airs, [pv, [], [msize], [], []],    # (decoded once)
                        min_security_bits=min_security_bits)
    if block is not None:
        _check_block(block, pv)
    return VerifiedBlock(pv, time.perf_counter() - t0, decoded.params, res.security)


def _verify_dev(proof: BlockProof, block, accept_dev: bool, t0: float) -> VerifiedBlock:
    if not accept_dev:
        raise DevProofRefused("this is a development-mode proof (made with PROVER_DEV_MODE=1 "
                              "/ dev_mode=True): execution and constraint check only, no "
                              "STARK, it proves nothing; accept it only in development with "
                              "--accept-dev (verify) / accept_dev=True (library)")
    pv = proof.public_values
    if program_digest(proof.rom) != pv[PV_PROGRAMS]:
        raise PublicValuesError("the program digest does not match the proof's ROM")
    if block is not None:
        _check_block(block, pv)
    log.warning("accepted a development-mode proof: it proves nothing")
    return VerifiedBlock(pv, time.perf_counter() - t0, Params(), None, dev=True)


def _check_block(block: BlockLike, pv: list) -> None:
    """The proof's public values ``pv`` are ``block``'s (all but the final-state digest,
    which the proof establishes): PublicValuesError naming the ones that differ."""
    blk = as_block(block)
    bad = describe_mismatch(block_public_values(blk, build_rom(blk)), pv)
    if bad:
        raise PublicValuesError("the proof is not for this block: " + ", ".join(bad)
                                + " differ")


__all__ = ["verify", "VerifiedBlock"]
