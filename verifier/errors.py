"""The verifier's error hierarchy.  Every rejection is one of these -- never an assert,
never a bare IndexError / struct.error from a malformed proof."""
from __future__ import annotations
from steadfast.errors import SteadfastError


class VerificationError(SteadfastError):
    """A proof was rejected.  ``table`` names the table when the failure is local to one."""

    def __init__(self, message: str, table: str | None = None):
        self.table = table
        super().__init__(f"[{table}] {message}" if table else message)


class ShapeError(VerificationError):
    """Malformed bytes, wrong magic/version, truncation, out-of-range values, or a shape
    that disagrees with the AIRs and parameters."""


class MerkleError(VerificationError):
    """An opened row or FRI leaf does not authenticate against its commitment."""


class CompositionError(VerificationError):
    """The constraints folded at z disagree with the opened quotient parts."""


class FriError(VerificationError):
    """A FRI folding step, the DEEP-quotient link, or the final polynomial is wrong."""


class PowError(VerificationError):
    """The proof-of-work nonce does not meet the difficulty."""


class LogUpError(VerificationError):
    """The LogUp terminal sums of all tables do not add up to zero."""


class PublicValuesError(VerificationError):
    """The public values in the proof differ from the expected statement."""


class ParameterError(VerificationError):
    """The proof's protocol parameters give less conjectured security than the verifier
    requires (``min_security_bits``); raised before any hashing.  ``bits`` and
    ``required`` hold the two figures."""

    def __init__(self, message: str, bits: int | None = None, required: int | None = None):
        self.bits = bits
        self.required = required
        super().__init__(message)


__all__ = ["VerificationError", "ShapeError", "MerkleError", "CompositionError", "FriError",
           "PowError", "LogUpError", "PublicValuesError", "ParameterError"]
