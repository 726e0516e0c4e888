"""The verifier (proof format 6): :func:`verify` checks a whole proof, step for step the
prover's rounds (docs/protocol.md section 6):

1. decode and shape-check everything (:mod:`verifier.shapes`: ShapeError), the security
   minimum (:func:`check_security`: ParameterError), the buses, the public values;
2. the main transcript: the statement, the main tree's cap (one mixed-height tree over
   every table's main matrix), the LogUp proof of work and challenges;
3. per table, its fork (:mod:`verifier.table`: the global aux and parts caps, proofs of
   work, the composition at z from :mod:`verifier.composition`) up to its
   ``table_digest``;
4. the LogUp terminal sums (LogUpError);
5. the join (:mod:`verifier.join`): one FRI for all tables, the three mixed-height
   multiproofs (main / aux / parts) of the openings.

The per-table replay and the join are public entry points too (the prover's self-check
runs them separately); they are re-exported here under their old names:
:func:`verify_table`, :func:`composition_check`, :func:`check_table_shape`,
:func:`check_shapes`, :func:`verify_join`, :func:`table_check_key`, :class:`TableState`.
"""
from __future__ import annotations

import operator
import time
from dataclasses import dataclass, field
from typing import Collection, Sequence

import numpy as np

from ..air import CHALLENGE_NAMES, check_buses
from ..air.builder import AirError

from .composition import composition_check
from .errors import LogUpError, ParameterError, PowError, PublicValuesError, ShapeError
from .field import F, P, ef_col
from .join import verify_join
from .proof_format import Params, Proof, decode
from .protocol import absorb_statement
from .security import SecurityReport, proof_security
from .shapes import check_shapes, check_table_shape
from .table import TableState, table_check_key, verify_table
from .transcript import Transcript

#: the security minimum every verification requires unless told otherwise (conjectured
#: bits, docs/protocol.md section 7); the ``verify`` command and the library share it
DEFAULT_MIN_SECURITY_BITS = 100


@dataclass
class VerifyResult:
    """What a successful verification returns."""
    public_values: list
    logs: list = field(default_factory=list)       # [main log, table 0 log, ...]
    seconds: float = 0.0
    security: SecurityReport | None = None         # the proof's security figure
    tables_prechecked: int = 0                     # tables whose composition check was skipped


def validate_min_security_bits(value) -> int | None:
    """Validate a ``min_security_bits`` argument: None, or an integer >= 0."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("min_security_bits must be an int or None, not bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"min_security_bits must be an int or None, not "
                        f"{type(value).__name__}") from None
    if value < 0:
        raise ValueError(f"min_security_bits must be >= 0, got {value}")
    return value


def check_security(params: Params, min_security_bits: int | None,
                   airs: Sequence = (), log_ns: Sequence[int] = ()) -> SecurityReport:
    """Refuse proofs whose parameters are too weak for their shapes: raise
    :class:`ParameterError` when the security figure of ``params`` for tables ``airs`` of
    heights 2^``log_ns`` (:func:`verifier.security.proof_security`: the sum of every
    soundness term -- FRI queries and proof of work, LogUp, alpha, OOD, DEEP, FRI folds --
    over the tables, docs/protocol.md section 7) is below ``min_security_bits``;
    ``None`` or 0 sets no minimum.  Returns the report.  Costs nothing: run it before any
    hashing, so that a cheap weak proof is turned away before the verifier spends work on
    it."""
    min_security_bits = validate_min_security_bits(min_security_bits)
    report = proof_security(params, airs, log_ns)
    if min_security_bits and report.bits < min_security_bits:
        raise ParameterError(
            f"proof parameters (log_blowup {params.log_blowup}, {params.num_queries} queries, "
            f"{params.pow_bits} query proof-of-work bits, LogUp/DEEP/commit grinding "
            f"{params.logup_pow_bits}/{params.deep_pow_bits}/{params.commit_pow_bits} bits) "
            f"give {report.bits} conjectured security bits for these tables, below the "
            f"required {min_security_bits} (weakest term: {report.limiting}, "
            f"{report.terms.get(report.limiting, 0):.1f} bits)",
            bits=report.bits, required=min_security_bits)
    return report


def verify(proof_bytes: bytes, airs: Sequence, public_values: Sequence | None = None,
           *, min_security_bits: int | None = DEFAULT_MIN_SECURITY_BITS,
           verified_tables: Collection[bytes] = ()) -> VerifyResult:
    """Verify a proof for the tables ``airs`` (in table order).

    ``min_security_bits``: refuse (:class:`ParameterError`) a proof whose parameters give
    fewer conjectured security bits for its tables (:func:`check_security`), checked after
    parsing and the shape check, before any hashing.  The default is
    :data:`DEFAULT_MIN_SECURITY_BITS` (100); 0 or ``None`` accepts the proof's own
    parameters, whatever they are -- say so explicitly (tests with weak parameters do).

    ``proof_bytes``: the proof's bytes, or the :class:`verifier.proof_format.Proof` that
    :func:`verifier.proof_format.decode` made of them.

    ``public_values``: the expected public values per table (None: accept those in the
    proof and return them).  Raises a :class:`verifier.errors.VerificationError`
    subclass on rejection; returns a :class:`VerifyResult` on success.

    ``verified_tables``: keys (:func:`table_check_key`) of per-table checks that already
    passed on identical inputs; a table whose key is among them skips its composition
    check (the prover's overlapped self-check).  Everything else -- parsing, shapes, the
    statement, every transcript and proof of work, the LogUp sum, the join with every
    opening -- always runs.

    Order (docs/protocol.md section 6): decode, shapes (ShapeError) -> security minimum
    (ParameterError) -> public values -> main transcript, LogUp proof of work -> per table
    its fork (proofs of work, composition at z) -> LogUp terminals (LogUpError) -> the
    join (:func:`verify_join`).
    """
    t0 = time.perf_counter()
    min_security_bits = validate_min_security_bits(min_security_bits)   # before the proof
    airs = list(airs)
    # a Proof that verifier.proof_format.decode returned is accepted as well (a caller
    # that decoded the bytes already, as prover.api.verify does, saves the second parse)
    proof = proof_bytes if isinstance(proof_bytes, Proof) else decode(proof_bytes)
    shapes = check_shapes(proof, airs)
    security = check_security(proof.params, min_security_bits, airs, [sh.log_n for sh in shapes])
    try:
        check_buses(airs)
    except AirError as e:
        raise ShapeError(str(e)) from None
    pvs = [[int(v) for v in tp.public_values] for tp in proof.tables]
    if public_values is not None:
        if len(public_values) != len(airs):
            raise PublicValuesError(f"{len(public_values)} public-value lists for {len(airs)} tables")
        for air, got, exp in zip(airs, pvs, public_values):
            exp = [int(v) for v in (exp or ())]
            if got != exp:
                raise PublicValuesError(f"proof has {got}, statement {exp}", air.name)
    tr = Transcript()
    absorb_statement(tr, proof.params, airs, shapes, pvs)
    tr.absorb("main_cap", proof.commits.main_cap)       # once: the main tree's cap
    if not tr.check_pow("logup_pow", proof.logup_nonce, proof.params.logup_pow_bits):
        raise PowError(f"LogUp nonce {proof.logup_nonce} does not give "
                       f"{proof.params.logup_pow_bits} zero bits")
    chal = {CHALLENGE_NAMES[0]: ef_col(tr.sample_ef("logup_beta")),
            CHALLENGE_NAMES[1]: ef_col(tr.sample_ef("logup_gamma"))}
    logs = [tr.log]
    skipped = 0
    states = []
    for i, (air, sh, tp) in enumerate(zip(airs, shapes, proof.tables)):
        fork = tr.fork(i)
        pre = bool(verified_tables) and table_check_key(fork, air, tp.raw, proof.params,
                                                        chal, proof.commits) in verified_tables
        skipped += pre
        states.append(verify_table(fork, air, sh, tp, proof.params, chal, proof.commits,
                                   composition=not pre))
        logs.append(fork.log)
    # LogUp: a table's sum is n * U (U = its terminal, the mean row sum that its cyclic
    # accumulator constraint subtracts on every row); the sums of all tables must cancel
    total = np.zeros((4, 1), dtype=np.uint64)
    for sh, tp in zip(shapes, proof.tables):
        if sh.aux_cols:
            total = F.ef_add(total, F.ef_mul_base(ef_col(tp.terminal).reshape(4, 1),
                                                  sh.n % P))
    if np.any(total):
        raise LogUpError("the LogUp terminal sums of the tables do not add up to zero")
    verify_join(tr, proof.params, shapes, proof.tables, states, proof.fri, proof.commits)
    return VerifyResult(public_values=pvs, logs=logs, seconds=time.perf_counter() - t0,
                        security=security, tables_prechecked=skipped)


__all__ = ["verify", "VerifyResult", "DEFAULT_MIN_SECURITY_BITS", "check_security",
           "validate_min_security_bits", "verify_table", "verify_join", "TableState",
           "composition_check", "check_table_shape", "check_shapes", "table_check_key"]
