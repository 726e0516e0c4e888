"""The library a VM node calls: prove blocks of RISC-V transactions one after another in one
long-lived process.

    from steadfast.prover.api import Prover, ProverConfig, verify
    prover = Prover(ProverConfig(num_queries=100))
    for block in blocks:                      # Block, dict, JSON text or a path
        proof = prover.prove_block(block)     # -> TxBlockProof (bytes via .to_bytes())
        print(proof.exit_codes, proof.state_out.hex(), proof.stats.summary())
    result = verify(proof, block=block, min_security_bits=100)  # VerificationError subclasses

This module is the public surface; each concept lives in its own module and is
re-exported here (docs/api.md documents these names):

* :class:`ProverConfig` -- backend, VRAM budget, protocol parameters, threads, check mode
  (:mod:`prover.engine.config`).
* :class:`Prover` -- reusable across blocks: ``prove_block(block)`` runs every
  transaction (an RV32IM program on its input, docs/block-format.md) and proves them in
  one proof (rv32/block.py: the statement) -> :class:`TxBlockProof`
  (:mod:`prover.blocks.proof`) carrying a :class:`ProofStats` (:mod:`prover.common.stats`);
  ``execute(block)`` sizes a proof without making it (:class:`TxBlockReport`);
  ``precompile(block)`` compiles its device kernels.  The block methods are
  :class:`prover.blocks.prover.TxBlockProver`'s, on the generic
  :class:`prover.engine.prover_core.ProverCore` (configuration, the self-check, backends, statistics,
  the process lock, timeout and cancel: :mod:`prover.engine.control`).
* :meth:`Prover.prove_program` -- one RV32IM program (ELF) run on an input, proven
  (:class:`ProgramProof`, :mod:`prover.programs.proof`); ``execute_program`` sizes it
  (:class:`ProgramReport`); the methods are :class:`prover.programs.prover.ProgramProver`'s.
* :meth:`Prover.prove_airs` / :func:`verify_airs` -- your own AIRs, traces and public
  values, with the same guarantees (:mod:`prover.engine.prover_core`, :mod:`prover.engine.air_proof`).
* :func:`verify` -- checks a :class:`TxBlockProof` (or its bytes) against its block
  (:func:`verify_txblock` -> :class:`VerifiedTxBlock`: every transaction's exit code and
  output, the chain state after the block), or a :class:`ProgramProof` against ``elf=``
  and ``input=`` (:func:`verify_program` -> :class:`VerifiedProgram`);
  ``min_security_bits`` refuses proofs made with weak parameters.
* Errors (:mod:`prover.common.errors`): :class:`UnprovableBlock` (a transaction fails, a claim
  is false, a trace violates a constraint), :class:`UnprovableProgram` (its subclass for
  programs: ``kind``, ``pc``, ``cycle``; a malformed ELF is :class:`rv32.ElfError`, a
  malformed block :class:`rv32.blockfile.BlockError`), :class:`ConfigError` (bad
  configuration), :class:`ProofSelfCheckFailure`, :class:`ProofAborted`,
  :class:`DevProofRefused`, and on the verifier side
  :class:`verifier.errors.VerificationError` and its subclasses.

Thread safety: a :class:`Prover` may be shared between threads; its proofs run one at a
time per process (a process-wide lock: the host kernels use numba's parallel pool, which
is not re-entrant), so concurrent calls queue.  :func:`verify` holds no shared state and
may run concurrently with anything.  A proof object is immutable.
"""
from __future__ import annotations

import os

from steadfast.errors import SteadfastError
from ..rv32.blockfile import Block, BlockError
from ..rv32.errors import ElfError
from ..verifier.errors import ShapeError
from ..verifier.verify import DEFAULT_MIN_SECURITY_BITS

from .engine.air_proof import AirProof, verify_airs
from .engine.config import BACKENDS_AVAILABLE, ProverConfig
from .engine.prover_core import ProgressCallback
from .common.errors import (ConfigError, ConfigTypeError, DevProofRefused, ProofAborted,
                            ProofSelfCheckFailure, UnprovableBlock, UnprovableProgram)
from .programs.proof import ElfLike, ProgramProof, is_program_proof
from .programs.segment_proof import SegmentedProof
from .programs.prover import ProgramProver
from .programs.report import ProgramReport, ProgramTableEstimate, TableEstimate
from .programs.verify import VerifiedProgram, verify_program
from .common.stats import ProofStats, TableStats
from .blocks.epochs import BlockEpochsProof
from .blocks.proof import (TxBlockLike, TxBlockProof, VerifiedTxBlock, is_txblock_proof,
                           verify_txblock)
from .blocks.prover import TxBlockProver, TxBlockReport, TxReport


class Prover(TxBlockProver, ProgramProver):
    """Proves blocks of RISC-V transactions (:meth:`prove_block`) and single RV32IM
    programs (:meth:`prove_program`), one after another, with one configuration -- and
    any AIRs (:meth:`prove_airs`).

    ``progress(table, stage, event, seconds)`` is called as protocol stages start and end
    (``table`` is None for whole-proof stages).  Construction validates the configuration
    (:class:`ConfigError`)."""


def verify(proof: TxBlockProof | BlockEpochsProof | ProgramProof | SegmentedProof | bytes
           | str | os.PathLike[str],
           block: TxBlockLike | None = None, *, elf: ElfLike | None = None,
           input: bytes | None = None, max_cycles: int | None = None,
           min_security_bits: int | None = DEFAULT_MIN_SECURITY_BITS,
           accept_dev: bool = False) -> VerifiedTxBlock | VerifiedProgram:
    """Verify a block proof against ``block`` (:func:`verify_txblock`) or, given ``elf``,
    a program proof (:func:`verify_program`: ``input`` default empty, ``max_cycles`` the
    proof's own unless given).  ``min_security_bits`` / ``accept_dev`` as documented
    there.  The proof must be of the kind asked for: anything else is refused as every
    invalid proof is (a :class:`verifier.errors.ShapeError` saying what it is).  A block
    proof without ``block`` or a program proof without ``elf`` is a ``ValueError`` (their
    AIRs are built from the block / the program), as are ``elf`` and ``block`` together."""
    if elf is not None and block is not None:
        raise ValueError("verify takes block= (a block proof) or elf= (a program proof), "
                         "not both")
    if isinstance(proof, (str, os.PathLike)):
        with open(proof, "rb") as fh:
            proof = fh.read()
    if isinstance(proof, (bytes, bytearray, memoryview)):
        proof = bytes(proof)
        is_block = is_txblock_proof(proof)
        if not is_block and not is_program_proof(proof):
            raise ShapeError("not a Steadfast proof (bad magic): a block proof starts with "
                             "STB2 (STBE in epochs), a program proof with STRV (STRS in "
                             "segments)")
    elif isinstance(proof, (TxBlockProof, BlockEpochsProof, ProgramProof, SegmentedProof)):
        is_block = isinstance(proof, (TxBlockProof, BlockEpochsProof))
    else:
        raise TypeError(f"a proof is a TxBlockProof, a BlockEpochsProof, a ProgramProof, a "
                        f"SegmentedProof, bytes or a path, not {type(proof).__name__}")
    if is_block:
        if elf is not None:
            raise ShapeError("this is a block proof, not a program proof (verify it with "
                             "--block / block=)")
        if block is None:
            raise ValueError("this is a block proof: the block is needed to verify it "
                             "(block= its path, JSON or Block)")
        if input is not None or max_cycles is not None:
            raise ValueError("input= and max_cycles= apply to program proofs (with elf=)")
        return verify_txblock(proof, block, min_security_bits=min_security_bits,
                              accept_dev=accept_dev)
    if elf is None:
        if block is not None:
            raise ShapeError("this is a program proof, not a block proof (verify it with "
                             "--elf / elf=)")
        raise ValueError("this is a program proof: its program is needed to verify it "
                         "(elf= the ELF's path, bytes or an rv32.Program)")
    return verify_program(proof, elf, b"" if input is None else input,
                          max_cycles=max_cycles, min_security_bits=min_security_bits,
                          accept_dev=accept_dev)


__all__ = ["Prover", "ProverConfig", "ProofStats", "TableStats", "verify", "UnprovableBlock",
           "ConfigError", "ProofSelfCheckFailure", "DevProofRefused", "SteadfastError",
           "ProofAborted", "ConfigTypeError", "ProgressCallback", "AirProof", "verify_airs",
           "BACKENDS_AVAILABLE", "ProgramProof", "ProgramReport", "ProgramTableEstimate",
           "TableEstimate", "VerifiedProgram", "verify_program", "UnprovableProgram",
           "ElfError", "ElfLike", "TxBlockProof", "VerifiedTxBlock", "verify_txblock",
           "TxBlockReport", "TxReport", "TxBlockLike", "Block", "BlockError"]
