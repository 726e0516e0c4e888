"""One table's transcript fork, replayed (docs/protocol.md, format 6): after the main
transcript forks, each table with interactions absorbs the (global) aux tree's cap and
its own LogUp terminal, draws alpha, absorbs the (global) parts tree's cap, grinds and
draws z, absorbs its opened values, grinds and draws lambda, and squeezes its
``table_digest`` for the join.  Nothing here reads the openings (the join checks them at
the queries), so a table can be checked as soon as its section and the commitments it
absorbs are final.

* :func:`verify_table` ``(fork, air, shape, section, params, challenges, commits,
  composition=True) -> TableState``: the replay, its proofs of work and the composition
  check at z;
* :func:`table_check_key`: a digest of everything :func:`verify_table` reads, so that a
  check that already passed on the same inputs can be skipped (the prover's self-check).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .composition import composition_check
from .errors import PowError
from .proof_format import Commitments, Params, TableProof
from .protocol import TableShape
from .transcript import Transcript


@dataclass
class TableState:
    """What one table's fork hands to the join: its challenges z and lambda (uint64[4])
    and its ``table_digest`` (8 base elements)."""
    z: np.ndarray
    lam: np.ndarray
    digest: list


def verify_table(tr: Transcript, air, sh: TableShape, tp: TableProof, params: Params, chal,
                 commits: Commitments, composition: bool = True) -> TableState:
    """One table's fork, replayed up to its ``table_digest``; ``commits`` is the proof's
    commitments section (the fork absorbs the global aux cap -- if the table has
    interactions -- and the global parts cap).  The proof-of-work checks
    before z and lambda (PowError) and -- unless ``composition=False`` -- the composition
    check at z (:func:`verifier.composition.composition_check`: CompositionError).
    Returns the :class:`TableState` the join needs.  The openings are checked by
    :func:`verifier.join.verify_join` (the queries come from the join).
    ``composition=False`` is for a caller that ran :func:`composition_check` on the same
    opened values already (the prover's self-check); :func:`verifier.verify.verify`
    skips it only for tables whose :func:`table_check_key` is among ``verified_tables``."""
    name = sh.name
    # ---- R1 (fork): the aux tree's cap (all tables' aux) and the claimed LogUp terminal
    if sh.aux_cols:
        tr.absorb("aux_cap", commits.aux_cap)
        tr.absorb("logup_terminal", tp.terminal)
    # ---- R2: alpha, the parts tree's cap (all tables' quotient parts)
    alpha = tr.sample_ef("alpha")
    tr.absorb("parts_cap", commits.parts_cap)
    # ---- R3: z (after a proof of work) and the opened values
    if not tr.check_pow("zeta_pow", tp.zeta_nonce, params.commit_pow_bits):
        raise PowError(f"zeta nonce {tp.zeta_nonce} does not give {params.commit_pow_bits} "
                       "zero bits", name)
    z = tr.sample_ef("zeta")
    tr.absorb("ood_main", tp.ood_main)
    if sh.uses_next_main:
        tr.absorb("ood_main_next", tp.ood_main_next)
    if sh.aux_cols:
        tr.absorb("ood_aux", tp.ood_aux)
        tr.absorb("ood_aux_next", tp.ood_aux_next)
    tr.absorb("ood_parts", tp.ood_parts)
    if composition:
        composition_check(air, sh, tp, tp.public_values, chal, alpha, z)
    # ---- R4: lambda (after a proof of work), then the table's digest for the join
    if not tr.check_pow("deep_pow", tp.deep_nonce, params.deep_pow_bits):
        raise PowError(f"DEEP nonce {tp.deep_nonce} does not give {params.deep_pow_bits} "
                       "zero bits", name)
    lam = tr.sample_ef("deep_lambda")
    digest = tr.sample_base("table_digest", 8)
    return TableState(z=np.asarray(z, np.uint64), lam=np.asarray(lam, np.uint64),
                      digest=[int(v) for v in digest])


def table_check_key(fork: Transcript, air, section: bytes, params: Params, chal: dict,
                    commits: Commitments) -> bytes:
    """A digest of everything :func:`verify_table` reads for one table: the transcript
    fork's state, the AIR fingerprint, the section's exact bytes, the parameters, the
    LogUp challenges and the commitments it absorbs (the aux and parts caps).  Two checks with the same key are the same computation, so a key
    recorded after a passing check lets :func:`verifier.verify.verify` skip that table
    (the prover checks tables as they finish, overlapped with device work,
    docs/diagnostics.md)."""
    h = hashlib.sha256(b"steadfast/table-check/v4")
    h.update(np.ascontiguousarray(fork.state, np.uint64).tobytes())
    h.update(np.asarray(list(fork.inbuf), np.uint64).tobytes() + b"|")
    h.update(np.asarray(list(fork.outbuf), np.uint64).tobytes() + b"|")
    h.update(np.asarray(air.fingerprint(), np.uint64).tobytes())
    h.update(repr(sorted(vars(params).items())).encode())
    for name in sorted(chal):
        h.update(name.encode() + np.ascontiguousarray(chal[name], np.uint64).tobytes())
    h.update(len(section).to_bytes(8, "little") + bytes(section))
    for cap in (commits.aux_cap, commits.parts_cap):
        cap = np.ascontiguousarray(cap, dtype="<u4")
        h.update(repr(cap.shape).encode() + b"|" + cap.tobytes())
    return h.digest()


__all__ = ["TableState", "verify_table", "table_check_key"]
