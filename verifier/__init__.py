"""Steadfast's independent verifier.

Depends on numpy, numba (its own Poseidon2 kernel) and the statement (:mod:`air`) only --
never on ``kernels/`` or ``prover/``.

* :func:`verify` ``(proof_bytes, airs, public_values=None, *, min_security_bits=100) -> VerifyResult``
* :mod:`verifier.security` -- the proof's security figure (``proof_security``, ``SecurityReport``)
* :class:`Transcript` -- the one Fiat-Shamir transcript (the prover imports it from here)
* :mod:`verifier.proof_format` -- ``Params``, ``Proof``, ``encode``, ``decode``, ``to_json``
* :mod:`verifier.errors` -- ``VerificationError`` and its subclasses
"""
from .errors import (CompositionError, FriError, LogUpError, MerkleError, ParameterError,
                     PowError, PublicValuesError, ShapeError, VerificationError)
from .proof_format import Params, Proof, TableProof, decode, encode, to_json
from .transcript import Transcript
from .security import SecurityReport, proof_security
from .verify import DEFAULT_MIN_SECURITY_BITS, VerifyResult, check_security, verify

__all__ = ["verify", "VerifyResult", "Transcript", "Params", "Proof", "TableProof", "decode",
           "encode", "to_json", "VerificationError", "ShapeError", "MerkleError",
           "CompositionError", "FriError", "PowError", "LogUpError", "PublicValuesError",
           "ParameterError", "check_security", "DEFAULT_MIN_SECURITY_BITS", "SecurityReport",
           "proof_security"]
