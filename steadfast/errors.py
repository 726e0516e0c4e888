"""The one base exception of Steadfast.

Every error the API raises on purpose -- a malformed block (``BlockError``), a block that
cannot be proven (``UnprovableBlock``), a configuration the prover cannot use
(``ConfigError``), a rejected proof (``VerificationError`` and its subclasses), a proof
that failed the self-check (``ProofSelfCheckFailure``) or the device cross-check
(``XcheckFailure``), an unusable backend (``BackendError``) -- is a
:class:`SteadfastError`, so a node can catch them all with one clause and still tell them
apart.  The subclasses keep their builtin bases (``ValueError``, ``RuntimeError``) too.

This module imports nothing: the verifier, the VM and the prover all depend on it, and
it on none of them.
"""
from __future__ import annotations


class SteadfastError(Exception):
    """Base of every error the Steadfast packages raise on purpose."""


__all__ = ["SteadfastError"]
