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
* :meth:`Prover.prove_airs` / :func:`verify_airs` -- your own AIRs, traces and public
  values, with the same guarantees (:mod:`prover.core`, :mod:`prover.air_proof`).
* :func:`verify` -- checks a :class:`BlockProof` (or its bytes) and, given the block, that
  the proof's public values are the block's; ``min_security_bits`` refuses proofs made
  with weak parameters (:mod:`prover.block_verify`).
* :class:`ExecutionReport` / :class:`TableEstimate` / :func:`digest_hex`
  (:mod:`prover.block_report`).
* Errors (:mod:`prover.errors`): :class:`UnprovableBlock` (execution fails, claims are
  false, a trace violates a constraint), :class:`ConfigError` (bad configuration),
  :class:`ProofSelfCheckFailure`, :class:`ProofAborted`, :class:`DevProofRefused`, and on
  the verifier side :class:`verifier.errors.VerificationError` and its subclasses.

Thread safety: a :class:`Prover` may be shared between threads; its proofs run one at a
time per process (a process-wide lock: the host kernels use numba's parallel pool, which
is not re-entrant), so concurrent calls queue.  :func:`verify` holds no shared state and
may run concurrently with anything.  A :class:`BlockProof` is immutable.
"""
from __future__ import annotations

from steadfast.errors import SteadfastError

from .air_proof import AirProof, verify_airs
from .block_proof import BlockLike, BlockProof
from .block_prover import BlockProver
from .block_report import ExecutionReport, TableEstimate, digest_hex
from .block_verify import VerifiedBlock, verify
from .config import BACKENDS_AVAILABLE, ProverConfig
from .core import ProgressCallback
from .errors import (ConfigError, ConfigTypeError, DevProofRefused, ProofAborted,
                     ProofSelfCheckFailure, UnprovableBlock)
from .stats import ProofStats, TableStats


class Prover(BlockProver):
    """Proves blocks, one after another, with one configuration -- and any AIRs
    (:meth:`prove_airs`).

    ``progress(table, stage, event, seconds)`` is called as protocol stages start and end
    (``table`` is None for whole-proof stages).  Construction validates the configuration
    (:class:`ConfigError`) and builds the block-independent AIRs once."""


__all__ = ["Prover", "ProverConfig", "ProofStats", "TableStats", "BlockProof", "VerifiedBlock",
           "verify", "UnprovableBlock", "ConfigError", "ProofSelfCheckFailure",
           "DevProofRefused", "ExecutionReport", "TableEstimate", "digest_hex", "SteadfastError",
           "ProofAborted", "ConfigTypeError", "BlockLike", "ProgressCallback", "AirProof",
           "verify_airs", "BACKENDS_AVAILABLE"]
