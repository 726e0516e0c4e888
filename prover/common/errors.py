"""The errors the prover's library raises on purpose (docs/api.md "Errors"): each derives
from :class:`steadfast.SteadfastError` and keeps its builtin base.

* :class:`ConfigError` (ValueError) / :class:`ConfigTypeError` (also a TypeError) -- a
  configuration the prover cannot use;
* :class:`UnprovableBlock` -- the block has no proof (execution fails, false claims, a
  trace breaks a constraint);
* :class:`UnprovableProgram` -- the same for an RV32IM program (an
  :class:`UnprovableBlock`): its execution fails (``kind``, ``pc``, ``cycle``) or a trace
  breaks a constraint;
* :class:`ProofSelfCheckFailure` (RuntimeError) -- the finished proof did not verify, so
  it was not emitted;
* :class:`ProofAborted` -- the caller's timeout or cancel event stopped the proof;
* :class:`DevProofRefused` (a :class:`verifier.errors.VerificationError`) -- a
  development-mode fake offered to ``verify`` without ``accept_dev``;
* :class:`ClusterError` (RuntimeError) -- cluster mode could not finish a piece.
"""
from __future__ import annotations

from typing import Sequence

from steadfast.errors import SteadfastError
from ...verifier.errors import VerificationError


class ConfigError(SteadfastError, ValueError):
    """A configuration value the prover cannot use (the message says which and why;
    ``field`` names the :class:`ProverConfig` field when there is one)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class ConfigTypeError(ConfigError, TypeError):
    """A :class:`ProverConfig` field of the wrong type: a :class:`ConfigError` that is also
    a :class:`TypeError` (``except TypeError`` catches it, as Python's own would)."""


class UnprovableBlock(SteadfastError):
    """The block has no proof: execution fails, its claims are false, or its traces break
    a constraint.  ``reason`` is the one-line cause; ``constraint``/``table`` name the
    failing constraint when the trace check found it; ``details`` lists specifics."""

    def __init__(self, reason: str, table: str | None = None, constraint: str | None = None,
                 details: Sequence[str] = ()):
        self.reason = reason
        self.table = table
        self.constraint = constraint
        self.details = list(details)
        msg = reason
        if constraint:
            msg += f" (table {table!r}, constraint {constraint!r})"
        super().__init__(msg)


class UnprovableProgram(UnprovableBlock):
    """An RV32IM program has no proof on this input: its execution fails -- ``kind`` (one
    of rv32.errors.KINDS: "cycles", "illegal", "misaligned", ...), ``pc`` and ``cycle``
    locate the failing instruction (rv32.ExecutionError's) -- or, with the check mode, a
    trace breaks a constraint (``table``, ``constraint``).  An :class:`UnprovableBlock`,
    so ``except UnprovableBlock`` and the CLI's exit status 1 cover both."""

    def __init__(self, reason: str, kind: str | None = None, pc: int | None = None,
                 cycle: int | None = None, table: str | None = None,
                 constraint: str | None = None, details: Sequence[str] = ()):
        super().__init__(reason, table, constraint, details)
        self.kind = kind
        self.pc = pc
        self.cycle = cycle


class ProofSelfCheckFailure(SteadfastError, RuntimeError):
    """The finished proof did not verify (the prover's self-check), so it was not emitted:
    a device or prover fault, never the block's.  ``postmortem`` is the report's path,
    ``report`` its content (docs/diagnostics.md).  The CLI exits with status 4."""

    def __init__(self, message: str, postmortem: str | None, report: dict):
        super().__init__(message)
        self.postmortem = postmortem
        self.report = report


class ProofAborted(SteadfastError):
    """The proof was stopped -- ``reason`` "cancelled" (the caller's ``cancel`` event was
    set) or "timeout" (``timeout`` seconds passed) -- at the next stage boundary or while
    waiting for the process lock.  No proof is returned; the prover stays usable."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


class DevProofRefused(VerificationError):
    """A development-mode proof (``PROVER_DEV_MODE=1`` / ``ProverConfig(dev_mode=True)``)
    was offered to :func:`verify` without ``accept_dev=True``: it proves nothing."""


class ClusterError(SteadfastError, RuntimeError):
    """The cluster could not finish a piece: its worker died more than ``max_retries``
    times, the workers did not start, or a wait timed out.  A :class:`SteadfastError` that
    keeps its builtin base (``except RuntimeError`` still catches it); the cluster CLI
    exits with status 3 on it."""


__all__ = ["ConfigError", "ConfigTypeError", "UnprovableBlock", "UnprovableProgram",
           "ProofSelfCheckFailure",
           "ProofAborted", "DevProofRefused", "ClusterError"]
