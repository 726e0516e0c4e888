"""A proof of your own AIRs (:meth:`prover.api.Prover.prove_airs`) and its verification.

:class:`AirProof` is the protocol proof's bytes (docs/protocol.md: parameters, public
values and every table's section inside) with the prover's :class:`ProofStats`;
:func:`verify_airs` checks one against the AIRs with the verifier's own code
(:func:`verifier.verify`), the same minimum security as a block proof's ``verify``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence, TypeVar

from ..common.proof_file import ProofFile
from ...verifier import DEFAULT_MIN_SECURITY_BITS, VerifyResult
from ...verifier import verify as _verify_proof
from ...verifier.errors import ShapeError
from ...verifier.proof_format import Params, Proof, decode

from ..common.stats import ProofStats

_P = TypeVar("_P")


@dataclass(frozen=True)
class AirProof(ProofFile):
    """The proof of a statement over your own AIRs: ``proof`` its bytes (the file is these
    bytes, nothing around them), ``stats`` the prover's record (None once read back)."""
    proof: bytes
    stats: ProofStats | None = field(default=None, compare=False, repr=False)

    @property
    def params(self) -> Params:
        """The protocol parameters the proof was made with."""
        return decode(self.proof).params

    @property
    def public_values(self) -> list[list[int]]:
        """The public values the proof carries, one list per table."""
        return [[int(v) for v in t.public_values] for t in decode(self.proof).tables]

    def to_bytes(self) -> bytes:
        return self.proof

    @classmethod
    def from_bytes(cls, data: bytes) -> "AirProof":
        return cls(bytes(data))



def verify_airs(proof: AirProof | bytes | str | os.PathLike[str], airs: Sequence[Any],
                public_values: Sequence[Sequence[int]] | None = None, *,
                min_security_bits: int | None = DEFAULT_MIN_SECURITY_BITS) -> VerifyResult:
    """Verify a proof of :meth:`prover.api.Prover.prove_airs` (an :class:`AirProof`, its
    bytes or a path) for ``airs`` (in table order, as proven).  ``public_values``: the
    expected values, one list per table (None: accept those in the proof and return
    them).  Raises a :class:`verifier.errors.VerificationError` subclass on rejection
    (ShapeError for malformed bytes or a proof of other shapes, PublicValuesError, ...);
    ``min_security_bits`` as for a block proof's ``verify`` (default 100; 0 accepts any
    parameters -- never for proofs from others).  -> the verifier's
    :class:`verifier.VerifyResult` (``public_values``, ``seconds``, ``security``)."""
    decoded = decode_proof(read_proof(proof, AirProof, "an AirProof").proof)
    return _verify_proof(decoded, list(airs), public_values, min_security_bits=min_security_bits)


def read_proof(proof: object, cls: type[_P], what: str) -> _P:
    """``proof`` -- a ``cls`` (:class:`AirProof`, a block proof), its bytes or the path of
    its file -- as a ``cls``; ``TypeError`` (naming ``what`` it must be) otherwise."""
    if isinstance(proof, (str, os.PathLike)):
        proof = cls.load(proof)             # type: ignore[attr-defined]
    elif isinstance(proof, (bytes, bytearray, memoryview)):
        proof = cls.from_bytes(bytes(proof))    # type: ignore[attr-defined]
    if not isinstance(proof, cls):
        raise TypeError(f"a proof is {what}, bytes or a path, not {type(proof).__name__}")
    return proof


def decode_proof(data: bytes) -> Proof:
    """The protocol proof in ``data``; any malformation is a ShapeError."""
    try:
        return decode(data)
    except ShapeError:
        raise
    except Exception as exc:        # decode raises ShapeError; anything else is malformed too
        raise ShapeError(f"malformed proof: {exc}") from None


__all__ = ["AirProof", "verify_airs"]
