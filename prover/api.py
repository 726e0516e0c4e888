"""The library a VM node calls: prove blocks one after another in one long-lived process.

    from steadfast.prover.api import Prover, ProverConfig, verify
    prover = Prover(ProverConfig(num_queries=100))
    for block in blocks:                      # Block, dict, JSON text or a path
        proof = prover.prove_block(block)     # -> BlockProof (bytes via .to_bytes())
        print(proof.stats.summary())
    result = verify(proof, block=block, min_security_bits=100)  # VerificationError subclasses

This module is the public surface; each concept lives in its own module and is
re-exported here (docs/api.md documents these names):

* :class:`ProverConfig` -- backend, VRAM budget, protocol parameters, threads, check mode
  (:mod:`prover.config`).
* :class:`Prover` -- reusable across blocks: ``prove_block(block)`` runs the VM, builds the
  five tables and proves them; ``prove_tables(tables, public_values, rom)`` proves traces a
  node built itself; ``execute(block)`` sizes a proof without making it; ``precompile``.
  Both proofs are a :class:`BlockProof` (:mod:`prover.block_proof`) carrying a
  :class:`ProofStats` (:mod:`prover.stats`).  The block methods are
  :class:`prover.block_prover.BlockProver`'s, on the generic
  :class:`prover.core.ProverCore` (configuration, the self-check, backends, statistics,
  the process lock, timeout and cancel: :mod:`prover.control`).
* :meth:`Prover.prove_program` -- an RV32IM program (ELF) run on an input, proven
  (:class:`ProgramProof`, :mod:`prover.program_proof`); ``execute_program`` sizes it
  (:class:`ProgramReport`); the methods are :class:`prover.program_prover.ProgramProver`'s.
* :meth:`Prover.prove_airs` / :func:`verify_airs` -- your own AIRs, traces and public
  values, with the same guarantees (:mod:`prover.core`, :mod:`prover.air_proof`).
* :func:`verify` -- checks a :class:`BlockProof` (or its bytes) and, given the block, that
  the proof's public values are the block's; ``min_security_bits`` refuses proofs made
  with weak parameters (:mod:`prover.block_verify`); a :class:`ProgramProof` against
  ``elf=`` and ``input=`` (:func:`verify_program`, :mod:`prover.program_verify`) ->
  :class:`VerifiedProgram`.
* :class:`ExecutionReport` / :class:`TableEstimate` / :func:`digest_hex`
  (:mod:`prover.block_report`).
* Errors (:mod:`prover.errors`): :class:`UnprovableBlock` (execution fails, claims are
  false, a trace violates a constraint), :class:`UnprovableProgram` (its subclass for
  programs: ``kind``, ``pc``, ``cycle``; a malformed ELF is :class:`rv32.ElfError`), :class:`ConfigError` (bad configuration),
  :class:`ProofSelfCheckFailure`, :class:`ProofAborted`, :class:`DevProofRefused`, and on
  the verifier side :class:`verifier.errors.VerificationError` and its subclasses.

Thread safety: a :class:`Prover` may be shared between threads; its proofs run one at a
time per process (a process-wide lock: the host kernels use numba's parallel pool, which
is not re-entrant), so concurrent calls queue.  :func:`verify` holds no shared state and
may run concurrently with anything.  A :class:`BlockProof` is immutable.
"""
from __future__ import annotations

import os

from steadfast.errors import SteadfastError
from ..rv32.errors import ElfError
from ..verifier.errors import ShapeError
from ..verifier.verify import DEFAULT_MIN_SECURITY_BITS

from .air_proof import AirProof, verify_airs
from .block_proof import BlockLike, BlockProof
from .block_prover import BlockProver
from .block_report import ExecutionReport, TableEstimate, digest_hex
from .block_verify import VerifiedBlock
from .block_verify import verify as verify_block
from .config import BACKENDS_AVAILABLE, ProverConfig
from .core import ProgressCallback
from .errors import (ConfigError, ConfigTypeError, DevProofRefused, ProofAborted,
                     ProofSelfCheckFailure, UnprovableBlock, UnprovableProgram)
from .program_proof import ElfLike, ProgramProof, is_program_proof
from .program_prover import ProgramProver
from .program_report import ProgramReport, ProgramTableEstimate
from .program_verify import VerifiedProgram, verify_program
from .stats import ProofStats, TableStats
from .txblock_proof import TxBlockProof, VerifiedTxBlock, is_txblock_proof, verify_txblock
from .txblock_prover import TxBlockProver, TxBlockReport, TxReport


class Prover(BlockProver, ProgramProver, TxBlockProver):
    """Proves blocks and RV32IM programs (:meth:`prove_program`), one after another, with
    one configuration -- and any AIRs (:meth:`prove_airs`).

    ``progress(table, stage, event, seconds)`` is called as protocol stages start and end
    (``table`` is None for whole-proof stages).  Construction validates the configuration
    (:class:`ConfigError`) and builds the block-independent AIRs once."""


def verify(proof: BlockProof | ProgramProof | bytes | str | os.PathLike[str],
           block: BlockLike | None = None, *, elf: ElfLike | None = None,
           input: bytes | None = None, max_cycles: int | None = None,
           min_security_bits: int | None = DEFAULT_MIN_SECURITY_BITS,
           accept_dev: bool = False) -> VerifiedBlock | VerifiedProgram:
    """Verify a block proof (:func:`prover.block_verify.verify`, ``block`` optional) or,
    given ``elf``, a program proof (:func:`verify_program`: ``input`` default empty,
    ``max_cycles`` the proof's own unless given).  ``min_security_bits`` /
    ``accept_dev`` as documented there.  With ``elf`` (or ``block``) the proof must be of
    that kind: anything else is refused as every invalid proof is (a
    :class:`verifier.errors.ShapeError` saying what it is).  A program proof without
    ``elf`` is a ``ValueError`` (its AIRs are built from the program), as are ``elf``
    and ``block`` together."""
    if elf is not None and block is not None:
        raise ValueError("verify takes block= (a block proof) or elf= (a program proof), "
                         "not both")
    if isinstance(proof, (str, os.PathLike)):
        with open(proof, "rb") as fh:
            proof = fh.read()
    if isinstance(proof, TxBlockProof) or (isinstance(proof, (bytes, bytearray, memoryview))
                                           and is_txblock_proof(proof)):
        if elf is not None:
            raise ShapeError("this is a block proof, not a program proof (verify it with "
                             "--block / block=)")
        if block is None:
            raise ValueError("this is a proof of a block of RISC-V transactions: the block "
                             "is needed to verify it (block= its path, JSON or Block)")
        if input is not None or max_cycles is not None:
            raise ValueError("input= and max_cycles= apply to program proofs (with elf=)")
        return verify_txblock(proof, block, min_security_bits=min_security_bits,
                              accept_dev=accept_dev)
    if isinstance(proof, (bytes, bytearray, memoryview)):
        proof = bytes(proof)
        program = is_program_proof(proof)
    elif isinstance(proof, (ProgramProof, BlockProof)):
        program = isinstance(proof, ProgramProof)
    else:
        raise TypeError(f"a proof is a BlockProof, a ProgramProof, bytes or a path, not "
                        f"{type(proof).__name__}")
    if elf is not None:
        if isinstance(proof, BlockProof):
            raise ShapeError("this is a block proof, not a program proof (verify it with "
                             "--block / block=)")
        return verify_program(proof, elf, b"" if input is None else input,
                              max_cycles=max_cycles, min_security_bits=min_security_bits,
                              accept_dev=accept_dev)
    if program:
        if block is not None:
            raise ShapeError("this is a program proof, not a block proof (verify it with "
                             "--elf / elf=)")
        raise ValueError("this is a program proof: its program is needed to verify it "
                         "(elf= the ELF's path, bytes or an rv32.Program)")
    if input is not None or max_cycles is not None:
        raise ValueError("input= and max_cycles= apply to program proofs (with elf=)")
    return verify_block(proof, block, min_security_bits=min_security_bits,
                        accept_dev=accept_dev)


__all__ = ["Prover", "ProverConfig", "ProofStats", "TableStats", "BlockProof", "VerifiedBlock",
           "verify", "UnprovableBlock", "ConfigError", "ProofSelfCheckFailure",
           "DevProofRefused", "ExecutionReport", "TableEstimate", "digest_hex", "SteadfastError",
           "ProofAborted", "ConfigTypeError", "BlockLike", "ProgressCallback", "AirProof",
           "verify_airs", "BACKENDS_AVAILABLE", "ProgramProof", "ProgramReport",
           "ProgramTableEstimate", "VerifiedProgram", "verify_program", "verify_block",
           "UnprovableProgram", "ElfError", "ElfLike", "TxBlockProof", "VerifiedTxBlock",
           "verify_txblock", "TxBlockReport", "TxReport"]
