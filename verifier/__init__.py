"""Steadfast's independent verifier.

Depends on numpy, numba (its own Poseidon2 kernel) and the statement (:mod:`air`) only --
never on ``kernels/`` or ``prover/`` (``steadfast._jit_cache``, numba's cache lookup
without the compiler's start-up, is the package root's).  Its compiled kernels allocate
nothing: the Python wrappers pass every array (an allocation inside a cached kernel makes
loading it import numba's array module, ~33 ms of a verify).

* :func:`verify` ``(proof_bytes, airs, public_values=None, *, min_security_bits=100) -> VerifyResult``
  (:mod:`verifier.verify`: the whole proof, step by step)
* :mod:`verifier.security` -- the proof's security figure (``proof_security``, ``SecurityReport``)
* :class:`Transcript` -- the one Fiat-Shamir transcript (the prover imports it from here)
* :func:`verify_table` (:mod:`verifier.table`: one table's fork -> ``TableState``, with the
  composition at z of :mod:`verifier.composition`) and :func:`verify_join`
  (:mod:`verifier.join`: the one FRI and every opening): the per-table / join split the
  prover's self-check uses; :mod:`verifier.shapes` -- the shape checks before any hashing
* :mod:`verifier.proof_format` -- ``Params``, ``Proof``, ``FriProof``, ``encode``, ``decode``, ``to_json``
* :mod:`verifier.errors` -- ``VerificationError`` and its subclasses
* :func:`warm_kernels` -- load or compile the verifier's kernels ahead of a verification
"""
from .errors import (CompositionError, FriError, LogUpError, MerkleError, ParameterError,
                     PowError, PublicValuesError, ShapeError, VerificationError)
from .proof_format import FriProof, Params, Proof, TableProof, decode, encode, to_json
from .transcript import Transcript
from .security import SecurityReport, proof_security
from .verify import (DEFAULT_MIN_SECURITY_BITS, TableState, VerifyResult, check_security, verify,
                     verify_join, verify_table)



def warm_kernels() -> None:
    """Load (or compile, on a cold numba cache) every compiled kernel a verification uses,
    so the first ``verify`` does not pay for them (they compile on first use otherwise)."""
    from . import composition, join, merkle, poseidon2
    poseidon2.warm_kernels()
    merkle.warm_kernels()
    composition.warm_kernels()
    join.warm_kernels()


__all__ = ["warm_kernels", "verify", "VerifyResult", "verify_table", "verify_join", "TableState", "Transcript",
           "Params", "Proof", "TableProof", "FriProof", "decode",
           "encode", "to_json", "VerificationError", "ShapeError", "MerkleError",
           "CompositionError", "FriError", "PowError", "LogUpError", "PublicValuesError",
           "ParameterError", "check_security", "DEFAULT_MIN_SECURITY_BITS", "SecurityReport",
           "proof_security"]
